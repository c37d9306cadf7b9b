package workloads

import (
	"context"
	"crypto/tls"
	"errors"
	"net/url"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// unaryConn carries etcd's unary calls (KV requests) over one HTTP/2 connection of its own, as gRPC does
// on the wire: a HEADERS frame and a DATA frame per request (content type application/grpc, the call's
// deadline as grpc-timeout, the context's metadata), answered by HEADERS, DATA and trailers whose
// grpc-status becomes the call's error, as gRPC's. It exists for the closed-loop micro workloads, where the
// client's CPU per request decides what a 2-core machine measures: gRPC's client allocates about 106 times
// and 7.8 KB per put (stream bookkeeping, hand-offs to its writer goroutine, per-call options), the unary
// connection 27 times and 1.5 KB (BenchmarkPutOverhead), and the client's CPU per put fell from 0.9-1.0x
// of etcd's benchmark tool to about 0.6x (make bench-vs-etcd). The framing is golang.org/x/net/http2's.
//
// What it does not carry goes to the gRPC connection it was made with (fallback): streams (watch, lease
// keep-alive), requests larger than one frame or than the server's flow-control window allows, every call
// while the connection is down or being dialed, and the calls Invoke names. Writes of concurrent calls
// share system calls: the last writer of a burst flushes.
type unaryConn struct {
	fallback  grpc.ClientConnInterface
	endpoints []unaryEndpoint
	tls       *tls.Config

	mu       sync.Mutex // guards the fields below
	cur      *h2Transport
	retired  []*h2Transport // replaced, and perhaps still answering calls: closed at the latest by Close
	next     int            // endpoint the next dial tries
	dialing  bool           // a dial is under way (in the background: calls go to the fallback meanwhile)
	failed   time.Time      // when the last dial failed: calls go to the fallback for a while
	failures int
	closed   bool

	ctx     context.Context    // of the background dials
	stop    context.CancelFunc // ends a dial under way when the connection is closed
	dialers sync.WaitGroup
}

// unaryEndpoint is where a unaryConn dials: a network and address, and the authority its requests name.
type unaryEndpoint struct {
	network, addr, authority string
	secure                   bool
}

// parseUnaryEndpoints reads clientv3 endpoints (host:port, http(s)://host:port, unix://path); ok is false
// when one is of a form the unary connection does not dial, which leaves every call to gRPC.
func parseUnaryEndpoints(endpoints []string, tlsOn bool) (eps []unaryEndpoint, ok bool) {
	for _, ep := range endpoints {
		e := unaryEndpoint{network: "tcp", secure: tlsOn}
		switch {
		case strings.HasPrefix(ep, "unix://"), strings.HasPrefix(ep, "unixs://"):
			e.network, e.addr, e.authority = "unix", ep[strings.Index(ep, "://")+3:], "localhost"
			e.secure = strings.HasPrefix(ep, "unixs://") || tlsOn
		case strings.Contains(ep, "://"):
			u, err := url.Parse(ep)
			if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
				return nil, false
			}
			e.addr, e.authority, e.secure = u.Host, u.Host, u.Scheme == "https" || tlsOn
		default:
			e.addr, e.authority = ep, ep
		}
		eps = append(eps, e)
	}
	return eps, len(eps) > 0
}

// newUnaryConn returns a unary connection to endpoints that falls back to fallback. It dials endpoint
// first (mod their number) at once, and the next endpoint each time it dials again, so that the runner's
// connections spread over a cluster's members as gRPC's round robin spreads calls; a first dial that fails
// is retried in the background, as every later one is.
func newUnaryConn(ctx context.Context, fallback grpc.ClientConnInterface, endpoints []unaryEndpoint, tlsConfig *tls.Config, first int) *unaryConn {
	if tlsConfig != nil {
		tlsConfig = tlsConfig.Clone()
		tlsConfig.NextProtos = []string{"h2"}
	}
	c := &unaryConn{fallback: fallback, endpoints: endpoints, tls: tlsConfig, next: first}
	c.ctx, c.stop = context.WithCancel(context.WithoutCancel(ctx))
	c.mu.Lock()
	ep := c.startDial()
	c.mu.Unlock()
	c.dial(c.ctx, ep)
	return c
}

// NewStream is the fallback's: the unary connection carries no streams.
func (c *unaryConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.fallback.NewStream(ctx, desc, method, opts...)
}

// Invoke sends one unary call. A call the connection cannot carry (see unaryConn) goes to the fallback, and
// so does one the server refused or dropped unprocessed (a refused stream, a stream above a GOAWAY's
// last); one it sent and lost with the connection fails with codes.Unavailable, as gRPC's would.
func (c *unaryConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	in, ok1 := args.(gogoMessage)
	out, ok2 := reply.(gogoMessage)
	if ok1 && ok2 {
		if t := c.transport(); t != nil {
			start := time.Now()
			err := t.invoke(ctx, method, in, out)
			if a := attemptsOf(ctx); a != nil && !errors.Is(err, errTooLarge) {
				a.add(start, time.Now(), t.conn.RemoteAddr(), !errors.Is(err, errNotSent), err)
			}
			switch {
			case errors.Is(err, errTooLarge), errors.Is(err, errNotSent):
			case status.Code(err) == codes.Unavailable && method == rangeMethod && ctx.Err() == nil:
				// etcd's client retries reads that failed so (a lost connection, a leader change): its
				// retries go with gRPC's connection.
			default:
				return err
			}
		}
	}
	return c.fallback.Invoke(ctx, method, args, reply, opts...)
}

// Close closes the HTTP/2 connections (not the fallback); calls in flight fail.
func (c *unaryConn) Close() {
	c.mu.Lock()
	ts := append(c.retired, c.cur)
	c.cur, c.retired, c.closed = nil, nil, true
	c.mu.Unlock()
	c.stop()
	c.dialers.Wait()
	for _, t := range ts {
		if t != nil {
			t.close(errors.New("connection closed"))
		}
	}
}

// transport returns the live HTTP/2 connection, or nil when there is none; then it starts dialing the next
// endpoint in the background, unless a dial is under way or one failed recently (backing off up to a
// second). Calls that find no connection go to the fallback, which has its own reconnection.
func (c *unaryConn) transport() *h2Transport {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil && c.cur.usable() {
		return c.cur
	}
	if c.closed || c.dialing || (c.failures > 0 && time.Since(c.failed) < min(time.Duration(c.failures)*100*time.Millisecond, time.Second)) {
		return nil
	}
	ep := c.startDial()
	c.dialers.Go(func() { c.dial(c.ctx, ep) })
	return nil
}

// startDial retires the current connection and picks the endpoint to dial; c.mu is held.
func (c *unaryConn) startDial() unaryEndpoint {
	if c.cur != nil {
		live := c.retired[:0]
		for _, t := range c.retired {
			if !t.done() {
				live = append(live, t)
			}
		}
		c.cur.retire(errors.New("connection replaced"))
		c.retired, c.cur = append(live, c.cur), nil
	}
	c.dialing = true
	ep := c.endpoints[c.next%len(c.endpoints)]
	c.next++
	return ep
}

// dial connects to ep and makes it the current connection.
func (c *unaryConn) dial(ctx context.Context, ep unaryEndpoint) {
	t, err := dialH2(ctx, ep, c.tls)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dialing = false
	switch {
	case err != nil:
		c.failures++
		c.failed = time.Now()
	case c.closed:
		t.close(errors.New("connection closed"))
	default:
		c.cur, c.failures = t, 0
	}
}

var (
	// errTooLarge: the request does not fit the connection's frame size or flow-control window now.
	errTooLarge = errors.New("request too large for the unary connection")
	// errNotSent: the connection was lost before the request was written; it may be sent elsewhere.
	errNotSent = errors.New("unary connection lost before the request was sent")
)

const rangeMethod = "/etcdserverpb.KV/Range"

// unaryKV is etcd's KV API (pb.KVClient) over a unary connection: etcd's generated client takes a
// *grpc.ClientConn only.
type unaryKV struct{ c *unaryConn }

// Range sends a RangeRequest.
func (kv unaryKV) Range(ctx context.Context, in *pb.RangeRequest, opts ...grpc.CallOption) (*pb.RangeResponse, error) {
	out := new(pb.RangeResponse)
	return out, kv.c.Invoke(ctx, rangeMethod, in, out, opts...)
}

// Put sends a PutRequest.
func (kv unaryKV) Put(ctx context.Context, in *pb.PutRequest, opts ...grpc.CallOption) (*pb.PutResponse, error) {
	out := new(pb.PutResponse)
	return out, kv.c.Invoke(ctx, "/etcdserverpb.KV/Put", in, out, opts...)
}

// DeleteRange sends a DeleteRangeRequest.
func (kv unaryKV) DeleteRange(ctx context.Context, in *pb.DeleteRangeRequest, opts ...grpc.CallOption) (*pb.DeleteRangeResponse, error) {
	out := new(pb.DeleteRangeResponse)
	return out, kv.c.Invoke(ctx, "/etcdserverpb.KV/DeleteRange", in, out, opts...)
}

// Txn sends a TxnRequest.
func (kv unaryKV) Txn(ctx context.Context, in *pb.TxnRequest, opts ...grpc.CallOption) (*pb.TxnResponse, error) {
	out := new(pb.TxnResponse)
	return out, kv.c.Invoke(ctx, "/etcdserverpb.KV/Txn", in, out, opts...)
}

// Compact sends a CompactionRequest.
func (kv unaryKV) Compact(ctx context.Context, in *pb.CompactionRequest, opts ...grpc.CallOption) (*pb.CompactionResponse, error) {
	out := new(pb.CompactionResponse)
	return out, kv.c.Invoke(ctx, "/etcdserverpb.KV/Compact", in, out, opts...)
}

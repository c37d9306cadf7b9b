// Package shapes counts the shapes of the requests etcd's clients send: which comparisons a transaction
// makes and what its branches do, whether a range reads one key or a prefix, with what limit, at which
// revision, how a watch is opened, with what TTL a lease is granted. Metrics show how many requests reach
// etcd per method, not what they ask; the fidelity comparison of the kube workload with real apiservers
// needs both.
//
// A Proxy stands between the clients and one etcd endpoint and passes every gRPC call through unchanged
// (bytes in, bytes out, metadata, headers, trailers and status), decoding a copy of each request to count
// its shape. It adds a hop of latency; it changes nothing else the clients or etcd see.
package shapes

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
)

// raw is a codec that passes messages through as bytes.
type raw struct{}

func (raw) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("shapes: cannot pass %T through", v)
	}
	return *b, nil
}

func (raw) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("shapes: cannot pass %T through", v)
	}
	*b = append((*b)[:0], data...)
	return nil
}

// Name is proto's: the content type on the wire stays application/grpc+proto.
func (raw) Name() string { return "proto" }

// Proxy is a counting pass-through proxy in front of one etcd endpoint.
type Proxy struct {
	lis     net.Listener
	srv     *grpc.Server
	backend *grpc.ClientConn
	scheme  string
	wg      sync.WaitGroup

	mu     sync.Mutex
	counts map[string]int64
}

// Start listens on a loopback port and forwards to endpoint (http:// or https://; tlsConfig is the
// client configuration for the latter, and the proxy serves with serverTLS when it is not nil).
func Start(endpoint string, tlsConfig, serverTLS *tls.Config) (*Proxy, error) {
	target, scheme := strings.TrimPrefix(strings.TrimPrefix(endpoint, "http://"), "https://"), "http"
	creds := insecure.NewCredentials()
	if strings.HasPrefix(endpoint, "https://") {
		scheme, creds = "https", credentials.NewTLS(tlsConfig)
	}
	backend, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math32), grpc.MaxCallSendMsgSize(math32)))
	if err != nil {
		return nil, fmt.Errorf("shapes: connect %s: %w", endpoint, err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		backend.Close()
		return nil, fmt.Errorf("shapes: listen: %w", err)
	}
	p := &Proxy{lis: lis, backend: backend, scheme: scheme, counts: map[string]int64{}}
	opts := []grpc.ServerOption{grpc.ForceServerCodec(raw{}), grpc.UnknownServiceHandler(p.forward),
		grpc.MaxRecvMsgSize(math32), grpc.MaxSendMsgSize(math32),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: etcdKeepaliveMinTime}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: etcdKeepaliveInterval, Timeout: etcdKeepaliveTimeout})}
	if serverTLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(serverTLS)))
	}
	p.srv = grpc.NewServer(opts...)
	p.wg.Go(func() { p.srv.Serve(lis) })
	return p, nil
}

// The proxy keeps etcd's keepalive rules (etcd's defaults: --grpc-keepalive-min-time 5s,
// --grpc-keepalive-interval 2h, --grpc-keepalive-timeout 20s), not gRPC's. gRPC's server refuses pings more
// often than every 5 minutes; a kube-apiserver's etcd client pings a quiet connection every 30 s, which etcd
// accepts. With gRPC's rules the proxy answered those pings with GOAWAY (too_many_pings), every watch on the
// connection was opened again from the revision it had reached, the idle resources' watches found that
// revision compacted, and their watch caches listed again: relists etcd never sees from real apiservers,
// counted as theirs.
const (
	etcdKeepaliveMinTime  = 5 * time.Second
	etcdKeepaliveInterval = 2 * time.Hour
	etcdKeepaliveTimeout  = 20 * time.Second
)

// math32 lifts gRPC's 4 MB message limits (a list page of pods is larger): etcd and its clients set their
// own, and the proxy must not be the one to refuse.
const math32 = 1<<31 - 1

// Endpoint is the URL clients use instead of the etcd endpoint.
func (p *Proxy) Endpoint() string { return p.scheme + "://" + p.lis.Addr().String() }

// Close stops the proxy, ending the calls in flight.
func (p *Proxy) Close() {
	p.srv.Stop()
	p.wg.Wait()
	p.backend.Close()
}

// Counts returns the number of requests of each shape so far.
func (p *Proxy) Counts() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int64, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// Reset forgets the counts so far (the set-up's requests, before the load).
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.counts)
}

// forward passes one call through: the client's messages to etcd, etcd's back, then its status.
func (p *Proxy) forward(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return errors.New("shapes: no method")
	}
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = metadata.NewOutgoingContext(ctx, md.Copy())
	}
	cs, err := p.backend.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(raw{}))
	if err != nil {
		return err
	}
	up := make(chan error, 1)
	go func() {
		for {
			var b []byte
			if err := ss.RecvMsg(&b); err != nil {
				if err == io.EOF {
					err = cs.CloseSend()
				}
				up <- err
				return
			}
			p.count(method, b)
			if err := cs.SendMsg(&b); err != nil {
				up <- nil // the status comes back on the receiving side
				return
			}
		}
	}()
	first := true
	for {
		var b []byte
		err := cs.RecvMsg(&b)
		if first {
			first = false
			if md, herr := cs.Header(); herr == nil {
				ss.SendHeader(md)
			}
		}
		if err != nil {
			ss.SetTrailer(cs.Trailer())
			if err == io.EOF {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(&b); err != nil {
			return err
		}
	}
}

// count decodes a copy of one request of method and counts its shape.
func (p *Proxy) count(method string, b []byte) {
	name := method[strings.LastIndexByte(method, '/')+1:]
	var m interface{ Unmarshal([]byte) error }
	switch name {
	case "Range":
		m = &pb.RangeRequest{}
	case "Txn":
		m = &pb.TxnRequest{}
	case "Put":
		m = &pb.PutRequest{}
	case "DeleteRange":
		m = &pb.DeleteRangeRequest{}
	case "Watch":
		m = &pb.WatchRequest{}
	case "LeaseGrant":
		m = &pb.LeaseGrantRequest{}
	case "Compact":
		m = &pb.CompactionRequest{}
	}
	shape := name
	if m != nil {
		if err := m.Unmarshal(b); err != nil {
			shape = name + " (undecodable)"
		} else {
			shape = Of(m)
		}
	}
	p.mu.Lock()
	p.counts[shape]++
	p.mu.Unlock()
}

// Of names the shape of an etcd request: the method and what distinguishes requests of the same method in
// what they cost etcd, never keys or values. For example "Range key limit=1", "Range prefix limit=500 rev
// paged", "Txn mod=0 ? put", "Txn mod= ? put : range", "Watch create prefix prev_kv progress_notify",
// "LeaseGrant ttl=3660s".
func Of(req any) string {
	switch r := req.(type) {
	case *pb.RangeRequest:
		return "Range " + rangeShape(r)
	case *pb.PutRequest:
		return "Put" + putShape(r)
	case *pb.DeleteRangeRequest:
		return "DeleteRange " + span(r.Key, r.RangeEnd)
	case *pb.TxnRequest:
		return "Txn " + txnShape(r)
	case *pb.WatchRequest:
		switch u := r.RequestUnion.(type) {
		case *pb.WatchRequest_CreateRequest:
			c := u.CreateRequest
			s := "Watch create " + span(c.Key, c.RangeEnd)
			if c.StartRevision > 0 {
				s += " from_rev"
			}
			if c.PrevKv {
				s += " prev_kv"
			}
			if c.ProgressNotify {
				s += " progress_notify"
			}
			if len(c.Filters) > 0 {
				s += " filtered"
			}
			return s
		case *pb.WatchRequest_CancelRequest:
			return "Watch cancel"
		case *pb.WatchRequest_ProgressRequest:
			return "Watch progress"
		}
		return "Watch"
	case *pb.LeaseGrantRequest:
		return fmt.Sprintf("LeaseGrant ttl=%ds", r.TTL)
	case *pb.CompactionRequest:
		if r.Physical {
			return "Compact physical"
		}
		return "Compact"
	}
	return fmt.Sprintf("%T", req)
}

func span(key, end []byte) string {
	switch {
	case len(end) == 0:
		return "key"
	case string(end) == "\x00":
		return "from-key"
	}
	return "prefix"
}

func rangeShape(r *pb.RangeRequest) string {
	parts := []string{span(r.Key, r.RangeEnd)}
	if r.Limit > 0 {
		parts = append(parts, fmt.Sprintf("limit=%d", r.Limit))
	}
	if r.Revision > 0 {
		parts = append(parts, "rev")
	}
	if r.Serializable {
		parts = append(parts, "serializable")
	}
	if r.KeysOnly {
		parts = append(parts, "keys_only")
	}
	if r.CountOnly {
		parts = append(parts, "count_only")
	}
	return strings.Join(parts, " ")
}

func putShape(r *pb.PutRequest) string {
	s := ""
	if r.Lease != 0 {
		s += " lease"
	}
	if r.PrevKv {
		s += " prev_kv"
	}
	return s
}

// txnShape is "compares ? then : else", each branch its operations' kinds.
func txnShape(r *pb.TxnRequest) string {
	var cmps []string
	for _, c := range r.Compare {
		target := strings.ToLower(c.Target.String())
		op := map[pb.Compare_CompareResult]string{pb.Compare_EQUAL: "=", pb.Compare_NOT_EQUAL: "!=", pb.Compare_LESS: "<", pb.Compare_GREATER: ">"}[c.Result]
		s := target[:min(3, len(target))] + op
		if c.Target == pb.Compare_MOD && c.GetModRevision() == 0 || c.Target == pb.Compare_VERSION && c.GetVersion() == 0 {
			s += "0"
		}
		cmps = append(cmps, s)
	}
	branch := func(ops []*pb.RequestOp) string {
		var kinds []string
		for _, op := range ops {
			switch o := op.Request.(type) {
			case *pb.RequestOp_RequestRange:
				kinds = append(kinds, "range")
			case *pb.RequestOp_RequestPut:
				kinds = append(kinds, "put"+strings.ReplaceAll(putShape(o.RequestPut), " ", "+"))
			case *pb.RequestOp_RequestDeleteRange:
				kinds = append(kinds, "delete")
			case *pb.RequestOp_RequestTxn:
				kinds = append(kinds, "txn")
			}
		}
		sort.Strings(kinds)
		return strings.Join(kinds, ",")
	}
	s := strings.Join(cmps, ",") + " ? " + branch(r.Success)
	if len(r.Failure) > 0 {
		s += " : " + branch(r.Failure)
	}
	return s
}

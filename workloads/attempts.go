package workloads

// The attempts of each operation. One call of etcd's client may go out more than once: the client's retry
// interceptor sends a request again after some errors (reads after Unavailable; any request, writes
// included, after DeadlineExceeded or Canceled while the caller's context is still alive), and gRPC
// retries an attempt the server provably did not process. An interceptor outside the client's sees one
// call; gRPC's stats handler sees every attempt, on the connection. So the Client puts a log of the
// operation's attempts in the context it sends with (context values reach the stats handler), the stats
// handler of the Runner's connections (AttemptRecorder) and the unary connection write each attempt into it,
// and the Client stores what the log holds with the operation (history.Operation.Attempts).

import (
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// attemptLog collects the attempts of a Client's operation in flight. A Client sends one operation at a
// time, so it keeps one log and reuses it; an event of an earlier operation that arrives late (a stream's
// end, after the call returned) carries an older generation and is dropped.
type attemptLog struct {
	base time.Time // the recorder's time base

	mu    sync.Mutex
	gen   uint64
	list  []history.Attempt
	peers []net.Addr // each attempt's member, made a string only for attempts that are stored
	ended []bool
}

// attemptKey is the context key under which an attemptCtx finds itself.
type attemptKey struct{}

// attemptCtx is the context of one operation: its parent's, and the log of its attempts. It costs one
// allocation, as context.WithValue would.
type attemptCtx struct {
	context.Context
	log *attemptLog
	gen uint64
}

// Value returns the attemptCtx itself for attemptKey, and the parent's values for every other key.
func (c *attemptCtx) Value(key any) any {
	if key == (attemptKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// attemptsOf returns the attempt context ctx descends from, or nil.
func attemptsOf(ctx context.Context) *attemptCtx {
	c, _ := ctx.Value(attemptKey{}).(*attemptCtx)
	return c
}

// start begins the log of a new operation and returns the context to send it with.
func (l *attemptLog) start(ctx context.Context) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	l.list, l.peers, l.ended = l.list[:0], l.peers[:0], l.ended[:0]
	return &attemptCtx{Context: ctx, log: l, gen: l.gen}
}

// begin notes the start of an attempt.
func (c *attemptCtx) begin(at time.Time, transparent bool) {
	l := c.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.gen != l.gen {
		return
	}
	l.list = append(l.list, history.Attempt{Start: int64(at.Sub(l.base)), NotSent: true, Transparent: transparent})
	l.peers = append(l.peers, nil)
	l.ended = append(l.ended, false)
}

// sent notes that the attempt begun last was handed to the connection to peer.
func (c *attemptCtx) sent(peer net.Addr) {
	l := c.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.gen != l.gen || len(l.list) == 0 {
		return
	}
	n := len(l.list) - 1
	l.list[n].NotSent, l.peers[n] = false, peer
}

// end notes the end of the attempt begun last, with its error.
func (c *attemptCtx) end(at time.Time, err error) {
	l := c.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.gen != l.gen || len(l.list) == 0 {
		return
	}
	n := len(l.list) - 1
	l.list[n].End, l.ended[n] = int64(at.Sub(l.base)), true
	setAttemptError(&l.list[n], err)
}

// add notes a whole attempt (the unary connection's, which it times itself).
func (c *attemptCtx) add(start, end time.Time, peer net.Addr, sent bool, err error) {
	c.begin(start, false)
	if sent {
		c.sent(peer)
	}
	c.end(end, err)
}

func setAttemptError(a *history.Attempt, err error) {
	if err == nil {
		a.Code, a.Error = "", ""
		return
	}
	s := status.Convert(err)
	a.Code, a.Error = s.Code().String(), s.Message()
}

// stop ends the operation's log: the call returned at end with err. It returns whether any attempt was
// seen, and the attempts to store: none when the operation went out once and was answered. An attempt
// whose end was not seen (a stream, which ends when its context is cancelled after the call returned) ends
// with the call, with the call's error. The slice is the log's, valid until the next start.
func (l *attemptLog) stop(end time.Time, err error) (recorded bool, attempts []history.Attempt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	if len(l.list) == 0 {
		return false, nil
	}
	for i := range l.list {
		if !l.ended[i] {
			l.list[i].End = int64(end.Sub(l.base))
			setAttemptError(&l.list[i], err)
		}
	}
	if len(l.list) == 1 && !l.list[0].Failed() && !l.list[0].NotSent {
		return true, nil
	}
	for i, p := range l.peers {
		if p != nil {
			l.list[i].Peer = p.String()
		}
	}
	return true, l.list
}

// AttemptRecorder is the gRPC stats handler that writes every attempt of a recording Client's operation
// into its log. Requests sent outside a Client's Do carry no log and are left alone. It is installed on
// every connection of a Runner (AttemptDialOption).
type AttemptRecorder struct{}

// AttemptDialOption returns the dial option that installs AttemptRecorder on a connection, for etcd
// clients whose requests recording Clients send.
func AttemptDialOption() grpc.DialOption { return grpc.WithStatsHandler(AttemptRecorder{}) }

// TagRPC returns ctx: the operation's log is already in it.
func (AttemptRecorder) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

// HandleRPC notes the begin, send and end of each attempt of an operation whose context carries a log.
func (AttemptRecorder) HandleRPC(ctx context.Context, s stats.RPCStats) {
	switch s := s.(type) {
	case *stats.Begin:
		if c := attemptsOf(ctx); c != nil {
			c.begin(s.BeginTime, s.IsTransparentRetryAttempt)
		}
	case *stats.OutHeader:
		if c := attemptsOf(ctx); c != nil {
			c.sent(s.RemoteAddr)
		}
	case *stats.End:
		if c := attemptsOf(ctx); c != nil {
			c.end(s.EndTime, s.Error)
		}
	}
}

// TagConn returns ctx.
func (AttemptRecorder) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

// HandleConn does nothing: attempts are per call.
func (AttemptRecorder) HandleConn(context.Context, stats.ConnStats) {}

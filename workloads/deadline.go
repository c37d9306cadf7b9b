package workloads

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// deadlineBucket is how long requests keep sharing one timeout context.
const deadlineBucket = 50 * time.Millisecond

// errRequestTimeout is the cause of a request context that a client-side timeout cancelled.
var errRequestTimeout = errors.New("request timeout")

// deadlines hands out request contexts with a timeout.
//
// Creating a context with its own timer for every request costs about eight allocations and a timer-heap
// insertion and removal, a noticeable share of the generator's CPU at tens of thousands of requests per
// second. Requests that start within the same deadlineBucket under the same parent share one context
// instead, which ends deadlineBucket after timeout: every request gets between timeout and
// timeout+deadlineBucket.
//
// A context with a deadline makes gRPC send it to etcd as a grpc-timeout header, different for every
// request. That is what kube-apiserver does, so the kube workload keeps it; but it also makes etcd arm a
// timer per request and defeats HPACK header compression on both sides, and etcd's own benchmark tool
// sends no deadline. Contexts made with server=false therefore carry no deadline: a timer cancels them
// (with cause errRequestTimeout) and the wire traffic is the benchmark tool's.
type deadlines struct {
	cur atomic.Pointer[deadlineCtx]
	mu  sync.Mutex
}

type deadlineCtx struct {
	parent  context.Context
	timeout time.Duration
	server  bool
	ctx     context.Context
	cancel  func() // kept, not called early: the context ends by itself at its deadline
	until   time.Time
}

func (b *deadlineCtx) fits(parent context.Context, timeout time.Duration, server bool, now time.Time) bool {
	return b != nil && b.parent == parent && b.timeout == timeout && b.server == server && now.Before(b.until)
}

// context returns a context that ends at least timeout after now. Parents must be comparable (every
// context of the standard library is).
func (d *deadlines) context(parent context.Context, timeout time.Duration, server bool, now time.Time) context.Context {
	if b := d.cur.Load(); b.fits(parent, timeout, server, now) {
		return b.ctx
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if b := d.cur.Load(); b.fits(parent, timeout, server, now) {
		return b.ctx
	}
	// A replaced bucket's context is not cancelled early: requests may still be using it. It ends, and
	// its timer is released, at its own deadline.
	end := now.Add(timeout + deadlineBucket)
	b := &deadlineCtx{parent: parent, timeout: timeout, server: server, until: now.Add(deadlineBucket)}
	if server {
		var cancel context.CancelFunc
		b.ctx, cancel = context.WithDeadline(parent, end)
		b.cancel = cancel
	} else {
		ctx, cancel := context.WithCancelCause(parent)
		time.AfterFunc(time.Until(end), func() { cancel(errRequestTimeout) })
		b.ctx, b.cancel = ctx, func() { cancel(errRequestTimeout) }
	}
	d.cur.Store(b)
	return b.ctx
}

// timedOut reports whether a request failed because its client-side timeout cancelled it.
func timedOut(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errRequestTimeout)
}

// Package workloads generates load against etcd. A workload decides what to send; a Runner owns the
// connections and the worker pool and paces them; a Client sends each request and records it, once, through
// the Recorder. Load is open-loop by default: every operation has an intended start time from the schedule,
// latency is counted from it, and an operation that starts late is counted as a schedule miss (with its
// cause) rather than silently slowing the schedule down. With no rate the runner is closed-loop, like etcd's
// benchmark tool: every client sends its next request as soon as the last one returns. The micro workloads'
// KV requests go over the runner's own HTTP/2 connections (unaryConn), at about half the client CPU of
// etcd's client per request; everything else goes over etcd's client.
package workloads

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// RunOptions configures the load a Runner generates.
type RunOptions struct {
	// Rate is the target arrival rate in operations per second; 0 runs closed-loop.
	Rate float64
	// Clients is the number of workers: concurrent requests at most.
	Clients int
	// Conns is the number of gRPC connections the workers share round robin.
	Conns int
	// Duration ends the schedule: no operation is scheduled at or after it (0: no limit).
	Duration time.Duration
	// Total ends the schedule after this many operations (0: no limit).
	Total int64
	// RequestTimeout bounds each request (0: none).
	RequestTimeout time.Duration
	// ServerDeadlines sends request timeouts to etcd as gRPC deadlines (see ClientOptions).
	ServerDeadlines bool
	// ProbeBandwidth keeps gRPC's bandwidth-delay probing (dynamic flow-control windows), as
	// kube-apiserver's etcd client does; without it connections have fixed windows (see dialOptions).
	ProbeBandwidth bool
	// ScheduleSlack is how late an operation may start before it counts as a schedule miss (default 10 ms).
	ScheduleSlack time.Duration
	// Seed seeds every worker's random source.
	Seed int64
	// IDBase is the first client and watcher number of the runner's recording clients (Share.IDBase), so
	// that the histories of generators that split one load never share a client, watcher or write id.
	IDBase int
}

// Validate checks the options and returns a usage error for the first bad one.
func (o RunOptions) Validate() error {
	switch {
	case o.Rate < 0:
		return outcome.Usagef("--rate %v: must not be negative", o.Rate)
	case o.Clients < 1:
		return outcome.Usagef("--clients %d: need at least one client", o.Clients)
	case o.Conns < 1:
		return outcome.Usagef("--conns %d: need at least one connection", o.Conns)
	case o.Conns > o.Clients:
		return outcome.Usagef("--conns %d: more connections than --clients %d", o.Conns, o.Clients)
	case o.Duration < 0 || o.Total < 0:
		return outcome.Usagef("--duration and --total must not be negative")
	case o.Duration == 0 && o.Total == 0:
		return outcome.Usagef("give --duration or --total")
	}
	return nil
}

// Worker is one of the runner's clients with its own seeded random source.
type Worker struct {
	ID int
	*Client
	Rand *rand.Rand
}

// Runner owns the connections and workers of a run and paces operations.
type Runner struct {
	opts    RunOptions
	rec     *Recorder
	conns   []*clientv3.Client
	kvs     []clientv3.KV // each connection's KV API: over its unary connection when there is one
	unary   []*unaryConn
	workers []*Worker
	nextID  atomic.Int64

	cfg      clientv3.Config             // the connections' configuration, for MemberClient's
	memberMu sync.Mutex                  // guards members
	members  map[string]*clientv3.Client // MemberClient's connections, one per endpoint
}

// NewRunner opens opts.Conns connections with cfg and creates opts.Clients workers over them.
func NewRunner(cfg clientv3.Config, rec *Recorder, opts RunOptions) (*Runner, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.ScheduleSlack <= 0 {
		opts.ScheduleSlack = 10 * time.Millisecond
	}
	r := &Runner{opts: opts, rec: rec}
	// The micro workloads' KV requests go over a unary connection (see unaryConn). The kube workloads keep
	// gRPC's, as kube-apiserver does, and so does a configuration that authenticates (etcd's token goes
	// with gRPC's per-call credentials) or brings dial options of its own (interceptors, say), which only
	// gRPC's connection honors.
	unary := !opts.ProbeBandwidth && cfg.Username == "" && len(cfg.DialOptions) == 0
	cfg.DialOptions = append(cfg.DialOptions[:len(cfg.DialOptions):len(cfg.DialOptions)], dialOptions(opts.ProbeBandwidth)...)
	// Every attempt of a recording client's operation goes into the history (attempts.go).
	cfg.DialOptions = append(cfg.DialOptions, AttemptDialOption())
	r.cfg = cfg
	for range opts.Conns {
		c, err := clientv3.New(cfg)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("connect to etcd: %w", err)
		}
		r.conns = append(r.conns, c)
		kv := c.KV
		if eps, ok := parseUnaryEndpoints(cfg.Endpoints, cfg.TLS != nil); ok && unary {
			u := newUnaryConn(context.Background(), c.ActiveConnection(), eps, cfg.TLS, len(r.conns)-1)
			r.unary = append(r.unary, u)
			kv = clientv3.NewKVFromKVClient(unaryKV{u}, c)
		}
		r.kvs = append(r.kvs, kv)
	}
	rec.watchIDs.Store(int64(opts.IDBase))
	for i := range opts.Clients {
		r.workers = append(r.workers, &Worker{
			ID:     i,
			Client: r.newClient(opts.IDBase+i, i),
			Rand:   r.Rand("worker", opts.IDBase+i),
		})
	}
	r.nextID.Store(int64(opts.IDBase + opts.Clients))
	return r, nil
}

// Options returns the runner's options.
func (r *Runner) Options() RunOptions { return r.opts }

// Recorder returns the recorder every client of the runner records to.
func (r *Runner) Recorder() *Recorder { return r.rec }

// Workers returns the workers, indexed by ID.
func (r *Runner) Workers() []*Worker { return r.workers }

// Conns returns the shared connections.
func (r *Runner) Conns() []*clientv3.Client { return r.conns }

// NewClient returns a recording client with a fresh client number, over connection i (mod Conns), for
// actors outside the worker pool (watchers, periodic writers).
func (r *Runner) NewClient(i int) *Client {
	return r.newClient(int(r.nextID.Add(1)-1), i)
}

func (r *Runner) newClient(id, conn int) *Client {
	c := NewClient(id, r.conns[conn%len(r.conns)], r.rec, r.clientOptions())
	c.kv = r.kvs[conn%len(r.kvs)]
	return c
}

func (r *Runner) clientOptions() ClientOptions {
	return ClientOptions{Timeout: r.opts.RequestTimeout, ServerDeadline: r.opts.ServerDeadlines}
}

// Rand returns a random source derived from the run's seed and a name: the same seed and name always give
// the same sequence, whatever else the run does.
func (r *Runner) Rand(name string, i int) *rand.Rand {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", name, i)
	return rand.New(rand.NewPCG(uint64(r.opts.Seed), h.Sum64()))
}

// MemberClient returns a recording client with a fresh client number over a connection to the i-th
// endpoint alone (mod the endpoints), opened on first use and shared by every client of that endpoint.
// Its requests and watches stay on that member whatever happens to it, as etcd's robustness tests keep
// their watches one client per member: a client of all the endpoints moves away from a member that goes
// down and, its streams being healthy elsewhere, never comes back.
func (r *Runner) MemberClient(i int) (*Client, error) {
	eps := r.cfg.Endpoints
	if len(eps) == 0 {
		return nil, errors.New("member client: no endpoints")
	}
	ep := eps[i%len(eps)]
	r.memberMu.Lock()
	defer r.memberMu.Unlock()
	conn := r.members[ep]
	if conn == nil {
		cfg := r.cfg
		cfg.Endpoints = []string{ep}
		c, err := clientv3.New(cfg)
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", ep, err)
		}
		if r.members == nil {
			r.members = map[string]*clientv3.Client{}
		}
		r.members[ep], conn = c, c
	}
	return NewClient(int(r.nextID.Add(1)-1), conn, r.rec, r.clientOptions()), nil
}

// Close closes the connections.
func (r *Runner) Close() error {
	var errs []error
	for _, u := range r.unary {
		u.Close()
	}
	for _, c := range r.conns {
		errs = append(errs, c.Close())
	}
	r.memberMu.Lock()
	for _, c := range r.members {
		errs = append(errs, c.Close())
	}
	r.memberMu.Unlock()
	return errors.Join(errs...)
}

// OpFunc sends one scheduled operation.
type OpFunc func(ctx context.Context, w *Worker, s *Slot)

// Pace marks the start of the load (Recorder.Begin) and runs op on the worker pool until the schedule
// ends (Duration or Total) or ctx is done, then waits for operations in flight.
func (r *Runner) Pace(ctx context.Context, op OpFunc) {
	r.rec.Begin()
	r.Stream(ctx, r.opts.Rate, r.opts.Total, len(r.workers), func(ctx context.Context, i int, s *Slot) {
		op(ctx, r.workers[i], s)
	})
}

// Stream runs one schedule of operations on n goroutines (numbered 0 to n-1) from the start of the load
// (Recorder.Begin, which it calls if no one has) until the run's Duration, total operations (0: no
// limit) or ctx ends, and waits for them. With a rate the schedule is open-loop: slot k is due
// rate*k seconds after the start, and a slot started late is marked as a miss; with rate 0 every goroutine
// sends as fast as its operations return. Workloads with several independent streams (the kube workload's
// actors) run one Stream each.
func (r *Runner) Stream(ctx context.Context, rate float64, total int64, n int, op func(ctx context.Context, i int, s *Slot)) {
	begin := r.rec.Begin()
	var pacer Pacer
	if rate > 0 {
		pacer = Constant{Rate: rate}
	}
	// Operations still in flight a drain period after the schedule's end are cut short: a cluster whose
	// members all crashed (or are all paused) must not hold the run forever. They stay in the history as
	// operations that may have taken effect, out of the figures, as at an interrupt.
	opCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if r.opts.Duration > 0 {
		end := begin + r.opts.Duration + r.drain()
		stop := time.AfterFunc(max(end-r.rec.Now(), 0), cancel)
		defer stop.Stop()
	}
	var next atomic.Uint64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r.work(ctx, i, pacer, begin, total, &next, func(_ context.Context, i int, s *Slot) { op(opCtx, i, s) })
		})
	}
	wg.Wait()
}

// drain is how long operations in flight at the schedule's end may still take: the request timeout, and at
// least DrainTimeout.
func (r *Runner) drain() time.Duration {
	return max(r.opts.RequestTimeout, DrainTimeout)
}

// DrainTimeout is the least time operations in flight at the end of the load's schedule may take before they
// are cut short.
const DrainTimeout = 10 * time.Second

// work claims slots in order from next, waits for each slot's time, and runs op. A slot claimed after its
// time had a backlog (no goroutine was free); a slot claimed in time but started late lagged.
func (r *Runner) work(ctx context.Context, i int, pacer Pacer, begin time.Duration, total int64, next *atomic.Uint64, op func(context.Context, int, *Slot)) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	slack := r.opts.ScheduleSlack
	for ctx.Err() == nil {
		n := next.Add(1) - 1
		if total > 0 && n >= uint64(total) {
			return
		}
		slot := Slot{N: n}
		if pacer == nil {
			now := r.rec.Now()
			if r.opts.Duration > 0 && now-begin >= r.opts.Duration {
				return
			}
			slot.Intended = now
		} else {
			at := pacer.At(n)
			if r.opts.Duration > 0 && at >= r.opts.Duration {
				return
			}
			slot.Intended = begin + at
			claimed := r.rec.Now()
			if wait := slot.Intended - claimed; wait > 0 {
				timer.Reset(wait)
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
				}
			}
			switch {
			case claimed-slot.Intended > slack:
				slot.Miss = results.Backlog
			case r.rec.Now()-slot.Intended > slack:
				slot.Miss = results.Lag
			}
		}
		op(ctx, i, &slot)
	}
}

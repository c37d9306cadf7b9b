package kube

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results/history"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-chaosbench/chaosbench/workloads"
)

// Workload is the kube workload: Setup preloads the cluster's objects and fills every apiserver's watch
// caches; Run starts the actors and runs them for the run's duration.
type Workload struct {
	cfg Config

	r *workloads.Runner
	// apiservers are every simulated apiserver by number; local are those this generator's share owns
	// (all of them unless the load is split), the only ones with a connection, caches and clients.
	apiservers []*apiserver
	local      []*apiserver
	delivery   *deliveries
	pods       *podQueue
	stats      stats
	stopCaches context.CancelFunc
	caches     sync.WaitGroup
}

// stats counts what the results' operation table does not show.
type stats struct {
	conflicts sync.Map // op -> *atomic.Int64: retries after a failed ModRevision compare
	notFound  atomic.Int64
	wins      atomic.Int64 // compactions this run's apiservers won
}

func (s *stats) conflict(op string, n int) {
	if n == 0 {
		return
	}
	v, _ := s.conflicts.LoadOrStore(op, new(atomic.Int64))
	v.(*atomic.Int64).Add(int64(n))
}

// New returns the kube workload for a resolved configuration.
func New(cfg Config) *Workload { return &Workload{cfg: cfg} }

// Name returns "kube".
func (w *Workload) Name() string { return "kube" }

// Config returns the workload's configuration.
func (w *Workload) Config() Config { return w.cfg }

// apiserver is one simulated kube-apiserver: its own etcd connection, watch caches and lease managers, and
// a pool of recording clients for its concurrent requests.
type apiserver struct {
	id     int
	connID int // the runner connection it uses
	r      *workloads.Runner
	conn   *clientv3.Client
	caches map[string]*watchCache
	events *leaseManager

	mu   sync.Mutex
	free []*workloads.Client

	// compact is the apiserver's compactor's state, touched by its compactor alone.
	compact compactorState

	// idle are the streams of the apiserver's idle watches, by idleResources index (nil until confirmed).
	idle []atomic.Pointer[workloads.WatchStream]
}

// client takes a recording client from the pool (a Client serves one goroutine at a time).
func (a *apiserver) client() *workloads.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := len(a.free); n > 0 {
		c := a.free[n-1]
		a.free = a.free[:n-1]
		return c
	}
	return a.r.NewClient(a.connID)
}

func (a *apiserver) release(c *workloads.Client) {
	a.mu.Lock()
	a.free = append(a.free, c)
	a.mu.Unlock()
}

// known returns the revision the apiserver's watch cache holds for an object.
func (a *apiserver) known(res, k string) (int64, bool) {
	return a.caches[res].cache.get(k)
}

// Setup connects the apiservers, preloads the cluster's objects and fills the watch caches. Nothing of it
// is measured.
func (w *Workload) Setup(ctx context.Context, r *workloads.Runner) error {
	w.r = r
	// Preloading and the initial lists handle a few hundred MB that are garbage as soon as they are sent
	// or decoded (list pages of 10000 pods are 50 MB): collect at the default pace meanwhile, whatever the
	// process runs the load with, so that set-up does not set the generator's peak memory.
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	owned := w.cfg.LocalApiservers()
	if len(r.Conns()) < owned {
		return fmt.Errorf("kube: %d connections for %d apiservers", len(r.Conns()), owned)
	}
	rec := r.Recorder()
	if w.cfg.Active[ActorWatchCache] {
		w.delivery = &deliveries{rec: rec, delivery: workloads.NewDelivery(owned)}
	}
	for i := range w.cfg.Apiservers {
		a := &apiserver{id: i, r: r, caches: map[string]*watchCache{}}
		w.apiservers = append(w.apiservers, a)
		if !w.cfg.Share.Owns(i) {
			continue
		}
		a.connID = len(w.local)
		a.conn = r.Conns()[a.connID]
		a.events = newLeaseManager("grant/leases", w.cfg.EventTTL, rec.Now)
		for _, res := range cachedResources {
			wc := &watchCache{res: res, prefix: prefix(res), client: r.NewClient(a.connID), cache: newObjectCache()}
			if w.delivery != nil {
				wc.onEvent = w.delivery.event
			}
			a.caches[res] = wc
		}
		w.local = append(w.local, a)
	}
	pods, err := w.preload(ctx)
	if err != nil {
		return fmt.Errorf("preload: %w", err)
	}
	w.pods = pods
	// Every apiserver lists every cached resource, then watches it. Without the watch-cache actor the
	// lists still run once, so that updates know the revisions they start from, but nothing keeps them
	// current: writers then track their own writes (see observe).
	for _, a := range w.local {
		for _, wc := range a.caches {
			if err := wc.list(ctx); err != nil {
				return fmt.Errorf("initial list of %s: %w", wc.res, err)
			}
		}
	}
	if w.cfg.Active[ActorWatchCache] {
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		w.stopCaches = cancel
		// The load begins once etcd has confirmed every watch: their creation is set-up, as an
		// apiserver's watch caches are in place before its clients come.
		var started sync.WaitGroup
		for _, a := range w.local {
			for _, wc := range a.caches {
				started.Add(1)
				wc.started = sync.OnceFunc(started.Done)
				w.caches.Go(func() { wc.run(cctx) })
			}
			a.idle = make([]atomic.Pointer[workloads.WatchStream], len(idleResources))
			for j, res := range idleResources {
				c := r.NewClient(a.connID)
				started.Add(1)
				done := sync.OnceFunc(started.Done)
				w.caches.Go(func() {
					idleWatch(cctx, c, res, func(s *workloads.WatchStream) { a.idle[j].Store(s); done() })
				})
			}
		}
		all := make(chan struct{})
		go func() { started.Wait(); close(all) }()
		select {
		case <-all:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Minute):
			return errors.New("the watch caches' watches were not confirmed within a minute")
		}
	}
	w.bootstrapCompactors(ctx)
	w.bootstrapMasterLeases(ctx)
	return nil
}

// owns reports whether apiserver a is simulated here: a split load's other generators send what goes
// through the apiservers they own.
func (w *Workload) owns(a int) bool { return w.cfg.Share.Owns(a) }

// observe records a successful write of a cached resource: for delivery latency, and in the writing
// apiserver's cache when no watch keeps the caches current.
func (w *Workload) observe(a *apiserver, c *workloads.Client, res, k string, v history.Value, rev int64) {
	if w.delivery != nil {
		w.delivery.acked(c, res, k, v.ID, rev)
		return
	}
	if wc := a.caches[res]; wc != nil {
		wc.cache.put(k, rev)
	}
}

// Run starts every active actor and waits for them: each stops scheduling at the run's duration, and Run
// returns once the requests in flight are done.
func (w *Workload) Run(ctx context.Context, r *workloads.Runner) error {
	if r.Options().Duration <= 0 {
		return outcome.Usagef("--workload kube needs --duration")
	}
	r.Recorder().Begin()
	var wg sync.WaitGroup
	for _, actor := range w.actors() {
		if w.cfg.Active[actor.name] {
			wg.Go(func() { actor.run(ctx) })
		}
	}
	wg.Wait()
	w.drainDeliveries(ctx)
	w.stopWatchCaches()
	return nil
}

// drainDeliveries gives the last writes' events a moment to reach the watch caches.
func (w *Workload) drainDeliveries(ctx context.Context) {
	if w.delivery == nil {
		return
	}
	deadline := time.Now().Add(2 * time.Second)
	for w.delivery.delivery.Pending() > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
}

func (w *Workload) stopWatchCaches() {
	if w.stopCaches != nil {
		w.stopCaches()
		w.caches.Wait()
		w.stopCaches = nil
	}
}

// Close stops the watch caches if Run did not (a failed set-up).
func (w *Workload) Close() { w.stopWatchCaches() }

// actor is a named part of the workload.
type actor struct {
	name string
	run  func(ctx context.Context)
}

func (w *Workload) actors() []actor {
	return []actor{
		{ActorHeartbeats, w.heartbeats},
		{ActorChurn, w.churn},
		{ActorElection, w.election},
		{ActorLists, w.lists},
		{ActorPolls, w.polls},
		{ActorCompactor, w.compactor},
		{ActorMasterLeases, w.masterLeases},
	}
}

// stream runs one open-loop schedule at rate on n goroutines: op gets the slot and the goroutine's own
// random source and recording clients. n bounds the requests of the stream in flight: a stream of
// independent clients (kubelets, controllers) gets one goroutine per client, so that a slow request holds
// up its own client only, as in a real cluster.
func (w *Workload) stream(ctx context.Context, name string, rate float64, n int, op func(ctx context.Context, s *workloads.Slot, g *goroutine)) {
	if rate <= 0 {
		return
	}
	gs := make([]*goroutine, n)
	for i := range gs {
		gs[i] = &goroutine{w: w, rand: w.r.Rand(name, i)}
	}
	w.r.Stream(ctx, rate, 0, n, func(ctx context.Context, i int, s *workloads.Slot) { op(ctx, s, gs[i]) })
	for _, g := range gs {
		g.release()
	}
}

// goroutine is what one goroutine of a stream owns: a random source, and a recording client per apiserver
// it has talked to.
type goroutine struct {
	w       *Workload
	rand    *rand.Rand
	clients []*workloads.Client // by apiserver, taken from its pool on first use
}

// client returns the goroutine's client of apiserver a.
func (g *goroutine) client(a int) *workloads.Client {
	if g.clients == nil {
		g.clients = make([]*workloads.Client, len(g.w.apiservers))
	}
	if g.clients[a] == nil {
		g.clients[a] = g.w.apiservers[a].client()
	}
	return g.clients[a]
}

func (g *goroutine) release() {
	for a, c := range g.clients {
		if c != nil {
			g.w.apiservers[a].release(c)
		}
	}
}

// size draws a value size for a resource.
func (w *Workload) size(r *rand.Rand, res string) func() int {
	s := w.cfg.Sizes[res]
	return func() int { return s.pick(r) }
}

// updateCached is a GuaranteedUpdate of a cached object through apiserver a, starting from the revision
// a's watch cache holds.
func (w *Workload) updateCached(ctx context.Context, a *apiserver, c *workloads.Client, slot *workloads.Slot, res, k string, size func() int, lease int64) error {
	op := "update/" + res
	known, ok := a.known(res, k)
	if !ok {
		// Not in the cache (yet): the apiserver reads it from etcd first.
		resp, err := get(ctx, c, nil, "get/"+res, k)
		if err != nil {
			return err
		}
		if len(resp.Range.KVs) == 0 {
			w.stats.notFound.Add(1)
			return errNotFound
		}
		known = resp.Range.KVs[0].ModRevision
	}
	rev, v, conflicts, err := update(ctx, c, slot, op, k, known, size, lease)
	w.stats.conflict(op, conflicts)
	if errors.Is(err, errNotFound) {
		w.stats.notFound.Add(1)
	}
	if err != nil {
		return err
	}
	w.observe(a, c, res, k, v, rev)
	return nil
}

// sleepUntil waits until offset at of the recorder's clock, and reports false if ctx ended first.
func sleepUntil(ctx context.Context, rec *workloads.Recorder, at time.Duration) bool {
	d := at - rec.Now()
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

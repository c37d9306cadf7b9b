package kube

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/etcd-chaosbench/chaosbench/workloads"
)

// One pod's life as its writes reach etcd, as offsets from the pod's slot: the pod is created, the
// scheduler binds it, the kubelet reports its status two or three times while events record each step,
// and meanwhile the oldest pod is deleted gracefully, by two DELETE calls (see podDeletion).
var (
	bindAfter = 100 * time.Millisecond
	// A kubelet reports a pod's status two or three times; the later slots serve profiles of clusters
	// whose pods are updated more (KWOK's stages: about four status updates a pod).
	statusAfter  = []time.Duration{time.Second, 3 * time.Second, 5 * time.Second, 7 * time.Second, 9 * time.Second}
	eventsAfter  = []time.Duration{150 * time.Millisecond, 800 * time.Millisecond, 1500 * time.Millisecond, 2 * time.Second, 2500 * time.Millisecond}
	deleteGrace  = 2 * time.Second
	eventsPerPod = float64(len(eventsAfter))
	statusPerPod = 2.5 // two or three, alternately (Options.StatusPerPod and EventsPerPod override them)
	// deleteCalls is the number of DELETE calls a pod's deletion takes (the user's, the kubelet's): each
	// reads the pod from etcd and updates it.
	deleteCalls   = 2.0
	updatesPerPod = 1 + statusPerPod + deleteCalls
)

// eventsPerPod and statusPerPod are the events and status updates of a pod's life, on average.
func (c Config) eventsPerPod() float64 {
	if c.EventsPerPod > 0 {
		return c.EventsPerPod
	}
	return eventsPerPod
}

func (c Config) statusPerPod() float64 {
	if c.StatusPerPod > 0 {
		return c.StatusPerPod
	}
	return statusPerPod
}

// deleteCalls is the DELETE calls of a pod's deletion on average (1 to 3: below 2, a share of the pods
// have no kubelet's call in the run, as when a cluster's kubelets lag behind its deletions).
func (c Config) deleteCalls() float64 {
	if c.DeleteCalls > 0 {
		return c.DeleteCalls
	}
	return deleteCalls
}

// updatesPerPod are a pod's updates: its binding, its status updates and its deletion's.
func (c Config) updatesPerPod() float64 {
	return 1 + c.statusPerPod() + math.Min(c.deleteCalls(), deleteCalls)
}

// removals is the share of pod deletions the kubelet's call completes (the rest are pending).
func (c Config) removals() float64 { return math.Min(1, c.deleteCalls()-1) }

// share is pod n's whole share of a mean per pod: floor((n+1)m) - floor(nm), so that pods alternate
// between the whole numbers around the mean and average it (2.5: two, three, two, ...).
func share(n uint64, mean float64) int {
	return int(math.Floor(float64(n+1)*mean) - math.Floor(float64(n)*mean))
}

// step is one write of a pod's life.
type step struct {
	at time.Duration
	do func(ctx context.Context, c *workloads.Client, s *workloads.Slot)
}

// churn creates --churn pods a second, each living the life above, and deletes as many of the oldest.
// Pod n goes through apiserver n mod apiservers, as a load balancer spreads clients.
func (w *Workload) churn(ctx context.Context) {
	rec := w.r.Recorder()
	begin, _ := rec.Began()
	end := begin + w.r.Options().Duration
	var lives sync.WaitGroup
	w.stream(ctx, "churn", w.cfg.Churn, 1, func(ctx context.Context, s *workloads.Slot, g *goroutine) {
		a := w.apiservers[int(s.N%uint64(len(w.apiservers)))]
		if !w.owns(a.id) {
			return
		}
		rng := w.r.Rand("pod", int(s.N))
		deletionSeed := rng.Uint64() // drawn here: rng belongs to the new pod's goroutine from now on
		slot := *s
		lives.Go(func() { w.live(ctx, a, slot, end, w.podLife(a, slot.N, rng)) })
		if old, ok := w.pods.pop(); ok {
			lives.Go(func() { w.live(ctx, a, slot, end, w.podDeletion(a, old, slot.N, deletionSeed)) })
		}
	})
	lives.Wait()
}

// live runs a chain of dependent steps from slot s. Each step is due at its offset from the slot, or when
// the step before it returns if that is later: a step waiting for the one before is not late.
func (w *Workload) live(ctx context.Context, a *apiserver, s workloads.Slot, end time.Duration, steps []step) {
	rec := w.r.Recorder()
	c := a.client()
	defer a.release(c)
	prev := time.Duration(0)
	for i, st := range steps {
		at := s.Intended + st.at
		if at >= end || !sleepUntil(ctx, rec, at) {
			return
		}
		slot := &workloads.Slot{N: s.N, Intended: max(at, prev)}
		if i == 0 {
			slot.Miss = s.Miss
		}
		st.do(ctx, c, slot)
		prev = rec.Now()
	}
}

// podLife plans the writes of slot n's new pod, in time order.
func (w *Workload) podLife(a *apiserver, n uint64, rng *rand.Rand) []step {
	p := pod{namespace: namespaceName(int(n % uint64(w.cfg.Namespaces))), name: "churn-" + strconv.FormatUint(n, 10)}
	podSize := w.size(rng, ResPods)
	eventSize := w.size(rng, ResEvents)
	k := p.key()
	created := false
	steps := []step{{0, func(ctx context.Context, c *workloads.Client, s *workloads.Slot) {
		v := c.NewValue(podSize())
		ok, rev, err := create(ctx, c, s, "create/"+ResPods, k, v, 0)
		if err != nil || !ok {
			w.delivery.failed(v.ID)
			return
		}
		created = true
		w.observe(a, c, ResPods, k, v, rev)
		w.pods.push(p)
	}}}
	update := func(ctx context.Context, c *workloads.Client, s *workloads.Slot) {
		if created {
			w.updateCached(ctx, a, c, s, ResPods, k, podSize, 0)
		}
	}
	steps = append(steps, step{bindAfter, update})
	for _, at := range statusAfter[:min(len(statusAfter), share(n, w.cfg.statusPerPod()))] {
		steps = append(steps, step{at, update})
	}
	// The pod's events go through its own apiserver or, when fewer apiservers create events
	// (Options.EventApiservers), through one of those; in a split load, through one simulated here.
	ea := a
	if e := w.apiservers[int(n%uint64(w.cfg.eventApiservers()))]; w.cfg.EventApiservers > 0 && w.owns(e.id) {
		ea = e
	}
	for i, at := range eventsAfter[:min(len(eventsAfter), share(n, w.cfg.eventsPerPod()))] {
		name := p.name + "." + strconv.Itoa(i)
		steps = append(steps, step{at, func(ctx context.Context, c *workloads.Client, s *workloads.Slot) {
			if ea != a {
				c = ea.client()
				defer ea.release(c)
			}
			lease, err := ea.events.lease(ctx, c)
			if err != nil {
				return
			}
			create(ctx, c, s, "create/"+ResEvents, key(ResEvents, p.namespace, name), c.NewValue(eventSize()), lease)
		}})
	}
	sortSteps(steps)
	return steps
}

// podDeletion plans a graceful deletion as it reaches etcd through the apiserver's generic registry
// (k8s.io/apiserver registry.Store.Delete): every DELETE call first reads the object from etcd (a Get
// without a resource version is not served from the watch cache), then updates it through the watch
// cache's copy. The user's DELETE sets the deletion timestamp and grace period; after the grace period the
// kubelet, having stopped the pod, sends its own DELETE with grace period zero, which updates the object
// again and removes it at once, from the watch cache's copy: that copy rarely holds the update just made,
// so the removal usually fails its comparison once and succeeds with the revision the failed
// transaction read, as the apiserver's conditional delete retries.
//
// The kubelet's removal of a share of the pods (Options.DeleteConflicts, deletion n alternating) starts
// from the revision the watch cache held before the kubelet's update, as a real apiserver's cache, slower
// to apply the update than the emulation's, often does: it fails once and succeeds from the revision
// the failed transaction read.
//
// With more than two calls a pod (Options.DeleteCalls, deletion n alternating), a third DELETE of grace
// zero comes with the kubelet's, as KWOK's pod-delete stage sends it again while the pod still carries its
// deletion timestamp: it reads the pod before the kubelet's removal lands and removes it from the
// revision it read, which that removal has made stale (one read and one failed delete).
func (w *Workload) podDeletion(a *apiserver, old pod, n, seed uint64) []step {
	podSize := w.size(rand.New(rand.NewPCG(seed, 0)), ResPods)
	k := old.key()
	ok := false
	extra := share(n, w.cfg.deleteCalls()-deleteCalls) > 0
	kubelet := share(n, w.cfg.removals()) > 0
	// A stale removal starts from the revision the cache held before the kubelet's update, as an
	// apiserver's watch cache that has not seen that update yet (Options.DeleteConflicts).
	stale := share(n, w.cfg.DeleteConflicts) > 0
	call := func(ctx context.Context, c *workloads.Client, s *workloads.Slot) bool {
		resp, err := get(ctx, c, s, "get/"+ResPods, k)
		if err != nil || len(resp.Range.KVs) == 0 {
			return false
		}
		return w.updateCached(ctx, a, c, nil, ResPods, k, podSize, 0) == nil
	}
	return []step{
		{0, func(ctx context.Context, c *workloads.Client, s *workloads.Slot) {
			ok = call(ctx, c, s)
		}},
		{deleteGrace, func(ctx context.Context, c *workloads.Client, s *workloads.Slot) {
			before, _ := a.known(ResPods, k)
			if !ok || !kubelet || !call(ctx, c, s) {
				return
			}
			var read int64
			if extra {
				if resp, err := get(ctx, c, nil, "get/"+ResPods, k); err == nil && len(resp.Range.KVs) > 0 {
					read = resp.Range.KVs[0].ModRevision
				}
			}
			if stale && before != 0 {
				w.removeCounted(ctx, c, nil, ResPods, k, before)
			} else {
				w.deleteCached(ctx, a, c, nil, ResPods, k)
			}
			if read != 0 {
				w.removeCounted(ctx, c, nil, ResPods, k, read)
			}
		}},
	}
}

// deleteCached deletes an object through apiserver a, from the revision a's watch cache holds.
func (w *Workload) deleteCached(ctx context.Context, a *apiserver, c *workloads.Client, s *workloads.Slot, res, k string) {
	known, ok := a.known(res, k)
	if !ok {
		resp, err := get(ctx, c, nil, "get/"+res, k)
		if err != nil {
			return
		}
		if len(resp.Range.KVs) == 0 {
			w.stats.notFound.Add(1)
			return
		}
		known = resp.Range.KVs[0].ModRevision
	}
	if w.removeCounted(ctx, c, s, res, k, known) == nil && w.delivery == nil {
		a.caches[res].cache.forget(k)
	}
}

// removeCounted is the apiserver's conditional delete of k from revision rev (remove), with its failed
// comparisons and a key already gone counted in the workload's stats.
func (w *Workload) removeCounted(ctx context.Context, c *workloads.Client, s *workloads.Slot, res, k string, rev int64) error {
	op := "delete/" + res
	conflicts, err := remove(ctx, c, s, op, k, rev)
	w.stats.conflict(op, conflicts)
	if errors.Is(err, errNotFound) {
		w.stats.notFound.Add(1)
	}
	return err
}

// sortSteps orders steps by time, keeping the planned order of simultaneous ones (insertion sort: a
// life has a dozen steps).
func sortSteps(steps []step) {
	for i := 1; i < len(steps); i++ {
		for j := i; j > 0 && steps[j].at < steps[j-1].at; j-- {
			steps[j], steps[j-1] = steps[j-1], steps[j]
		}
	}
}

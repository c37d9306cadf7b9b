package kube

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
	"github.com/etcd-chaosbench/chaosbench/workloads"
)

// Periods of the control plane's periodic writers and readers (Kubernetes defaults).
const (
	nodeLeaseRenew      = 10 * time.Second // kubelet --node-lease-renew-interval (lease duration 40 s)
	nodeStatusReport    = 5 * time.Minute  // kubelet --node-status-report-frequency
	electionRetryPeriod = 2 * time.Second  // leader election renew/retry period
	masterLeaseRenew    = 10 * time.Second // endpoint reconciler interval (lease TTL 15 s)
	masterLeaseTTL      = 15 * time.Second
	countPollPeriod     = time.Minute      // --etcd-count-metric-poll-period
	statusPollPeriod    = 30 * time.Second // the apiserver's DB size monitor
	healthCheckPeriod   = time.Second      // etcd health checks, at most one a second
	progressRequestWait = 100 * time.Millisecond
	cacheSyncTimeout    = 3 * time.Second
	kubectlPageSize     = 500
)

// streamGoroutines is how many requests of a stream of the control plane's few clients (controllers'
// leader election, apiservers' own polls, clients' lists) may be in flight at once: enough for every
// request of a 10-second outage at their rates. Kubelets' streams have one goroutine per node.
const streamGoroutines = 32

// heartbeats renews every node's lease every 10 s, spread evenly, and writes each node's status every 5
// minutes. Node i talks to apiserver i mod apiservers.
func (w *Workload) heartbeats(ctx context.Context) {
	nodes := w.cfg.Nodes
	run := func(rate float64, name, res string, keyOf func(int) string) {
		w.stream(ctx, name, rate, nodes, func(ctx context.Context, s *workloads.Slot, g *goroutine) {
			node := int(s.N % uint64(nodes))
			a := node % len(w.apiservers)
			if !w.owns(a) {
				return
			}
			w.updateCached(ctx, w.apiservers[a], g.client(a), s, res, keyOf(node), w.size(g.rand, res), 0)
		})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(w.cfg.nodeStatusRate(), "node-status", ResNodes, func(i int) string { return key(ResNodes, "", nodeName(i)) })
	}()
	run(w.cfg.nodeLeaseRate(), "node-lease", ResLeases, func(i int) string { return key(ResLeases, nsNodeLease, nodeName(i)) })
	<-done
}

// election emulates leader election of kube-controller-manager and kube-scheduler, one replica of each per
// apiserver: each component's leader updates its lease every 2 s, and each standby reads it every 2 s
// (Options.LeaseReads sets the reads' rate instead, spread the same way).
func (w *Workload) election(ctx context.Context) {
	comps, slots := len(electedComponents), w.cfg.standbySlots()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.stream(ctx, "election-standby", w.cfg.leaseReadRate(), streamGoroutines, func(ctx context.Context, s *workloads.Slot, g *goroutine) {
			i := int(s.N % uint64(slots))
			comp := i % comps
			a := (comp + 1 + i/comps) % len(w.apiservers) // any apiserver but the leader's, when there are others
			if !w.owns(a) {
				return
			}
			get(ctx, g.client(a), s, "get/"+ResLeases, key(ResLeases, nsSystem, electedComponents[comp]))
		})
	}()
	w.stream(ctx, "election-leader", float64(comps)/electionRetryPeriod.Seconds(), streamGoroutines, func(ctx context.Context, s *workloads.Slot, g *goroutine) {
		comp := int(s.N % uint64(comps))
		a := comp % len(w.apiservers)
		if !w.owns(a) {
			return
		}
		w.updateCached(ctx, w.apiservers[a], g.client(a), s, ResLeases, key(ResLeases, nsSystem, electedComponents[comp]), w.size(g.rand, ResLeases), 0)
	})
	<-done
}

// masterLeases runs each apiserver's lease refreshes every 10 s: its identity lease (through the watch
// cache), then the endpoint reconciler's master lease and its list of every apiserver's master lease, and
// the peer endpoint reconciler's lease (Kubernetes 1.36 and later).
func (w *Workload) masterLeases(ctx context.Context) {
	w.stream(ctx, "master-leases", float64(len(w.apiservers))/masterLeaseRenew.Seconds(), streamGoroutines, func(ctx context.Context, s *workloads.Slot, g *goroutine) {
		i := int(s.N % uint64(len(w.apiservers)))
		if !w.owns(i) {
			return
		}
		a, c := w.apiservers[i], g.client(i)
		w.updateCached(ctx, a, c, s, ResLeases, key(ResLeases, nsSystem, apiserverLease(i)), w.size(g.rand, ResLeases), 0)
		if w.refreshLease(ctx, a, c, ResMasterLeases, masterLeaseKey(i), g.rand) {
			p := prefix(ResMasterLeases)
			c.Do(ctx, nil, "list/"+ResMasterLeases, history.Request{Kind: history.KindRange, Range: &history.Range{Key: p, End: prefixEnd(p)}})
		}
		w.refreshLease(ctx, a, c, ResPeerServerLeases, key(ResPeerServerLeases, "", apiserverLease(i)), g.rand)
	})
}

// bootstrapMasterLeases writes every local apiserver's master and peer endpoint leases at the end of
// set-up, as running apiservers hold them: the load's refreshes update them (a lease of 15 s outlives
// the few seconds to the load's first refresh) instead of creating them.
func (w *Workload) bootstrapMasterLeases(ctx context.Context) {
	if !w.cfg.Active[ActorMasterLeases] {
		return
	}
	for _, a := range w.local {
		c := a.client()
		rng := w.r.Rand("master-leases-setup", a.id)
		w.refreshLease(ctx, a, c, ResMasterLeases, masterLeaseKey(a.id), rng)
		w.refreshLease(ctx, a, c, ResPeerServerLeases, key(ResPeerServerLeases, "", apiserverLease(a.id)), rng)
		a.release(c)
	}
}

// refreshLease is an endpoint reconciler's update of its key with a TTL (k8s.io/apiserver reconcilers): the
// storage has no watch cache, so the update reads the key from etcd first; a TTL of 15 s is too short for
// the apiserver to reuse a lease, so every refresh grants one and writes the key on it (creating the key
// the first time). It reports whether the key was written.
func (w *Workload) refreshLease(ctx context.Context, a *apiserver, c *workloads.Client, res, k string, rng *rand.Rand) bool {
	cur, err := get(ctx, c, nil, "get/"+res, k)
	if err != nil {
		return false
	}
	grant, err := c.Do(ctx, nil, "grant/"+res, history.Request{Kind: history.KindLeaseGrant, Lease: &history.Lease{TTL: int64(masterLeaseTTL.Seconds())}})
	if err != nil {
		return false
	}
	lease := grant.Lease.ID
	var rev int64
	var v history.Value
	if len(cur.Range.KVs) == 0 {
		v = c.NewValue(w.cfg.Sizes[res].pick(rng))
		var created bool
		if created, rev, err = create(ctx, c, nil, "create/"+res, k, v, lease); err != nil || !created {
			return false
		}
	} else {
		var conflicts int
		rev, v, conflicts, err = update(ctx, c, nil, "update/"+res, k, cur.Range.KVs[0].ModRevision, w.size(rng, res), lease)
		w.stats.conflict("update/"+res, conflicts)
		if err != nil {
			return false
		}
	}
	if a.caches[res] != nil {
		w.observe(a, c, res, k, v, rev) // the emulation watches the master leases
	}
	return true
}

// lists sends clients' lists at the list rate: kubectl-style paged, consistent lists of a namespace's pods
// (500 per page, later pages pinned to the first page's revision; a label-selector list is the same scan,
// filtered in the apiserver), and as many consistent lists served from the watch cache: the apiserver
// reads the current revision (a Get of the resource's prefix as a key), then requests progress notifications
// every 100 ms until its cache has caught up with it. The wait is recorded as cache-sync/pods.
func (w *Workload) lists(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.stream(ctx, "list-from-cache", w.cfg.CacheListRate, streamGoroutines, func(ctx context.Context, s *workloads.Slot, g *goroutine) {
			i := int(s.N % uint64(len(w.apiservers)))
			if !w.owns(i) {
				return
			}
			w.listFromCache(ctx, w.apiservers[i], g.client(i), s, ResPods)
		})
	}()
	w.stream(ctx, "list", w.cfg.ListRate, streamGoroutines, func(ctx context.Context, s *workloads.Slot, g *goroutine) {
		a := int(s.N % uint64(len(w.apiservers)))
		if !w.owns(a) {
			return
		}
		ns := namespaceName(int(s.N % uint64(w.cfg.Namespaces)))
		p := prefix(ResPods) + ns + "/"
		list(ctx, g.client(a), s, "list/"+ResPods, p, prefixEnd(p), kubectlPageSize, nil)
	})
	<-done
}

// listFromCache is the etcd side of a consistent list served from apiserver a's watch cache.
func (w *Workload) listFromCache(ctx context.Context, a *apiserver, c *workloads.Client, s *workloads.Slot, res string) {
	rev, err := currentRV(ctx, c, s, "current-rv/"+res, res)
	if err != nil || !w.cfg.Active[ActorWatchCache] {
		return
	}
	w.waitFresh(ctx, a, c, res, rev)
}

// currentRV reads the current revision as the apiserver's GetCurrentResourceVersion does: a Get (limit 1)
// of the resource's prefix as a key, which no object has, for the revision in the response's header.
func currentRV(ctx context.Context, c *workloads.Client, s *workloads.Slot, op, res string) (int64, error) {
	resp, err := c.Do(ctx, s, op, history.Request{Kind: history.KindRange, Range: &history.Range{Key: strings.TrimSuffix(prefix(res), "/"), Limit: 1}})
	return resp.Revision, err
}

// idleCurrentRV names an idle resource's current-revision reads as the apiserver's metrics name them:
// current-rv/<its API resource> (getCurrentResourceVersion/<resource> in the fidelity comparison).
func idleCurrentRV(storagePrefix string) string { return "current-rv/" + apiResource(storagePrefix) }

// waitFresh waits until apiserver a's watch cache of res has reached revision rev, asking etcd for a
// progress notification on the cache's watch stream every 100 ms meanwhile, and records the wait as
// cache-sync/<res>.
func (w *Workload) waitFresh(ctx context.Context, a *apiserver, c *workloads.Client, res string, rev int64) {
	wc := a.caches[res]
	start := c.Recorder().Now()
	sctx, cancel := context.WithTimeout(ctx, cacheSyncTimeout)
	defer cancel()
	for wc.cache.revision() < rev && sctx.Err() == nil {
		if stream := wc.stream.Load(); stream != nil {
			c.Call(sctx, nil, "progress", func(ctx context.Context) (int64, error) {
				return 0, stream.RequestProgress(clientv3.WithRequireLeader(ctx))
			})
		}
		wctx, wcancel := context.WithTimeout(sctx, progressRequestWait)
		wc.cache.waitFor(wctx, rev)
		wcancel()
	}
	if ctx.Err() != nil {
		return
	}
	// The wait is not a request: it is recorded directly, timed from its start.
	rec := &results.Record{Op: "cache-sync/" + res, Intended: start, Start: start, End: c.Recorder().Now(), Revision: wc.cache.revision()}
	if sctx.Err() != nil {
		rec.Outcome, rec.ErrClass = results.Error, workloads.ErrDeadline
	}
	c.Recorder().Record(c.ID(), rec)
}

// cacheStats is what an apiserver's object count metric costs etcd for a resource with a watch cache
// (Kubernetes 1.37 counts the cache's keys at the current revision): the current revision, then the wait
// for the cache to reach it; for an idle watch, whose cache is always fresh but for the progress, one
// progress request on its stream.
func (w *Workload) cacheStats(ctx context.Context, a *apiserver, c *workloads.Client, s *workloads.Slot, i int) {
	if i < len(cachedResources) {
		res := cachedResources[i]
		if rev, err := currentRV(ctx, c, s, "current-rv/"+res, res); err == nil {
			w.waitFresh(ctx, a, c, res, rev)
		}
		return
	}
	j := i - len(cachedResources)
	if _, err := currentRV(ctx, c, s, idleCurrentRV(idleResources[j]), idleResources[j]); err != nil {
		return
	}
	if stream := a.idle[j].Load(); stream != nil {
		c.Call(ctx, nil, "progress", func(ctx context.Context) (int64, error) {
			return 0, stream.RequestProgress(clientv3.WithRequireLeader(ctx))
		})
	}
}

// polls sends the apiserver's background reads: every minute per apiserver, a count of the resource
// without a watch cache (events) and, for every watched resource, what counting it from its watch cache
// costs (cacheStats), or that read at the rate Options.CacheReads sets; Maintenance.Status of every
// endpoint every 30 s, and a health check Get every second (or at Options.HealthChecks).
func (w *Workload) polls(ctx context.Context) {
	resources := countedResources
	endpoints := w.r.Conns()[0].Endpoints()
	as := len(w.apiservers)
	type pollStream struct {
		name string
		rate float64
		op   func(ctx context.Context, s *workloads.Slot, g *goroutine)
	}
	streams := []pollStream{
		{"count", w.cfg.countRate(), func(ctx context.Context, s *workloads.Slot, g *goroutine) {
			i := int(s.N % uint64(as*len(resources)))
			res := resources[i%len(resources)]
			if !w.owns(i / len(resources)) {
				return
			}
			p := prefix(res)
			g.client(i/len(resources)).Do(ctx, s, "count/"+res, history.Request{Kind: history.KindRange, Range: &history.Range{Key: p, End: prefixEnd(p), CountOnly: true}})
		}},
		{"cache-stats", float64(as*watchedResources) / countPollPeriod.Seconds(), func(ctx context.Context, s *workloads.Slot, g *goroutine) {
			if !w.cfg.Active[ActorWatchCache] {
				return
			}
			i := int(s.N % uint64(as*watchedResources))
			if _, set := w.cfg.CacheReads[watchedAPI(i%watchedResources)]; set {
				return // read at its own rate (below)
			}
			if a := w.apiservers[i/watchedResources]; w.owns(a.id) {
				w.cacheStats(ctx, a, g.client(a.id), s, i%watchedResources)
			}
		}},
		{"status", w.cfg.statusRate(len(endpoints)), func(ctx context.Context, s *workloads.Slot, g *goroutine) {
			i := int(s.N % uint64(as*len(endpoints)))
			a, ep := w.apiservers[i/len(endpoints)], endpoints[i%len(endpoints)]
			if !w.owns(a.id) {
				return
			}
			g.client(a.id).Call(ctx, s, "status", func(ctx context.Context) (int64, error) {
				st, err := a.conn.Status(ctx, ep)
				if err != nil {
					return 0, err
				}
				return st.Header.Revision, nil
			})
		}},
		{"health", w.cfg.healthRate(), func(ctx context.Context, s *workloads.Slot, g *goroutine) {
			i := int(s.N % uint64(as))
			if !w.owns(i) {
				return
			}
			// The apiserver's etcd prober: a Get without a limit (k8s.io/apiserver storagebackend/factory).
			g.client(i).Do(ctx, s, "get/health", history.Request{Kind: history.KindRange, Range: &history.Range{Key: "/registry/health"}})
		}},
	}
	for _, res := range sortedKeys(w.cfg.CacheReads) {
		i, _ := watchedIndex(res)
		streams = append(streams, pollStream{"cache-reads/" + res, w.cfg.CacheReads[res], func(ctx context.Context, s *workloads.Slot, g *goroutine) {
			if a := int(s.N % uint64(as)); w.cfg.Active[ActorWatchCache] && w.owns(a) {
				w.cacheStats(ctx, w.apiservers[a], g.client(a), s, i)
			}
		}})
	}
	done := make(chan struct{}, len(streams))
	for _, st := range streams {
		go func() {
			defer func() { done <- struct{}{} }()
			w.stream(ctx, st.name, st.rate, streamGoroutines, st.op)
		}()
	}
	for range streams {
		<-done
	}
}

// compactKey is the apiserver's compaction bookkeeping key (no /registry prefix).
const compactKey = "compact_rev_key"

// compactor runs every apiserver's compactor: every interval, a transaction on compact_rev_key decides
// which apiserver compacts (If Version(compact_rev_key) == the version it last saw Then Put the revision it
// saw one interval earlier Else Get), and the winner compacts to that revision. Only one apiserver wins each
// round, whatever their number: as in a real control plane, whose apiservers started at different times,
// each apiserver's timer has its own phase (apiserver i at (i + 1/2)/apiservers of the interval), and the
// first to fire after a win wins again while the others learn its version.
//
// Each compactor's first round, which only records the revision (an apiserver does not compact on
// bootstrap), was sent in Setup (bootstrapCompactors): the load's rounds compact from its first interval,
// as long-running apiservers' do.
func (w *Workload) compactor(ctx context.Context) {
	interval := w.cfg.CompactionInterval
	rec := w.r.Recorder()
	begin, _ := rec.Began()
	end := begin + w.r.Options().Duration
	done := make(chan struct{}, len(w.local))
	for _, a := range w.local {
		go func() {
			defer func() { done <- struct{}{} }()
			c := a.client()
			defer a.release(c)
			phase := time.Duration((float64(a.id) + 0.5) / float64(w.cfg.Apiservers) * float64(interval))
			for n := int64(0); ; n++ {
				at := begin + phase + time.Duration(n)*interval
				if at >= end || !sleepUntil(ctx, rec, at) {
					return
				}
				if a.compact.round(ctx, c, &workloads.Slot{N: uint64(n), Intended: at}) {
					w.stats.wins.Add(1)
				}
			}
		}()
	}
	for range w.local {
		<-done
	}
}

// bootstrapCompactors sends every local apiserver's first compaction round, which records the revision
// and compacts nothing, before the load (see compactor).
func (w *Workload) bootstrapCompactors(ctx context.Context) {
	if !w.cfg.Active[ActorCompactor] {
		return
	}
	for _, a := range w.local {
		c := a.client()
		a.compact.round(ctx, c, nil)
		a.release(c)
	}
}

// compactorState is what one apiserver's compactor knows between rounds: the version of compact_rev_key
// it last saw and the revision of its last round.
type compactorState struct {
	version, rev int64
}

// round is one round of the compactor (k8s.io/apiserver storage/etcd3 Compact): it reports whether this
// apiserver compacted.
func (st *compactorState) round(ctx context.Context, c *workloads.Client, s *workloads.Slot) bool {
	resp, err := c.Do(ctx, s, "compact-txn", history.Request{Kind: history.KindTxn, Txn: &history.Txn{
		Compares: []history.Compare{{Key: compactKey, Target: history.CompareVersion, Result: history.Equal, Operand: st.version}},
		// The apiserver writes the revision as text (4 to 10 bytes); the workload's values carry a
		// write id of 8.
		Then: []history.Request{{Kind: history.KindPut, Put: &history.Put{Key: compactKey, Value: c.NewValue(8)}}},
		Else: []history.Request{{Kind: history.KindRange, Range: &history.Range{Key: compactKey}}},
	}})
	if err != nil {
		return false
	}
	if !resp.Txn.Succeeded {
		if r := resp.Txn.Results; len(r) > 0 && r[0].Range != nil && len(r[0].Range.KVs) > 0 {
			st.version = r[0].Range.KVs[0].Version
		}
		st.rev = resp.Revision
		return false
	}
	st.version++
	compacted := false
	if st.rev != 0 {
		_, err := c.Do(ctx, nil, "compact", history.Request{Kind: history.KindCompact, Compact: &history.Compact{Revision: st.rev}})
		compacted = err == nil
	}
	st.rev = resp.Revision
	return compacted
}

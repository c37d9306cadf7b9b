package kube

import (
	"context"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
	"github.com/etcd-chaosbench/chaosbench/workloads"
)

func TestMain(m *testing.M) {
	clusters.RunMemberIfRequested()
	os.Exit(m.Run())
}

// env is a real single-member etcd with a runner recording to a collector and a history.
type env struct {
	cluster *clusters.Embedded
	runner  *workloads.Runner
	col     *results.Collector
	hist    *history.Writer
	raw     *clientv3.Client // an unrecorded client, to look at etcd's state
}

func newEnv(t *testing.T, conns int, duration time.Duration) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := clusters.StartEmbedded(ctx, clusters.EmbedOptions{Members: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	dir := t.TempDir()
	hist, err := history.NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	col, err := results.NewCollector(results.CollectorOptions{Dir: dir, Start: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clusters.ClientConfig(c)
	cfg.Logger = zap.NewNop()
	rec := workloads.NewRecorder(col.Start(), hist, []byte("filler"), col)
	r, err := workloads.NewRunner(cfg, rec, workloads.RunOptions{Clients: conns, Conns: conns, Duration: duration, RequestTimeout: 10 * time.Second, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		raw.Close()
		r.Close()
		hist.Close()
	})
	return &env{cluster: c, runner: r, col: col, hist: hist, raw: raw}
}

func TestConcurrentCreatesExactlyOneWins(t *testing.T) {
	e := newEnv(t, 2, time.Minute)
	ctx := context.Background()
	for round := range 20 {
		k := key(ResPods, "default", fmt.Sprintf("twin-%d", round))
		var wg sync.WaitGroup
		start := make(chan struct{})
		won := make([]bool, 2)
		ids := make([]uint64, 2)
		for i := range 2 {
			c := e.runner.NewClient(i)
			wg.Go(func() {
				v := c.NewValue(2048)
				ids[i] = v.ID
				<-start
				ok, _, err := create(ctx, c, nil, "create/pods", k, v, 0)
				if err != nil {
					t.Error(err)
				}
				won[i] = ok
			})
		}
		close(start)
		wg.Wait()
		if won[0] == won[1] {
			t.Fatalf("round %d: creates won %v: exactly one must win", round, won)
		}
		resp, err := e.raw.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		winner := ids[0]
		if won[1] {
			winner = ids[1]
		}
		if got := history.DecodeValue(resp.Kvs[0].Value).ID; got != winner || resp.Kvs[0].Version != 1 {
			t.Fatalf("round %d: etcd holds write %d (version %d), the winner wrote %d", round, got, resp.Kvs[0].Version, winner)
		}
	}
}

func TestStaleUpdateTakesElseBranchAndRetries(t *testing.T) {
	e := newEnv(t, 1, time.Minute)
	ctx := context.Background()
	c := e.runner.NewClient(0)
	k := key(ResLeases, nsNodeLease, "node-0")
	ok, rev1, err := create(ctx, c, nil, "create/leases", k, c.NewValue(400), 0)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	size := func() int { return 400 }
	rev2, _, conflicts, err := update(ctx, c, nil, "update/leases", k, rev1, size, 0)
	if err != nil || conflicts != 0 || rev2 <= rev1 {
		t.Fatalf("fresh update: rev %d, conflicts %d, err %v", rev2, conflicts, err)
	}
	// rev1 is stale now: the compare fails, the Else branch returns the object at rev2, the retry wins.
	rev3, v, conflicts, err := update(ctx, c, nil, "update/leases", k, rev1, size, 0)
	if err != nil {
		t.Fatal(err)
	}
	if conflicts != 1 || rev3 <= rev2 {
		t.Fatalf("stale update: %d conflicts, revision %d after %d; want 1 conflict and a newer revision", conflicts, rev3, rev2)
	}
	resp, err := e.raw.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if got := history.DecodeValue(resp.Kvs[0].Value).ID; got != v.ID || resp.Kvs[0].ModRevision != rev3 || resp.Kvs[0].Version != 3 {
		t.Fatalf("etcd holds write %d at revision %d (version %d); want the retry's write %d at %d, version 3", got, resp.Kvs[0].ModRevision, resp.Kvs[0].Version, v.ID, rev3)
	}
	// An update of an object that is gone ends with errNotFound after its conflict.
	if _, err := e.raw.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := update(ctx, c, nil, "update/leases", k, rev3, size, 0); err != errNotFound {
		t.Fatalf("update of a deleted object: %v, want errNotFound", err)
	}
}

func TestPagedListIsOneSnapshotWhileWritesContinue(t *testing.T) {
	e := newEnv(t, 2, time.Minute)
	ctx := context.Background()
	const n = 1200
	p := prefix(ResPods) + "busy/"
	for i := 0; i < n; i += 100 {
		var ops []clientv3.Op
		for j := i; j < i+100; j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("%s%05d", p, j), "v"))
		}
		if _, err := e.raw.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var writes int
	wg.Go(func() {
		for j := 0; wctx.Err() == nil; j++ {
			k := fmt.Sprintf("%s%05d", p, (j*7919)%(n+200)) // updates, and creates past the end
			if j%5 == 4 {
				e.raw.Delete(wctx, k)
			} else {
				e.raw.Put(wctx, k, fmt.Sprint(j))
			}
			writes++
		}
	})
	// Slow pages down so that the writer gets in between them.
	c := e.runner.NewClient(1)
	seen := map[string]int64{}
	rev, pages, err := list(ctx, c, nil, "list/pods", p, prefixEnd(p), 100, func(kv history.KV) {
		if _, dup := seen[kv.Key]; dup {
			t.Errorf("key %s listed twice", kv.Key)
		}
		seen[kv.Key] = kv.ModRevision
		time.Sleep(200 * time.Microsecond)
	})
	stop()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	now, err := e.raw.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if now.Header.Revision <= rev || writes == 0 {
		t.Fatalf("writes did not continue during the list (%d writes, revision %d then %d)", writes, rev, now.Header.Revision)
	}
	snap, err := e.raw.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Kvs) != len(seen) {
		t.Fatalf("list returned %d keys, etcd held %d at revision %d", len(seen), len(snap.Kvs), rev)
	}
	for _, kv := range snap.Kvs {
		if got, ok := seen[string(kv.Key)]; !ok || got != kv.ModRevision {
			t.Fatalf("key %s: listed at mod revision %d (present %v), etcd had %d at revision %d", kv.Key, got, ok, kv.ModRevision, rev)
		}
	}
	if want := (len(seen) + 99) / 100; pages != want {
		t.Fatalf("%d pages for %d keys, want %d", pages, len(seen), want)
	}
}

func TestWatchCacheRelistsAfterCompactionAndConverges(t *testing.T) {
	e := newEnv(t, 1, time.Minute)
	ctx := context.Background()
	p := prefix(ResPods)
	for i := range 50 {
		if _, err := e.raw.Put(ctx, fmt.Sprintf("%sns/p%02d", p, i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	wc := &watchCache{res: ResPods, prefix: p, client: e.runner.NewClient(0), cache: newObjectCache()}
	if err := wc.list(ctx); err != nil {
		t.Fatal(err)
	}
	// While the cache is not watching, the store moves on and is compacted past the cache's revision:
	// its watch must fail with ErrCompacted and the cache relist.
	write := func(from, to int) {
		for i := from; i < to; i++ {
			k := fmt.Sprintf("%sns/p%02d", p, i%70)
			var err error
			if i%4 == 3 {
				_, err = e.raw.Delete(ctx, k)
			} else {
				_, err = e.raw.Put(ctx, k, fmt.Sprint(i))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0, 200)
	resp, err := e.raw.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.raw.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); wc.run(cctx) }()
	write(200, 400) // writes continue while it relists
	defer func() { cancel(); <-done }()

	want, err := e.raw.Get(ctx, p, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if err := waitCtx(ctx, 10*time.Second, func() bool { return wc.cache.revision() >= want.Header.Revision }); err != nil {
		t.Fatalf("cache at revision %d, etcd at %d: %v", wc.cache.revision(), want.Header.Revision, err)
	}
	if wc.relists.Load() < 1 {
		t.Fatal("the cache did not relist after its revision was compacted")
	}
	if got := wc.cache.len(); got != len(want.Kvs) {
		t.Fatalf("cache holds %d objects, etcd %d", got, len(want.Kvs))
	}
	for _, kv := range want.Kvs {
		if rev, ok := wc.cache.get(string(kv.Key)); !ok || rev != kv.ModRevision {
			t.Fatalf("cache has %s at %d (%v), etcd at %d", kv.Key, rev, ok, kv.ModRevision)
		}
	}
}

func waitCtx(ctx context.Context, d time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

func TestEventLeasesAreReused(t *testing.T) {
	e := newEnv(t, 1, time.Minute)
	ctx := context.Background()
	c := e.runner.NewClient(0)
	var clock time.Duration
	m := newLeaseManager("grant/leases", time.Hour, func() time.Duration { return clock })
	// An events flood of 50/s for three minutes: leases fill up every 1000 events (20 s).
	const rate, minutes = 50, 3
	grantedAt := map[int64]time.Duration{}
	events := 0
	for i := range rate * 60 * minutes {
		clock = time.Duration(i) * time.Second / rate
		id, err := m.lease(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := grantedAt[id]; !ok {
			grantedAt[id] = clock
		}
		events++
	}
	// No 60 s window holds more than ceil(events in it / 1000) grants.
	for from := time.Duration(0); from < minutes*time.Minute; from += time.Second {
		grants := 0
		for _, at := range grantedAt {
			if at >= from && at < from+time.Minute {
				grants++
			}
		}
		inWindow := int(math.Min(float64(rate*60), float64(rate)*(float64(minutes*time.Minute-from)/float64(time.Second))))
		if limit := (inWindow + 999) / 1000; grants > limit {
			t.Fatalf("%d grants in the minute from %s, %d events: more than %d", grants, from, inWindow, limit)
		}
	}
	if want := rate * 60 * minutes / 1000; m.granted() != want {
		t.Fatalf("%d grants for %d events, want %d", m.granted(), events, want)
	}
	// A trickle of events reuses one lease for 60 s, then grants a fresh one; each lease is etcd's and
	// lives TTL + reuse.
	m = newLeaseManager("grant/leases", time.Hour, func() time.Duration { return clock })
	lease := func() int64 {
		t.Helper()
		id, err := m.lease(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	first := lease()
	clock += 59 * time.Second
	if again := lease(); again != first {
		t.Fatal("lease not reused within 60 s")
	}
	clock += 2 * time.Second
	if next := lease(); next == first || m.granted() != 2 {
		t.Fatalf("lease reused after 61 s (%d grants)", m.granted())
	}
	ttl, err := e.raw.TimeToLive(ctx, clientv3.LeaseID(first))
	if err != nil {
		t.Fatal(err)
	}
	if ttl.GrantedTTL != 3660 {
		t.Fatalf("event lease granted for %d s, want TTL + reuse = 3660", ttl.GrantedTTL)
	}
}

// podsToDelete starts a one-member cluster and a workload of options o whose one apiserver watches pods,
// and creates the pods doomed, each in that apiserver's watch cache: the start of a deletion test.
func podsToDelete(t *testing.T, o Options, doomed ...pod) (*env, *Workload, *apiserver, *workloads.Client) {
	t.Helper()
	e := newEnv(t, 1, time.Minute)
	cfg, err := o.Resolve(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	w := New(cfg)
	w.r = e.runner
	a := &apiserver{r: e.runner, caches: map[string]*watchCache{ResPods: {res: ResPods, cache: newObjectCache()}}}
	e.runner.Recorder().Begin()
	c := e.runner.NewClient(0)
	for _, p := range doomed {
		ok, rev, err := create(context.Background(), c, nil, "create/"+ResPods, p.key(), c.NewValue(2048), 0)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		a.caches[ResPods].cache.put(p.key(), rev)
	}
	return e, w, a, c
}

// TestPodDeletionAsTheRegistrySendsIt: a pod's graceful deletion reaches etcd as the apiserver's generic
// registry sends it: two DELETE calls (the user's, then the kubelet's), each a read from etcd and an update
// through the watch cache's copy, then the removal. A removal from a stale copy of the watch cache (the
// kubelet's update not yet seen) fails its comparison once and succeeds with the revision the failed
// transaction read.
func TestPodDeletionAsTheRegistrySendsIt(t *testing.T) {
	ctx := context.Background()
	doomed := []pod{{namespace: "default", name: "doomed-0"}, {namespace: "default", name: "doomed-1"}}
	e, w, a, c := podsToDelete(t, Options{Nodes: 10, Apiservers: 1}, doomed...)
	// The first pod's deletion as planned, the grace period skipped.
	steps := w.podDeletion(a, doomed[0], 0, 1)
	for _, st := range steps {
		st.do(ctx, c, nil)
	}
	// The second pod's removal from a watch cache that has not seen its last update.
	k := doomed[1].key()
	stale, _ := a.known(ResPods, k)
	if err := w.updateCached(ctx, a, c, nil, ResPods, k, func() int { return 2048 }, 0); err != nil {
		t.Fatal(err)
	}
	a.caches[ResPods].cache.forget(k)
	a.caches[ResPods].cache.put(k, stale)
	w.deleteCached(ctx, a, c, nil, ResPods, k)

	end := e.runner.Recorder().Now()
	if err := e.col.Close(end); err != nil {
		t.Fatal(err)
	}
	ops := e.col.Operations(end)
	count := func(op string) (n, failed int64) {
		if o := ops[op]; o != nil {
			return o.Count, o.Failed
		}
		return 0, 0
	}
	for _, want := range []struct {
		op            string
		count, failed int64
	}{
		{"get/" + ResPods, 2, 0},
		{"update/" + ResPods, 3, 0},     // two for the first pod, one for the second
		{"delete/" + ResPods, 1 + 2, 1}, // the second pod's removal: one conflict, one success
	} {
		if n, failed := count(want.op); n != want.count || failed != want.failed {
			t.Errorf("%s: %d requests (%d failed their comparison), want %d (%d)", want.op, n, failed, want.count, want.failed)
		}
	}
	for _, p := range doomed {
		if resp, err := e.raw.Get(ctx, p.key()); err != nil || len(resp.Kvs) != 0 {
			t.Errorf("%s still in etcd (%v)", p.key(), err)
		}
	}
}

// TestPodDeletionWithAThirdCall: with three DELETE calls a pod (KWOK's second grace-zero DELETE), the third
// reads the pod before the kubelet's removal lands and removes it from the revision it read: one more read
// and one more delete, which fails its comparison and finds the pod gone. With two, the deletion is the
// user's and the kubelet's calls alone.
func TestPodDeletionWithAThirdCall(t *testing.T) {
	// With DeleteConflicts 1 the kubelet's removal starts from the revision before its update: one more
	// delete, which fails its comparison.
	// With one call (a kubelet that lags behind), the user's alone: the pod stays.
	for _, c := range []struct {
		calls, conflicts               float64
		gets, updates, deletes, failed int64
	}{{3, 0, 3, 2, 2, 1}, {2, 0, 2, 2, 1, 0}, {2, 1, 2, 2, 2, 1}, {3, 1, 3, 2, 3, 2}, {1, 0, 1, 1, 0, 0}} {
		ctx := context.Background()
		p := pod{namespace: "default", name: "doomed"}
		e, w, a, cl := podsToDelete(t, Options{Nodes: 10, Apiservers: 1, DeleteCalls: c.calls, DeleteConflicts: c.conflicts}, p)
		for _, st := range w.podDeletion(a, p, 0, 1) {
			st.do(ctx, cl, nil)
		}
		end := e.runner.Recorder().Now()
		if err := e.col.Close(end); err != nil {
			t.Fatal(err)
		}
		ops := e.col.Operations(end)
		for _, want := range []struct {
			op            string
			count, failed int64
		}{{"get/" + ResPods, c.gets, 0}, {"update/" + ResPods, c.updates, 0}, {"delete/" + ResPods, c.deletes, c.failed}} {
			if o := ops[want.op]; (o == nil && want.count != 0) || (o != nil && (o.Count != want.count || o.Failed != want.failed)) {
				t.Errorf("%g calls, %g conflicts: %s: %+v, want %d requests (%d failed their comparison)", c.calls, c.conflicts, want.op, o, want.count, want.failed)
			}
		}
		if resp, err := e.raw.Get(ctx, p.key()); err != nil || (len(resp.Kvs) != 0) != (c.calls < 2) {
			t.Errorf("%g calls: %s in etcd: %d (%v)", c.calls, p.key(), len(resp.Kvs), err)
		}
	}
	if _, err := (Options{DeleteCalls: 3.5}).Resolve(time.Minute); !outcome.IsUsage(err) {
		t.Errorf("3.5 delete calls: %v, want a usage error", err)
	}
}

// TestPreloadKeepsEventsAndOthers: the events a cluster keeps when the load begins are preloaded on leases
// of the event TTL (a lease per 1000, as the apiserver attaches them), and the objects of resources the
// workload does not model under their storage prefixes, at their sizes.
func TestPreloadKeepsEventsAndOthers(t *testing.T) {
	cfg, err := Options{Nodes: 2, PodsPerNode: 2, Apiservers: 1, Events: 1500, Secrets: 10,
		Others: []Others{{Prefix: "apiregistration.k8s.io/apiservices", Objects: 40, Bytes: 1200}, {Prefix: "flowschemas", Objects: 13, Bytes: 1024}}}.Resolve(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, 1, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := New(cfg)
	if err := w.Setup(ctx, e.runner); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	events, err := e.raw.Get(ctx, "/registry/events/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	leases := map[int64]int{}
	for _, kv := range events.Kvs {
		leases[kv.Lease]++
	}
	if len(events.Kvs) != 1500 || len(leases) != 2 || leases[0] != 0 {
		t.Fatalf("%d events on leases %v, want 1500 on two leases (1000 and 500)", len(events.Kvs), leases)
	}
	for id := range leases {
		ttl, err := e.raw.TimeToLive(ctx, clientv3.LeaseID(id))
		if err != nil {
			t.Fatal(err)
		}
		if ttl.GrantedTTL != 3600 {
			t.Errorf("kept events' lease granted for %d s, want the event TTL, 3600", ttl.GrantedTTL)
		}
	}
	// Ten secrets over the five namespaces (default, kube-system, kube-public, kube-node-lease, ns-0): 2 each.
	secrets, err := e.raw.Get(ctx, "/registry/secrets/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	perNamespace := map[string]int{}
	for _, kv := range secrets.Kvs {
		perNamespace[strings.Split(string(kv.Key), "/")[3]]++
	}
	if want := map[string]int{"default": 2, "kube-system": 2, "kube-public": 2, "kube-node-lease": 2, "ns-0": 2}; !reflect.DeepEqual(perNamespace, want) {
		t.Errorf("secrets per namespace %v, want %v", perNamespace, want)
	}
	for _, x := range cfg.Others {
		got, err := e.raw.Get(ctx, "/registry/"+x.Prefix+"/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Kvs) != x.Objects {
			t.Errorf("%s: %d objects, want %d", x.Prefix, len(got.Kvs), x.Objects)
		}
		for _, kv := range got.Kvs {
			if len(kv.Value) != x.Bytes || kv.Lease != 0 {
				t.Fatalf("%s: %d bytes on lease %d, want %d bytes on none", kv.Key, len(kv.Value), kv.Lease, x.Bytes)
			}
		}
	}
}

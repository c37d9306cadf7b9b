package kube

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/workloads"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestResolveDerivesFromClusterSize(t *testing.T) {
	cases := []struct {
		opts                   Options
		nodes, pods, ns        int
		churn, listRate        float64
		compaction, wantPreset string
	}{
		{Options{}, 100, 3000, 10, 5, 0.5, "15s", ""},
		{Options{Preset: "small"}, 50, 1500, 5, 2.5, 0.25, "15s", "small"},
		{Options{Preset: "medium"}, 250, 7500, 25, 12.5, 1.25, "15s", "medium"},
		{Options{Preset: "large"}, 1000, 30000, 100, 20, 5, "15s", "large"},
		{Options{Preset: "xlarge", Churn: 3, ListRate: -1}, 3000, 90000, 300, 3, 0, "15s", "xlarge"},
		{Options{Nodes: 10, PodsPerNode: 110, Namespaces: 2}, 10, 1100, 2, 1, 0.05, "15s", ""},
	}
	for _, c := range cases {
		cfg, err := c.opts.Resolve(time.Minute)
		if err != nil {
			t.Fatalf("%+v: %v", c.opts, err)
		}
		if cfg.Nodes != c.nodes || cfg.Pods() != c.pods || cfg.Namespaces != c.ns || cfg.Churn != c.churn ||
			cfg.ListRate != c.listRate || cfg.CompactionInterval.String() != c.compaction || cfg.Preset != c.wantPreset {
			t.Errorf("%+v resolved to %s, lists %g, compaction %s", c.opts, cfg, cfg.ListRate, cfg.CompactionInterval)
		}
	}
	long, _ := Options{}.Resolve(time.Hour)
	if long.CompactionInterval != 5*time.Minute || long.EventTTL != time.Hour {
		t.Errorf("an hour's run compacts every %s, events live %s; want kube-apiserver's 5m and 1h", long.CompactionInterval, long.EventTTL)
	}
}

func TestResolveRejectsBadOptions(t *testing.T) {
	cases := []struct {
		opts Options
		want string
	}{
		{Options{Preset: "huge"}, "--preset \"huge\""},
		{Options{Nodes: -1}, "--nodes -1"},
		{Options{PodsPerNode: 5000}, "--pods-per-node 5000"},
		{Options{Apiservers: 100}, "--apiservers 100"},
		{Options{Nodes: 1, PodsPerNode: 2, Namespaces: 5}, "more namespaces than pods"},
		{Options{Churn: -1}, "--churn -1"},
		{Options{EventTTL: time.Second}, "--event-ttl 1s"},
		{Options{CompactionInterval: time.Millisecond}, "--compaction-interval 1ms"},
		{Options{ObjectSizes: "pods=4k-2k"}, "min before max"},
		{Options{ObjectSizes: "pod=4k"}, "did you mean pods"},
		{Options{ObjectSizes: "pods"}, "is not resource=size"},
		{Options{ObjectSizes: "events=2m"}, "1.5 MiB"},
		{Options{ObjectSizes: "events=lots"}, "bad size"},
		{Options{Actors: []string{"churm"}}, "did you mean churn"},
		{Options{SkipActors: []string{"nope"}}, "no such actor"},
		{Options{Events: -1}, "events -1"},
		{Options{Others: []Others{{Prefix: "/flowschemas", Objects: 1, Bytes: 10}}}, "without slashes"},
		{Options{Others: []Others{{Prefix: "pods", Objects: 1, Bytes: 10}}}, "writes that resource itself"},
		{Options{Others: []Others{{Prefix: "flowschemas", Objects: -1, Bytes: 10}}}, "-1 objects"},
		{Options{Others: []Others{{Prefix: "flowschemas", Objects: 1}}}, "0 bytes each"},
	}
	for _, c := range cases {
		_, err := c.opts.Resolve(time.Minute)
		if err == nil || !outcome.IsUsage(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want a usage error with %q", c.opts, err, c.want)
		}
	}
}

func TestParseSizes(t *testing.T) {
	s, err := ParseSizes("pods=4k-16k, events=1k,configmaps=1.5k")
	if err != nil {
		t.Fatal(err)
	}
	if s[ResPods] != (SizeRange{4096, 16384}) || s[ResEvents] != (SizeRange{1024, 1024}) || s[ResConfigMaps] != (SizeRange{1536, 1536}) {
		t.Fatalf("parsed %v", s)
	}
	if s[ResNodes] != DefaultSizes()[ResNodes] {
		t.Fatal("unnamed resources must keep their defaults")
	}
	if back, err := ParseSizes(s.String()); err != nil || back.String() != s.String() {
		t.Fatalf("%s does not parse back: %v %v", s, back, err)
	}
}

func TestPlanFollowsKubernetesPeriods(t *testing.T) {
	cfg, err := Options{Nodes: 600, Apiservers: 3, Churn: 10}.Resolve(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rates := map[string]float64{}
	for _, p := range cfg.Plan(3) {
		rates[p.Actor+" "+p.Op] += p.Rate
	}
	want := map[string]float64{
		"heartbeats update/leases":                60,   // 600 node leases every 10 s
		"heartbeats update/minions":               2,    // 600 node statuses every 5 min
		"churn create/pods":                       10,   //
		"churn update/pods":                       55,   // bind, 2.5 statuses, the two DELETE calls' updates
		"churn get/pods":                          20,   // the two DELETE calls' reads
		"churn create/events":                     50,   // 5 events per pod
		"churn grant/leases":                      0.05, // 3 apiservers, 1 lease per 60 s each
		"election update/leases":                  1,    // 2 leaders every 2 s
		"election get/leases":                     2,    // 2 standbys of 2 components every 2 s
		"master-leases grant/masterleases":        0.3,  // 3 apiservers every 10 s
		"master-leases get/masterleases":          0.3,  // read first: no watch cache for endpoint leases
		"master-leases list/masterleases":         0.3,  // the endpoint reconciler lists every master lease
		"master-leases get/peerserverleases":      0.3,  // the peer endpoint reconciler (1.36+), likewise
		"master-leases grant/peerserverleases":    0.3,
		"master-leases update/peerserverleases":   0.3,
		"polls get/health":                        3,
		"polls count/events":                      0.05, // events alone have no watch cache: counted in etcd every minute
		"polls current-rv/configmaps":             0.05, // the others are counted from their caches, at the current revision
		"polls cache-sync/configmaps":             0.05,
		"polls current-rv/apiservices":            0.05, // the 55 idle watches' resources too, each by its API name
		"polls current-rv/endpoints":              0.05,
		"polls current-rv/replicationcontrollers": 0.05,
		"polls current-rv/idle":                   0,
		"polls count/pods":                        0,
		"polls status":                            0.3, // 3 apiservers x 3 endpoints every 30 s
		"compactor compact-txn":                   0.01,
		"lists list/pods":                         3, // 3 lists/s of namespaces of 300 pods: one page of 500
		"watch-cache watch-event/pods":            3 * (10 + 55),
	}
	for k, v := range want {
		if math.Abs(rates[k]-v) > 1e-9 {
			t.Errorf("%s: planned %g/s, want %g", k, rates[k], v)
		}
	}
	// An events flood beyond 1000 per minute and apiserver grants per 1000 events.
	flood, _ := Options{Nodes: 1000, Churn: 20, Apiservers: 1}.Resolve(time.Hour)
	for _, p := range flood.Plan(1) {
		if p.Op == "grant/leases" && math.Abs(p.Rate-0.1) > 1e-9 {
			t.Errorf("100 events/s on one apiserver: %g grants/s, want 0.1", p.Rate)
		}
	}
	// A profile's control plane: events created through one apiserver (one lease manager: a grant a
	// minute) and the cluster's own lease reads instead of every standby's.
	one, err := Options{Nodes: 600, Apiservers: 3, Churn: 1, EventApiservers: 1, LeaseReads: 0.5}.Resolve(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range one.Plan(3) {
		if want, ok := map[string]float64{"grant/leases": 1.0 / 60, "get/leases": 0.5, "create/events": 5}[p.Op]; ok && math.Abs(p.Rate-want) > 1e-9 {
			t.Errorf("events through one apiserver, 0.5 lease reads/s: %s planned %g/s, want %g", p.Op, p.Rate, want)
		}
	}
	// A profile's reads of the current revision replace the count timers' of the resources it names.
	reads, err := Options{Apiservers: 3, CacheReads: map[string]float64{"namespaces": 0.2, "limitranges": 0.5}}.Resolve(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	planned := map[string]float64{}
	for _, p := range reads.Plan(3) {
		planned[p.Op] += p.Rate
	}
	for op, want := range map[string]float64{"current-rv/namespaces": 0.2, "cache-sync/namespaces": 0.2, "current-rv/limitranges": 0.5, "current-rv/minions": 0.05, "current-rv/apiservices": 0.05} {
		if math.Abs(planned[op]-want) > 1e-9 {
			t.Errorf("cache reads of namespaces and limitranges: %s planned %g/s, want %g", op, planned[op], want)
		}
	}
	for _, c := range []struct{ status, want float64 }{{0, 2}, {0.5, 0.5}, {-1, 0}} {
		o, _ := Options{Nodes: 600, NodeStatus: c.status}.Resolve(time.Hour)
		got := 0.0
		for _, p := range o.Plan(3) {
			if p.Op == "update/"+ResNodes {
				got += p.Rate
			}
		}
		if got != c.want {
			t.Errorf("node status %g: update/minions planned %g/s, want %g", c.status, got, c.want)
		}
	}
	counted, _ := Options{Apiservers: 3, Counts: 0.1, HealthChecks: -1}.Resolve(time.Hour)
	uncounted, _ := Options{Apiservers: 3, Counts: -1, HealthChecks: 0.5}.Resolve(time.Hour)
	for _, c := range []struct {
		cfg  Config
		want float64
	}{{counted, 0}, {uncounted, 0.5}} {
		got := 0.0
		for _, p := range c.cfg.Plan(3) {
			if p.Op == "get/health" {
				got += p.Rate
			}
		}
		if got != c.want {
			t.Errorf("health checks %g: get/health planned %g/s, want %g", c.cfg.HealthChecks, got, c.want)
		}
	}
	for _, c := range []struct {
		cfg  Config
		want float64
	}{{counted, 0.1}, {uncounted, 0}} {
		got := 0.0
		for _, p := range c.cfg.Plan(3) {
			if p.Op == "count/events" {
				got += p.Rate
			}
		}
		if got != c.want {
			t.Errorf("counts %g: count/events planned %g/s, want %g", c.cfg.Counts, got, c.want)
		}
	}
	if _, err := (Options{CacheReads: map[string]float64{"widgets": 1}}).Resolve(time.Hour); !outcome.IsUsage(err) {
		t.Errorf("cache reads of a resource nobody watches: %v, want a usage error", err)
	}
	none, _ := Options{Apiservers: 3, LeaseReads: -1}.Resolve(time.Hour)
	for _, p := range none.Plan(3) {
		if p.Op == "get/leases" {
			t.Errorf("no lease reads asked, %g/s planned", p.Rate)
		}
	}
	if _, err := (Options{Apiservers: 3, EventApiservers: -1}).Resolve(time.Hour); !outcome.IsUsage(err) {
		t.Errorf("events through -1 apiservers: %v, want a usage error", err)
	}
	// A profile's one event apiserver of three, run with --apiservers 1: through the one there is.
	if c, err := (Options{Apiservers: 1, EventApiservers: 3}).Resolve(time.Hour); err != nil || c.eventApiservers() != 1 {
		t.Errorf("events through 3 of 1 apiserver: %v, %+v", err, c)
	}
	// Actors turned off plan nothing.
	quiet, _ := Options{SkipActors: []string{ActorChurn, ActorWatchCache}}.Resolve(time.Hour)
	for _, p := range quiet.Plan(3) {
		if p.Actor == ActorChurn || p.Actor == ActorWatchCache {
			t.Errorf("skipped actor planned: %+v", p)
		}
	}
	var out bytes.Buffer
	if err := WritePlan(&out, cfg, cfg.Plan(3)); err != nil || !strings.Contains(out.String(), "update/leases") || !strings.Contains(out.String(), "total") {
		t.Fatalf("plan output:\n%s", out.String())
	}
}

// TestRunMatchesPlan runs every actor against real etcd and compares the measured rates of the frequent
// operations with the plan, within 10%. The run is short, so the steps of pod lives that fall after its end
// (deletions 2 s after the deletion timestamp, events up to 2.5 s and statuses up to 5 s after the create)
// are cut: their rates may fall short by that share of the run too. The 5-minute run of docs/figures.md shows the
// full-length figures.
func TestRunMatchesPlan(t *testing.T) {
	const duration = 12 * time.Second
	cfg, err := Options{Nodes: 200, PodsPerNode: 10, Apiservers: 2, ListRate: 2, CacheReads: map[string]float64{"namespaces": 2, "limitranges": 2}}.Resolve(duration)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, cfg.Apiservers, duration)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := New(cfg)
	if err := w.Setup(ctx, e.runner); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tick, stop := context.WithCancel(ctx)
	go e.col.Run(tick)
	if err := w.Run(ctx, e.runner); err != nil {
		t.Fatal(err)
	}
	end := e.runner.Recorder().Now()
	stop()
	if err := e.col.Close(end); err != nil {
		t.Fatal(err)
	}
	from, _ := e.col.MeasureFrom()
	measured := (end - from).Seconds()
	ops := e.col.Operations(end - from)
	k := w.Summary(ops, measured, 1)
	cut := map[string]time.Duration{
		"delete/pods": deleteGrace, "create/events": eventsAfter[len(eventsAfter)-1],
		"update/pods": statusAfter[len(statusAfter)-1], "watch-event/pods": statusAfter[len(statusAfter)-1],
	}
	for _, m := range k.Mix {
		if m.Compared && math.Abs(m.DiffPercent) > 10+100*cut[m.Op].Seconds()/measured {
			t.Errorf("%s: measured %.2f/s, planned %.2f/s (%+.1f%%)", m.Op, m.Measured, m.Planned, m.DiffPercent)
		}
	}
	compared := 0
	for _, m := range k.Mix {
		if m.Compared {
			compared++
		}
	}
	if compared < 6 {
		t.Fatalf("only %d operations frequent enough to compare: %+v", compared, k.Mix)
	}
	for _, op := range []string{"create/pods", "update/pods", "delete/pods", "create/events", "update/leases", "list/pods", "get/leases", "watch-event/pods", "current-rv/pods", "get/health", "grant/leases", "current-rv/namespaces", "cache-sync/namespaces", "current-rv/limitranges"} {
		if ops[op] == nil || ops[op].Count == 0 || ops[op].Errors > 0 {
			t.Errorf("%s: %+v", op, ops[op])
		}
	}
	if !k.SLOPass || len(k.SLO) == 0 || k.EventLeaseGrants < 2 || k.CacheLists < int64(cfg.Apiservers*len(cachedResources)) {
		t.Errorf("summary: SLO pass %v (%d rows), %d event lease grants, %d cache lists", k.SLOPass, len(k.SLO), k.EventLeaseGrants, k.CacheLists)
	}
	// Steady state: as many pods as before, give or take the deletions cut by the end of the run.
	if got, want := w.pods.len(), cfg.Pods(); got < want-int(cfg.Churn*3) || got > want+int(cfg.Churn*3) {
		t.Errorf("%d pods in the queue after the run, want about %d", got, want)
	}
}

// TestPlanSharesAddUp: the plans of a split load's shares add up, operation by operation, to the plan of
// the whole load, for every number of workers the apiservers allow.
func TestPlanSharesAddUp(t *testing.T) {
	for _, o := range []Options{{Nodes: 100}, {Nodes: 7, Apiservers: 5}, {Preset: "large", Apiservers: 4}, {Nodes: 50, Apiservers: 2}} {
		cfg, err := o.Resolve(time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		whole := map[string]float64{}
		for _, p := range cfg.Plan(3) {
			whole[p.Actor+" "+p.Op] += p.Rate
		}
		for n := 1; n <= cfg.Apiservers; n++ {
			sum := map[string]float64{}
			local := 0
			for i := range n {
				c := cfg
				c.Share = workloads.Share{Index: i, Of: n}
				local += c.LocalApiservers()
				for _, p := range c.Plan(3) {
					sum[p.Actor+" "+p.Op] += p.Rate
				}
			}
			if local != cfg.Apiservers {
				t.Fatalf("%s over %d workers: %d apiservers simulated, want %d", cfg, n, local, cfg.Apiservers)
			}
			for op, r := range whole {
				if math.Abs(sum[op]-r) > 1e-9*r {
					t.Fatalf("%s over %d workers: %s adds up to %v, the whole plan has %v", cfg, n, op, sum[op], r)
				}
			}
			if len(sum) != len(whole) {
				t.Fatalf("%s over %d workers: the shares plan %d operations, the whole %d", cfg, n, len(sum), len(whole))
			}
		}
	}
}

// TestIdleResourcesNamedAsTheApiserverDoes checks the idle resources' operation names: each is the API
// resource the apiserver's etcd request metrics label (endpoints, not services/endpoints), one per
// resource, so that the fidelity comparison finds each on the real side.
func TestIdleResourcesNamedAsTheApiserverDoes(t *testing.T) {
	for prefix, want := range map[string]string{
		"services/endpoints": "endpoints", "services/specs": "services", "controllers": "replicationcontrollers",
		"ingress": "ingresses", "apiregistration.k8s.io/apiservices": "apiservices", "flowschemas": "flowschemas", ResNodes: "nodes",
	} {
		if got := apiResource(prefix); got != want {
			t.Errorf("apiResource(%q) = %q, want %q", prefix, got, want)
		}
	}
	seen := map[string]bool{}
	for _, res := range idleResources {
		op := idleCurrentRV(res)
		if seen[op] || strings.Count(op, "/") != 1 {
			t.Errorf("idle resource %s: operation %q repeated or not verb/resource", res, op)
		}
		seen[op] = true
	}
}

// TestCompactorsCompactEveryInterval runs three apiservers' compactors for 7 s at a 2 s interval: their
// bootstrap rounds are set-up, so the load's rounds compact from the first interval on; each apiserver
// fires at its own phase (1/6, 3/6 and 5/6 of the interval: 4, 3 and 3 rounds in 7 s), and the first
// to fire after a win (apiserver 0, every time) wins each round: one compaction per interval.
func TestCompactorsCompactEveryInterval(t *testing.T) {
	const duration = 7 * time.Second
	cfg, err := Options{Nodes: 1, PodsPerNode: 1, Apiservers: 3, CompactionInterval: 2 * time.Second, Actors: []string{ActorCompactor}}.Resolve(duration)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, cfg.Apiservers, duration)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := New(cfg)
	if err := w.Setup(ctx, e.runner); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Run(ctx, e.runner); err != nil {
		t.Fatal(err)
	}
	if got := w.stats.wins.Load(); got != 4 {
		t.Errorf("%d compactions in 7 s at a 2 s interval, want 4 (the first at 1/3 s)", got)
	}
	for i, want := range []int64{5, 4, 4} { // the bootstrap version (1) and four wins; the others learn 4
		if got := w.local[i].compact.version; got != want {
			t.Errorf("apiserver %d saw compact_rev_key version %d, want %d", i, got, want)
		}
	}
	resp, err := e.raw.Get(ctx, compactKey)
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Version != 5 {
		t.Fatalf("compact_rev_key: %+v, %v; want version 5", resp, err)
	}
	if _, err := e.raw.Get(ctx, compactKey, clientv3.WithRev(1)); err == nil {
		t.Error("revision 1 was not compacted")
	}
}

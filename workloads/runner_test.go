package workloads

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results/history"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// load is one workload run against a real cluster, with everything a chaosbench run records.
type load struct {
	ops      map[string]*results.Operation
	measured time.Duration
	dir      string
}

func runLoad(t *testing.T, c clusters.Cluster, wl Workload, opts RunOptions, during func(ctx context.Context, r *Runner)) load {
	t.Helper()
	dir := t.TempDir()
	hist, err := history.NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	col, err := results.NewCollector(results.CollectorOptions{Dir: dir, Start: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(col.Start(), hist, []byte("filler"), col)
	r, err := NewRunner(clientConfig(c), rec, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := wl.Setup(ctx, r); err != nil {
		t.Fatal(err)
	}
	tick, stop := context.WithCancel(ctx)
	go col.Run(tick)
	if during != nil {
		go during(tick, r)
	}
	if err := wl.Run(ctx, r); err != nil {
		t.Fatal(err)
	}
	end := rec.Now()
	stop()
	if err := col.Close(end); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := hist.Close(); err != nil {
		t.Fatal(err)
	}
	from, _ := col.MeasureFrom()
	return load{ops: col.Operations(end - from), measured: end - from, dir: dir}
}

func skipUnderRace(t *testing.T) {
	if raceEnabled {
		t.Skip("timing test: the race detector slows the generator about tenfold; run without -race (make test does)")
	}
}

func microOptions() MicroOptions {
	return MicroOptions{KeySize: 8, ValSize: 64, KeySpaceSize: 100, KeyPrefix: "/t/", Consistency: "l", RangeKeys: 1,
		TxnOps: 2, RWRatio: 1, WatchStreams: 2, WatchersPerStream: 3}
}

// TestOpenLoopKeepsRate: well below capacity, the achieved rate is within 2% of the target and at most 2%
// of the operations start later than the schedule's slack (10 ms). A generator that drifts or waits for
// answers misses hundreds every time; a virtual machine that stalls both cores (steal time) makes tens to
// a hundred and more late at once now and then (22, 135 and 177 of 2,000 in three runs of one afternoon on
// a 2-core machine, with nothing else running). So a run whose operations started late is tried again,
// three runs in all: the schedule must be kept in one of them.
func TestOpenLoopKeepsRate(t *testing.T) {
	skipUnderRace(t)
	c := startCluster(t, 1)
	const attempts = 3
	for attempt := 1; ; attempt++ {
		wl, _ := NewMicro("put", microOptions())
		got := runLoad(t, c, wl, RunOptions{Rate: 400, Clients: 8, Conns: 2, Duration: 5 * time.Second, RequestTimeout: 10 * time.Second, Seed: 1}, nil)
		put := got.ops["put"]
		if put == nil || put.Count != 2000 {
			t.Fatalf("put count %v, want the 2000 scheduled in 5s at 400/s", put)
		}
		if math.Abs(put.Throughput-400)/400 > 0.02 {
			t.Fatalf("achieved %.1f puts/s over %v, target 400", put.Throughput, got.measured)
		}
		if put.Errors != 0 {
			t.Fatalf("%d errors", put.Errors)
		}
		late := put.MissedBacklog + put.MissedLag
		if late <= put.Count/50 {
			return
		}
		if attempt == attempts {
			t.Fatalf("%d of %d operations missed their slot at a rate far below capacity, in each of %d runs", late, put.Count, attempts)
		}
		t.Logf("run %d: %d of %d operations missed their slot; trying again (a stalled machine, or the generator?)", attempt, late, put.Count)
	}
}

// TestPauseShowsInResponseTimeNotServiceTime is the coordinated-omission test: 10 clients at 1000 ops/s
// against one member that is paused for 2 s. The ~2000 operations scheduled during the pause wait for a
// client, so response time (from the intended start) p99 is about the pause, while service time (from the
// actual send) p99 stays normal: only the 10 requests in flight saw the pause. The schedule misses say why.
func TestPauseShowsInResponseTimeNotServiceTime(t *testing.T) {
	skipUnderRace(t)
	c := startCluster(t, 1)
	member := c.Members()[0].(clusters.Process)
	wl, _ := NewMicro("put", microOptions())
	const pause = 2 * time.Second
	got := runLoad(t, c, wl, RunOptions{Rate: 1000, Clients: 10, Conns: 2, Duration: 8 * time.Second, RequestTimeout: 10 * time.Second, Seed: 1},
		func(ctx context.Context, r *Runner) {
			time.Sleep(3 * time.Second)
			if err := member.Pause(ctx); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(pause)
			if err := member.Resume(context.Background()); err != nil {
				t.Error(err)
			}
		})
	put := got.ops["put"]
	t.Logf("response p50 %.1fms p99 %.0fms max %.0fms; service p50 %.1fms p99 %.1fms max %.0fms; missed backlog %d lag %d of %d",
		put.Response.P50, put.Response.P99, put.Response.Max, put.Service.P50, put.Service.P99, put.Service.Max, put.MissedBacklog, put.MissedLag, put.Count)
	if put.Count != 8000 || put.Errors != 0 {
		t.Fatalf("count %d errors %d, want 8000 and 0", put.Count, put.Errors)
	}
	pauseMs := float64(pause / time.Millisecond)
	if put.Response.P99 < 0.8*pauseMs || put.Response.P99 > 1.3*pauseMs {
		t.Errorf("response time p99 %.0fms, want about the %.0fms pause", put.Response.P99, pauseMs)
	}
	if put.Service.P99 > 200 {
		t.Errorf("service time p99 %.0fms, want it near normal (the pause hits only requests in flight)", put.Service.P99)
	}
	if put.Service.Max < 0.8*pauseMs {
		t.Errorf("service time max %.0fms: the requests in flight during the pause should show it", put.Service.Max)
	}
	if put.MissedBacklog < 1500 {
		t.Errorf("%d slots missed with every client busy, want about the %d scheduled during the pause", put.MissedBacklog, 2000)
	}
}

func TestMicroWorkloads(t *testing.T) {
	t.Parallel() // judges behaviour, not latency (see TestMain)
	c := startCluster(t, 1)
	opts := RunOptions{Rate: 200, Clients: 4, Conns: 2, Duration: 2 * time.Second, RequestTimeout: 10 * time.Second, Seed: 7}
	tests := []struct {
		workload string
		mutate   func(*MicroOptions)
		want     map[string]int64 // operation -> expected count (-1: some)
	}{
		{"put", nil, map[string]int64{"put": 400}},
		{"range", nil, map[string]int64{"range": 400}},
		{"range", func(o *MicroOptions) { o.RangeKeys = 0; o.Consistency = "s"; o.Limit = 10 }, map[string]int64{"range": 400}},
		{"txn-put", nil, map[string]int64{"txn-put": 400}},
		{"txn-mixed", nil, map[string]int64{"txn-read": -1, "txn-write": -1}},
		{"watch-latency", nil, map[string]int64{"put": 400, "watch": 400 * 6}},
		{"lease-keepalive", nil, map[string]int64{"lease-keepalive": 400}},
	}
	for _, tt := range tests {
		t.Run(tt.workload, func(t *testing.T) {
			o := microOptions()
			if tt.mutate != nil {
				tt.mutate(&o)
			}
			wl, err := NewMicro(tt.workload, o)
			if err != nil {
				t.Fatal(err)
			}
			got := runLoad(t, c, wl, opts, nil)
			var total int64
			for op, want := range tt.want {
				s := got.ops[op]
				if s == nil {
					t.Fatalf("no %q operations recorded; have %v", op, got.ops)
				}
				if want >= 0 && s.Count != want {
					t.Errorf("%s: %d operations, want %d", op, s.Count, want)
				}
				if s.Errors != 0 {
					t.Errorf("%s: %d errors %v", op, s.Errors, s.ErrorsByClass)
				}
				if s.Response.P50 <= 0 {
					t.Errorf("%s: no latency recorded", op)
				}
				total += s.Count
			}
			if tt.workload == "txn-mixed" && total != 400 {
				t.Errorf("txn-mixed: %d operations, want 400", total)
			}
			// Every request is in the history; every written value has a unique write id.
			ids := map[uint64]bool{}
			var n int
			err = history.ReadOperations(filepath.Join(got.dir, history.HistoryFile), func(op *history.Operation) error {
				n++
				for _, v := range writtenValues(op.Request) {
					if ids[v.ID] || v.ID == 0 {
						t.Errorf("write id %d reused or zero", v.ID)
					}
					ids[v.ID] = true
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if n < 400 {
				t.Errorf("history holds %d operations, want at least the 400 measured ones", n)
			}
		})
	}
}

// TestTxnPastRead: with --txn-past-read 1 every txn-mixed write after the first answers also reads its key
// at a past revision, never ahead of the last revision a write was answered at, in the same transaction;
// with nothing compacted etcd answers them all.
func TestTxnPastRead(t *testing.T) {
	t.Parallel() // judges behaviour, not latency (see TestMain)
	c := startCluster(t, 1)
	o := microOptions()
	o.RWRatio, o.TxnPastRead = 0, 1
	wl, err := NewMicro("txn-mixed", o)
	if err != nil {
		t.Fatal(err)
	}
	got := runLoad(t, c, wl, RunOptions{Rate: 200, Clients: 4, Conns: 2, Duration: 2 * time.Second, RequestTimeout: 10 * time.Second, Seed: 7}, nil)
	if s := got.ops["txn-write"]; s == nil || s.Count != 400 || s.Errors != 0 {
		t.Fatalf("txn-write: %+v", s)
	}
	var writes, past int
	err = history.ReadOperations(filepath.Join(got.dir, history.HistoryFile), func(op *history.Operation) error {
		if op.Op != "txn-write" || op.Response == nil {
			return nil
		}
		writes++
		if len(op.Request.Txn.Then) == 2 {
			rg := op.Request.Txn.Then[1].Range
			if rg == nil || rg.Revision <= 0 || rg.Revision >= op.Response.Revision || rg.Key != op.Request.Txn.Then[0].Put.Key {
				t.Errorf("past read %+v in a write answered at %d", rg, op.Response.Revision)
			}
			past++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if writes != 400 || past < writes-8 {
		t.Errorf("%d of %d writes read at a past revision, want all but the first few (before a write was answered)", past, writes)
	}
}

// TestWatchProgress: with --watch-progress every watcher asks for progress notifications on its stream,
// each request recorded as a "progress" operation, and etcd's answers reach every watcher as progress
// responses in the watch history, re-opened watches included; without it, no watcher receives one
// (etcd's own periodic notifications come every ten minutes, and only to watches that ask for them).
func TestWatchProgress(t *testing.T) {
	c := startCluster(t, 1)
	for _, every := range []time.Duration{0, 50 * time.Millisecond} {
		t.Run(every.String(), func(t *testing.T) {
			o := microOptions()
			o.WatchProgress, o.WatchStreams, o.WatchersPerStream = every, 4, 1
			o.WatchReopen, o.WatchFrom = 500*time.Millisecond, WatchFromPast
			wl, err := NewMicro("watch-latency", o)
			if err != nil {
				t.Fatal(err)
			}
			got := runLoad(t, c, wl, RunOptions{Rate: 100, Clients: 2, Conns: 2, Duration: 2 * time.Second, RequestTimeout: 10 * time.Second, Seed: 7}, nil)
			s := got.ops["progress"]
			progressed := map[int]int{}
			err = history.ReadWatches(filepath.Join(got.dir, history.WatchFile), func(r *history.WatchResponse) error {
				if r.Progress {
					progressed[r.Watcher]++
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if every == 0 {
				if s != nil || len(progressed) != 0 {
					t.Fatalf("no --watch-progress: %v progress requests, progress responses on %d watchers", s, len(progressed))
				}
				return
			}
			// Four watchers, one request each every 50 ms for the 2 s of load, but none while the last is
			// unanswered or the watch is not created yet: at least half of them on a busy machine.
			if s == nil || s.Count < 4*10 || s.Errors != 0 {
				t.Fatalf("progress requests: %+v, want at least 40 without errors", s)
			}
			// Each watcher re-opens its watch every 500 ms: at least 4 watches each over the load.
			if len(progressed) < 4*4 {
				t.Fatalf("progress responses on %d watches, want at least 16: %v", len(progressed), progressed)
			}
			var total int
			for _, k := range progressed {
				total += k
			}
			// Most requests are answered: etcd 3.6 drops a request made while a watch of the stream is
			// still catching up (every re-opened watch from the past does), so not all (136 of 159 once).
			if int64(total) < s.Count*3/4 {
				t.Errorf("%d progress responses for %d requests, want at least three in four answered", total, s.Count)
			}
		})
	}
}

func writtenValues(r history.Request) []history.Value {
	switch r.Kind {
	case history.KindPut:
		return []history.Value{r.Put.Value}
	case history.KindTxn:
		var out []history.Value
		for _, op := range append(append([]history.Request{}, r.Txn.Then...), r.Txn.Else...) {
			out = append(out, writtenValues(op)...)
		}
		return out
	}
	return nil
}

func TestMicroOptionsValidation(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(*MicroOptions)
	}{
		{"nope", nil},
		{"put", func(o *MicroOptions) { o.ValSize = 4 }},
		{"put", func(o *MicroOptions) { o.KeySpaceSize = 0 }},
		{"range", func(o *MicroOptions) { o.Consistency = "x" }},
		{"range", func(o *MicroOptions) { o.KeysOnly, o.CountOnly = true, true }},
		{"txn-put", func(o *MicroOptions) { o.TxnOps = 1000 }},
		{"watch-latency", func(o *MicroOptions) { o.WatchStreams = 0 }},
		{"put", func(o *MicroOptions) { o.DeleteRatio = 1.5 }},
		{"watch-latency", func(o *MicroOptions) { o.WatchFrom = "yesterday" }},
		{"watch-latency", func(o *MicroOptions) { o.WatchReopen = -time.Second }},
		{"watch-latency", func(o *MicroOptions) { o.WatchProgress = -time.Second }},
		{"put", func(o *MicroOptions) { o.WatchProgress = time.Second }},
		{"watch-latency", func(o *MicroOptions) { o.WatchProgress = time.Second }}, // three watchers per stream
		{"txn-mixed", func(o *MicroOptions) { o.TxnPastRead = 1.5 }},
		{"put", func(o *MicroOptions) { o.TxnPastRead = 0.5 }},
	} {
		o := microOptions()
		if tt.mutate != nil {
			tt.mutate(&o)
		}
		if _, err := NewMicro(tt.name, o); err == nil || !outcome.IsUsage(err) {
			t.Errorf("NewMicro(%s, %+v) = %v, want a usage error", tt.name, o, err)
		}
	}
}

// TestMemberClient: MemberClient(i) talks to the i-th endpoint alone, one connection per endpoint shared
// by its clients, each with a client number of its own; a watch opened on it is served (by that member,
// the only one the connection knows).
func TestMemberClient(t *testing.T) {
	c := startCluster(t, 3)
	cfg := clientConfig(c)
	rec := NewRecorder(time.Now(), nil, []byte("filler"), nil)
	r, err := NewRunner(cfg, rec, RunOptions{Rate: 10, Clients: 1, Conns: 1, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ids := map[int]bool{}
	for i := range 6 {
		mc, err := r.MemberClient(i)
		if err != nil {
			t.Fatal(err)
		}
		if eps := mc.Etcd().Endpoints(); len(eps) != 1 || eps[0] != cfg.Endpoints[i%3] {
			t.Fatalf("member client %d: endpoints %v, want only %s", i, eps, cfg.Endpoints[i%3])
		}
		if ids[mc.ID()] {
			t.Fatalf("member client %d: client number %d reused", i, mc.ID())
		}
		ids[mc.ID()] = true
		if i >= 3 {
			if first, _ := r.MemberClient(i - 3); first.Etcd() != mc.Etcd() {
				t.Errorf("member client %d: a second connection to %s", i, cfg.Endpoints[i%3])
			}
		}
	}
	mc, _ := r.MemberClient(1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := mc.NewWatchStream().Watch(ctx, history.WatchRequest{Key: "/pin"})
	if err := waitWatchesReady(ctx, []*Watch{w}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Conns()[0].Put(ctx, "/pin", "v"); err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-w.C:
		if len(resp.Events) != 1 || resp.Events[0].KV.Key != "/pin" {
			t.Fatalf("watch on member 1: %+v", resp)
		}
	case <-ctx.Done():
		t.Fatal("watch on member 1: no event")
	}
}

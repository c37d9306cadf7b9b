package linearizability_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/proxy"
	lin "github.com/etcd-chaosbench/chaosbench/linearizability"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
	"github.com/etcd-chaosbench/chaosbench/workloads"
)

func TestMain(m *testing.M) {
	clusters.RunMemberIfRequested()
	os.Exit(m.Run())
}

// startCluster starts an embedded cluster of n member processes for one test.
func startCluster(tb testing.TB, n int, flags ...string) *clusters.Embedded {
	tb.Helper()
	ef, err := clusters.ParseEtcdFlags(flags)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := clusters.StartEmbedded(ctx, clusters.EmbedOptions{Members: n, Dir: tb.TempDir(), EtcdFlags: ef})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func clientConfig(c clusters.Cluster) clientv3.Config {
	cfg := clusters.ClientConfig(c)
	cfg.Logger = zap.NewNop()
	return cfg
}

// recording is a history being recorded into a directory.
type recording struct {
	dir    string
	writer *history.Writer
	rec    *workloads.Recorder
}

func newRecording(tb testing.TB) *recording {
	dir := tb.TempDir()
	w, err := history.NewWriter(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return &recording{dir: dir, writer: w, rec: workloads.NewRecorder(time.Now(), w, []byte("filler"))}
}

func (r *recording) close(tb testing.TB) {
	tb.Helper()
	if err := r.writer.Close(); err != nil {
		tb.Fatal(err)
	}
}

// runMicro runs a micro workload against cfg and records its history.
func runMicro(tb testing.TB, cfg clientv3.Config, r *recording, name string, o workloads.MicroOptions, opts workloads.RunOptions, during func(ctx context.Context)) {
	tb.Helper()
	wl, err := workloads.NewMicro(name, o)
	if err != nil {
		tb.Fatal(err)
	}
	runner, err := workloads.NewRunner(cfg, r.rec, opts)
	if err != nil {
		tb.Fatal(err)
	}
	defer runner.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := wl.Setup(ctx, runner); err != nil {
		tb.Fatal(err)
	}
	dctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if during != nil {
			during(dctx)
		}
	}()
	if err := wl.Run(ctx, runner); err != nil {
		tb.Fatal(err)
	}
	stop()
	<-done
}

func microOptions() workloads.MicroOptions {
	return workloads.MicroOptions{KeySize: 8, ValSize: 16, KeySpaceSize: 20, KeyPrefix: "/t/", Consistency: "l", RangeKeys: 1,
		TxnOps: 2, RWRatio: 1, WatchStreams: 2, WatchersPerStream: 2, PrevKV: true}
}

func checkDir(tb testing.TB, dir string) *lin.Report {
	tb.Helper()
	rep, err := lin.CheckDir(context.Background(), dir, lin.Options{Timeout: time.Minute})
	if rep == nil {
		tb.Fatal(err)
	}
	return rep
}

func requireVerdicts(tb testing.TB, rep *lin.Report, want map[string]string) {
	tb.Helper()
	for _, c := range rep.Checks {
		if w, ok := want[c.Name]; ok && c.Verdict != w {
			tb.Errorf("%s: %s, want %s: %s", c.Name, c.Verdict, w, c.Detail)
		}
	}
}

var allOK = map[string]string{lin.CheckLinearizability: results.VerdictOK, lin.CheckWatch: results.VerdictOK, lin.CheckSerializable: results.VerdictOK}

// TestMicroWorkloadsPass: every micro workload against a healthy cluster records a history that checks.
func TestMicroWorkloadsPass(t *testing.T) {
	t.Parallel() // its own cluster; judges the history, not latency
	c := startCluster(t, 1)
	for _, name := range workloads.MicroNames {
		t.Run(name, func(t *testing.T) {
			r := newRecording(t)
			o := microOptions()
			o.KeyPrefix = "/" + name + "/"
			runMicro(t, clientConfig(c), r, name, o, workloads.RunOptions{Rate: 400, Clients: 8, Conns: 2, Duration: 2 * time.Second, RequestTimeout: 5 * time.Second, Seed: 1}, nil)
			r.close(t)
			rep := checkDir(t, r.dir)
			// The micro workloads read linearizably, and only watch-latency watches: the other checks have
			// nothing to check, and must say so.
			want := map[string]string{lin.CheckLinearizability: results.VerdictOK, lin.CheckWatch: results.VerdictNothing,
				lin.CheckSerializable: results.VerdictNothing}
			if name == "watch-latency" {
				want[lin.CheckWatch] = results.VerdictOK
			}
			requireVerdicts(t, rep, want)
			t.Logf("%+v", rep.Stats)
		})
	}
}

// recordTraffic runs traffic against cfg for d, recording into a new directory, and returns it.
func recordTraffic(tb testing.TB, cfg clientv3.Config, tr traffic, d time.Duration, during func(ctx context.Context)) string {
	tb.Helper()
	r := newRecording(tb)
	runner, err := workloads.NewRunner(cfg, r.rec, workloads.RunOptions{Clients: 2, Conns: 2, Duration: d, RequestTimeout: 2 * time.Second, Seed: 1})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if during != nil {
			during(ctx)
		}
	}()
	tr.run(ctx, tb, runner, d)
	cancel()
	<-done
	runner.Close()
	r.close(tb)
	return r.dir
}

func defaultTraffic(seed uint64) traffic {
	return traffic{prefix: "/t/", keys: 12, clients: 6, seed: seed}
}

// TestTrafficPasses: the full request mix against a healthy cluster checks clean.
func TestTrafficPasses(t *testing.T) {
	t.Parallel() // its own cluster; judges the history, not latency
	for _, members := range []int{3} {
		t.Run(fmt.Sprintf("%d-members", members), func(t *testing.T) {
			c := startCluster(t, members)
			dir := recordTraffic(t, clientConfig(c), defaultTraffic(1), 4*time.Second, nil)
			rep := checkDir(t, dir)
			requireVerdicts(t, rep, allOK)
			t.Logf("%+v", rep.Stats)
		})
	}
}

// faultLoop injects the faults the clusters package offers (SIGKILL and restart, SIGSTOP and SIGCONT,
// graceful restart, reset of a member's peer connections) one after another on random members until ctx
// ends, and writes each window to faults.jsonl in dir.
func faultLoop(ctx context.Context, tb testing.TB, c *clusters.Embedded, rec *workloads.Recorder, dir string, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	f, err := os.Create(filepath.Join(dir, results.FaultsFile))
	if err != nil {
		tb.Error(err)
		return
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	members := clusters.Processes(c)
	sleep := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	for sleep(time.Duration(300+rng.IntN(500)) * time.Millisecond) {
		i := rng.IntN(len(members))
		if rng.IntN(2) == 0 {
			// Half the faults hit the leader: that is where requests fail and time out.
			lctx, cancel := context.WithTimeout(ctx, time.Second)
			if l, err := c.Leader(lctx); err == nil {
				for j, mm := range c.Members() {
					if mm.Name() == l.Name() {
						i = j
					}
				}
			}
			cancel()
		}
		m := members[i]
		name := c.Members()[i].Name()
		w := results.FaultWindow{Targets: []string{name}, Start: time.Now(), StartNs: int64(rec.Now())}
		// Recovery runs even when the load has ended: leave the cluster whole.
		heal := context.Background()
		switch rng.IntN(5) {
		case 4:
			// Quorum loss: a second member goes down too, for a moment.
			w.Fault = "kill-two"
			other := members[(i+1)%len(members)]
			w.Targets = append(w.Targets, c.Members()[(i+1)%len(members)].Name())
			var errs []error
			if err := m.Kill(ctx); err == nil {
				if err := other.Kill(ctx); err == nil {
					sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond)
					errs = append(errs, other.Start(heal))
				}
				errs = append(errs, m.Start(heal))
			}
			err = errors.Join(errs...)
		case 0:
			w.Fault = "kill"
			if err = m.Kill(ctx); err == nil {
				sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond)
				err = m.Start(heal)
			}
		case 1:
			w.Fault = "pause"
			if err = m.Pause(ctx); err == nil {
				sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
				err = m.Resume(heal)
			}
		case 2:
			w.Fault = "restart"
			err = m.Restart(heal)
		case 3:
			w.Fault = "peer-reset"
			c.Proxy(name).Reset(func(proxy.Conn) bool { return true })
		}
		w.End, w.EndNs, w.Outcome = time.Now(), int64(rec.Now()), "recovered"
		if err != nil {
			w.Outcome = err.Error()
			tb.Logf("fault %s on %s: %v", w.Fault, name, err)
		}
		enc.Encode(w)
	}
}

// TestTrafficUnderFaults is the "never cry wolf" test: real etcd under member kills, pauses, restarts and
// peer connection resets, with requests failing and timing out, must check clean. Each run is a fresh
// 3-member cluster; CHAOS_RUNS sets how many (default 2; make soak-checker runs more).
func TestTrafficUnderFaults(t *testing.T) {
	t.Parallel() // its own cluster; judges the history, not latency
	runs := 2
	if s := os.Getenv("CHAOS_RUNS"); s != "" {
		fmt.Sscan(s, &runs)
	}
	for run := range runs {
		t.Run(fmt.Sprintf("run-%d", run), func(t *testing.T) {
			c := startCluster(t, 3)
			r := newRecording(t)
			runner, err := workloads.NewRunner(clientConfig(c), r.rec, workloads.RunOptions{Clients: 2, Conns: 2, Duration: time.Minute, RequestTimeout: 2 * time.Second, Seed: int64(run)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				faultLoop(ctx, t, c, r.rec, r.dir, uint64(run))
			}()
			defaultTraffic(uint64(run)).run(ctx, t, runner, 8*time.Second)
			cancel()
			<-done
			runner.Close()
			r.close(t)
			rep := checkDir(t, r.dir)
			requireVerdicts(t, rep, allOK)
			t.Logf("%+v", rep.Stats)
			if t.Failed() {
				keep := filepath.Join(os.TempDir(), fmt.Sprintf("chaos-run-%d-%d", run, time.Now().Unix()))
				os.CopyFS(keep, os.DirFS(r.dir))
				t.Logf("history kept in %s", keep)
			}
		})
	}
}

// expectedKinds are the violations each anomaly must produce (any one of them), by check.
var expectedKinds = map[anomaly]struct {
	check string
	kinds []string
}{
	staleRead:      {lin.CheckLinearizability, []string{"stale read", "wrong read", "stale read", "not linearizable"}},
	lostWrite:      {lin.CheckLinearizability, []string{"duplicate revision", "stale read", "wrong read", "missing key", "not linearizable", "write at wrong revision"}},
	revisionBack:   {lin.CheckLinearizability, []string{"duplicate revision", "write at wrong revision", "revision order contradicts real time"}},
	tornTxn:        {lin.CheckLinearizability, []string{"stale read", "wrong read", "missing key", "not linearizable", "duplicate revision", "wrong compare outcome"}},
	duplicateEvent: {lin.CheckWatch, []string{"watch event duplicated", "watch not atomic"}},
	reorderEvents:  {lin.CheckWatch, []string{"watch not ordered", "watch not bookmarkable"}},
	dropEvent:      {lin.CheckWatch, []string{"watch not reliable", "watch not resumable"}},
}

// TestInjectedAnomaliesAreCaught puts the injector between the recording client and real etcd, one kind
// of anomaly at a time, and requires the checker to report it in the right check. The cases share one
// cluster, each with keys of its own: a history owns its keys (see the package documentation), and keys
// of an earlier case, leases included, change only outside them.
func TestInjectedAnomaliesAreCaught(t *testing.T) {
	t.Parallel() // its own cluster; judges the history, not latency
	c := startCluster(t, 1)
	for _, kind := range anomalies {
		t.Run(string(kind), func(t *testing.T) {
			in := newInjector(kind, 1, 500*time.Millisecond, 5)
			cfg := clientConfig(c)
			cfg.DialOptions = append(cfg.DialOptions, in.dialOptions()...)
			tr := defaultTraffic(2)
			tr.prefix = "/" + string(kind) + "/"
			dir := recordTraffic(t, cfg, tr, 2500*time.Millisecond, nil)
			if in.injected() == 0 {
				t.Fatalf("the injector found no chance to inject a %s", kind)
			}
			rep := checkDir(t, dir)
			want := expectedKinds[kind]
			for _, ch := range rep.Checks {
				if ch.Name == want.check && ch.Verdict != results.VerdictViolation {
					t.Fatalf("%d %s injected, but %s says %s: %s", in.injected(), kind, ch.Name, ch.Verdict, ch.Detail)
				}
			}
			found := map[string]int{}
			for _, v := range rep.Violations {
				if v.Check == want.check {
					found[v.Kind]++
				}
			}
			ok := false
			for _, k := range want.kinds {
				ok = ok || found[k] > 0
			}
			if !ok {
				t.Errorf("%s: violations %v, want one of %v", kind, found, want.kinds)
			}
			t.Logf("%d injected; found %v", in.injected(), found)
		})
	}
}

// TestWatchLatencyWatchesAgain: watch-latency's watchers behave as a real client's. Compacted while they
// lag (a compaction every 100 ms at the newest revision, and watchers re-opened in the past), they watch
// again from the compaction revision and keep receiving, so the run's watch traffic after the first
// compaction is recorded and checked; re-opened in the past or the future, and with deletes among the
// writes, the history still checks clean. About 10 s.
func TestWatchLatencyWatchesAgain(t *testing.T) {
	t.Parallel() // its own cluster; judges the history, not latency
	c := startCluster(t, 1)
	for _, from := range []string{workloads.WatchFromPast, workloads.WatchFromFuture} {
		t.Run(from, func(t *testing.T) {
			r := newRecording(t)
			o := microOptions()
			o.KeyPrefix = "/rewatch-" + from + "/"
			o.DeleteRatio, o.WatchReopen, o.WatchFrom = 0.2, 150*time.Millisecond, from
			compact := func(ctx context.Context) {
				// Compactions are recorded, as the compact fault's are, so that the checker knows which
				// previous values they took away; by a runner of its own, numbering its clients and watches
				// apart from the workload's.
				runner, err := workloads.NewRunner(clientConfig(c), r.rec, workloads.RunOptions{Clients: 1, Conns: 1, Duration: time.Minute, RequestTimeout: 5 * time.Second, Seed: 2, IDBase: 1000})
				if err != nil {
					t.Error(err)
					return
				}
				defer runner.Close()
				cli := runner.NewClient(0)
				for ctx.Err() == nil {
					if resp, err := cli.Do(ctx, nil, "get", history.Request{Kind: history.KindRange, Range: &history.Range{Key: "/"}}); err == nil {
						cli.Do(ctx, nil, "compact", history.Request{Kind: history.KindCompact, Compact: &history.Compact{Revision: resp.Revision}})
					}
					select {
					case <-ctx.Done():
					case <-time.After(100 * time.Millisecond):
					}
				}
			}
			runMicro(t, clientConfig(c), r, "watch-latency", o, workloads.RunOptions{Rate: 300, Clients: 4, Conns: 2, Duration: 3 * time.Second, RequestTimeout: 5 * time.Second, Seed: 1}, compact)
			r.close(t)
			var firstCompacted int64
			opened := map[int64]int{} // start revision -> watches opened there
			var deletes, eventsAfter, watches int
			err := history.ReadWatches(filepath.Join(r.dir, history.WatchFile), func(w *history.WatchResponse) error {
				switch {
				case w.Request != nil:
					watches++
					opened[w.Request.Revision]++
				case w.CompactRevision > 0 && firstCompacted == 0:
					firstCompacted = w.Time
				case firstCompacted != 0 && len(w.Events) > 0:
					eventsAfter++
				}
				for _, ev := range w.Events {
					if ev.Type == history.EventDelete {
						deletes++
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if watches <= 4 || opened[0] != 4 {
				t.Errorf("%d watches opened (%d from now), want the 4 watchers' first and more re-opened", watches, opened[0])
			}
			if from == workloads.WatchFromPast && firstCompacted == 0 {
				t.Error("no watcher was told its revision was compacted: the test did not exercise re-watching")
			}
			if firstCompacted != 0 && eventsAfter == 0 {
				t.Error("no watch event after the first compaction: compacted watchers were not re-opened")
			}
			if deletes == 0 {
				t.Error("no delete event: --delete-ratio wrote no deletes")
			}
			requireVerdicts(t, checkDir(t, r.dir), map[string]string{lin.CheckLinearizability: results.VerdictOK, lin.CheckWatch: results.VerdictOK})
			t.Logf("%d watches, %d events after the first compaction, %d delete events", watches, eventsAfter, deletes)
		})
	}
}

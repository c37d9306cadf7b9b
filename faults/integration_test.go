package faults

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/workloads"
)

// Integration tests: real clusters of member processes (3 members unless a test asks for another size), real
// faults. Elections are made fast (50 ms heartbeats, 500 ms election timeout) to keep the tests short.

var fastElections = []string{"heartbeat-interval=50", "election-timeout=500"}

func startCluster(t *testing.T, opts clusters.EmbedOptions, etcdFlags ...string) *clusters.Embedded {
	t.Helper()
	if len(etcdFlags) == 0 {
		etcdFlags = fastElections
	}
	flags, err := clusters.ParseEtcdFlags(etcdFlags)
	if err != nil {
		t.Fatal(err)
	}
	opts.Members, opts.Dir, opts.EtcdFlags, opts.Seed = cmp.Or(opts.Members, 3), t.TempDir(), flags, 1
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := clusters.StartEmbedded(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("close cluster: %v", err)
		}
	})
	return c
}

func newClient(t *testing.T, c clusters.Cluster, endpoints ...string) *clientv3.Client {
	t.Helper()
	cfg := clusters.ClientConfig(c)
	if len(endpoints) > 0 {
		cfg.Endpoints = endpoints
	}
	cfg.Logger = zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// logWriter sends the runner's lines to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// putP50 sends n puts one after the other and returns their median latency.
func putP50(t *testing.T, cli *clientv3.Client, n int) time.Duration {
	t.Helper()
	var ds []time.Duration
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		_, err := cli.Put(ctx, fmt.Sprintf("/latency/%d", i), "v")
		cancel()
		if err != nil {
			t.Fatalf("put: %v", err)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// injectEntry builds the fault one spec describes, bound to c.
func injectEntry(t *testing.T, c clusters.Cluster, spec string) *Lifecycle {
	t.Helper()
	s, err := Parse([]string{spec})
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(s.Entries[0], NewEnv(c, t.TempDir(), 1, logWriter{t}))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Available(c); err != nil {
		t.Fatalf("%s unavailable: %v", spec, err)
	}
	return NewLifecycle(f)
}

func leaderOf(t *testing.T, c clusters.Cluster) clusters.Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// sameHashKV checks that every member reports the same KV hash at the same revision.
func sameHashKV(t *testing.T, c clusters.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := newClient(t, c)
	resp, err := cli.Put(ctx, "/hashkv/marker", "x")
	if err != nil {
		t.Fatal(err)
	}
	rev := resp.Header.Revision
	hashes := map[string]uint32{}
	for _, m := range c.Members() {
		for {
			st, err := cli.Status(ctx, m.ClientURL())
			if err == nil && st.Header.Revision >= rev {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s did not reach revision %d: %v", m.Name(), rev, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		h, err := cli.HashKV(ctx, m.ClientURL(), rev)
		if err != nil {
			t.Fatalf("HashKV of %s: %v", m.Name(), err)
		}
		hashes[m.Name()] = h.Hash
	}
	var distinct []uint32
	for _, h := range hashes {
		if !slices.Contains(distinct, h) {
			distinct = append(distinct, h)
		}
	}
	if len(distinct) != 1 {
		t.Fatalf("members disagree at revision %d: %v", rev, hashes)
	}
	t.Logf("all members hash to %x at revision %d", distinct[0], rev)
}

// loadRun is a put workload with a fault schedule, wired as chaosbench run wires them.
type loadRun struct {
	runner  *Runner
	phases  *results.Phases
	windows []results.FaultWindow
	stopErr error
	dir     string
}

type runSink struct {
	*results.Phases
	r *Runner
}

func (s runSink) Begin(at time.Duration) {
	s.Phases.Begin(at)
	s.r.Begin(at)
}

func runWithFaults(t *testing.T, c clusters.Cluster, spec string, rate float64, duration time.Duration) *loadRun {
	t.Helper()
	sched, err := Parse([]string{spec})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now()
	lr := &loadRun{dir: t.TempDir()}
	if lr.phases, err = results.NewPhases(results.CollectorOptions{Start: base}); err != nil {
		t.Fatal(err)
	}
	lr.runner, err = Start(c, sched, Options{Base: base, Seed: 7, Dir: lr.dir, Log: logWriter{t}, Phases: lr.phases,
		Duration: duration, Settle: time.Second, RecoveryTimeout: 20 * time.Second, Grace: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rec := workloads.NewRecorder(base, nil, make([]byte, 1024), runSink{lr.phases, lr.runner})
	cfg := clusters.ClientConfig(c)
	cfg.Logger = zap.NewNop()
	runner, err := workloads.NewRunner(cfg, rec, workloads.RunOptions{Rate: rate, Clients: 16, Conns: 3, Duration: duration,
		RequestTimeout: 3 * time.Second, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer runner.Close()
	wl, err := workloads.NewMicro("put", workloads.MicroOptions{KeySize: 8, ValSize: 64, KeySpaceSize: 1000, KeyPrefix: "/bench/",
		Consistency: "l", RangeKeys: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := wl.Setup(ctx, runner); err != nil {
		t.Fatal(err)
	}
	if err := wl.Run(ctx, runner); err != nil {
		t.Fatal(err)
	}
	end := rec.Now()
	sctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	lr.stopErr = lr.runner.Stop(sctx, LoadEnded)
	lr.windows = lr.runner.Windows()
	lr.phases.Close(end)
	return lr
}

// TestKillLeader: the leader is SIGKILLed; a new leader is elected, the write gap is measured, and the old
// leader rejoins when restarted.
func TestKillLeader(t *testing.T) {
	c := startCluster(t, clusters.EmbedOptions{})
	lr := runWithFaults(t, c, "kill:leader@1s+2s", 200, 6*time.Second)
	if lr.stopErr != nil {
		t.Fatal(lr.stopErr)
	}
	if len(lr.windows) != 1 {
		t.Fatalf("windows %+v", lr.windows)
	}
	w := lr.windows[0]
	t.Logf("window %+v availability %+v", w, *w.Availability)
	if w.Outcome != OutcomeRecovered || len(w.Targets) != 1 || w.Targets[0] != w.Leader {
		t.Fatalf("window: outcome %q, targets %v, leader %q", w.Outcome, w.Targets, w.Leader)
	}
	if held := time.Duration(w.EndNs - w.StartNs); held < 2*time.Second || held > 4*time.Second {
		t.Errorf("the member was down for %v, scheduled 2s", held)
	}
	a := w.Availability
	if a.TimeToLeaderMs == nil || a.NewLeader == "" || a.NewLeader == w.Leader || a.LeaderChanges < 1 {
		t.Fatalf("no new leader observed: %+v", a)
	}
	if *a.TimeToLeaderMs > 5000 {
		t.Errorf("election took %.0f ms with a 500 ms election timeout", *a.TimeToLeaderMs)
	}
	// Writes stop until the election completes: the gap covers at least an election timeout, and ends
	// once a new leader serves.
	if a.WriteGapOpen || a.WriteGapMs < 300 || a.WriteGapMs > 10000 || a.WriteGapToNs < w.StartNs {
		t.Fatalf("write gap %.0f ms (open %v, to %d, window start %d)", a.WriteGapMs, a.WriteGapOpen, a.WriteGapToNs, w.StartNs)
	}
	// The killed leader runs again, follows the new leader and serves linearizable reads.
	var old clusters.Process
	for _, p := range clusters.Processes(c) {
		if p.Name() == w.Leader {
			old = p
		}
	}
	if !old.Running() {
		t.Fatalf("%s was not restarted", old.Name())
	}
	cli := newClient(t, c, old.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, old.ClientURL())
	if err != nil || st.Leader == 0 || st.Leader == st.Header.MemberId {
		t.Fatalf("restarted old leader: status %v, %v", st, err)
	}
	if _, err := cli.Get(ctx, "/bench/"); err != nil {
		t.Fatalf("linearizable read through the rejoined member: %v", err)
	}
	// The window is in faults.jsonl as recorded.
	fromFile, err := results.ReadFaults(lr.dir)
	if err != nil || len(fromFile) != 1 || fromFile[0].Spec != w.Spec || fromFile[0].Availability == nil {
		t.Fatalf("faults.jsonl: %+v, %v", fromFile, err)
	}
	// Records were split into phases: the fault phase has the errors.
	sum := lr.phases.Summary(0, time.Duration(w.EndNs)+5*time.Second)
	if sum[results.PhaseFault] == nil || sum[results.PhaseSteady] == nil || sum[results.PhaseFault].Total.Count == 0 {
		t.Fatalf("phases %+v", sum)
	}
	sameHashKV(t, c)
}

// TestPartitionLeader: the leader is cut off from the majority. It cannot commit, the majority elects a
// new leader, and after the heal every member reports the same KV hash at the same revision.
func TestPartitionLeader(t *testing.T) {
	t.Parallel() // judges behaviour, not latency (see TestMain)
	c := startCluster(t, clusters.EmbedOptions{})
	old := leaderOf(t, c)
	var majority []string
	for _, m := range c.Members() {
		if m.Name() != old.Name() {
			majority = append(majority, m.ClientURL())
		}
	}
	toOld := newClient(t, c, old.ClientURL())
	toMajority := newClient(t, c, majority...)
	ctx := context.Background()
	if _, err := toOld.Put(ctx, "/before", "x"); err != nil {
		t.Fatal(err)
	}

	lc := injectEntry(t, c, "partition:leader@0s+30s")
	if err := lc.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	healed := false
	defer func() {
		if !healed {
			lc.Recover(ctx)
		}
	}()
	if got := lc.Fault().(Targeted).Targets(); len(got) != 1 || got[0] != old.Name() {
		t.Fatalf("partition targets %v, leader %s", got, old.Name())
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := toOld.Put(pctx, "/isolated", "must not commit")
	cancel()
	if err == nil {
		t.Fatal("the partitioned leader committed a write")
	}
	t.Logf("write through the isolated leader: %v", err)

	var newLeader clusters.Member
	deadline := time.Now().Add(15 * time.Second)
	for newLeader == nil && time.Now().Before(deadline) {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if l, err := c.Leader(lctx); err == nil && l.Name() != old.Name() {
			newLeader = l
		}
		cancel()
		time.Sleep(100 * time.Millisecond)
	}
	if newLeader == nil {
		t.Fatal("the majority did not elect a new leader")
	}
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = toMajority.Put(mctx, "/majority", "commits")
	cancel()
	if err != nil {
		t.Fatalf("write through the majority: %v", err)
	}
	t.Logf("new leader %s", newLeader.Name())

	if err := lc.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	healed = true
	hctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := c.WaitHealthy(hctx); err != nil {
		t.Fatalf("not healthy after the heal: %v", err)
	}
	sameHashKV(t, c)
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := toOld.Get(gctx, "/isolated")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Kvs) != 0 {
		t.Fatalf("the write sent to the isolated leader is visible: %v", got.Kvs)
	}
}

// TestPartitionCutsLeaseForwarding: a partitioned follower cannot forward lease renewals to the leader
// either. Lease forwarding (/leases) carries no X-Server-From header; the proxies attribute it to the
// follower's process. Elections are slow here, so that the follower still believes in its leader.
func TestPartitionCutsLeaseForwarding(t *testing.T) {
	c := startCluster(t, clusters.EmbedOptions{}, "heartbeat-interval=100", "election-timeout=5000")
	leader := leaderOf(t, c)
	var follower clusters.Member
	for _, m := range c.Members() {
		if m.Name() != leader.Name() {
			follower = m
			break
		}
	}
	cli := newClient(t, c, follower.ClientURL())
	ctx := context.Background()
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.KeepAliveOnce(ctx, lease.ID); err != nil {
		t.Fatalf("keepalive through the follower before the partition: %v", err)
	}
	lc := injectEntry(t, c, "partition:"+follower.Name()+"@0s+30s")
	if err := lc.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	defer lc.Recover(ctx)
	kctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	start := time.Now()
	_, err = cli.KeepAliveOnce(kctx, lease.ID)
	cancel()
	if err == nil {
		t.Fatal("a partitioned follower renewed a lease with the leader")
	}
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Fatalf("the renewal failed after %v (%v), not by timing out on the cut link", took, err)
	}
	t.Logf("renewal through the partitioned follower: %v", err)
}

// TestDelayRaisesLatency: 100 ms on every message to and from the leader raises the put median by at
// least 100 ms; healing restores it.
func TestDelayRaisesLatency(t *testing.T) {
	if raceEnabled {
		t.Skip("latency assertions do not hold under the race detector")
	}
	c := startCluster(t, clusters.EmbedOptions{})
	leader := leaderOf(t, c)
	cli := newClient(t, c, leader.ClientURL())
	before := putP50(t, cli, 15)
	lc := injectEntry(t, c, "delay:leader=100ms@0s+30s")
	ctx := context.Background()
	if err := lc.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	during := putP50(t, cli, 15)
	if err := lc.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	after := putP50(t, cli, 15)
	t.Logf("put p50: %v before, %v with 100ms delay, %v after", before, during, after)
	if during < before+100*time.Millisecond {
		t.Fatalf("put p50 %v with the delay, %v before: not raised by 100ms", during, before)
	}
	if after > before+50*time.Millisecond {
		t.Fatalf("put p50 %v after the heal, %v before", after, before)
	}
}

// fsyncMetric scrapes etcd_disk_wal_fsync_duration_seconds from a member: count and sum.
func fsyncMetric(t *testing.T, m clusters.Member) (count uint64, sum float64) {
	t.Helper()
	resp, err := http.Get(m.(clusters.Process).MetricsURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	mf := families["etcd_disk_wal_fsync_duration_seconds"]
	if mf == nil || len(mf.Metric) == 0 {
		t.Fatal("no etcd_disk_wal_fsync_duration_seconds")
	}
	h := mf.Metric[0].GetHistogram()
	return h.GetSampleCount(), h.GetSampleSum()
}

// TestSlowDiskFsync: a 50 ms fsync delay under the leader's data raises put latency by about as much,
// and the member's own WAL fsync histogram shows it.
func TestSlowDiskFsync(t *testing.T) {
	if raceEnabled {
		t.Skip("latency assertions do not hold under the race detector")
	}
	if err := slowfs.Available(); err != nil {
		testenv.Missing(t, testenv.FUSE, "slow disk through slowfs needs FUSE: %v", err)
	}
	c := startCluster(t, clusters.EmbedOptions{SlowFS: &clusters.SlowFSOptions{}})
	leader := leaderOf(t, c)
	cli := newClient(t, c, leader.ClientURL())
	before := putP50(t, cli, 15)
	n0, s0 := fsyncMetric(t, leader)
	lc := injectEntry(t, c, "slowdisk:leader=50ms@0s+30s")
	ctx := context.Background()
	if err := lc.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	during := putP50(t, cli, 15)
	n1, s1 := fsyncMetric(t, leader)
	if err := lc.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	after := putP50(t, cli, 15)
	mean := (s1 - s0) / float64(n1-n0)
	t.Logf("put p50: %v before, %v with 50ms fsyncs, %v after; leader's WAL fsync mean %.1f ms over %d fsyncs",
		before, during, after, mean*1000, n1-n0)
	if during < before+45*time.Millisecond || during < 50*time.Millisecond {
		t.Fatalf("put p50 %v with 50ms fsyncs, %v before", during, before)
	}
	if n1-n0 < 15 || mean < 0.045 || mean > 0.5 {
		t.Fatalf("etcd_disk_wal_fsync_duration_seconds: %d fsyncs, mean %.1f ms; want >= 15 near 50 ms", n1-n0, mean*1000)
	}
	if after > before+30*time.Millisecond {
		t.Fatalf("put p50 %v after the heal, %v before", after, before)
	}
}

// TestSlowDiskStrace: without slowfs, strace delays the leader's fdatasync calls.
func TestSlowDiskStrace(t *testing.T) {
	if raceEnabled {
		t.Skip("latency assertions do not hold under the race detector")
	}
	if err := StraceAvailable(); err != nil {
		testenv.Missing(t, testenv.Strace, "strace fallback: %v", err)
	}
	c := startCluster(t, clusters.EmbedOptions{})
	leader := leaderOf(t, c)
	cli := newClient(t, c, leader.ClientURL())
	before := putP50(t, cli, 10)
	lc := injectEntry(t, c, "slowdisk:leader=50ms@0s+30s")
	ctx := context.Background()
	if err := lc.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	during := putP50(t, cli, 10)
	if err := lc.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	pid := leader.(clusters.Process).PID()
	if tr := tracer(pid); tr != 0 {
		t.Fatalf("strace (pid %d) still attached to the leader after the heal", tr)
	}
	t.Logf("put p50: %v before, %v with 50ms fdatasync through strace", before, during)
	if during < before+45*time.Millisecond {
		t.Fatalf("put p50 %v with 50ms fdatasync, %v before", during, before)
	}
}

// TestPause: a paused member answers nothing until it is resumed: a request to it waits out the pause;
// after the resume it serves again.
func TestPause(t *testing.T) {
	c := startCluster(t, clusters.EmbedOptions{})
	leader := leaderOf(t, c)
	var follower clusters.Member
	for _, m := range c.Members() {
		if m.Name() != leader.Name() {
			follower = m
			break
		}
	}
	cli := newClient(t, c, follower.ClientURL())
	ctx := context.Background()
	if _, err := cli.Put(ctx, "/pause/before", "x"); err != nil {
		t.Fatal(err)
	}
	lc := injectEntry(t, c, "pause:"+follower.Name()+"@0s+30s")
	if err := lc.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	if st := follower.(clusters.Process); !st.Paused() {
		t.Fatal("not paused")
	}
	const pause = 2 * time.Second
	var wg sync.WaitGroup
	var recoverErr error
	wg.Go(func() {
		time.Sleep(pause)
		recoverErr = lc.Recover(ctx)
	})
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	_, err := cli.Put(pctx, "/pause/during", "x")
	cancel()
	took := time.Since(start)
	wg.Wait()
	if recoverErr != nil {
		t.Fatal(recoverErr)
	}
	t.Logf("put through the paused member took %v (%v)", took, err)
	if took < pause-200*time.Millisecond {
		t.Fatalf("a put through a member paused for %v returned after %v", pause, took)
	}
	if err != nil {
		t.Fatalf("put through the paused member after the resume: %v", err)
	}
	start = time.Now()
	if _, err := cli.Put(ctx, "/pause/after", "x"); err != nil || time.Since(start) > time.Second {
		t.Fatalf("put after the resume: %v in %v", err, time.Since(start))
	}
}

// TestKillDropUnsynced: a leader killed with drop-unsynced loses what it had not fsynced, restarts on what
// a disk would hold after a power failure, and the cluster converges.
func TestKillDropUnsynced(t *testing.T) {
	t.Parallel() // judges behaviour, not latency (see TestMain)
	if err := slowfs.Available(); err != nil {
		testenv.Missing(t, testenv.FUSE, "drop-unsynced needs FUSE: %v", err)
	}
	c := startCluster(t, clusters.EmbedOptions{SlowFS: &clusters.SlowFSOptions{TrackUnsynced: true}})
	lr := runWithFaults(t, c, "kill:leader=drop-unsynced@1s+1s", 300, 4*time.Second)
	if lr.stopErr != nil {
		t.Fatal(lr.stopErr)
	}
	if len(lr.windows) != 1 || lr.windows[0].Outcome != OutcomeRecovered {
		t.Fatalf("windows %+v", lr.windows)
	}
	st, err := c.Disk(lr.windows[0].Leader).Stats(context.Background())
	if err != nil || st.Crashes != 1 {
		t.Fatalf("disk of the killed leader: %+v, %v", st, err)
	}
	sameHashKV(t, c)
}

// TestNemesisIsSeeded: the same seed picks the same faults, targets and values.
func TestNemesisIsSeeded(t *testing.T) {
	t.Parallel() // judges behaviour, not latency (see TestMain)
	c := startCluster(t, clusters.EmbedOptions{})
	s, err := Parse([]string{"nemesis"})
	if err != nil {
		t.Fatal(err)
	}
	picks := func(seed int64) []string {
		r := &Runner{env: NewEnv(c, "", seed, io.Discard), opts: Options{Seed: seed}}
		rng := seeded(seed, "entry", 0)
		var out []string
		for range 8 {
			e, err := r.pickNemesis(s.Entries[0], rng)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, e.Spec)
		}
		return out
	}
	a, b, other := picks(42), picks(42), picks(43)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different picks:\n%v\n%v", a, b)
	}
	if slices.Equal(a, other) {
		t.Fatalf("different seeds, same picks: %v", a)
	}
	sort.Strings(a)
	t.Logf("picks: %v", a)
}

// TestReplaceAndSnapshot: operations under load. A replaced follower comes back under its name with a new
// raft id, as a voting member with the same data; a snapshot is saved and its file removed.
func TestReplaceAndSnapshot(t *testing.T) {
	t.Parallel() // judges behaviour, not latency (see TestMain)
	c := startCluster(t, clusters.EmbedOptions{})
	ctx := context.Background()
	cli := newClient(t, c)
	for i := range 50 {
		if _, err := cli.Put(ctx, fmt.Sprintf("/replace/%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	leader := leaderOf(t, c)
	var follower clusters.Member
	for _, m := range c.Members() {
		if m.Name() != leader.Name() {
			follower = m
			break
		}
	}
	oldID := follower.ID()
	lc := injectEntry(t, c, "replace:"+follower.Name()+"@0s")
	if err := lc.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lc.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if follower.ID() == oldID || follower.ID() == 0 {
		t.Fatalf("%s kept raft id %x", follower.Name(), oldID)
	}
	list, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Members {
		if m.IsLearner || m.Name == "" {
			t.Fatalf("member list after the replacement: %v", list.Members)
		}
	}
	if len(list.Members) != 3 {
		t.Fatalf("%d members after the replacement", len(list.Members))
	}
	sameHashKV(t, c)

	dir := t.TempDir()
	s, _ := Parse([]string{"snapshot:leader@0s"})
	f, _ := New(s.Entries[0], NewEnv(c, dir, 1, logWriter{t}))
	snap := NewLifecycle(f)
	if err := snap.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	if err := snap.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("snapshot files left behind: %v", entries)
	}
}

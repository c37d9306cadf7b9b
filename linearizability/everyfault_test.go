package linearizability_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
	"github.com/etcd-chaosbench/chaosbench/faults"
	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
	"github.com/etcd-chaosbench/chaosbench/workloads"
)

// everyFault fires each kind of fault the faults package has (but the nemesis, which only picks among
// them) once, one after the other, on a 3-member cluster with fast elections. Times count from the start
// of the traffic. Windows are short but force what each kind forces: elections (kill, pause, partition of
// the leader), members rejoining from their disk (restart) or from a snapshot (replace), slow links and
// disks, broken peer connections, compactions and defragmentation under load; and requests failing and
// timing out around them. Each fault starts only once the cluster is healthy after the one before.
var everyFault = []string{
	"kill:leader@1500ms+1s",
	"restart:follower@4s",
	"pause:leader@6s+1s",
	"partition:leader@8500ms+2s",
	"delay:leader=50ms@12s+1s",
	"bandwidth:leader=256KiB@13500ms+1s",
	"reset:leader=200ms@15s+1s",
	"slowdisk:leader=20ms@16500ms+1s",
	"defrag@18s",
	"compact=300ms@19s+1s",
	"snapshot:leader@20500ms",
	"replace:follower@21500ms",
}

// everyFaultLoad is how long the traffic runs: the last fault, the replacement (3 s on a busy 2-core
// machine, which is why it comes last: a fault after it could be pushed past the end), and time for the
// cluster to settle after it.
const everyFaultLoad = 27 * time.Second

// TestLongTrafficUnderEveryFault: the full request mix against real etcd under every kind of fault the faults
// package injects, scheduled, healed and recorded as chaosbench run does, must check clean. The test fails
// when the run did not test what it claims: a fault that did not recover, no request that failed or timed
// out during the faults (no uncertainty for the checker to resolve), a problem of the schedule (a fault
// skipped, injecting nothing or left to the final sweep), a check that is not ok, or a member
// process, mount or snapshot file left behind. CHAOS_RUNS sets how many runs (default 1; make
// soak-checker runs more), each with its own seed. A long test (make test-long): make test keeps
// TestTrafficUnderFaults, and the faults package injects and heals each kind on its own.
func TestLongTrafficUnderEveryFault(t *testing.T) {
	testenv.Long(t, "27 s of traffic through twelve faults one after the other, on one 3-member cluster, then its check")
	sched, err := faults.Parse(everyFault)
	if err != nil {
		t.Fatal(err)
	}
	// Rolling upgrades and downgrades move members between etcd releases in containers: the docker fault
	// tests of cmd/chaosbench run them under load with the checks on; so do its failpoint tests for
	// failpoint faults, which need failpoint builds of a release.
	covered := map[string]bool{faults.KindNemesis: true, faults.KindUpgrade: true, faults.KindDowngrade: true, faults.KindFailpoint: true}
	for _, e := range sched.Entries {
		covered[e.Kind] = true
	}
	for _, k := range faults.KindNames {
		if !covered[k] {
			t.Fatalf("the schedule lacks a %s fault", k)
		}
	}
	runs := 1
	if s := os.Getenv("CHAOS_RUNS"); s != "" {
		fmt.Sscan(s, &runs)
	}
	for run := range runs {
		t.Run(fmt.Sprintf("seed-%d", run+1), func(t *testing.T) { trafficUnderEveryFault(t, sched, uint64(run+1)) })
	}
}

func trafficUnderEveryFault(t *testing.T, sched faults.Schedule, seed uint64) {
	flags, err := clusters.ParseEtcdFlags([]string{"heartbeat-interval=50", "election-timeout=500"})
	if err != nil {
		t.Fatal(err)
	}
	clusterDir := t.TempDir()
	opts := clusters.EmbedOptions{Members: 3, Dir: clusterDir, EtcdFlags: flags, Seed: seed}
	// Slow disks through slowfs (FUSE) where it is available, as chaosbench run does; otherwise strace
	// delays fdatasync.
	if err := slowfs.Available(); err == nil {
		opts.SlowFS = &clusters.SlowFSOptions{}
	} else if err := faults.StraceAvailable(); err != nil {
		testenv.Missing(t, testenv.FUSE, "slowdisk needs FUSE or strace: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	c, err := clusters.StartEmbedded(ctx, opts)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			c.Close(context.Background())
		}
	}()

	// The recorder feeds the phases, which measure each window's errors, as in chaosbench run.
	dir := t.TempDir()
	w, err := history.NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now()
	phases, err := results.NewPhases(results.CollectorOptions{Start: base})
	if err != nil {
		t.Fatal(err)
	}
	rec := workloads.NewRecorder(base, w, []byte("filler"), phases)
	// Requests time out after a second, shorter than the partition and about an election with these
	// settings, so that the faults leave writes whose outcome the client never learns.
	runner, err := workloads.NewRunner(clientConfig(c), rec, workloads.RunOptions{Clients: 2, Conns: 2, Duration: time.Minute, RequestTimeout: time.Second, Seed: int64(seed)})
	if err != nil {
		t.Fatal(err)
	}
	fr, err := faults.Start(c, sched, faults.Options{Base: base, Seed: int64(seed), Dir: dir, Log: logWriter{t}, Phases: phases,
		Duration: everyFaultLoad, Settle: 500 * time.Millisecond, RecoveryTimeout: 20 * time.Second, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fr.Begin(rec.Begin())
	defaultTraffic(seed).run(context.Background(), t, runner, everyFaultLoad)
	sctx, scancel := context.WithTimeout(context.Background(), 45*time.Second)
	stopErr := fr.Stop(sctx, faults.LoadEnded)
	scancel()
	runner.Close()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if stopErr != nil {
		t.Errorf("faults: %v", stopErr)
	}
	// Nothing was skipped, injected nothing, failed or was left to the final sweep.
	for _, p := range fr.Problems() {
		t.Errorf("%s: %s", p.Kind, p)
	}

	// Every fault ran and the cluster recovered from each.
	windows := fr.Windows()
	if len(windows) != len(sched.Entries) {
		t.Errorf("%d fault windows, want %d", len(windows), len(sched.Entries))
	}
	for _, w := range windows {
		if w.Outcome != faults.OutcomeRecovered {
			t.Errorf("fault %s: %s", w.Spec, w.Outcome)
		}
	}

	rep := checkDir(t, dir)
	requireVerdicts(t, rep, allOK)
	for _, ch := range rep.Checks {
		t.Logf("%s: %s in %.2fs: %s", ch.Name, ch.Verdict, ch.Seconds, ch.Detail)
	}

	// The faults made requests fail or time out, so the checker had outcomes to resolve.
	h, err := history.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	failed, failedWrites := failedDuring(h, windows)
	for _, w := range windows {
		a := w.Availability
		if a == nil {
			t.Errorf("fault %s: no availability figures", w.Spec)
			continue
		}
		t.Logf("%-32s %-8s %-9s ops %4d errors %3d %v write gap %.0fms", w.Spec, strings.Join(w.Targets, ","), w.Outcome, a.Ops, a.Errors, a.ErrorsByClass, a.WriteGapMs)
	}
	t.Logf("%d operations failed during fault windows, %d of them writes; stats %+v", failed, failedWrites, rep.Stats)
	if failedWrites == 0 || rep.Stats.FailedWrites == 0 {
		t.Errorf("no write failed or timed out during the faults (%d failed operations, %d failed writes in the history): the run did not exercise uncertain outcomes", failed, rep.Stats.FailedWrites)
	}

	// Nothing is left behind: member processes, slowfs mounts, snapshot files.
	if err := c.Close(context.Background()); err != nil {
		t.Errorf("close cluster: %v", err)
	}
	closed = true
	if left := processesMentioning(clusterDir); len(left) > 0 {
		t.Errorf("processes remain: %v", left)
	}
	if mounts := mountsUnder(t, clusterDir); len(mounts) > 0 {
		t.Errorf("mounts remain: %v", mounts)
	}
	if snaps, _ := filepath.Glob(filepath.Join(dir, "snapshot-*")); len(snaps) > 0 {
		t.Errorf("snapshot files left: %v", snaps)
	}
	if t.Failed() {
		keep := filepath.Join(os.TempDir(), fmt.Sprintf("every-fault-%d-%d", seed, time.Now().Unix()))
		os.CopyFS(keep, os.DirFS(dir))
		t.Logf("history kept in %s", keep)
	}
}

// failedDuring counts the operations that failed or timed out while a fault window was open or the
// cluster was recovering from it, and how many of them were requests that could write.
func failedDuring(h *history.History, windows []results.FaultWindow) (failed, writes int) {
	for _, op := range h.Operations {
		if op.Error == "" {
			continue
		}
		for _, w := range windows {
			end := max(w.EndNs, w.RecoveredNs)
			if op.Call <= end && op.Return >= w.StartNs {
				failed++
				if canWrite(op.Request) {
					writes++
				}
				break
			}
		}
	}
	return failed, writes
}

// canWrite reports whether a request could change the store.
func canWrite(req history.Request) bool {
	switch req.Kind {
	case history.KindPut, history.KindDelete, history.KindLeaseRevoke:
		return true
	case history.KindTxn:
		for _, b := range [][]history.Request{req.Txn.Then, req.Txn.Else} {
			for _, r := range b {
				if r.Kind == history.KindPut || r.Kind == history.KindDelete {
					return true
				}
			}
		}
	}
	return false
}

// processesMentioning returns the pids of live processes whose command line contains s.
func processesMentioning(s string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(s)) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && bytes.Contains(stat, []byte(") Z ")) {
			continue // a zombie is already dead
		}
		pids = append(pids, e.Name())
	}
	return pids
}

// logWriter sends a fault runner's lines to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// mountsUnder is slowfs.MountsUnder, failing the test when the mount table cannot be read.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	mounts, err := slowfs.MountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	return mounts
}

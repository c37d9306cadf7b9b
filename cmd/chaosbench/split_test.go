package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	lin "github.com/etcd-chaosbench/chaosbench/linearizability"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// splitKube is a kube load big enough that its operation counts are not noise over 20 s.
var splitKube = []string{"run", "--workload", "kube", "--nodes", "300", "--apiservers", "3", "--duration", "20s", "--seed", "5", "--progress", "none"}

// runBinary runs the built chaosbench and returns its exit code and output.
func runBinary(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}

// TestSplitLoad: one load split over three worker processes sends the same operation mix as one
// generator, its merged histograms hold exactly the workers' records, and its merged history with a
// leader kill checks clean.
func TestSplitLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four clusters for 12 s each")
	}
	dir := t.TempDir()
	one, three := filepath.Join(dir, "one"), filepath.Join(dir, "three")
	if code, out := runBinary(t, append(splitKube, "--duration", "12s", "--faults", "none", "--out", one)...); code != 0 {
		t.Fatalf("one generator: exit %d\n%s", code, out)
	}
	if code, out := runBinary(t, append(splitKube, "--duration", "12s", "--faults", "none", "--workers", "3", "--out", three)...); code != 0 {
		t.Fatalf("three workers: exit %d\n%s", code, out)
	}
	a, b := readSummary(t, one), readSummary(t, three)
	if b.Split == nil || b.Split.Workers != 3 || len(b.Split.Members) != 3 {
		t.Fatalf("merged run's split: %+v", b.Split)
	}
	// The same plan: every operation sent often enough to count has the same rate within 2%.
	compared := 0
	for name, op := range a.Operations {
		if op.Count < 200 || strings.HasPrefix(name, "watch-event/") {
			continue
		}
		got := b.Operations[name]
		if got == nil {
			t.Fatalf("%s: %d in one generator's run, none in the split run", name, op.Count)
		}
		// An update's or delete's conflicts (failed comparisons, then retried) depend on timing, not on
		// the plan: the plan's operations are the rest.
		planned := func(o *results.Operation) int64 {
			if strings.HasPrefix(name, "update/") || strings.HasPrefix(name, "delete/") {
				return o.Count - o.Failed
			}
			return o.Count
		}
		if d := float64(planned(got)-planned(op)) / float64(planned(op)); d > 0.02 || d < -0.02 {
			t.Errorf("%s: %d operations split over three workers, %d from one generator (%+.1f%%)", name, planned(got), planned(op), 100*d)
		}
		compared++
	}
	if compared < 4 {
		t.Fatalf("only %d operations were sent 200 times or more: the comparison says nothing", compared)
	}
	// The merged histograms hold exactly the workers' records.
	workerCounts := map[string]int64{}
	for i := range 3 {
		w := readSummary(t, filepath.Join(three, "workers", string(rune('0'+i))))
		if w.Split == nil || w.Split.Worker != i || w.Split.Clock == nil || w.Split.Clock.UncertaintyNs <= 0 {
			t.Fatalf("worker %d's split record: %+v", i, w.Split)
		}
		for name, op := range w.Operations {
			workerCounts[name] += op.Count
		}
	}
	logCounts := hlogCounts(t, three)
	for name, op := range b.Operations {
		if op.Count != workerCounts[name] || logCounts[name] != op.Count {
			t.Errorf("%s: merged count %d, merged histograms %d, the workers' counts add up to %d", name, op.Count, logCounts[name], workerCounts[name])
		}
	}
	if len(b.Operations) != len(workerCounts) {
		t.Errorf("merged run has %d operations, the workers %d", len(b.Operations), len(workerCounts))
	}
	if kids := children(os.Getpid()); len(kids) > 0 {
		t.Fatalf("processes left running: %v", kids)
	}
}

// TestSplitChecks: a split load's merged history with a leader kill checks clean; shifting one worker's
// clock by 50 ms with that uncertainty recorded still checks clean; the same shift unrecorded breaks
// real-time order (the case docs/scale-out.md warns about); and an anomaly in one worker's history is caught in
// the merged check.
func TestSplitChecks(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	if testing.Short() {
		t.Skip("runs a cluster for 20 s")
	}
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	code, out := runBinary(t, append(splitKube, "--workers", "3", "--faults", "kill:leader@8s+3s", "--out", run)...)
	if code != 0 {
		t.Fatalf("split run with a leader kill: exit %d\n%s", code, out)
	}
	s := readSummary(t, run)
	if len(s.Faults) != 1 || !strings.HasPrefix(s.Faults[0].Fault, "kill") {
		t.Fatalf("fault windows of the merged run: %+v", s.Faults)
	}
	assertCheck(t, s, lin.CheckLinearizability, results.VerdictOK)
	// The phase tables file every worker's requests (not worker 0's alone, a third of them): their counts
	// add up to the merged run's, and the leader kill's phase holds requests.
	var phased int64
	for _, p := range s.Phases {
		phased += p.Total.Count
	}
	if f := s.Phases[results.PhaseFault]; phased != s.Total.Count || f == nil || f.Total.Count == 0 {
		t.Fatalf("merged phases count %d records (fault phase %+v), the merged run %d", phased, f, s.Total.Count)
	}

	const shift = int64(50e6)
	variant := func(name string, change func(workers string)) (int, *results.Summary, string) {
		t.Helper()
		d := filepath.Join(dir, name)
		if err := exec.Command("cp", "-r", filepath.Join(run, "workers"), d).Run(); err != nil {
			t.Fatal(err)
		}
		change(d)
		merged := filepath.Join(dir, name+"-merged")
		code, out := runBinary(t, "merge", filepath.Join(d, "0"), filepath.Join(d, "1"), filepath.Join(d, "2"), "--out", merged)
		return code, readSummary(t, merged), out
	}
	shifted := func(d string) {
		rewriteHistory(t, filepath.Join(d, "1"), func(op *history.Operation) { op.Call += shift; op.Return += shift }, shift)
	}
	code, m, out := variant("recorded", func(d string) {
		shifted(d)
		editSummary(t, filepath.Join(d, "1"), func(s *results.Summary) { s.Split.Clock.UncertaintyNs += shift })
	})
	if code != 0 {
		t.Fatalf("worker 1's clock 50 ms off, uncertainty recorded: exit %d, want a clean check\n%s", code, out)
	}
	assertCheck(t, m, lin.CheckLinearizability, results.VerdictOK)

	code, m, out = variant("unrecorded", shifted)
	t.Logf("worker 1's clock 50 ms off, not recorded: exit %d, checks %+v", code, m.Checks)
	if code != outcome.ExitViolation {
		t.Fatalf("an unrecorded 50 ms skew: exit %d; the README says it can fake a violation, and this history shows one\n%s", code, out)
	}

	code, m, out = variant("anomaly", func(d string) {
		done := false
		rewriteHistory(t, filepath.Join(d, "2"), func(op *history.Operation) {
			r := op.Response
			if done || r == nil || r.Range == nil || len(r.Range.KVs) == 0 || r.Range.KVs[0].Value.ID == 0 {
				return
			}
			r.Range.KVs[0].Value.ID = 0xdead<<32 | 1 // a value no client wrote
			done = true
		}, 0)
		if !done {
			t.Fatal("worker 2 read nothing to corrupt")
		}
	})
	if code != outcome.ExitViolation {
		t.Fatalf("worker 2 read a value nobody wrote: merged exit %d, want %d\n%s", code, outcome.ExitViolation, out)
	}
	assertCheck(t, m, lin.CheckLinearizability, results.VerdictViolation)

	// Bad input: directories of different loads, or a worker missing.
	if code, out := runBinary(t, "merge", filepath.Join(run, "workers", "0"), filepath.Join(run, "workers", "1"), "--out", filepath.Join(dir, "bad")); code != outcome.ExitUsage {
		t.Fatalf("merge of 2 of 3 workers: exit %d\n%s", code, out)
	}
	if code, out := runBinary(t, "merge", run, filepath.Join(run, "workers", "1"), "--out", filepath.Join(dir, "bad2")); code != outcome.ExitUsage {
		t.Fatalf("merge of a merged run: exit %d\n%s", code, out)
	}
}

func readSummary(t *testing.T, dir string) *results.Summary {
	t.Helper()
	s, err := results.ReadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func editSummary(t *testing.T, dir string, fn func(*results.Summary)) {
	t.Helper()
	s := readSummary(t, dir)
	fn(s)
	if err := results.WriteSummary(dir, s); err != nil {
		t.Fatal(err)
	}
}

func assertCheck(t *testing.T, s *results.Summary, name, verdict string) {
	t.Helper()
	for _, c := range s.Checks {
		if c.Name == name {
			if c.Verdict != verdict {
				t.Fatalf("%s: %s (%s), want %s", name, c.Verdict, c.Detail, verdict)
			}
			return
		}
	}
	t.Fatalf("no %s check in %+v", name, s.Checks)
}

// rewriteHistory rewrites a run directory's history through fn, and moves its watch records by shift.
func rewriteHistory(t *testing.T, dir string, fn func(*history.Operation), shift int64) {
	t.Helper()
	tmp := t.TempDir()
	w, err := history.NewWriter(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if err := history.ReadOperations(filepath.Join(dir, history.HistoryFile), func(op *history.Operation) error {
		fn(op)
		w.Operation(op)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := history.ReadWatches(filepath.Join(dir, history.WatchFile), func(r *history.WatchResponse) error {
		r.Time += shift
		w.Watch(r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{history.HistoryFile, history.WatchFile} {
		if err := os.Rename(filepath.Join(tmp, f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
}

// hlogCounts adds up the records of every response-time interval histogram of a run's latency.hlog.
func hlogCounts(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, results.LatencyLogFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := hdr.NewHistogramLogReader(f)
	counts := map[string]int64{}
	for {
		h, err := r.NextIntervalHistogram()
		if err != nil {
			t.Fatal(err)
		}
		if h == nil {
			return counts
		}
		if op, ok := strings.CutSuffix(h.Tag(), ".response"); ok {
			counts[op] += h.TotalCount()
		}
	}
}

// TestSplitWorkerContainers: with --worker-containers every worker runs in a container of its own, CPU
// limited, on the docker cluster's network; this process only holds the cluster and the faults. The merged
// run's fault window is measured over the workers' requests, and nothing is left behind.
func TestSplitWorkerContainers(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	if testing.Short() {
		t.Skip("runs a docker cluster for 20 s")
	}
	d := requireDocker(t)
	out := filepath.Join(t.TempDir(), "run")
	code, log := runBinary(t, "run", "--cluster", "docker", "--workers", "2", "--worker-containers", "--worker-cpus", "0.5",
		"--workload", "kube", "--nodes", "100", "--duration", "20s", "--faults", "kill:leader@7s+3s", "--progress", "none", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, log)
	}
	s := readSummary(t, out)
	if s.Split == nil || !s.Split.Observer || len(s.Split.Members) != 2 {
		t.Fatalf("split record %+v: want 2 workers and the observer", s.Split)
	}
	for _, m := range s.Split.Members {
		if m.Clock == nil || m.Clock.UncertaintyNs <= 0 || m.Requests == 0 {
			t.Fatalf("worker %d: %+v: want a measured clock and requests", m.Worker, m)
		}
		if g := m.GeneratorLoad; g == nil || g.Cores > 0.6 {
			t.Fatalf("worker %d used %+v cores under a 0.5 CPU limit", m.Worker, g)
		}
	}
	if len(s.Faults) != 1 || s.Faults[0].Availability == nil || s.Faults[0].Availability.Writes == 0 {
		t.Fatalf("fault windows %+v: want the kill, measured over the workers' writes", s.Faults)
	}
	assertCheck(t, s, lin.CheckLinearizability, results.VerdictOK)
	obs := readSummary(t, filepath.Join(out, "workers", "observer"))
	if results.Requests(obs.Operations) != 0 {
		t.Fatalf("the observer sent %d requests", results.Requests(obs.Operations))
	}
	if cs, ns := labelled(t, d, filepath.Join(out, "workers", "observer")); len(cs)+len(ns) > 0 {
		t.Fatalf("left behind: containers %v, networks %v", cs, ns)
	}
}

// TestSplitDryRun: --dry-run --workers prints each worker's share and their sum, which is the whole plan,
// and starts nothing.
func TestSplitDryRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := execute([]string{"run", "--workers", "3", "--dry-run", "--nodes", "300", "--duration", "2m"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	_, table, ok := strings.Cut(out, "each worker's share, and their sum\n")
	if !ok {
		t.Fatalf("no share table:\n%s", out)
	}
	rows := 0
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) != 7 { // actor, operation, whole, w0, w1, w2, sum
			break
		}
		var whole, sum, parts float64
		fmt.Sscan(f[2], &whole)
		fmt.Sscan(f[6], &sum)
		for _, p := range f[3:6] {
			var x float64
			fmt.Sscan(p, &x)
			parts += x
		}
		if math.Abs(sum-whole) > 1e-3 || math.Abs(parts-whole) > 2e-3 {
			t.Fatalf("%s: whole %v, shares add up to %v (sum column %v)", f[1], whole, parts, sum)
		}
		rows++
	}
	if rows < 20 {
		t.Fatalf("only %d operations in the share table:\n%s", rows, table)
	}
	stdout.Reset()
	if code := execute([]string{"run", "--workers", "3", "--dry-run", "--workload", "put", "--rate", "1000", "--clients", "10", "--conns", "4"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	found := false
	for _, line := range strings.Split(stdout.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "sum" {
			found = strings.Join(f, " ") == "sum 1000 10 4 10000"
		}
	}
	if !found {
		t.Fatalf("micro shares do not add up to the plan (1000/s, 10 clients, 4 connections, 10000 keys):\n%s", stdout.String())
	}
}

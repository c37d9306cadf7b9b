package linearizability_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lin "github.com/etcd-chaosbench/chaosbench/linearizability"
	"github.com/etcd-chaosbench/chaosbench/linearizability/kubesim"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// sameFindings requires the check with proofs to say what the offline check said: every verdict with its
// detail, every violation, the counts, the known issues, the partitions.
// The reports are of histories in directories offDir and incDir, which the visualization's path names.
func sameFindings(t *testing.T, offline, incremental *lin.Report, offDir, incDir string) {
	t.Helper()
	if offline == nil || incremental == nil {
		t.Fatalf("reports: offline %v, incremental %v", offline != nil, incremental != nil)
	}
	strip := func(r *lin.Report, dir string) string {
		x := *r
		x.Seconds, x.Stats.ProvedBefore = 0, 0
		x.Checks = append(x.Checks[:0:0], r.Checks...)
		for i := range x.Checks {
			x.Checks[i].Seconds = 0
		}
		data, err := json.MarshalIndent(x, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(string(data), dir, "RUN")
	}
	a, b := strip(offline, offDir), strip(incremental, incDir)
	if a != b {
		al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
		for i := range min(len(al), len(bl)) {
			if al[i] != bl[i] {
				t.Errorf("the check with proofs differs from the offline check at line %d of the report:\noffline:     %s\nincremental: %s", i+1, al[i], bl[i])
				return
			}
		}
		t.Errorf("the check with proofs differs from the offline check: %d lines against %d", len(al), len(bl))
	}
}

// copyPrefixes copies the first frac of each history file of dir into a new directory, as a check during
// the load finds them: the last record may be cut short.
func copyPrefixes(t testing.TB, dir string, frac float64) string {
	t.Helper()
	out := t.TempDir()
	for _, name := range []string{history.HistoryFile, history.WatchFile} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, name), data[:int(float64(len(data))*frac)], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestProofsKeepVerdicts: checks of the history recorded so far (its files cut at a third and two thirds,
// the last record torn, then what was recorded by nine tenths of the run), then the check of the whole history with the segments they proved, find
// exactly what the offline check finds, on clean simulated kube histories with faults and on every way
// the simulated etcd can misbehave (lost writes, stale reads, duplicate, dropped and reordered watch
// events, ...); and on the clean one whose keys come and go, most segments come proved.
func TestProofsKeepVerdicts(t *testing.T) {
	cases := map[string]kubesim.Options{
		"clean/seed-0": {Seed: 0, Duration: 40 * time.Second, Rate: 150, Nodes: 20, Pods: 200, FaultEvery: 10 * time.Second, CompactEvery: 8 * time.Second},
		"clean/seed-1": {Seed: 1, Duration: 40 * time.Second, Rate: 150, Nodes: 20, Pods: 100, Names: 150, FaultEvery: 10 * time.Second, CompactEvery: 8 * time.Second},
	}
	for _, bug := range kubesim.Bugs {
		cases["bug/"+bug] = kubesim.Options{Seed: 7, Duration: 30 * time.Second, Rate: 150, Nodes: 20, Pods: 200, FaultEvery: -1, CompactEvery: 8 * time.Second, Bug: bug}
	}
	ctx := context.Background()
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // pure CPU, nothing timed
			dir := t.TempDir()
			if _, err := kubesim.Write(dir, o); err != nil {
				t.Fatal(err)
			}
			offline, _ := lin.CheckDir(ctx, dir, lin.Options{Timeout: time.Minute})
			proofs := lin.NewProofs()
			for _, cut := range []string{copyPrefixes(t, dir, 0.33), copyPrefixes(t, dir, 0.67), cutAtTime(t, dir, 0.9)} {
				// What a check of a prefix finds decides nothing: only its proofs are kept.
				lin.CheckDir(ctx, cut, lin.Options{Timeout: time.Minute, Proofs: proofs})
				lin.PruneProofs(proofs) // as DuringLoad does after each check
			}
			lin.FreezeProofs(proofs)
			defer proofs.Close()
			n := proofs.Len()
			incremental, _ := lin.CheckDir(ctx, dir, lin.Options{Timeout: time.Minute, Proofs: proofs})
			if proofs.Len() != n {
				t.Errorf("frozen proofs grew from %d to %d", n, proofs.Len())
			}
			sameFindings(t, offline, incremental, dir, dir)
			if o.Bug == "" {
				requireVerdicts(t, incremental, allOK)
			} else if !offline.Violated() {
				t.Errorf("the offline check found no violation of %s", o.Bug)
			}
			// A key whose segment is still open at a cut (fixed-keys histories: every key lives all along,
			// each segment runs to segmentTarget operations) has another segment at the next: fewer come proved.
			if incremental.Stats.ProvedBefore == 0 || (o.Names == 0 && 2*incremental.Stats.ProvedBefore < incremental.Stats.Partitions) {
				t.Errorf("%d of %d partitions came proved", incremental.Stats.ProvedBefore, incremental.Stats.Partitions)
			}
			t.Logf("%d of %d partitions came proved (%d proofs)", incremental.Stats.ProvedBefore, incremental.Stats.Partitions, proofs.Len())
		})
	}
}

// TestDuringLoadWhileWritten: the checks during the load read history files while they are appended to,
// as a run writes them, and the check after the load with their proofs finds what the offline check finds,
// for a clean history and for one with lost writes and one with dropped watch events.
func TestDuringLoadWhileWritten(t *testing.T) {
	t.Parallel() // its own cluster; judges the history, not latency
	for _, bug := range []string{"", "lost-write", "dropped-event"} {
		t.Run("bug="+bug, func(t *testing.T) {
			src, run := t.TempDir(), t.TempDir()
			o := kubesim.Options{Seed: 3, Duration: 40 * time.Second, Rate: 150, Nodes: 20, Pods: 200, FaultEvery: 10 * time.Second, CompactEvery: 8 * time.Second, Bug: bug}
			if bug != "" {
				o.FaultEvery = -1
			}
			if _, err := kubesim.Write(src, o); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			offline, _ := lin.CheckDir(ctx, src, lin.Options{Timeout: time.Minute})

			d := lin.StartDuringLoadEvery(ctx, run, lin.Options{Timeout: time.Minute}, 20*time.Millisecond, 1.2, 16<<10)
			appendInSteps(t, src, run, 40, 100*time.Millisecond)
			st := d.Stop()
			defer d.Proofs().Close()
			if st.Checks == 0 || len(st.Errors) > 0 {
				t.Fatalf("checks during the load: %+v", st)
			}
			incremental, _ := lin.CheckDir(ctx, run, lin.Options{Timeout: time.Minute, Proofs: d.Proofs()})
			sameFindings(t, offline, incremental, src, run)
			if incremental.Stats.ProvedBefore == 0 {
				t.Errorf("no partition came proved (%+v)", st)
			}
			left, _ := filepath.Glob(filepath.Join(run, ".check-during-load-*"))
			if len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
			t.Logf("during the load: %+v; after: %d of %d partitions came proved", st, incremental.Stats.ProvedBefore, incremental.Stats.Partitions)
		})
	}
}

// appendInSteps writes src's history files into dir in steps, pausing between them, as a run appends them.
func appendInSteps(t *testing.T, src, dir string, steps int, pause time.Duration) {
	t.Helper()
	var files [2]*os.File
	var data [2][]byte
	for i, name := range []string{history.HistoryFile, history.WatchFile} {
		var err error
		if data[i], err = os.ReadFile(filepath.Join(src, name)); err != nil {
			t.Fatal(err)
		}
		if files[i], err = os.Create(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		defer files[i].Close()
	}
	for s := 1; s <= steps; s++ {
		for i := range files {
			from, to := len(data[i])*(s-1)/steps, len(data[i])*s/steps
			if _, err := files[i].Write(data[i][from:to]); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(pause)
	}
}

// TestProofsPrune: a prune keeps what the check since the last one met and what it proved, and forgets
// the rest; a check of a longer history meets the proofs of the shorter one's closed segments.
func TestProofsPrune(t *testing.T) {
	dir := t.TempDir()
	if _, err := kubesim.Write(dir, kubesim.Options{Seed: 2, Duration: 30 * time.Second, Rate: 150, Nodes: 20, Pods: 200, FaultEvery: -1}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	proofs := lin.NewProofs()
	first, _ := lin.CheckDir(ctx, copyPrefixes(t, dir, 0.5), lin.Options{Proofs: proofs})
	if proofs.Len() == 0 || proofs.Len() > first.Stats.Partitions {
		t.Fatalf("%d proofs after a check of %d partitions", proofs.Len(), first.Stats.Partitions)
	}
	lin.PruneProofs(proofs)
	n := proofs.Len() // everything the first check proved: it met all of it
	whole, _ := lin.CheckDir(ctx, dir, lin.Options{Proofs: proofs})
	if whole.Stats.ProvedBefore == 0 || proofs.Len() <= n {
		t.Fatalf("the whole history: %d of %d partitions came proved, proofs %d -> %d", whole.Stats.ProvedBefore, whole.Stats.Partitions, n, proofs.Len())
	}
	lin.PruneProofs(proofs)
	// Now what the whole check met or proved: each of its partitions that porcupine proved, once.
	if proofs.Len() > whole.Stats.Partitions {
		t.Errorf("after the prune %d proofs, more than the %d partitions met", proofs.Len(), whole.Stats.Partitions)
	}
	again, _ := lin.CheckDir(ctx, dir, lin.Options{Proofs: proofs})
	if again.Stats.ProvedBefore != again.Stats.Partitions {
		t.Errorf("the same history again: %d of %d partitions came proved", again.Stats.ProvedBefore, again.Stats.Partitions)
	}
}

// cutAtTime writes what a run had recorded at frac of its duration into a new directory: the operations
// that had returned (in their order) and the watch records that had arrived, as the checks during the
// load find the files once the writer has flushed them.
func cutAtTime(tb testing.TB, dir string, frac float64) string {
	tb.Helper()
	var end int64
	if err := history.ReadOperations(filepath.Join(dir, history.HistoryFile), func(op *history.Operation) error {
		end = max(end, op.Return)
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	cut := int64(float64(end) * frac)
	out := tb.TempDir()
	w, err := history.NewWriter(out)
	if err != nil {
		tb.Fatal(err)
	}
	if err := history.ReadOperations(filepath.Join(dir, history.HistoryFile), func(op *history.Operation) error {
		if op.Return <= cut {
			w.Operation(op)
		}
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	if err := history.ReadWatches(filepath.Join(dir, history.WatchFile), func(r *history.WatchResponse) error {
		if r.Time <= cut {
			w.Watch(r)
		}
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return out
}

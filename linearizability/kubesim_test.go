package linearizability_test

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"syscall"
	"testing"
	"time"

	lin "github.com/etcd-chaosbench/chaosbench/linearizability"
	"github.com/etcd-chaosbench/chaosbench/linearizability/kubesim"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

func simulate(tb testing.TB, o kubesim.Options) *lin.Report {
	tb.Helper()
	dir := tb.TempDir()
	if _, err := kubesim.Write(dir, o); err != nil {
		tb.Fatal(err)
	}
	rep, err := lin.CheckDir(context.Background(), dir, lin.Options{Timeout: time.Minute})
	if rep == nil {
		tb.Fatal(err)
	}
	return rep
}

// TestSimulatedKubeHistoriesPass: histories of a correct simulated etcd under kube-shaped load, faults and
// all, check clean, for several seeds (in parallel: nothing is timed).
func TestSimulatedKubeHistoriesPass(t *testing.T) {
	for seed := range int64(4) {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			t.Parallel()
			rep := simulate(t, kubesim.Options{Seed: seed, Duration: 40 * time.Second, Rate: 150, Nodes: 20, Pods: 200, FaultEvery: 10 * time.Second, CompactEvery: 8 * time.Second})
			requireVerdicts(t, rep, allOK)
			if t.Failed() {
				t.Fatalf("seed %d: %+v", seed, rep.Violations[:min(len(rep.Violations), 5)])
			}
		})
	}
}

// TestSimulatedFixedKeysPass: a simulated history whose pods and events reuse a fixed set of names
// (kubesim.Options.Names) checks clean, creates of names still held failing as they must, and its keys
// stop growing: twice the run, the same keys.
func TestSimulatedFixedKeysPass(t *testing.T) {
	var keys []int
	for _, d := range []time.Duration{40 * time.Second, 80 * time.Second} {
		rep := simulate(t, kubesim.Options{Seed: 3, Duration: d, Rate: 150, Nodes: 20, Pods: 100, Names: 150, FaultEvery: 10 * time.Second, CompactEvery: 8 * time.Second})
		requireVerdicts(t, rep, allOK)
		if t.Failed() {
			t.Fatalf("%s: %+v", d, rep.Violations[:min(len(rep.Violations), 5)])
		}
		keys = append(keys, rep.Stats.Keys)
	}
	// 150 pod names, 150 event names, 20 node leases, configmaps and the apiservers' keys: all of them
	// met in the first 40 seconds, none new in the next.
	if keys[0] > 400 || keys[1] != keys[0] {
		t.Errorf("keys of the 40- and 80-second histories: %v; want the same, at most 400", keys)
	}
	if _, err := kubesim.Write(t.TempDir(), kubesim.Options{Pods: 100, Names: 100}); err == nil {
		t.Error("as many names as pods: no error")
	}
}

// bugChecks says which check must catch each bug of the simulated etcd.
var bugChecks = map[string]string{
	"stale-read":          lin.CheckLinearizability,
	"lost-write":          lin.CheckLinearizability,
	"revision-back":       lin.CheckLinearizability,
	"duplicate-event":     lin.CheckWatch,
	"dropped-event":       lin.CheckWatch,
	"reordered-events":    lin.CheckWatch,
	"early-progress":      lin.CheckWatch,
	"early-lease-expiry":  lin.CheckLinearizability,
	"future-serializable": lin.CheckSerializable,
	"compacted-read":      lin.CheckLinearizability,
	"wrong-count":         lin.CheckLinearizability,
	"wrong-prevkv":        lin.CheckWatch,
}

// TestSimulatedBugsAreCaught: every way the simulated etcd can misbehave is reported by the right check,
// and only by checks that can see it. The cases run in parallel: nothing is timed.
func TestSimulatedBugsAreCaught(t *testing.T) {
	for _, bug := range kubesim.Bugs {
		t.Run(bug, func(t *testing.T) {
			t.Parallel()
			want, ok := bugChecks[bug]
			if !ok {
				t.Fatalf("no expectation for bug %s", bug)
			}
			rep := simulate(t, kubesim.Options{Seed: 7, Duration: 30 * time.Second, Rate: 150, Nodes: 20, Pods: 200, FaultEvery: -1, CompactEvery: 8 * time.Second, Bug: bug})
			kinds := map[string]int{}
			for _, v := range rep.Violations {
				kinds[v.Check+": "+v.Kind]++
			}
			for _, c := range rep.Checks {
				if c.Name == want && c.Verdict != results.VerdictViolation {
					t.Fatalf("%s: %s %s: %s", bug, c.Name, c.Verdict, c.Detail)
				}
			}
			t.Logf("%v", kinds)
		})
	}
}

// BenchmarkCheckKube checks a simulated one-minute kube-shaped history at 500 requests/s, from files, as
// `chaosbench check` does; make bench-checker runs the ten-minute one.
func BenchmarkCheckKube(b *testing.B) {
	dir := b.TempDir()
	st, err := kubesim.Write(dir, kubesim.Options{Seed: 1, Duration: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		h, err := history.Load(dir)
		if err != nil {
			b.Fatal(err)
		}
		rep, err := lin.Check(context.Background(), h, lin.Options{})
		if err != nil || rep.Violated() {
			b.Fatalf("%v %+v", err, rep.Checks)
		}
	}
	b.ReportMetric(float64(st.Operations)*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(st.WatchEvents)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkCheckDirPeakHeap checks simulated kube histories of `make bench-checker`'s shape (500
// requests/s, seed 7) from files, as `chaosbench check` does, and reports the check's live heap two ways:
// live-MB, the highest of the exact live heap (two full collections in a row) at the end of each phase
// and ten times during the replay; and peak-live, the highest of a full collection every 100 ms, the
// heap's objects read right after it (what is live, and what the check allocated while the collection
// marked, which makes it an upper bound that grows with how fast the check allocates), in all, per
// operation and per key of the history.
//
// The 10-, 20- and 35-minute histories are bench-checker's: their keys grow as fast as their operations
// (pods and events come and go under new names). The fixed-keys ones name pods and events from 2,000
// names each (kubesim.Options.Names), so that the keys stop growing: the difference between two of their
// lengths is what the check holds per operation beyond its keys and its fixed budgets (see the package
// documentation, Memory). The 140-minute one takes a few minutes.
func BenchmarkCheckDirPeakHeap(b *testing.B) {
	for _, tc := range []struct {
		name  string
		d     time.Duration
		names int
	}{
		{"10m", 10 * time.Minute, 0},
		{"20m", 20 * time.Minute, 0},
		{"35m", 35 * time.Minute, 0},
		{"fixed-keys/35m", 35 * time.Minute, 2000},
		{"fixed-keys/70m", 70 * time.Minute, 2000},
		{"fixed-keys/140m", 140 * time.Minute, 2000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			st, err := kubesim.Write(dir, kubesim.Options{Seed: 7, Duration: tc.d, Rate: 500, Names: tc.names})
			if err != nil {
				b.Fatal(err)
			}
			var peak, live uint64
			var keys int
			for b.Loop() {
				runtime.GC()
				stop := sampleLiveHeap(&peak)
				rep, err := lin.CheckDir(context.Background(), dir, lin.WithPhaseHook(lin.Options{}, func(string) {
					live = max(live, liveHeap())
				}))
				stop()
				if err != nil || rep.Violated() {
					b.Fatalf("%v %+v", err, rep)
				}
				keys = rep.Stats.Keys
			}
			b.ReportMetric(float64(st.Operations), "ops")
			b.ReportMetric(float64(keys), "keys")
			b.ReportMetric(float64(live)/(1<<20), "live-MB")
			b.ReportMetric(float64(peak)/(1<<20), "peak-live-MB")
			b.ReportMetric(float64(peak)/float64(st.Operations), "peak-live-B/op")
			b.ReportMetric(float64(peak)/float64(keys), "peak-live-B/key")
		})
	}
}

// liveHeap returns the live heap, exactly: what is left after two full collections in a row (the first
// may leave what was allocated while it marked).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// sampleLiveHeap raises *peak to the live heap, measured right after a full collection, every 100 ms until
// the returned stop is called; stop waits for the sampler.
func sampleLiveHeap(peak *uint64) (stop func()) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.GC()
			metrics.Read(sample)
			*peak = max(*peak, sample[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// BenchmarkCheckAfterLoad measures what the checks during the load (DuringLoad) leave for after it, on
// bench-checker's simulated kube history: the history is checked as it was at half and four fifths of the
// run (what had been recorded by then, as the checks during the load find it; with the growth DuringLoad
// waits for, its last check before the load's end covers about four fifths), then whole with the
// segments those checks proved. It reports the offline check's wall time, the per-key searches' share of it and its live
// heap (offline-s, offline-perkey-s, offline-live-MB: the highest live heap at the end of each phase, as
// BenchmarkCheckDirPeakHeap measures it, in a check of its own, since the collections take time), the
// same of the check after the load (after-load-*), the checks of the cut history's (during-s,
// during-live-MB), and the share of the partitions that came proved. The 35-minute history takes minutes.
func BenchmarkCheckAfterLoad(b *testing.B) {
	for _, tc := range []struct {
		name string
		d    time.Duration
	}{{"10m", 10 * time.Minute}, {"35m", 35 * time.Minute}} {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			if _, err := kubesim.Write(dir, kubesim.Options{Seed: 7, Duration: tc.d, Rate: 500}); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			type measured struct {
				rep            *lin.Report
				secs, perKeyS  float64
				cpu, perKeyCPU float64 // CPU seconds: on a busy machine, steadier than the wall
				live           uint64
			}
			// check checks dir twice with the proofs as they are (a copy for each): timed by phase, then
			// with the live heap measured.
			check := func(dir string, proofs func() *lin.Proofs) measured {
				var m measured
				runtime.GC()
				start, cpu0 := time.Now(), cpuSeconds()
				last, lastCPU := start, cpu0
				rep, _ := lin.CheckDir(ctx, dir, lin.WithPhaseHook(lin.Options{Proofs: proofs()}, func(phase string) {
					if phase == "per-key" {
						m.perKeyS, m.perKeyCPU = time.Since(last).Seconds(), cpuSeconds()-lastCPU
					}
					last, lastCPU = time.Now(), cpuSeconds()
				}))
				m.secs, m.cpu = time.Since(start).Seconds(), cpuSeconds()-cpu0
				if rep == nil {
					b.Fatal("no report")
				}
				m.rep = rep
				runtime.GC()
				lin.CheckDir(ctx, dir, lin.WithPhaseHook(lin.Options{Proofs: proofs()}, func(string) {
					m.live = max(m.live, liveHeap())
				}))
				return m
			}
			var off, after measured
			var duringS float64
			var duringLive uint64
			for b.Loop() {
				off = check(dir, func() *lin.Proofs { return nil })
				proofs := lin.NewProofs()
				duringS, duringLive = 0, 0
				for _, frac := range []float64{0.5, 0.8} {
					m := check(cutAtTime(b, dir, frac), func() *lin.Proofs { return proofs })
					lin.PruneProofs(proofs) // as DuringLoad does after each check
					duringS += m.secs
					duringLive = max(duringLive, m.live)
				}
				var frozen []*lin.Proofs
				after = check(dir, func() *lin.Proofs {
					// As DuringLoad leaves them at the load's end: frozen, mapped from a file.
					p := lin.CloneProofs(proofs)
					lin.FreezeProofs(p)
					frozen = append(frozen, p)
					return p
				})
				for _, p := range frozen {
					p.Close()
				}
				if off.rep.Violated() || after.rep.Violated() {
					b.Fatalf("violations: %+v %+v", off.rep.Checks, after.rep.Checks)
				}
			}
			b.ReportMetric(off.secs, "offline-s")
			b.ReportMetric(off.perKeyS, "offline-perkey-s")
			b.ReportMetric(after.secs, "after-load-s")
			b.ReportMetric(after.perKeyS, "after-load-perkey-s")
			b.ReportMetric(off.cpu, "offline-cpu-s")
			b.ReportMetric(off.perKeyCPU, "offline-perkey-cpu-s")
			b.ReportMetric(after.cpu, "after-load-cpu-s")
			b.ReportMetric(after.perKeyCPU, "after-load-perkey-cpu-s")
			b.ReportMetric(duringS, "during-s")
			b.ReportMetric(float64(off.live)/(1<<20), "offline-live-MB")
			b.ReportMetric(float64(after.live)/(1<<20), "after-load-live-MB")
			b.ReportMetric(float64(duringLive)/(1<<20), "during-live-MB")
			b.ReportMetric(float64(after.rep.Stats.ProvedBefore)/float64(max(after.rep.Stats.Partitions, 1)), "proved-share")
		})
	}
}

// cpuSeconds returns the CPU time the process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

package history_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/linearizability/kubesim"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// BenchmarkHistory measures the history format on a kube-shaped history from the simulated etcd (5
// minutes at 500 requests/s, seed 7: the shape of `make bench-checker`'s, shorter): writing it as the
// load generator's clients do and reading it back.
func BenchmarkHistory(b *testing.B) {
	dir := b.TempDir()
	if _, err := kubesim.Write(dir, kubesim.Options{Seed: 7, Duration: 5 * time.Minute, Rate: 500}); err != nil {
		b.Fatal(err)
	}
	var ops []*history.Operation
	var watches []*history.WatchResponse
	if err := history.ReadOperations(filepath.Join(dir, history.HistoryFile), func(op *history.Operation) error { ops = append(ops, op); return nil }); err != nil {
		b.Fatal(err)
	}
	if err := history.ReadWatches(filepath.Join(dir, history.WatchFile), func(r *history.WatchResponse) error { watches = append(watches, r); return nil }); err != nil {
		b.Fatal(err)
	}
	b.Run("write", func(b *testing.B) { benchmarkHistoryWrite(b, ops, watches) })
	b.Run("read", func(b *testing.B) { benchmarkHistoryRead(b, dir, len(ops), len(watches)) })
	b.Run("store", func(b *testing.B) { benchmarkOperationStore(b, dir) })
}

// benchmarkOperationStore measures the operations held as the checker holds them: the heap a loaded
// history's decoded operations take (decoded-B/op) against an OperationStore's (held-B/op, and on-disk-B/op
// for the records a store loaded from a run directory keeps on disk), and the cost of decoding one from
// the store (ns/op, allocs/op, every operation in turn): alone (At) and in a pass over all of them (Scan,
// each decoded into the memory of the one before); from a store that keeps its records on disk (disk) and
// from one that holds them in memory (memory).
func benchmarkOperationStore(b *testing.B, dir string) {
	held := func(load func() any) (any, float64) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		v := load()
		runtime.GC()
		runtime.ReadMemStats(&after)
		return v, float64(after.HeapAlloc) - float64(before.HeapAlloc)
	}
	loadOps := func() []history.Operation {
		h, err := history.LoadOperations(dir)
		if err != nil {
			b.Fatal(err)
		}
		return h.Operations
	}
	h, decoded := held(func() any { return loadOps() })
	n := len(h.([]history.Operation))
	h = nil
	v, spilledHeld := held(func() any {
		s, err := history.LoadOperationStore(dir)
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
	spilled := v.(*history.OperationStore)
	defer spilled.Close()
	v, memHeld := held(func() any { return history.NewOperationStore(loadOps()) })
	for _, tc := range []struct {
		name string
		s    *history.OperationStore
		held float64
	}{{"disk", spilled, spilledHeld}, {"memory", v.(*history.OperationStore), memHeld}} {
		s := tc.s
		b.Run(tc.name+"/at", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if s.At(i%n) == nil {
					b.Fatal("no operation")
				}
				i++
			}
			b.ReportMetric(decoded/float64(n), "decoded-B/op")
			b.ReportMetric(tc.held/float64(n), "held-B/op")
			b.ReportMetric(float64(s.DiskBytes())/float64(n), "on-disk-B/op")
		})
		b.Run(tc.name+"/scan", func(b *testing.B) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			scans := 0
			for b.Loop() {
				s.Scan(func(int, *history.Operation) {})
				scans++
			}
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			ops := float64(scans * n)
			b.ReportMetric(float64(elapsed.Nanoseconds())/ops, "ns/record")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/ops, "allocs/record")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/ops, "B/record")
		})
	}
}

// benchmarkHistoryWrite measures the history writer on the kube workload's records, as the load
// generator's clients call it: time and allocations per record, and the bytes each record takes in the
// file (file-B/op). The records are replayed in order, cycling; the file keeps growing.
func benchmarkHistoryWrite(b *testing.B, ops []*history.Operation, watches []*history.WatchResponse) {
	for _, tc := range []struct {
		name  string
		n     int
		write func(w *history.Writer, i int)
		file  string
	}{
		{"operations", len(ops), func(w *history.Writer, i int) { w.Operation(ops[i]) }, history.HistoryFile},
		{"watches", len(watches), func(w *history.Writer, i int) { w.Watch(watches[i]) }, history.WatchFile},
	} {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			w, err := history.NewWriter(dir)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				tc.write(w, n%tc.n)
				n++
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			st, err := os.Stat(filepath.Join(dir, tc.file))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(st.Size())/float64(n), "file-B/op")
		})
	}
}

// benchmarkHistoryRead measures reading the kube workload's history files back, per record (ns/record,
// allocs/record, and the file's bytes per record), streaming (ReadOperations, ReadWatches: a fresh record
// each) and whole (Load, as the checker loads a run).
func benchmarkHistoryRead(b *testing.B, dir string, nops, nwatches int) {
	size := func(name string) float64 {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			b.Fatal(err)
		}
		return float64(st.Size())
	}
	for _, tc := range []struct {
		name  string
		n     int
		bytes float64
		read  func() error
	}{
		{"operations", nops, size(history.HistoryFile), func() error {
			return history.ReadOperations(filepath.Join(dir, history.HistoryFile), func(*history.Operation) error { return nil })
		}},
		{"watches", nwatches, size(history.WatchFile), func() error {
			return history.ReadWatches(filepath.Join(dir, history.WatchFile), func(*history.WatchResponse) error { return nil })
		}},
		{"load", nops + nwatches, size(history.HistoryFile) + size(history.WatchFile), func() error {
			_, err := history.Load(dir)
			return err
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			loops := 0
			for b.Loop() {
				if err := tc.read(); err != nil {
					b.Fatal(err)
				}
				loops++
			}
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			records := float64(loops * tc.n)
			b.ReportMetric(float64(elapsed.Nanoseconds())/records, "ns/record")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/records, "allocs/record")
			b.ReportMetric(tc.bytes/float64(tc.n), "file-B/record")
			b.ReportMetric(tc.bytes*float64(loops)/elapsed.Seconds()/1e6, "MB/s")
		})
	}
}

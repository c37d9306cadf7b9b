package history

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestFollowerWhileWritten: followers reading a run's history files while they are written, in pieces cut
// at any byte (inside the header, inside records, inside a record's length), with pauses that make them
// wait at the end of a file, build the store LoadOperationStore builds from the finished file (every
// operation comes back as written) and pass on every watch record as written. A file that ends in a
// record cut short (a run killed while writing) ends there, as it does for every reader; and the
// followers leave no name in the run directory.
func TestFollowerWhileWritten(t *testing.T) {
	for seed := range uint64(6) {
		src, ops, watches := writeGenerated(t, seed)
		cut := seed%3 == 2 // the last record of each file cut short
		want, wantWatches := ops, watches
		if cut {
			want, wantWatches = ops[:len(ops)-1], watches[:len(watches)-1]
		}
		dir := t.TempDir()
		var files [2]*os.File
		var data [2][]byte
		for i, name := range []string{HistoryFile, WatchFile} {
			var err error
			if data[i], err = os.ReadFile(filepath.Join(src, name)); err != nil {
				t.Fatal(err)
			}
			if cut {
				data[i] = data[i][:len(data[i])-3]
			}
			if files[i], err = os.Create(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		var folded []int
		fl := followOperations(dir, time.Millisecond, storeSizes{kvBudget: 1 << 10, indexBudget: 1 << 10, pageBytes: 256}, func(i int, op *Operation) {
			if !reflect.DeepEqual(op, ops[i]) {
				t.Errorf("seed %d: operation %d folded differs from the one written", seed, i)
			}
			folded = append(folded, i)
		})
		var got []*WatchResponse
		wf := followWatches(dir, time.Millisecond, func(r *WatchResponse) { got = append(got, r) })
		rng := rand.New(rand.NewPCG(seed, 41))
		for i, f := range files {
			for off := 0; off < len(data[i]); {
				n := min(len(data[i])-off, 1+rng.IntN(8<<10))
				if seed == 0 && off == 0 {
					n = 3 // inside the header
				}
				if _, err := f.Write(data[i][off : off+n]); err != nil {
					t.Fatal(err)
				}
				off += n
				if rng.IntN(8) == 0 {
					time.Sleep(2 * time.Millisecond) // the follower reaches the end and waits
				}
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
		s, err := fl.Finish()
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		requireStore(t, s, want)
		if len(folded) != len(want) || (len(folded) > 0 && folded[len(folded)-1] != len(want)-1) {
			t.Fatalf("seed %d: %d operations folded, want %d, numbered as in the store", seed, len(folded), len(want))
		}
		if err := fl.Close(); err != nil { // the store is the caller's now: Close leaves it
			t.Fatal(err)
		}
		requireStore(t, s, want)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := wf.Finish(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		wf.Close()
		if !reflect.DeepEqual(got, wantWatches) {
			t.Fatalf("seed %d: the watch follower passed on %d records, not the %d written (or not as written)", seed, len(got), len(wantWatches))
		}
		if left, _ := os.ReadDir(dir); len(left) != 2 {
			t.Fatalf("seed %d: the followers left %d entries in the run directory, want the history files alone", seed, len(left))
		}
	}
}

// TestFollowerClosedEarly: a follower closed before the file is complete stops waiting for it, releases
// what it built and hands out nothing.
func TestFollowerClosedEarly(t *testing.T) {
	src, _, _ := writeGenerated(t, 4)
	data, err := os.ReadFile(filepath.Join(src, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, HistoryFile), data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	fl := followOperations(dir, time.Millisecond, storeSizes{}, nil)
	time.Sleep(20 * time.Millisecond)
	done := make(chan error)
	go func() { done <- fl.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not stop the follower")
	}
	if s, err := fl.Finish(); s != nil || !errors.Is(err, errFollowStopped) {
		t.Fatalf("Finish after Close: %v, %v; want no store and the follower's stop", s, err)
	}
	if err := fl.Close(); err != nil {
		t.Fatal(err)
	}
}

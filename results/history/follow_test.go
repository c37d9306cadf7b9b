package history

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFollowerWhileWritten: a follower reading a history file while it is written, in pieces cut at any
// byte (inside the header, inside records, inside a record's length), with pauses that make it wait at the
// end of the file, builds the store LoadOperationStore builds from the finished file: every operation
// comes back as written. A file that ends in a record cut short (a run killed while writing) ends there,
// as it does for every reader; and the follower leaves no name in the run directory.
func TestFollowerWhileWritten(t *testing.T) {
	for seed := range uint64(6) {
		src, ops, _ := writeGenerated(t, seed)
		data, err := os.ReadFile(filepath.Join(src, HistoryFile))
		if err != nil {
			t.Fatal(err)
		}
		cut := seed%3 == 2 // the last record cut short
		want := ops
		if cut {
			data, want = data[:len(data)-3], ops[:len(ops)-1]
		}
		dir := t.TempDir()
		f, err := os.Create(filepath.Join(dir, HistoryFile))
		if err != nil {
			t.Fatal(err)
		}
		fl := followOperations(dir, time.Millisecond, storeSizes{kvBudget: 1 << 10, indexBudget: 1 << 10, pageBytes: 256})
		rng := rand.New(rand.NewPCG(seed, 41))
		for off := 0; off < len(data); {
			n := min(len(data)-off, 1+rng.IntN(8<<10))
			if seed == 0 && off == 0 {
				n = 3 // inside the header
			}
			if _, err := f.Write(data[off : off+n]); err != nil {
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
		s, err := fl.Finish()
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		requireStore(t, s, want)
		if err := fl.Close(); err != nil { // the store is the caller's now: Close leaves it
			t.Fatal(err)
		}
		requireStore(t, s, want)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if left, _ := os.ReadDir(dir); len(left) != 1 {
			t.Fatalf("seed %d: the follower left %d entries in the run directory, want the history alone", seed, len(left))
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
	fl := followOperations(dir, time.Millisecond, storeSizes{})
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

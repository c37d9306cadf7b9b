package results

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// randomRecord draws a record with every field the log keeps: every outcome, miss and access, errors with
// their class, intended starts that go backwards (records arrive from many goroutines) and starts before
// their intended time.
func randomRecord(rng *rand.Rand) Record {
	ops := []string{"put", "range", "txn", "create/pods", "watch-event/pods", ""}
	classes := []string{"timeout", "unavailable", "leader changed", ""}
	r := Record{
		Op:       ops[rng.IntN(len(ops))],
		Intended: time.Duration(rng.Int64N(int64(time.Hour))),
		Outcome:  Outcome(rng.IntN(3)),
		Miss:     Miss(rng.IntN(3)),
		Access:   Access(rng.IntN(3)),
	}
	r.Start = r.Intended + time.Duration(rng.Int64N(int64(time.Second))-int64(time.Millisecond))
	r.End = r.Start + time.Duration(rng.Int64N(int64(10*time.Second)))
	if r.Outcome == Error {
		r.ErrClass = classes[rng.IntN(len(classes))]
	}
	return r
}

func readAll(t *testing.T, path string) []Record {
	t.Helper()
	var got []Record
	if err := ReadRecordLog(path, func(r *Record) error { got = append(got, *r); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestRecordLogRoundTrip: every record comes back exactly as logged, in order (what the log keeps: not the
// key, revision or write id, which the merge's phase tables do not use).
func TestRecordLogRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	path := filepath.Join(t.TempDir(), RecordsFile)
	l, err := NewRecordLog(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.Begin(0)
	want := make([]Record, 20000)
	for i := range want {
		want[i] = randomRecord(rng)
		r := want[i]
		r.Key, r.Revision, r.WriteID = "/k", 7, 9
		l.Record(i%8, &r)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, path)
	if len(got) != len(want) {
		t.Fatalf("read %d records, logged %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("record %d: read %+v, logged %+v", i, got[i], want[i])
		}
	}
}

// TestRecordLogSize: a closed loop's records (one every 50 µs, answered in about a millisecond) cost at
// most 10 bytes each.
func TestRecordLogSize(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	path := filepath.Join(t.TempDir(), RecordsFile)
	l, err := NewRecordLog(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.Begin(0)
	const n = 100000
	for i := range n {
		at := time.Duration(i) * 50 * time.Microsecond
		l.Record(0, &Record{Op: "put", Intended: at, Start: at, End: at + time.Duration(500+rng.IntN(1500))*time.Microsecond, Access: AccessWrite})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Size() > 10*n {
		t.Fatalf("%v: %d bytes for %d records, more than 10 a record", err, fi.Size(), n)
	}
	t.Logf("%.1f bytes a record", float64(fi.Size())/n)
}

// TestRecordLogWarmup: records intended before the load began, or during its warm-up, are not logged (the
// collector does not count them either), and neither is anything recorded after Close.
func TestRecordLogWarmup(t *testing.T) {
	path := filepath.Join(t.TempDir(), RecordsFile)
	l, err := NewRecordLog(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l.Record(0, &Record{Op: "put", Intended: 1})
	l.Begin(2 * time.Second)
	for _, at := range []time.Duration{2 * time.Second, 2999 * time.Millisecond, 3 * time.Second, 4 * time.Second} {
		l.Record(0, &Record{Op: "put", Intended: at, Start: at, End: at + 1})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.Record(0, &Record{Op: "put", Intended: 5 * time.Second})
	got := readAll(t, path)
	if len(got) != 2 || got[0].Intended != 3*time.Second || got[1].Intended != 4*time.Second {
		t.Fatalf("logged %+v, want the records intended at 3 s and 4 s", got)
	}
}

// TestRecordLogConcurrentAndCut: records from many goroutines all arrive; a log cut short in its last
// record (a run killed while writing) reads up to that record without an error; a file that is not a
// record log is refused.
func TestRecordLogConcurrentAndCut(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, RecordsFile)
	l, err := NewRecordLog(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.Begin(0)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for range 5000 {
				r := randomRecord(rng)
				l.Record(g, &r)
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, path); len(got) != 40000 {
		t.Fatalf("read %d of 40000 records", len(got))
	}
	b, _ := os.ReadFile(path)
	for _, cut := range []int{1, 2, 3} {
		os.WriteFile(path, b[:len(b)-cut], 0o644)
		if got := readAll(t, path); len(got) != 39999 {
			t.Fatalf("cut by %d bytes: read %d records, want 39999", cut, len(got))
		}
	}
	os.WriteFile(path, []byte("CBHIST\x01o"), 0o644)
	if err := ReadRecordLog(path, func(*Record) error { return nil }); err == nil {
		t.Fatal("a history file read as a record log")
	}
}

package linearizability

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/etcd-chaosbench/chaosbench/linearizability/kubesim"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// TestWatchLogWaysAgree: the checks come to the same report whichever way they read the history: the
// watch records from memory (Check) or the watch file pass by pass (CheckDir), each watcher compared with
// the replay as its events arrive or from its records held; the operations from memory or from a store
// that decodes each when asked (CheckDir). The simulated histories with bugs make every check find
// something, out-of-order events included. The histories are simulated and checked in memory, nothing is
// timed: the cases run in parallel.
func TestWatchLogWaysAgree(t *testing.T) {
	for _, bug := range append([]string{""}, kubesim.Bugs...) {
		t.Run("bug="+bug, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			o := kubesim.Options{Seed: 7, Duration: 20 * time.Second, Rate: 150, Nodes: 20, Pods: 200, FaultEvery: -1, CompactEvery: 8 * time.Second, Bug: bug}
			if _, err := kubesim.Write(dir, o); err != nil {
				t.Fatal(err)
			}
			h, err := history.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			path, err := history.WatchPath(dir)
			if err != nil {
				t.Fatal(err)
			}
			ways := map[string]watchLog{
				"file":        {path: path},
				"memory held": {records: h.Watches, holdAll: true},
				"file held":   {path: path, holdAll: true},
			}
			store, err := history.LoadOperationStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			want := checkWith(t, inMemory(h.Operations), watchLog{records: h.Watches})
			for name, wl := range ways {
				if got := checkWith(t, inMemory(h.Operations), wl); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: %+v\nin memory: %+v", name, got, want)
				}
			}
			if got := checkWith(t, store, watchLog{path: path}); !reflect.DeepEqual(got, want) {
				t.Errorf("operations from a store: %+v\nin memory: %+v", got, want)
			}
			// The paged arrays in memory, in pages of 16 changes of the canonical log: every revision's changes
			// may straddle two.
			if got := checkOpts(t, store, watchLog{path: path}, Options{Timeout: time.Minute, pageBytes: 16 * 64}); !reflect.DeepEqual(got, want) {
				t.Errorf("the canonical log in pages of 16: %+v\nin pages of 256: %+v", got, want)
			}
			// The paged arrays in files, a page of one or two values each and eight of them in memory: every
			// step of every pass reads a page back, written out when it changed.
			paging := Options{Timeout: time.Minute, paging: true, pageDir: t.TempDir(), pageBudget: 1, pageBytes: 1}
			if got := checkOpts(t, store, watchLog{path: path}, paging); !reflect.DeepEqual(got, want) {
				t.Errorf("paged arrays in files, eight pages of one value in memory: %+v\nin memory: %+v", got, want)
			}
		})
	}
}

// checkWith checks operations ops with the watch records of wl, and returns the report without timings.
func checkWith(t *testing.T, ops operations, wl watchLog) *Report {
	t.Helper()
	return checkOpts(t, ops, wl, Options{Timeout: time.Minute})
}

// checkOpts is checkWith with options.
func checkOpts(t *testing.T, ops operations, wl watchLog, opts Options) *Report {
	t.Helper()
	rep, err := check(context.Background(), ops, wl, opts)
	if err != nil {
		t.Fatal(err)
	}
	rep.Seconds = 0
	for i := range rep.Checks {
		rep.Checks[i].Seconds = 0
	}
	return rep
}

// TestCheckerRecordSizes: what the check holds per change of the run (the canonical log) and per operation
// stays at the size its memory figures were measured at (see the package documentation, Memory).
func TestCheckerRecordSizes(t *testing.T) {
	if n := unsafe.Sizeof(canonEvent{}); n > 64 {
		t.Errorf("a change of the canonical log takes %d bytes, want at most 64", n)
	}
	if n := unsafe.Sizeof(opInfo{}); n > 48 {
		t.Errorf("an operation's opInfo takes %d bytes, want at most 48", n)
	}
}

// failingStore is a store whose records stop being readable after a number of reads, as a store's
// records on disk would if the disk failed: it panics with the store's ReadBackError.
type failingStore struct {
	inMemory
	left int
}

func (f *failingStore) read() {
	if f.left--; f.left < 0 {
		panic(&history.ReadBackError{Err: errors.New("input/output error")})
	}
}

func (f *failingStore) At(i int) *history.Operation {
	f.read()
	return f.inMemory.At(i)
}

func (f *failingStore) Scan(fn func(int, *history.Operation)) {
	f.inMemory.Scan(func(i int, op *history.Operation) {
		f.read()
		fn(i, op)
	})
}

// TestCheckReadBackError: a check whose operations stop being readable, at any point of any pass, fails
// with the read's error: no verdict, no crash.
func TestCheckReadBackError(t *testing.T) {
	dir := t.TempDir()
	o := kubesim.Options{Seed: 3, Duration: 10 * time.Second, Rate: 150, Nodes: 20, Pods: 200, FaultEvery: -1, Bug: "stale-read"}
	if _, err := kubesim.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	h, err := history.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	count := &failingStore{inMemory: inMemory(h.Operations), left: 1 << 40}
	if _, err := check(context.Background(), count, watchLog{records: h.Watches}, Options{Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	reads := 1<<40 - count.left
	t.Logf("%d operations, %d reads in a check", len(h.Operations), reads)
	for _, n := range []int{0, 1, reads / 7, reads / 3, reads / 2, reads * 2 / 3, reads - 1} {
		rep, err := check(context.Background(), &failingStore{inMemory: inMemory(h.Operations), left: n}, watchLog{records: h.Watches}, Options{Timeout: time.Minute})
		var rb *history.ReadBackError
		if !errors.As(err, &rb) || rep != nil {
			t.Errorf("operations unreadable after %d of %d reads: report %v, error %v; want no report and the read's error", n, reads, rep != nil, err)
		}
	}
}

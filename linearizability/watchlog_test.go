package linearizability

import (
	"context"
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
// something, out-of-order events included.
func TestWatchLogWaysAgree(t *testing.T) {
	for _, bug := range append([]string{""}, kubesim.Bugs...) {
		t.Run("bug="+bug, func(t *testing.T) {
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
		})
	}
}

// checkWith checks operations ops with the watch records of wl, and returns the report without timings.
func checkWith(t *testing.T, ops operations, wl watchLog) *Report {
	t.Helper()
	rep, err := check(context.Background(), ops, wl, Options{Timeout: time.Minute})
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
	if n := unsafe.Sizeof(opInfo{}); n > 64 {
		t.Errorf("an operation's opInfo takes %d bytes, want at most 64", n)
	}
}

package linearizability

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/linearizability/kubesim"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// TestWatchLogWaysAgree: the watch checks come to the same report whichever way they read the watch
// records: from memory (Check) or the watch file pass by pass (CheckDir), each watcher compared with the
// replay as its events arrive or from its records held. The simulated histories with bugs make every
// watch check find something, out-of-order events included.
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
			want := checkWith(t, h, watchLog{records: h.Watches})
			for name, wl := range ways {
				if got := checkWith(t, h, wl); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: %+v\nin memory: %+v", name, got, want)
				}
			}
		})
	}
}

// checkWith checks h's operations with the watch records of wl, and returns the report without timings.
func checkWith(t *testing.T, h *history.History, wl watchLog) *Report {
	t.Helper()
	rep, err := check(context.Background(), h, wl, Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rep.Seconds = 0
	for i := range rep.Checks {
		rep.Checks[i].Seconds = 0
	}
	return rep
}

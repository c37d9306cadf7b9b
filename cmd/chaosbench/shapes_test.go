package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench"
)

// TestRequestShapes: a kube run whose clients go through the counting proxies (what chaosbench fidelity
// does on both sides) passes the load through unchanged and counts what kube-apiserver's requests ask:
// creates as Txn(mod=0 ? put), updates as Txn(mod= ? put : range), leased event creates, paged lists,
// watch-cache watches from the list's revision with prev_kv and progress notifications, lease grants.
func TestRequestShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster for 10 s")
	}
	s := chaosbench.DefaultScenario()
	s.Workload, s.Kube.Nodes, s.Duration = "kube", 50, 10*time.Second
	s.Faults.Schedule = []string{"none"}
	s.Check, s.Progress, s.Out = false, "none", t.TempDir()
	sum, err := chaosbench.Run(context.Background(), s, chaosbench.Env{Out: io.Discard, RequestShapes: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Total.Errors > 0 || sum.Total.Count == 0 {
		t.Fatalf("through the proxies: %d requests, %d errors", sum.Total.Count, sum.Total.Errors)
	}
	data, err := os.ReadFile(filepath.Join(s.Out, chaosbench.ShapesFile))
	if err != nil {
		t.Fatal(err)
	}
	var counts map[string]int64
	if err := json.Unmarshal(data, &counts); err != nil {
		t.Fatal(err)
	}
	for _, shape := range []string{
		"Txn mod=0 ? put", "Txn mod= ? put : range", "Txn mod=0 ? put+lease", "Range prefix limit=500",
		"Watch create prefix from_rev prev_kv progress_notify", "Range key limit=1", "Txn mod= ? delete : range",
	} {
		if counts[shape] == 0 {
			t.Errorf("no %q counted: %v", shape, counts)
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench"
)

// TestRequestShapes: a kube run whose clients go through the counting proxies (what chaosbench fidelity
// does on both sides) passes the load through unchanged and counts what kube-apiserver's requests ask:
// creates as Txn(mod=0 ? put), updates as Txn(mod= ? put : range), leased event creates, paged lists,
// lease grants; the watch caches' watches are opened (and confirmed) before the load.
func TestRequestShapes(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
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
		"Range key limit=1", "Txn mod= ? delete : range",
	} {
		if counts[shape] == 0 {
			t.Errorf("no %q counted: %v", shape, counts)
		}
	}
	// The watch caches' watches are set up before the load begins: the load's counts hold none.
	for shape := range counts {
		if strings.HasPrefix(shape, "Watch create") {
			t.Errorf("%d %q counted during the load", counts[shape], shape)
		}
	}
}

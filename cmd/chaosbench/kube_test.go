package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// kubeChecks are the verdicts of a clean run of the kube workload: kube-apiserver reads linearizably, so the
// serializable-read check has nothing to check, and says so.
var kubeChecks = map[string]string{"linearizability": results.VerdictOK, "watch": results.VerdictOK,
	"serializable-reads": results.VerdictNothing, "members-agree": results.VerdictOK}

// TestKubeDryRun prints the plan of the README's medium run and starts nothing.
func TestKubeDryRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	var stdout, stderr bytes.Buffer
	code := execute([]string{"run", "--preset", "medium", "--duration", "5m", "--dry-run", "--out", out}, &stdout, &stderr)
	if code != outcome.ExitOK {
		t.Fatalf("exit code %d: %s", code, stderr.String())
	}
	for _, want := range []string{
		"medium: 250 nodes, 7500 pods in 25 namespaces, churn 12.5 pods/s, 3 apiservers",
		"heartbeats update/leases 25.00", "churn create/pods 12.50",
		"churn create/events 62.50", "lists list/pods 1.25",
		"watch-cache watch-event/pods", "default faults: kill:leader@1m40s+15s,partition:leader@3m20s+30s",
	} {
		// Columns are aligned to the longest name: compare words, not spaces.
		if !strings.Contains(strings.Join(strings.Fields(stdout.String()), " "), want) {
			t.Errorf("dry run output lacks %q:\n%s", want, stdout.String())
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a dry run created %s", out)
	}
}

// TestRunKube runs the default workload as the README's first command does, shorter and smaller, with a
// leader kill: the per-(operation, resource) table, the operation mix against the plan, the SLO verdict and
// the consistency checks all come out, and nothing is left behind.
func TestRunKube(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(binary, "run", "--nodes", "40", "--duration", "14s", "--faults", "kill:leader@5s+3s", "--out", out, "--progress", "none")
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chaosbench run: %v\n%s", err, output)
	}
	s, err := results.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "kube" || s.Cluster.Members != 3 || s.Kube == nil || s.GeneratorLoad == nil {
		t.Fatalf("summary: name %q, %d members, kube %v, generator %v", s.Name, s.Cluster.Members, s.Kube, s.GeneratorLoad)
	}
	for _, op := range []string{"create/pods", "update/pods", "delete/pods", "create/events", "update/leases", "get/leases",
		"list/pods", "watch-event/pods", "watch-event/leases", "grant/leases", "count/events", "current-rv/pods", "get/pods", "get/health"} {
		if o := s.Operations[op]; o == nil || o.Count == 0 {
			t.Errorf("no %s operations: %+v", op, o)
		}
	}
	if len(s.Kube.SLO) == 0 || len(s.Kube.Mix) == 0 || s.Kube.CacheLists == 0 {
		t.Errorf("kube summary: %+v", s.Kube)
	}
	if len(s.Faults) != 1 || s.Faults[0].RecoveredNs == 0 {
		t.Errorf("faults: %+v", s.Faults)
	}
	requireChecks(t, s.Checks, kubeChecks)
	for _, want := range []string{"kube workload: 40 nodes", "operation  planned/s  measured/s", "Kubernetes SLOs", "update/pods", "linearizability"} {
		if !strings.Contains(string(output), want) {
			t.Errorf("output lacks %q:\n%s", want, output)
		}
	}
	if left := processesMentioning(out); len(left) > 0 {
		t.Fatalf("member processes remain after the run: %v", left)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/outcome"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/clusters/kubebuild"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// TestControlPlaneBadVersion: an unknown Kubernetes release and one the module proxy does not serve are
// one line each, exit 2, and nothing is created.
func TestControlPlaneBadVersion(t *testing.T) {
	for _, tt := range []struct{ version, want string }{
		{"nope", `--kube-version "nope": expected a Kubernetes release`},
		{"v1.20.0", "chaosbench builds Kubernetes 1.33 or later"},
		{"v1.33.99", "the Go module proxy does not serve k8s.io/kubernetes@v1.33.99"},
	} {
		t.Run(tt.version, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			var stdout, stderr bytes.Buffer
			code := execute([]string{"run", "--workload", "controlplane", "--kube-version", tt.version, "--out", out}, &stdout, &stderr)
			if code != outcome.ExitUsage {
				t.Fatalf("exit code %d, want 2: %s", code, stderr.String())
			}
			if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Fatalf("stderr %q, want one line with %q", stderr.String(), tt.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("bad input created %s", out)
			}
		})
	}
}

// TestLongControlPlaneSmoke is the CI-sized run of the real control plane: one kube-apiserver, the
// controller-manager, the scheduler and KWOK with 20 nodes against a single-member cluster for 60 s. The
// workload's requests are recorded, the apiservers' request and etcd metrics and every component's usage
// are in controlplane.json, and no process is left. It needs the build cache (`chaosbench image kube`,
// which .ci/run runs); without it the test skips. It runs in make test-long; make test starts a real
// kube-apiserver too (TestKubeRenderServerDryRun, and clusters/controlplane's tests).
func TestLongControlPlaneSmoke(t *testing.T) {
	testenv.Long(t, "the whole control plane and KWOK start, then 60 s of load")
	r, _ := kubebuild.Parse(kubebuild.DefaultVersion)
	if _, ok := kubebuild.Cached(r, kubebuild.Options{}); !ok {
		testenv.Missing(t, testenv.Kube, "Kubernetes %s and KWOK are not in the build cache: `chaosbench image kube` builds them (about 5 minutes; .ci/run does)", kubebuild.DefaultVersion)
	}
	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(binary, "run", "--workload", "controlplane", "--members", "1", "--apiservers", "1", "--nodes", "20",
		"--pods-per-node", "10", "--churn", "2", "--list-rate", "0.5", "--duration", "60s", "--faults", "none",
		"--out", out, "--progress", "none")
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chaosbench run: %v\n%s", err, output)
	}
	s, err := results.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"create/pods", "delete/pods", "list/pods", "watch-event/pods"} {
		if o := s.Operations[op]; o == nil || o.Count == 0 {
			t.Errorf("no %s operations: %+v", op, o)
		}
	}
	if o := s.Operations["create/pods"]; o != nil && o.Count < 100 {
		t.Errorf("only %d pods created in 60 s at 2/s", o.Count)
	}
	data, err := os.ReadFile(filepath.Join(out, chaosbench.ControlPlaneReport))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Requests  []struct{ Verb, Resource string } `json:"apiserver_requests"`
		Etcd      []struct{ Verb, Resource string } `json:"etcd_requests"`
		Processes []struct {
			Name       string
			CPUSeconds float64 `json:"cpu_seconds"`
			RSSBytes   int64   `json:"rss_bytes"`
		}
		Workload struct{ Preloaded struct{ Nodes, Pods int } }
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	has := func(rows []struct{ Verb, Resource string }, verb, res string) bool {
		for _, r := range rows {
			if r.Verb == verb && r.Resource == res {
				return true
			}
		}
		return false
	}
	if !has(rep.Requests, "POST", "pods") || !has(rep.Requests, "DELETE", "pods") || !has(rep.Requests, "PUT", "leases") {
		t.Errorf("apiserver requests lack pod creates and deletes or lease updates: %+v", rep.Requests)
	}
	if !has(rep.Etcd, "create", "pods") || !has(rep.Etcd, "update", "leases") {
		t.Errorf("etcd requests lack pod creates or lease updates: %+v", rep.Etcd)
	}
	names := map[string]bool{}
	for _, p := range rep.Processes {
		if p.CPUSeconds > 0 && p.RSSBytes > 0 {
			names[p.Name] = true
		}
	}
	for _, n := range []string{"kube-apiserver-0", "kube-controller-manager", "kube-scheduler", "kwok"} {
		if !names[n] {
			t.Errorf("no usage of %s: %+v", n, rep.Processes)
		}
	}
	if rep.Workload.Preloaded.Nodes != 20 || rep.Workload.Preloaded.Pods != 200 {
		t.Errorf("preloaded %+v", rep.Workload.Preloaded)
	}
	if left := processesMentioning(out); len(left) > 0 {
		t.Fatalf("processes remain after the run: %v", left)
	}
}

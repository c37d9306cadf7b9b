package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/clusters/controlplane"
	"github.com/etcd-chaosbench/chaosbench/clusters/kubebuild"
	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

const renderScenario = "workload: kube\nnodes: 300\nduration: 2m\nthreshold: [\"k8s-slo\"]\n"

// renderManifests runs `chaosbench kube render` and returns its documents.
func renderManifests(t *testing.T, args ...string) []string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := execute(append([]string{"kube", "render"}, args...), &stdout, &stderr); code != 0 {
		t.Fatalf("kube render: exit %d: %s", code, stderr.String())
	}
	return strings.Split(stdout.String(), "\n---\n")[1:]
}

// TestKubeRenderManifests: the rendered manifests decode strictly into the Kubernetes API types; the
// workers' Job is an Indexed Job of N pods, never retried, whose command line, with its index substituted,
// is a valid worker of the scenario with the seed and the reference clock; the merge Job merges every
// worker's directory; names, labels and claims refer to one another.
func TestKubeRenderManifests(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "scenario.yaml")
	if err := os.WriteFile(config, []byte(renderScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	docs := renderManifests(t, "--workers", "3", "--config", config, "--endpoints", "https://etcd-0.etcd:2379,https://etcd-1.etcd:2379",
		"--tls-secret", "etcd-client", "--image", "registry.example.com/chaosbench:v1", "--namespace", "bench")
	var (
		cm      corev1.ConfigMap
		svc     corev1.Service
		pvc     corev1.PersistentVolumeClaim
		jobs    []batchv1.Job
		decoded int
	)
	for _, d := range docs {
		var kind struct{ Kind string }
		if err := yaml.Unmarshal([]byte(d), &kind); err != nil {
			t.Fatal(err)
		}
		var into any
		switch kind.Kind {
		case "ConfigMap":
			into = &cm
		case "Service":
			into = &svc
		case "PersistentVolumeClaim":
			into = &pvc
		case "Job":
			jobs = append(jobs, batchv1.Job{})
			into = &jobs[len(jobs)-1]
		default:
			t.Fatalf("unexpected document of kind %q:\n%s", kind.Kind, d)
		}
		if err := yaml.UnmarshalStrict([]byte(d), into); err != nil {
			t.Fatalf("%s does not decode strictly: %v\n%s", kind.Kind, err, d)
		}
		decoded++
	}
	if decoded != 5 || len(jobs) != 2 {
		t.Fatalf("%d documents, %d jobs: want a ConfigMap, a Service, a claim and two Jobs", decoded, len(jobs))
	}
	if cm.Data["scenario.yaml"] != renderScenario || cm.Namespace != "bench" {
		t.Fatalf("the scenario ConfigMap holds %q in %q", cm.Data["scenario.yaml"], cm.Namespace)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 7400 {
		t.Fatalf("service spec %+v: want a headless service on 7400", svc.Spec)
	}
	workers, merge := jobs[0], jobs[1]
	spec := workers.Spec
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion || *spec.Completions != 3 || *spec.Parallelism != 3 ||
		spec.BackoffLimitPerIndex == nil || *spec.BackoffLimitPerIndex != 0 || spec.BackoffLimit != nil || *merge.Spec.BackoffLimit != 0 {
		t.Fatalf("workers' job spec: %+v", spec)
	}
	pod := spec.Template.Spec
	for k, v := range svc.Spec.Selector {
		if pod.Subdomain != svc.Name || spec.Template.Labels[k] != v {
			t.Fatalf("the service (selector %v) does not select the workers (labels %v, subdomain %q)", svc.Spec.Selector, spec.Template.Labels, pod.Subdomain)
		}
	}
	if len(pod.TopologySpreadConstraints) != 1 || pod.TopologySpreadConstraints[0].TopologyKey != "kubernetes.io/hostname" {
		t.Fatalf("workers are not spread over nodes: %+v", pod.TopologySpreadConstraints)
	}
	c := pod.Containers[0]
	if len(c.Env) != 1 || c.Env[0].Name != chaosbench.JobIndexEnv || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef == nil {
		t.Fatalf("worker env %+v: want %s from the pod's completion index", c.Env, chaosbench.JobIndexEnv)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Fatalf("worker resources %+v", c.Resources)
	}
	claims := map[string]bool{}
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims[v.PersistentVolumeClaim.ClaimName] = true
		}
		if v.ConfigMap != nil && v.ConfigMap.Name != cm.Name {
			t.Fatalf("workers mount ConfigMap %q, the scenario is %q", v.ConfigMap.Name, cm.Name)
		}
	}
	if !claims[pvc.Name] {
		t.Fatalf("workers mount claims %v, not the rendered %q", claims, pvc.Name)
	}

	// Worker 1's command line, as Kubernetes expands it, is a valid worker of the scenario.
	args := strings.Join(append(c.Command, c.Args...), "\x00")
	args = strings.ReplaceAll(args, "$("+chaosbench.JobIndexEnv+")", "1")
	list := strings.Split(args, "\x00")
	if list[0] != "/chaosbench" || list[1] != "run" {
		t.Fatalf("worker command %v", list)
	}
	s := chaosbench.DefaultScenario()
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	var cfgPath string
	fs.StringVar(&cfgPath, "config", "", "")
	chaosbench.BindFlags(fs, &s)
	if err := fs.Parse(list[2:]); err != nil {
		t.Fatalf("worker flags %v: %v", list[2:], err)
	}
	if cfgPath != "/etc/chaosbench/scenario.yaml" {
		t.Fatalf("worker reads its scenario from %q", cfgPath)
	}
	if err := chaosbench.LoadScenarioFile(config, fs); err != nil {
		t.Fatal(err)
	}
	if err := s.UseWorkerIndex(func(k string) (string, bool) {
		return map[string]string{chaosbench.JobIndexEnv: "1"}[k], k == chaosbench.JobIndexEnv
	}, false); err != nil {
		t.Fatal(err)
	}
	if s.Workers != 3 || s.Worker != 1 || s.Cluster != "external" || s.Seed == 0 || s.Out != "/results/worker-1" ||
		s.ClockRef != "http://chaosbench-workers-0.chaosbench:7400" || s.CACert != "/etc/chaosbench-tls/ca.crt" || s.Kube.Nodes != 300 {
		t.Fatalf("worker 1 would run %+v", s.WorkerOptions)
	}
	if !strings.Contains(strings.Join(docs, ""), fmt.Sprint(s.Seed)) {
		t.Fatal("the seed is not in the manifests")
	}
	margs := strings.Join(merge.Spec.Template.Spec.Containers[0].Args, " ")
	if want := "merge /results/worker-0 /results/worker-1 /results/worker-2 --out /results/merged --wait"; !strings.HasPrefix(margs, want) {
		t.Fatalf("merge job args %q, want %q...", margs, want)
	}
}

// TestKubeRenderBadInput: bad input is one line, exit 2, and no manifest.
func TestKubeRenderBadInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte(renderScenario), 0o644)
	os.WriteFile(bad, []byte("workload: kube\nnodez: 3\n"), 0o644)
	tlsScenario := filepath.Join(dir, "tls.yaml")
	os.WriteFile(tlsScenario, []byte(renderScenario+"cacert: /etc/etcd/ca.crt\n"), 0o644)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no config", []string{"--endpoints", "http://e:2379"}, "give --config"},
		{"no endpoints", []string{"--config", good}, "give --endpoints"},
		{"no workers", []string{"--config", good, "--endpoints", "http://e:2379", "--workers", "0"}, "--workers 0"},
		{"unknown key", []string{"--config", bad, "--endpoints", "http://e:2379"}, `unknown setting "nodez"`},
		{"more workers than apiservers", []string{"--config", good, "--endpoints", "http://e:2379", "--workers", "4"}, "at most 3 workers"},
		{"bad quantity", []string{"--config", good, "--endpoints", "http://e:2379", "--memory", "lots"}, "--memory"},
		{"name not a DNS label", []string{"--config", good, "--endpoints", "http://e:2379", "--name", "Chaos_Bench"}, `--name "Chaos_Bench"`},
		{"name too long", []string{"--config", good, "--endpoints", "http://e:2379", "--name", strings.Repeat("c", 60)}, "--name"},
		{"namespace not a DNS label", []string{"--config", good, "--endpoints", "http://e:2379", "--namespace", "a.b"}, `--namespace "a.b"`},
		{"https without a secret", []string{"--config", good, "--endpoints", "https://e:2379"}, "give --tls-secret"},
		{"scenario TLS files without a secret", []string{"--config", tlsScenario, "--endpoints", "http://e:2379"}, "give --tls-secret"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := execute(append([]string{"kube", "render"}, tt.args...), &stdout, &stderr)
			if code != outcome.ExitUsage || stdout.Len() != 0 {
				t.Fatalf("exit %d, stdout %q", code, stdout.String())
			}
			if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Fatalf("stderr %q, want one line with %q", stderr.String(), tt.want)
			}
		})
	}
}

// TestKubeRenderServerDryRun: a real kube-apiserver accepts every rendered manifest in a server-side dry
// run with strict field validation. It needs the Kubernetes build cache (`chaosbench image kube`, which
// .ci/run runs) and skips without it.
func TestKubeRenderServerDryRun(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	r, _ := kubebuild.Parse(kubebuild.DefaultVersion)
	b, ok := kubebuild.Cached(r, kubebuild.Options{})
	if !ok {
		testenv.Missing(t, testenv.Kube, "Kubernetes %s is not in the build cache: `chaosbench image kube` builds it (.ci/run does)", kubebuild.DefaultVersion)
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "scenario.yaml")
	os.WriteFile(config, []byte(renderScenario), 0o644)
	docs := renderManifests(t, "--workers", "3", "--config", config, "--endpoints", "https://etcd-0.etcd:2379",
		"--tls-secret", "etcd-client", "--image", "registry.example.com/chaosbench:v1", "--namespace", "default")

	// A single-member cluster for the apiserver, then the apiserver itself.
	cluster := exec.Command(binary, "cluster", "--members", "1", "--out", filepath.Join(dir, "cluster"))
	cluster.Stdout, cluster.Stderr = io.Discard, io.Discard
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cluster.Process.Signal(os.Interrupt)
		cluster.Wait()
	}()
	var eps []byte
	for i := 0; i < 600 && len(eps) == 0; i++ {
		time.Sleep(100 * time.Millisecond)
		eps, _ = os.ReadFile(filepath.Join(dir, "cluster", "endpoints"))
	}
	if len(eps) == 0 {
		t.Fatal("the cluster wrote no endpoints")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.Options{Binaries: b, Dir: filepath.Join(dir, "cp"), Apiservers: 1,
		Etcd: controlplane.Etcd{Endpoints: strings.Fields(string(eps))}})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close(context.Background())
	hc, err := cp.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{
		"ConfigMap": "/api/v1/namespaces/default/configmaps", "Service": "/api/v1/namespaces/default/services",
		"PersistentVolumeClaim": "/api/v1/namespaces/default/persistentvolumeclaims", "Job": "/apis/batch/v1/namespaces/default/jobs",
	}
	for _, d := range docs {
		var kind struct{ Kind string }
		yaml.Unmarshal([]byte(d), &kind)
		body, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, cp.APIServerURLs()[0]+paths[kind.Kind]+"?dryRun=All&fieldValidation=Strict", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("the apiserver refused the %s: %s: %s", kind.Kind, resp.Status, msg)
		}
	}
}

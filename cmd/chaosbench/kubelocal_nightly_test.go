package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/kubenode"
	"github.com/etcd-chaosbench/chaosbench/internal/fakegcs"
	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// TestLongKubeLocalNightly runs the two nightly assets for Kubernetes on a real one-node Kubernetes (`kube
// local up`), each once, with its smoke tag, as their users would:
//
//   - ci/kubernetes/nightly-chaos.yaml applied with only what a user fills in (the Secret from the client
//     certificates of a real mutual-TLS etcd cluster the pods reach, its endpoints, the image), a volume
//     for its claim (the node has no provisioner), and its quick check triggered by hand with the command its
//     header gives: the Job's pod exits 0, and the suite.json it left on the volume says ok, with the smoke
//     scenario only;
//   - ci/prow/nightly-chaos-periodic.yaml's container (image, command, script, security context) in a pod
//     as Prow's decoration starts it (the repository checked out at its path alias, ARTIFACTS, JOB_NAME,
//     BUILD_ID), with TAGS=smoke: it builds chaosbench with make build and runs ci/prow-nightly.sh, reading
//     the job's history from a stand-in bucket; it exits 0 with the smoke suite and the JUnit in $ARTIFACTS.
//
// Pods here reach no registry and no mirror: the periodic's image (golang:1.26) is a stand-in built by
// debootstrap with the host's Go and the packages the job installs (golangStandIn), and the pod's make build
// uses this machine's Go module and build caches, fetching nothing. Then the up process is killed
// and `kube local down` removes the node, leaving nothing.
func TestLongKubeLocalNightly(t *testing.T) {
	testenv.Long(t, "a stand-in golang image (debootstrap, once), a one-node Kubernetes, the CronJob's quick check and the Prow periodic's smoke night on it: about 10 minutes")
	requireKubeNode(t)
	began := time.Now()
	dir := t.TempDir()
	periodic := readPeriodic(t)
	standIn := time.Now()
	golangStandIn(t, periodic.Spec.Containers[0].Image)
	t.Logf("stand-in %s ready in %.0fs", periodic.Spec.Containers[0].Image, time.Since(standIn).Seconds())

	nodeDir := filepath.Join(dir, "node")
	nodeUp := time.Now()
	up, _ := startBackground(t, 8*time.Minute, "ready (interrupt to remove it)", "kube", "local", "up", "--dir", nodeDir,
		"--image", periodic.Spec.Containers[0].Image)
	snap, err := kubenode.ReadSnapshot(nodeDir)
	if err != nil {
		t.Fatal(err)
	}
	// The node goes as after an up that was killed: `kube local down`, which must leave nothing. (Cleanups
	// run last-in first-out: this one after the etcd cluster's and the servers' below.)
	t.Cleanup(func() {
		up.cmd.Process.Kill()
		<-up.done
		code, out := runBinary(t, "kube", "local", "down", "--dir", nodeDir)
		if code != 0 {
			t.Errorf("kube local down: exit %d\n%s", code, out)
		}
		if left := kubenode.Leftovers(nodeDir, snap); len(left) > 0 {
			t.Errorf("after kube local down the node left %s", strings.Join(left, "; "))
			kubenode.Down(nodeDir)
		}
	})
	node := parseUp(t, up)
	node.kubeconfig = filepath.Join(nodeDir, "kubeconfig")
	t.Logf("node up in %.0fs (%s)", time.Since(nodeUp).Seconds(), strings.Join(node.images, ", "))

	cron := time.Now()
	runCronJobSmoke(t, node, dir)
	t.Logf("the CronJob's quick check: %.0fs", time.Since(cron).Seconds())
	prow := time.Now()
	runProwSmoke(t, node, periodic, dir)
	t.Logf("the Prow periodic's smoke night: %.0fs", time.Since(prow).Seconds())
	t.Logf("TestLongKubeLocalNightly: %.0fs before the node goes", time.Since(began).Seconds())
}

// localNode is what `kube local up` printed of its node.
type localNode struct {
	kubectl, kubeconfig string
	// gateway is the host's address on the pods' bridge; images are the images it imported.
	gateway net.IP
	images  []string
}

// parseUp reads what a `kube local up` prints after its ready line (its output is read as it comes: it
// waits up to 30 s for the lines).
func parseUp(t *testing.T, up *background) localNode {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n localNode
		out := up.output()
		for _, l := range strings.Split(out, "\n") {
			l = strings.TrimSpace(l)
			if v, ok := strings.CutPrefix(l, "kubectl: "); ok {
				n.kubectl = v
			}
			if v, ok := strings.CutPrefix(l, "image: "); ok {
				n.images = append(n.images, strings.Fields(v)[0])
			}
			if v, ok := strings.CutPrefix(l, "pods reach this machine at "); ok {
				n.gateway = net.ParseIP(strings.TrimSuffix(strings.Fields(v)[0], ":"))
			}
		}
		if n.kubectl != "" && len(n.images) > 0 && n.gateway != nil {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube local up named no kubectl, image or gateway:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (n localNode) kubectlIn(t *testing.T, ns string, args ...string) string {
	t.Helper()
	return kubectl(t, n.kubectl, n.kubeconfig, append([]string{"-n", ns}, args...)...)
}

// podExit waits for the first pod matching selector in ns to end and returns its container's exit code
// and log; after timeout it fails the test with the state of the namespace.
func podExit(t *testing.T, n localNode, ns, selector string, timeout time.Duration) (int, string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code := n.kubectlIn(t, ns, "get", "pods", "-l", selector,
			"-o", "jsonpath={.items[*].status.containerStatuses[*].state.terminated.exitCode}")
		if f := strings.Fields(code); len(f) > 0 {
			c, err := strconv.Atoi(f[0])
			if err != nil {
				t.Fatalf("pod %s: exit code %q", selector, code)
			}
			return c, n.kubectlIn(t, ns, "logs", "-l", selector, "--tail", "-1")
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod %s has not ended within %s:\n%s\n%s", selector, timeout,
				n.kubectlIn(t, ns, "get", "pods,jobs,pvc,pv", "-o", "wide"), n.kubectlIn(t, ns, "describe", "pods", "-l", selector))
		}
		time.Sleep(2 * time.Second)
	}
}

// runCronJobSmoke applies the CronJob manifest with a user's substitutions, triggers its quick check by
// hand as the manifest's header says, and checks what the night left on the volume.
func runCronJobSmoke(t *testing.T, n localNode, dir string) {
	t.Helper()
	// A real etcd cluster over mutual TLS that the pods reach: members in containers on Docker's network,
	// their server certificates good for the containers' addresses.
	_, line := startBackground(t, 3*time.Minute, "client TLS: ", "cluster", "--cluster", "docker", "--members", "1", "--tls",
		"--out", filepath.Join(dir, "etcd"))
	etcd, err := os.ReadFile(filepath.Join(dir, "etcd", chaosbench.EndpointsFile))
	if err != nil {
		t.Fatal(err)
	}
	endpoints := strings.Join(strings.Fields(string(etcd)), ",")
	// client TLS: --cacert CA --cert CERT --key KEY
	files := strings.Fields(line[strings.Index(line, "client TLS: ")+len("client TLS: "):])
	pem := map[string]string{}
	for key, flag := range map[string]string{"ca.crt": "--cacert", "client.crt": "--cert", "client.key": "--key"} {
		i := slices.Index(files, flag)
		if i < 0 || i+1 >= len(files) {
			t.Fatalf("chaosbench cluster printed no %s: %s", flag, line)
		}
		b, err := os.ReadFile(files[i+1])
		if err != nil {
			t.Fatalf("the cluster's client TLS files: %v", err)
		}
		pem[key] = string(b)
	}
	manifestPath := filepath.Join(repoRoot, "ci", "kubernetes", "nightly-chaos.yaml")
	content, err := os.ReadFile(manifestPath)
	if err != nil {
		t.Fatal(err)
	}
	manifest, claim := fillCronJobManifest(t, string(content), pem, endpoints, n.images[0])
	path := filepath.Join(dir, "nightly-chaos.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	// The claim's volume: a directory the pods' user may write, reserved for the claim.
	volume := filepath.Join(dir, "nightly-results")
	if err := os.Mkdir(volume, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(volume, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	pv := corev1.PersistentVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: "chaosbench-nightly-results"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: claim.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   claim.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: claim.Namespace, Name: claim.Name},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: volume, Type: ptr(corev1.HostPathDirectory)}},
		},
	}
	pvPath := filepath.Join(dir, "pv.yaml")
	writeYAML(t, pvPath, pv)
	kubectl(t, n.kubectl, n.kubeconfig, "apply", "-f", pvPath)
	kubectl(t, n.kubectl, n.kubeconfig, "apply", "-f", path)

	// The quick check, triggered by hand with the manifest header's own command.
	trigger := headerCommand(t, string(content), "kubectl -n chaosbench create job --from=cronjob/chaosbench-nightly")
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", trigger)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+n.kubeconfig, "PATH="+filepath.Dir(n.kubectl)+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", trigger, err, out)
	}
	job := "chaosbench-smoke"
	code, log := podExit(t, n, "chaosbench", "job-name="+job, 4*time.Minute)
	if code != outcome.ExitOK {
		t.Fatalf("the quick check's pod exited %d:\n%s", code, log)
	}
	n.kubectlIn(t, "chaosbench", "wait", "--for=condition=complete", "--timeout=60s", "job/"+job)
	suites, _ := filepath.Glob(filepath.Join(volume, "results", "*-suite", results.SuiteFile))
	if len(suites) != 1 {
		t.Fatalf("the volume holds %d suites (%v), want the quick check's:\n%s", len(suites), suites, log)
	}
	suite, err := results.ReadSuite(filepath.Dir(suites[0]))
	if err != nil {
		t.Fatal(err)
	}
	if suite.Outcome != outcome.OK || !slices.Equal(suite.Selection.Tags, []string{"smoke"}) || len(suite.Scenarios) != 1 ||
		suite.Scenarios[0].Name != "external-smoke" {
		t.Fatalf("the quick check's suite: outcome %s %v, tags %v, %d scenarios", suite.Outcome, suite.Reasons, suite.Selection.Tags, len(suite.Scenarios))
	}
	run := readSummary(t, filepath.Join(filepath.Dir(suites[0]), suite.Scenarios[0].Dir))
	var ops int64
	for _, op := range run.Operations {
		ops += op.Count
	}
	// 100 puts a second for 15 s.
	if run.Cluster.Backend != "external" || ops < 1000 {
		t.Fatalf("the quick check's run: backend %q, %d operations", run.Cluster.Backend, ops)
	}
	t.Logf("quick check: %s, %d operations on %s over TLS", suite.Outcome, ops, endpoints)
	// The CronJob goes, and its Job with it: no night may start on this node while the test goes on.
	n.kubectlIn(t, "chaosbench", "delete", "cronjob", "chaosbench-nightly", "--wait=true")
}

// fillCronJobManifest makes the substitutions a user makes in the CronJob manifest: the Secret's
// certificates, the endpoints and the image. It returns the manifest and its claim.
func fillCronJobManifest(t *testing.T, content string, pem map[string]string, endpoints, image string) (string, corev1.PersistentVolumeClaim) {
	t.Helper()
	var claim corev1.PersistentVolumeClaim
	docs := strings.Split(content, "\n---\n")
	filled := 0
	for i, doc := range docs {
		var head metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatal(err)
		}
		switch head.Kind {
		case "Secret":
			var s corev1.Secret
			if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil {
				t.Fatal(err)
			}
			for k := range s.StringData {
				if pem[k] == "" {
					t.Fatalf("the Secret's key %s is none of the cluster's TLS files", k)
				}
				s.StringData[k] = pem[k]
			}
			docs[i] = marshalYAML(t, s)
			filled++
		case "CronJob":
			var cj batchv1.CronJob
			if err := yaml.UnmarshalStrict([]byte(doc), &cj); err != nil {
				t.Fatal(err)
			}
			c := &cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
			c.Image = image
			set := false
			for j, a := range c.Args {
				if strings.HasPrefix(a, "--set=endpoints=") {
					c.Args[j], set = "--set=endpoints="+endpoints, true
				}
			}
			if !set {
				t.Fatalf("the CronJob has no --set=endpoints= argument to fill: %v", c.Args)
			}
			docs[i] = marshalYAML(t, cj)
			filled++
		case "PersistentVolumeClaim":
			if err := yaml.UnmarshalStrict([]byte(doc), &claim); err != nil {
				t.Fatal(err)
			}
		}
	}
	if filled != 2 || claim.Name == "" {
		t.Fatalf("the manifest has no Secret, CronJob or claim to fill")
	}
	return strings.Join(docs, "\n---\n"), claim
}

// headerCommand returns the command a manifest's header comment gives, from its line starting with prefix
// through its continuation lines (a line ending in a pipe).
func headerCommand(t *testing.T, content, prefix string) string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(content, "\n") {
		text, ok := strings.CutPrefix(l, "#")
		if !ok {
			break
		}
		text = strings.TrimSpace(text)
		if strings.HasPrefix(text, prefix) || (len(lines) > 0 && strings.HasSuffix(lines[len(lines)-1], "|")) {
			lines = append(lines, text)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("the manifest's header gives no command starting with %q", prefix)
	}
	return strings.Join(lines, "\n")
}

func marshalYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeYAML(t *testing.T, path string, v any) {
	t.Helper()
	if err := os.WriteFile(path, []byte(marshalYAML(t, v)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// prowPeriodic is what the test reads of the Prow periodic (ci/prow_test.go decodes it strictly).
type prowPeriodic struct {
	Name      string `json:"name"`
	ExtraRefs []struct {
		PathAlias string `json:"path_alias"`
	} `json:"extra_refs"`
	Spec corev1.PodSpec `json:"spec"`
}

func readPeriodic(t *testing.T) prowPeriodic {
	t.Helper()
	content, err := os.ReadFile(filepath.Join(repoRoot, "ci", "prow", "nightly-chaos-periodic.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Periodics []prowPeriodic `json:"periodics"`
	}
	if err := yaml.Unmarshal(content, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Periodics) != 1 || len(cfg.Periodics[0].Spec.Containers) != 1 || len(cfg.Periodics[0].ExtraRefs) != 1 {
		t.Fatalf("the periodic file: want one periodic with one container and one ref")
	}
	return cfg.Periodics[0]
}

// serveOnGateway serves h on the node's gateway (where pods reach this machine) until the test ends, and
// returns its URL.
func serveOnGateway(t *testing.T, n localNode, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(n.gateway.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

// runProwSmoke runs the periodic's container in a pod as Prow's decoration would start it, with TAGS=smoke,
// and checks its night.
func runProwSmoke(t *testing.T, n localNode, p prowPeriodic, dir string) {
	t.Helper()
	// The checkout, as clonerefs makes it: this repository's commit (with the tree's uncommitted changes to
	// tracked files, so that what is tested is what is here) under $GOPATH/src at the path alias.
	gopath := filepath.Join(dir, "prow", "go")
	checkout := filepath.Join(gopath, "src", p.ExtraRefs[0].PathAlias)
	if out, err := exec.Command("git", "clone", "-q", repoRoot, checkout).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	diff, err := exec.Command("git", "-C", repoRoot, "diff", "HEAD", "--binary").Output()
	if err != nil {
		t.Fatal(err)
	}
	if len(diff) > 0 {
		apply := exec.Command("git", "-C", checkout, "apply", "--whitespace=nowarn")
		apply.Stdin = bytes.NewReader(diff)
		if out, err := apply.CombinedOutput(); err != nil {
			t.Fatalf("git apply of the uncommitted changes: %v\n%s", err, out)
		}
	}
	artifacts := filepath.Join(dir, "prow", "artifacts")
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	// Where the pod reaches the internet in Prow, a stand-in on this machine: the job's GCS bucket (no
	// previous night: the job's first).
	const bucket = "kubernetes-ci-logs"
	gcs := serveOnGateway(t, n, &fakegcs.Bucket{Name: bucket, Objects: map[string]string{}})
	// The pod builds chaosbench with make build, in the image, with this machine's module and build caches
	// (at the same paths, so that the dependencies' builds are found) and GOPROXY=off, nothing fetched: a
	// cold build in the pod took 16 minutes on this 2-core machine (load average 18), too long for CI.
	var caches []string
	for _, v := range []string{"GOMODCACHE", "GOCACHE"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil || strings.TrimSpace(string(out)) == "" {
			t.Fatalf("go env %s: %v", v, err)
		}
		caches = append(caches, strings.TrimSpace(string(out)))
	}

	buildID := strconv.FormatInt(time.Now().Unix(), 10)
	c := p.Spec.Containers[0]
	c.Name = "test"
	c.WorkingDir = "/home/prow/go/src/" + p.ExtraRefs[0].PathAlias
	c.Env = append(c.Env,
		// As Prow's decoration sets them.
		corev1.EnvVar{Name: "ARTIFACTS", Value: "/logs/artifacts"}, corev1.EnvVar{Name: "JOB_NAME", Value: p.Name},
		corev1.EnvVar{Name: "JOB_TYPE", Value: "periodic"}, corev1.EnvVar{Name: "BUILD_ID", Value: buildID},
		corev1.EnvVar{Name: "GOPATH", Value: "/home/prow/go"}, corev1.EnvVar{Name: "CI", Value: "true"},
		// The stand-in bucket, this machine's Go caches, and the smoke night.
		corev1.EnvVar{Name: "GCS_ENDPOINT", Value: gcs}, corev1.EnvVar{Name: "GOPROXY", Value: "off"},
		corev1.EnvVar{Name: "GOMODCACHE", Value: caches[0]}, corev1.EnvVar{Name: "GOCACHE", Value: caches[1]},
		corev1.EnvVar{Name: "TAGS", Value: "smoke"})
	// The periodic asks for 4 CPUs, more than this node has (2 cores here): such a pod is never scheduled.
	// It gets what the node has; its memory stays as asked.
	cpu := resource.MustParse(strings.TrimSpace(kubectl(t, n.kubectl, n.kubeconfig, "get", "nodes", "-o", "jsonpath={.items[0].status.allocatable.cpu}")))
	for _, rl := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
		if q, ok := rl[corev1.ResourceCPU]; ok && q.Cmp(cpu) > 0 {
			rl[corev1.ResourceCPU] = cpu
		}
	}
	volumes := []corev1.Volume{
		{Name: "code", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: gopath, Type: ptr(corev1.HostPathDirectory)}}},
		{Name: "logs", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: artifacts, Type: ptr(corev1.HostPathDirectory)}}},
		{Name: "gomodcache", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: caches[0], Type: ptr(corev1.HostPathDirectory)}}},
		{Name: "gocache", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: caches[1], Type: ptr(corev1.HostPathDirectory)}}},
	}
	c.VolumeMounts = append(c.VolumeMounts,
		corev1.VolumeMount{Name: "gomodcache", MountPath: caches[0]}, corev1.VolumeMount{Name: "gocache", MountPath: caches[1]})
	// A privileged container gets every capability of the kernel; where this machine's root lacks one (these
	// machines' root has no CAP_SYS_RESOURCE), runc fails to start it ("unable to apply caps"), and without
	// the privilege the device cgroup keeps /dev/fuse shut even when it is mounted in. The pod then runs
	// unprivileged, with the scenarios that use disk faults (slowdisk, drop-unsynced: FUSE) dropped from the
	// checkout, as the periodic's header tells a cluster that forbids the privilege: the suite checks every
	// scenario of ci/chaos before it starts, and the smoke ones use none.
	if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
		if missing := missingCapabilities(t); missing != "" {
			c.SecurityContext.Privileged = nil
			dropped := dropDiskScenarios(t, filepath.Join(checkout, "ci", "chaos"))
			t.Logf("the periodic's pod runs unprivileged (this machine's root lacks %s), without %s", missing, strings.Join(dropped, ", "))
		}
	}
	c.VolumeMounts = append(c.VolumeMounts,
		corev1.VolumeMount{Name: "code", MountPath: "/home/prow/go"}, corev1.VolumeMount{Name: "logs", MountPath: "/logs/artifacts"})
	name := p.Name + "-" + buildID
	pod := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"prow.k8s.io/job": p.Name, "prow.k8s.io/build-id": buildID}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{c},
			Volumes:       volumes,
		},
	}
	podPath := filepath.Join(dir, "prow-pod.yaml")
	writeYAML(t, podPath, pod)
	kubectl(t, n.kubectl, n.kubeconfig, "apply", "-f", podPath)
	code, log := podExit(t, n, "default", "prow.k8s.io/build-id="+buildID, 20*time.Minute)
	if err := os.WriteFile(filepath.Join(dir, "prow", "build-log.txt"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	// The job's first night: the suite is green, and the trend gate, with no previous night to measure the
	// noise of, is undecided (it needs 3), which the script's exit code is when the suite's is 0: never a pass.
	if code != outcome.ExitHarness {
		t.Fatalf("the periodic's pod exited %d, want %d (a green suite, an undecided trend on the first night):\n%s", code, outcome.ExitHarness, log)
	}
	for _, want := range []string{
		"fuse3, strace and python3 are installed in the image: no apt-get",
		"history: no previous runs in gs://" + bucket + "/logs/" + p.Name,
		"trend verdict: UNDECIDED", "the trend needs 3 to measure their noise",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the night's log does not say %q:\n%s", want, log)
		}
	}
	suite, err := results.ReadSuite(filepath.Join(artifacts, "suite"))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if suite.Outcome != outcome.OK || !slices.Equal(suite.Selection.Tags, []string{"smoke"}) || len(suite.Scenarios) < 1 {
		t.Fatalf("the night's suite: outcome %s %v, tags %v, %d scenarios", suite.Outcome, suite.Reasons, suite.Selection.Tags, len(suite.Scenarios))
	}
	for _, f := range []string{"junit_chaosbench.xml", filepath.Join("trend", "trend.html")} {
		if _, err := os.Stat(filepath.Join(artifacts, f)); err != nil {
			t.Errorf("$ARTIFACTS has no %s: %v", f, err)
		}
	}
	t.Logf("Prow smoke night: %s, %d scenarios", suite.Outcome, len(suite.Scenarios))
}

// dropDiskScenarios removes the scenario files of dir whose faults use the members' disks through FUSE
// (slowdisk, drop-unsynced) and returns their names.
func dropDiskScenarios(t *testing.T, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	var dropped []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); !strings.HasPrefix(l, "#") && (strings.Contains(l, "slowdisk") || strings.Contains(l, "drop-unsynced")) {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
				dropped = append(dropped, filepath.Base(f))
				break
			}
		}
	}
	return dropped
}

// missingCapabilities returns the capabilities (by number) of the kernel that this process's bounding set
// lacks: a privileged container, given all of them, cannot start here.
func missingCapabilities(t *testing.T) string {
	t.Helper()
	last, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(last)))
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var bounding uint64
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "CapBnd:"); ok {
			if bounding, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64); err != nil {
				t.Fatal(err)
			}
		}
	}
	var missing []string
	for c := 0; c <= n; c++ {
		if bounding&(1<<c) == 0 {
			missing = append(missing, fmt.Sprintf("capability %d", c))
		}
	}
	return strings.Join(missing, ", ")
}

// standInLabel marks the stand-in for the Prow periodic's golang image, with the Go release it holds.
const standInLabel = "io.chaosbench.golang-stand-in"

// golangStandIn makes sure the local Docker engine has image, the Prow periodic's golang image, which
// cannot be pulled here: a stand-in, built once and kept (labelled as chaosbench's: `chaosbench clean
// --images` removes it). It is a Debian root file system of this host's release made by debootstrap, with
// the Go toolchain of this host at /usr/local/go and the environment of the golang images (PATH, GOPATH=/go,
// GOTOOLCHAIN=local), and with what the periodic installs (fuse3, strace, python3: pods here reach no
// mirror), git and make preinstalled.
func golangStandIn(t *testing.T, image string) {
	t.Helper()
	d := requireDocker(t)
	ctx := context.Background()
	goVersion := runtime.Version()
	if res, err := d.ImageInspect(ctx, image); err == nil {
		var labels map[string]string
		if res.Config != nil {
			labels = res.Config.Labels
		}
		switch {
		case labels[standInLabel] == goVersion:
			return
		case labels[standInLabel] == "":
			t.Fatalf("Docker has an image %s that is not this test's stand-in: its pod could not install the periodic's packages here (pods reach no mirror); remove it (docker rmi %s) to let the test build its stand-in", image, image)
		}
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		testenv.Missing(t, testenv.Debootstrap, "skipping: a stand-in for %s is built with debootstrap (Debian's debootstrap), and there is none: %v", image, err)
	}
	release := ""
	if osr, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, l := range strings.Split(string(osr), "\n") {
			if v, ok := strings.CutPrefix(l, "VERSION_CODENAME="); ok {
				release = strings.Trim(v, `"`)
			}
		}
	}
	if release == "" {
		testenv.Missing(t, testenv.Debootstrap, "skipping: a stand-in for %s is a Debian root file system of this host's release, and /etc/os-release names none", image)
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "rootfs")
	// debootstrap mounts /proc and /sys in the root while it installs: none may stay behind.
	t.Cleanup(func() {
		if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], root+"/") {
					syscall.Unmount(f[4], syscall.MNT_DETACH)
					t.Errorf("debootstrap left %s mounted", f[4])
				}
			}
		}
	})
	began := time.Now()
	deboot := exec.Command("debootstrap", "--variant=minbase", "--include=ca-certificates,git,make,procps,fuse3,strace,python3", release, root)
	if out, err := deboot.CombinedOutput(); err != nil {
		testenv.Missing(t, testenv.Debootstrap, "skipping: debootstrap %s could not make a stand-in for %s: %v\n%s", release, image, err, tail(out, 20))
	}
	debootstrapped := time.Since(began)
	for _, junk := range []string{"var/cache/apt/archives", "var/lib/apt/lists"} {
		ents, _ := os.ReadDir(filepath.Join(root, junk))
		for _, e := range ents {
			if !e.IsDir() {
				os.Remove(filepath.Join(root, junk, e.Name()))
			}
		}
	}
	if out, err := exec.Command("cp", "-a", strings.TrimSpace(string(goroot)), filepath.Join(root, "usr", "local", "go")).CombinedOutput(); err != nil {
		t.Fatalf("copy the Go toolchain: %v\n%s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(root, "go", "bin"), 0o777); err != nil {
		t.Fatal(err)
	}
	tarCmd := exec.Command("tar", "-C", root, "--numeric-owner", "-c", ".")
	pipe, err := tarCmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var tarErr bytes.Buffer
	tarCmd.Stderr = &tarErr
	if err := tarCmd.Start(); err != nil {
		t.Fatal(err)
	}
	res, err := d.ImageImport(ctx, client.ImageImportSource{Source: pipe, SourceName: "-"}, image, client.ImageImportOptions{
		Message: "stand-in for " + image + " (chaosbench's TestLongKubeLocalNightly)",
		Changes: []string{
			"ENV PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"ENV GOPATH=/go", "ENV GOTOOLCHAIN=local", "ENV GOLANG_VERSION=" + strings.TrimPrefix(goVersion, "go"),
			"WORKDIR /go", `CMD ["bash"]`,
			fmt.Sprintf("LABEL %s=true %s=%s %s=golang-stand-in", clusters.LabelOwned, standInLabel, goVersion, clusters.LabelImageKind),
		},
	})
	if err == nil {
		err = clusters.ReadDockerStream(res)
		res.Close()
	}
	if werr := tarCmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("tar: %w: %s", werr, tarErr.String())
	}
	if err != nil {
		t.Fatalf("import the stand-in %s: %v", image, err)
	}
	t.Logf("built the stand-in %s: debootstrap %s in %.0fs, import in %.0fs", image, release, debootstrapped.Seconds(), (time.Since(began) - debootstrapped).Seconds())
}

// tail returns the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

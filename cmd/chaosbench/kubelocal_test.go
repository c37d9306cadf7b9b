package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/clusters/kubebuild"
	"github.com/etcd-chaosbench/chaosbench/clusters/kubenode"
	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// background is a chaosbench process that runs until interrupted (kube local up, cluster), with its
// output collected.
type background struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	line chan string
	done chan struct{}
}

// startBackground starts the built binary with args and returns once a line of its output contains
// ready (failing the test with its output if it exits first or takes longer than timeout). Cleanup
// interrupts it and waits for it.
func startBackground(t *testing.T, timeout time.Duration, ready string, args ...string) (*background, string) {
	t.Helper()
	b := &background{cmd: exec.Command(binary, args...), line: make(chan string, 1000), done: make(chan struct{})}
	pr, pw := io.Pipe()
	b.cmd.Stdout, b.cmd.Stderr = pw, pw
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			b.mu.Lock()
			b.out.WriteString(sc.Text() + "\n")
			b.mu.Unlock()
			select {
			case b.line <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		b.cmd.Wait()
		pw.Close()
		close(b.done)
	}()
	t.Cleanup(func() { b.stop(t) })
	deadline := time.After(timeout)
	for {
		select {
		case l := <-b.line:
			if strings.Contains(l, ready) {
				return b, l
			}
		case <-b.done:
			t.Fatalf("chaosbench %s exited before %q: %v\n%s", strings.Join(args, " "), ready, b.cmd.ProcessState, b.output())
		case <-deadline:
			t.Fatalf("chaosbench %s: no %q within %s\n%s", strings.Join(args, " "), ready, timeout, b.output())
		}
	}
}

func (b *background) output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.String()
}

// stop interrupts the process and waits up to two minutes for it to clean up.
func (b *background) stop(t *testing.T) {
	select {
	case <-b.done:
		return
	default:
	}
	b.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-b.done:
	case <-time.After(2 * time.Minute):
		b.cmd.Process.Kill()
		<-b.done
		t.Errorf("chaosbench %s did not stop within 2 minutes of an interrupt\n%s", strings.Join(b.cmd.Args[1:], " "), b.output())
	}
}

// requireKubeNode skips (or, where CI requires it, fails) unless this machine can run a local node and
// its binaries are built.
func requireKubeNode(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a one-node Kubernetes")
	}
	if err := kubenode.CheckHost(); err != nil {
		testenv.Missing(t, testenv.KubeNode, "skipping: %v", err)
	}
	requireDocker(t)
	r, err := kubebuild.Parse(chaosbench.DefaultKubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := kubebuild.Cached(r, kubebuild.Options{}); !ok {
		testenv.Missing(t, testenv.Kube, "skipping: the Kubernetes %s control plane is not built (chaosbench image kube)", r.Version)
	}
	if _, ok := kubebuild.CachedNode(r, kubebuild.Options{}); !ok {
		testenv.Missing(t, testenv.KubeNode, "skipping: the kubelet, kubectl and CoreDNS of %s are not built (chaosbench image kube)", r.Version)
	}
}

// kubectl runs the node's kubectl and returns its output; a failure fails the test.
func kubectl(t *testing.T, bin, kubeconfig string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestLongKubeLocalSplit runs what a user runs on a real cluster, on a real one-node Kubernetes here
// (`kube local up`: the kubelet, containerd, CoreDNS): `kube render` of a 3-worker split, applied with
// kubectl, runs to completion against a docker etcd cluster the pods reach; the merge Job's exit code is
// the merged run's outcome (0), and its merged figures are those of a local `run --workers 3` of the same
// scenario. Then a worker killed mid-run (SIGKILL, nothing written) makes the merge Job name the missing
// share and fail with exit 1, never pass on the other shares. Then the node goes, leaving nothing.
func TestLongKubeLocalSplit(t *testing.T) {
	testenv.Long(t, "a one-node Kubernetes, a 3-worker split on it, a local split and a killed worker: about 2 minutes")
	requireKubeNode(t)
	began := time.Now()
	dir := t.TempDir()
	nodeDir := filepath.Join(dir, "node")
	up, _ := startBackground(t, 6*time.Minute, "ready (interrupt to remove it)", "kube", "local", "up", "--dir", nodeDir)
	snap, err := kubenode.ReadSnapshot(nodeDir)
	if err != nil {
		t.Fatal(err)
	}
	node := parseUp(t, up)
	node.kubeconfig = filepath.Join(nodeDir, "kubeconfig")
	kubeconfig, kubectlBin := node.kubeconfig, node.kubectl
	t.Logf("node up in %.0fs", time.Since(began).Seconds())
	// The node leaves nothing: checked after up has stopped (cleanups run last-in first-out).
	t.Cleanup(func() {
		up.stop(t)
		if left := kubenode.Leftovers(nodeDir, snap); len(left) > 0 {
			t.Errorf("the node left %s\n%s", strings.Join(left, "; "), up.output())
			kubenode.Down(nodeDir)
		}
	})

	_, line := startBackground(t, 3*time.Minute, "endpoints: ", "cluster", "--cluster", "docker", "--members", "1", "--out", filepath.Join(dir, "etcd"))
	endpoints := strings.TrimSpace(line[strings.Index(line, "endpoints: ")+len("endpoints: "):])

	// The scenario the docs run on a local node (docs/scale-out.md).
	scenario := filepath.Join(repoRoot, "docs", "examples", "split-local.yaml")
	render := func(name, mergeWait string) string {
		t.Helper()
		path := filepath.Join(dir, name+".yaml")
		code, out := runBinary(t, "kube", "render", "--workers", "3", "--config", scenario, "--endpoints", endpoints,
			"--name", name, "--cpu", "400m", "--memory", "512Mi", "--storage", "1Gi", "--merge-wait", mergeWait)
		if code != 0 {
			t.Fatalf("kube render: exit %d\n%s", code, out)
		}
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// mergeExit waits for the merge Job's pod to end and returns its exit code and log.
	mergeExit := func(name string, timeout time.Duration) (int, string) {
		t.Helper()
		return podExit(t, node, "default", "job-name="+name+"-merge", timeout)
	}

	// The split run, as a user runs it.
	split := time.Now()
	kubectl(t, kubectlBin, kubeconfig, "apply", "-f", render("split", "3m"))
	code, log := mergeExit("split", 5*time.Minute)
	if code != outcome.ExitOK {
		t.Fatalf("merge Job exit %d:\n%s\nworkers:\n%s", code, log, kubectl(t, kubectlBin, kubeconfig, "logs", "-l", "job-name=split-workers", "--tail", "30", "--prefix"))
	}
	kubectl(t, kubectlBin, kubeconfig, "wait", "--for=condition=complete", "--timeout=60s", "job/split-merge", "job/split-workers")
	t.Logf("split run on the node: %.0fs", time.Since(split).Seconds())
	// The claim is bound to one of the node's volumes: the merged run is in its directory.
	volume := strings.TrimSpace(kubectl(t, kubectlBin, kubeconfig, "get", "pvc", "split-results", "-o", "jsonpath={.spec.volumeName}"))
	merged := readSummary(t, filepath.Join(kubenode.VolumeDir(nodeDir, volume), "merged"))
	if merged.Outcome != outcome.OK || merged.Split == nil || merged.Split.Workers != 3 {
		t.Fatalf("merged run: outcome %q, split %+v, reasons %v", merged.Outcome, merged.Split, merged.Reasons)
	}
	for _, c := range merged.Checks {
		if c.Verdict != results.VerdictOK && c.Verdict != results.VerdictNothing {
			t.Errorf("merged check %s: %s", c.Name, c.Verdict)
		}
	}

	// The same scenario split over three local processes, on a fresh one-member cluster as the node's run
	// had (on the node's cluster, now full of its objects, the churn's reads would meet other state): the
	// same plan, the same operations.
	local := filepath.Join(dir, "local")
	if code, out := runBinary(t, "run", "--config", scenario, "--cluster", "embed", "--members", "1", "--workers", "3", "--out", local, "--progress", "none"); code != 0 {
		t.Fatalf("local run --workers 3: exit %d\n%s", code, out)
	}
	compareSplit(t, readSummary(t, local), merged, 0.05)

	// A worker killed mid-run: its share is missing, and the merge fails saying which.
	kubectl(t, kubectlBin, kubeconfig, "apply", "-f", render("killed", "60s"))
	pid := waitWorkerProcess(t, "killed", 1, 3*time.Minute)
	// Mid-run: once the workers have their start time (worker 1's log, as the kubelet keeps it), past the
	// warmup.
	waitLog(t, filepath.Join(nodeDir, "pod-logs", "default_killed-workers-1-*", "worker", "*.log"), "load starts at", 2*time.Minute)
	time.Sleep(6 * time.Second)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill worker 1 (pid %d): %v", pid, err)
	}
	code, log = mergeExit("killed", 4*time.Minute)
	if code != outcome.ExitHarness || !strings.Contains(log, "/results/worker-1") {
		t.Fatalf("merge with worker 1 killed: exit %d, want %d naming /results/worker-1:\n%s", code, outcome.ExitHarness, log)
	}
	if strings.Contains(log, "PASS") {
		t.Errorf("merge with a share missing says PASS:\n%s", log)
	}
	t.Logf("TestLongKubeLocalSplit: %.0fs in all", time.Since(began).Seconds())
}

// waitLog waits for a file matching glob to hold want.
func waitLog(t *testing.T, glob, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			if data, err := os.ReadFile(f); err == nil && bytes.Contains(data, []byte(want)) {
				return
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("no %q in %s within %s", want, glob, timeout)
}

// waitWorkerProcess finds the host process of worker index of the render named name: a chaosbench run
// whose environment has the Job's completion index, once it is running its load.
func waitWorkerProcess(t *testing.T, name string, index int, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err != nil || !bytes.HasPrefix(cmdline, []byte("/chaosbench\x00run\x00")) ||
				!bytes.Contains(cmdline, []byte("http://"+name+"-workers-0."+name+":")) {
				continue
			}
			environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if err == nil && bytes.Contains(append([]byte{0}, environ...), []byte("\x00"+chaosbench.JobIndexEnv+"="+strconv.Itoa(index)+"\x00")) {
				return pid
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("no process of worker %d of %s within %s", index, name, timeout)
	return 0
}

// compareSplit checks that two runs of one scenario sent the same plan: every operation sent often
// enough to count has the same count within tolerance.
func compareSplit(t *testing.T, a, b *results.Summary, tolerance float64) {
	t.Helper()
	compared := 0
	for name, op := range a.Operations {
		if op.Count < 50 || strings.HasPrefix(name, "watch-event/") {
			continue
		}
		got := b.Operations[name]
		if got == nil {
			t.Errorf("%s: %d in the local run, none on the node", name, op.Count)
			continue
		}
		planned := func(o *results.Operation) int64 {
			if strings.HasPrefix(name, "update/") || strings.HasPrefix(name, "delete/") {
				return o.Count - o.Failed
			}
			return o.Count
		}
		if d := float64(planned(got)-planned(op)) / float64(planned(op)); d > tolerance || d < -tolerance {
			t.Errorf("%s: %d operations from the node's pods, %d from local processes (%+.1f%%)", name, planned(got), planned(op), 100*d)
		}
		t.Logf("%s: %d operations from the node's pods, %d from local processes", name, planned(got), planned(op))
		compared++
	}
	if compared < 5 {
		t.Errorf("only %d operations compared", compared)
	}
}

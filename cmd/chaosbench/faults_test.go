package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/outcome"

	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
	"github.com/etcd-chaosbench/chaosbench/faults"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// TestBadFaultSpecs: a fault schedule that cannot run is one clear line, exit code 2, and nothing started.
func TestBadFaultSpecs(t *testing.T) {
	dir := t.TempDir()
	badYAML := filepath.Join(dir, "bad.yaml")
	os.WriteFile(badYAML, []byte("faults:\n  - fault: kill\n    targt: leader\n    at: 5s\n"), 0o644)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown kind", []string{"--faults", "kil:leader@5s"}, "did you mean kill"},
		{"no time", []string{"--faults", "kill:leader"}, "when? add @TIME"},
		{"bad target", []string{"--faults", "pause:boss@5s"}, `target "boss"`},
		{"bad duration", []string{"--faults", "kill:leader@5s+forever"}, `duration "forever"`},
		{"after the load", []string{"--faults", "kill:leader@90s", "--duration", "60s"}, "after the load ends"},
		{"one of several", []string{"--faults", "kill:leader@5s+1s,delay:leader@10s"}, "delay needs a value"},
		{"external cluster", []string{"--cluster", "external", "--endpoints", "http://127.0.0.1:1", "--faults", "kill:leader@5s"}, "needs control of member processes"},
		{"partition of one", []string{"--members", "1", "--faults", "partition:leader@5s"}, "at least 2 members"},
		{"slowfs mode", []string{"--slowfs", "maybe"}, `--slowfs "maybe"`},
		{"structured entry", []string{"--config", badYAML}, `unknown fault field "targt"`},
		{"upgrade without a release", []string{"--faults", "upgrade@5s"}, "needs the release to move to"},
		{"upgrade to an old release", []string{"--faults", "upgrade=v3.3.1@5s"}, "3.4.13 and 3.5 or later"},
		{"upgrade of processes", []string{"--faults", "upgrade=v3.6.16@5s"}, "needs a docker cluster"},
		{"docker clients cut", []string{"--cluster", "docker", "--faults", "partition:leader=clients@5s"}, "client proxies"},
		{"docker replace", []string{"--cluster", "docker", "--faults", "replace@5s"}, "not supported on a docker cluster"},
		{"docker client proxies", []string{"--cluster", "docker", "--client-proxies"}, "--client-proxies is for embedded clusters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(tt.name, " ", "-"))
			args := append([]string{"run", "--out", out}, tt.args...)
			var stdout, stderr bytes.Buffer
			code := execute(args, &stdout, &stderr)
			if code != outcome.ExitUsage {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, outcome.ExitUsage, stderr.String())
			}
			lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Fatalf("stderr %q, want one line containing %q", stderr.String(), tt.want)
			}
			if stdout.Len() != 0 {
				t.Fatalf("something was started or printed: %q", stdout.String())
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatalf("run directory %s was created", out)
			}
			if kids := children(os.Getpid()); len(kids) > 0 {
				t.Fatalf("processes left running: %v", kids)
			}
		})
	}
}

// TestInterruptDuringFaults: Ctrl-C in the middle of every kind of fault heals it, writes partial results
// with the window recorded, and leaves no process, mount, proxy or temporary directory behind.
func TestInterruptDuringFaults(t *testing.T) {
	fuse := slowfs.Available()
	strace := faults.StraceAvailable()
	tests := []struct {
		name  string
		spec  string
		extra []string
		needs error
	}{
		{"kill", "kill:leader", nil, nil},
		{"kill drop-unsynced", "kill:follower=drop-unsynced", nil, fuse},
		{"restart", "restart:follower", nil, nil},
		{"pause", "pause:leader", nil, nil},
		{"partition", "partition:leader", nil, nil},
		{"one-way partition", "partition:minority=in", nil, nil},
		{"refuse peers and clients", "partition:leader=refuse|clients", nil, nil},
		{"delay", "delay:leader=100ms~20ms", nil, nil},
		{"bandwidth", "bandwidth:leader=256KiB", nil, nil},
		{"resets", "reset:leader=300ms", nil, nil},
		{"slow disk", "slowdisk:leader=20ms~5ms|write=1ms", nil, fuse},
		{"slow disk strace", "slowdisk:leader=20ms", []string{"--slowfs", "off"}, strace},
		{"compaction burst", "compact=500ms", nil, nil},
		// Operations: their window is the operation itself, interrupted while it runs.
		{"replace in flight", "replace:follower", nil, nil},
		{"defrag in flight", "defrag:all", nil, nil},
	}
	sem := make(chan struct{}, 3) // three runs at a time: the subtests do not measure timing
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.needs != nil {
				tool := testenv.FUSE
				if tt.needs == strace {
					tool = testenv.Strace
				}
				testenv.Missing(t, tool, "needs %v", tt.needs)
			}
			t.Parallel()
			sem <- struct{}{}
			defer func() { <-sem }()
			if strings.Contains(tt.name, "in flight") {
				interruptDuringFault(t, tt.spec+"@1s", tt.extra)
				return
			}
			interruptDuringFault(t, tt.spec+"@1s+60s", tt.extra)
		})
	}
}

func interruptDuringFault(t *testing.T, spec string, extra []string) {
	root := t.TempDir()
	out := filepath.Join(root, "run")
	tmp := filepath.Join(root, "tmp")
	os.MkdirAll(tmp, 0o755)
	args := append([]string{"run", "--workload", "put", "--duration", "60s", "--rate", "200", "--clients", "16", "--conns", "4",
		"--out", out, "--progress", "none", "--faults", spec}, extra...)
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var output safeBuffer
	marker := "injected at"
	operation := !strings.Contains(spec, "+")
	if operation {
		marker = "injecting at"
	}
	injected := watchOutput(t, cmd, &output, marker)
	select {
	case <-injected:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the fault was not injected within 60s:\n%s", output.String())
	}
	if !operation {
		time.Sleep(500 * time.Millisecond) // in the middle of the fault
	}
	sent := time.Now()
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	took := time.Since(sent)
	if code := cmd.ProcessState.ExitCode(); code != outcome.ExitInterrupted {
		t.Fatalf("exit code %d (%v), want %d:\n%s", code, err, outcome.ExitInterrupted, output.String())
	}
	if took > 15*time.Second {
		t.Errorf("exiting took %v after SIGINT", took)
	}
	// Partial results, with the fault window healed and recorded.
	s, err := results.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	// An operation cut short may have failed or finished; a fault with a duration was healed.
	if !s.Incomplete || len(s.Faults) != 1 || (!operation && s.Faults[0].Outcome != faults.OutcomeInterrupted) {
		t.Fatalf("summary: incomplete %v, faults %+v\n%s", s.Incomplete, s.Faults, output.String())
	}
	windows, err := results.ReadFaults(out)
	if err != nil || len(windows) != 1 || windows[0].EndNs <= windows[0].StartNs {
		t.Fatalf("faults.jsonl: %+v, %v", windows, err)
	}
	if !strings.Contains(output.String(), "healed at") {
		t.Errorf("no heal reported:\n%s", output.String())
	}
	for _, e := range s.Errors {
		if strings.Contains(e, "still") {
			t.Errorf("a fault was healed by the last-resort heal only: %s", e)
		}
	}
	// Nothing left behind: processes (members, slowfs helpers), strace, mounts, proxies, temp dirs.
	if left := processesMentioning(out); len(left) > 0 {
		t.Errorf("processes remain: %v", left)
	}
	for _, pid := range memberPIDs(t, out) {
		if tracers := processesMentioning("-p\x00" + strconv.Itoa(pid) + "\x00"); len(tracers) > 0 {
			t.Errorf("strace still attached to member pid %d: %v", pid, tracers)
		}
	}
	if mounts := mountsUnder(t, out); len(mounts) > 0 {
		t.Errorf("mounts remain: %v", mounts)
	}
	for _, port := range proxyPorts(t, out) {
		if owner := listeningOwner(port); owner != "" && (strings.Contains(owner, out) || strings.Contains(owner, binary)) {
			t.Errorf("proxy port %d still listening (%s)", port, owner)
		}
	}
	if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
		t.Errorf("temporary files left in TMPDIR: %v", entries)
	}
	t.Logf("interrupted %s after %v; window %s -> %s", spec, took, s.Faults[0].Spec, s.Faults[0].Outcome)
}

// safeBuffer is a bytes.Buffer for one writer and concurrent readers.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// watchOutput starts cmd, copies its output to buf, and returns a channel closed when a line containing
// marker appears.
func watchOutput(t *testing.T, cmd *exec.Cmd, buf *safeBuffer, marker string) <-chan struct{} {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	seen := make(chan struct{})
	var once sync.Once
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(buf, sc.Text())
			if strings.Contains(sc.Text(), marker) {
				once.Do(func() { close(seen) })
			}
		}
	}()
	return seen
}

var (
	argvPorts = regexp.MustCompile(`--(?:initial-advertise-peer-urls|advertise-client-urls)=https?://127\.0\.0\.1:(\d+)`)
	pidInLog  = regexp.MustCompile(`\(pid (\d+)\)`)
)

// proxyPorts returns the ports of the proxies the members advertised, from the command lines in their logs.
func proxyPorts(t *testing.T, out string) []int {
	var ports []int
	logs, _ := filepath.Glob(filepath.Join(out, "members", "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		for _, m := range argvPorts.FindAllSubmatch(b, -1) {
			p, _ := strconv.Atoi(string(m[1]))
			ports = append(ports, p)
		}
	}
	if len(ports) == 0 {
		t.Fatal("no proxy ports found in the member logs")
	}
	return ports
}

// memberPIDs returns the pids the member logs mention.
func memberPIDs(t *testing.T, out string) []int {
	var pids []int
	logs, _ := filepath.Glob(filepath.Join(out, "members", "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		for _, m := range pidInLog.FindAllSubmatch(b, -1) {
			p, _ := strconv.Atoi(string(m[1]))
			pids = append(pids, p)
		}
	}
	return pids
}

// listeningOwner returns the command line of the process listening on TCP port, or "".
func listeningOwner(port int) string {
	want := fmt.Sprintf(":%04X", port)
	var inode string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) > 9 && strings.HasSuffix(fields[1], want) && fields[3] == "0A" {
				inode = fields[9]
			}
		}
	}
	if inode == "" {
		return ""
	}
	target := "socket:[" + inode + "]"
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		fds, err := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, _ := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); l == target {
				cmdline, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
				return string(bytes.ReplaceAll(cmdline, []byte{0}, []byte(" ")))
			}
		}
	}
	return "unknown process"
}

// TestRunWithFaults: a run with a schedule records every window, splits results into phases, prints
// both, and exits 0 when the cluster recovered from each fault.
func TestRunWithFaults(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(binary, "run", "--workload", "put", "--duration", "9s", "--rate", "300", "--clients", "16", "--conns", "4",
		"--etcd-flag", "heartbeat-interval=50", "--etcd-flag", "election-timeout=500", "--fault-settle", "1s",
		"--faults", "kill:leader@2s+1s,delay:follower=50ms@5s+1s,defrag@7s", "--out", out, "--progress", "none")
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chaosbench run: %v\n%s", err, output)
	}
	s, err := results.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Faults) != 3 {
		t.Fatalf("faults %+v\n%s", s.Faults, output)
	}
	for _, w := range s.Faults {
		if w.Outcome != faults.OutcomeRecovered || w.Availability == nil {
			t.Fatalf("window %+v\n%s", w, output)
		}
		if w.Members == nil || w.Members.Verdict != results.VerdictOK {
			t.Errorf("members after %s: %+v", w.Spec, w.Members)
		}
	}
	if c := membersCheck(s); c == nil || c.Verdict != results.VerdictOK {
		t.Errorf("members-agree: %+v\n%s", c, output)
	}
	if kill := s.Faults[0].Availability; kill.TimeToLeaderMs == nil || kill.WriteGapMs <= 0 {
		t.Errorf("kill availability %+v", kill)
	}
	for _, phase := range []string{results.PhaseSteady, results.PhaseFault, results.PhaseRecovery} {
		if ph := s.Phases[phase]; ph == nil || ph.Total.Count == 0 || ph.Seconds <= 0 {
			t.Errorf("phase %s: %+v", phase, ph)
		}
	}
	for _, want := range []string{"faults: 3 windows, 3 recovered", "by phase (response time):", "kill:leader@2s+1s"} {
		if !strings.Contains(string(output), want) {
			t.Errorf("output lacks %q:\n%s", want, output)
		}
	}
	if left := processesMentioning(out); len(left) > 0 {
		t.Fatalf("processes remain: %v", left)
	}
}

// TestFaultNotRecoveredExitCode: a cluster that does not recover within the bound is a reported failure
// (exit code 3), not a hang.
func TestFaultNotRecoveredExitCode(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(binary, "run", "--workload", "put", "--duration", "5s", "--rate", "100", "--clients", "8", "--conns", "2",
		"--faults", "kill:leader@1s+1s", "--fault-recovery-timeout", "1ms", "--out", out, "--progress", "none")
	start := time.Now()
	output, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != outcome.ExitThresholds {
		t.Fatalf("exit code %d, want %d\n%s", code, outcome.ExitThresholds, output)
	}
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("took %v", took)
	}
	s, err := results.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Faults) != 1 || !strings.HasPrefix(s.Faults[0].Outcome, faults.OutcomeNotRecovered) || s.Outcome != outcome.ThresholdFailed ||
		len(s.Reasons) == 0 || !strings.Contains(s.Reasons[0].Text, "not recovered within 1ms") {
		t.Fatalf("faults %+v outcome %s reasons %v", s.Faults, s.Outcome, s.Reasons)
	}
	if !strings.Contains(string(output), "not recovered within 1ms") {
		t.Errorf("the failure is not reported:\n%s", output)
	}
}

// TestKill9LeavesNoMount: SIGKILL of chaosbench takes its members with it, and the slowfs helpers
// unmount the data directories on their way out.
func TestKill9LeavesNoMount(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	if err := slowfs.Available(); err != nil {
		testenv.Missing(t, testenv.FUSE, "needs FUSE: %v", err)
	}
	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(binary, "run", "--workload", "put", "--duration", "60s", "--rate", "100", "--slowfs", "on", "--faults", "none",
		"--out", out, "--progress", "none")
	var output safeBuffer
	ready := watchOutput(t, cmd, &output, "cluster ready")
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		t.Fatalf("the cluster did not start:\n%s", output.String())
	}
	if mounts := mountsUnder(t, out); len(mounts) != 3 {
		t.Fatalf("mounts %v, want the 3 data directories", mounts)
	}
	cmd.Process.Kill()
	cmd.Wait()
	waitUntil(t, 15*time.Second, func() bool {
		return len(mountsUnder(t, out)) == 0 && len(processesMentioning(out)) == 0
	})
}

// mountsUnder is slowfs.MountsUnder, failing the test when the mount table cannot be read.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	mounts, err := slowfs.MountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	return mounts
}

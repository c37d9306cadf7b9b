package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/outcome"

	"github.com/etcd-chaosbench/chaosbench/results"
)

var fixtureDir = flag.String("fixture", "", "copy the files of TestReportSlowDiskAndPausedLeader's run into this directory (to refresh report/testdata)")

// Bad thresholds and report arguments get one clear line, exit code 2, and start nothing.
func TestBadReportInput(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "thresholds.yaml")
	os.WriteFile(cfg, []byte("workload: put\nthreshold:\n  - put:p99<25ms\n  - put:p99<<25ms\n"), 0o644)
	notRun := filepath.Join(dir, "empty")
	os.MkdirAll(notRun, 0o755)
	aRun := filepath.Join(dir, "a-run")
	os.MkdirAll(aRun, 0o755)
	os.WriteFile(filepath.Join(aRun, results.SummaryFile), []byte(`{"name":"put","operations":{}}`), 0o644)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"threshold without unit", []string{"run", "--threshold", "put:p99<25"}, `"25" needs a unit`},
		{"threshold unknown set", []string{"run", "--threshold", "k8s-sloo"}, "did you mean k8s-slo"},
		{"threshold bad statistic", []string{"run", "--threshold", "put:p98<25ms"}, "unknown statistic"},
		{"threshold bad comparison", []string{"run", "--threshold", "errors~1%"}, "no comparison"},
		{"threshold in scenario file", []string{"run", "--config", cfg}, `"put:p99<<25ms": "<25ms" is not a duration`},
		{"scrape interval", []string{"run", "--scrape-interval", "10ms"}, "--scrape-interval 10ms"},
		{"report without directory", []string{"report"}, "requires at least 1 arg"},
		{"report of a non-run", []string{"report", notRun}, "not a run directory"},
		{"report bad threshold", []string{"report", aRun, "--threshold", "put:p99<"}, "no value after <"},
		{"report out of one run", []string{"report", aRun, "--out", dir}, "--out is for comparisons"},
		{"report thresholds of a comparison", []string{"report", aRun, aRun, "--threshold", "put:p99<1s"}, "judges a single run"},
		{"report labels", []string{"report", notRun, notRun, "--label", "a"}, "1 labels for 2 run directories"},
		{"report redact without bundle", []string{"report", aRun, "--redact"}, "--redact applies to --bundle"},
		{"report gate of one run", []string{"report", aRun, "--fail-on-regression"}, "gates a comparison"},
		{"report min effect", []string{"report", aRun, aRun, "--min-effect", "150"}, "--min-effect 150%: from 0 to under 100"},
		{"report gate spec", []string{"report", aRun, aRun, "--fail-on-regression=put:"}, "give figures as op:stat"},
		{"compare gate figures without =", []string{"compare", "--fail-on-regression", "put:p99"}, "write the figures with ="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(tt.name, " ", "-"))
			args := tt.args
			if args[0] == "run" {
				args = append(append([]string{}, args...), "--out", out)
			}
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

// memberProc is a member process of a running chaosbench, found from its command line.
type memberProc struct {
	name, metricsURL string
	pid              int
}

func membersOf(t *testing.T, pid int) []memberProc {
	t.Helper()
	var out []memberProc
	for _, kid := range children(pid) {
		cmdline, err := os.ReadFile(filepath.Join("/proc", kid, "cmdline"))
		if err != nil {
			continue
		}
		m := memberProc{}
		fmt.Sscan(kid, &m.pid)
		for _, arg := range strings.Split(string(cmdline), "\x00") {
			if v, ok := strings.CutPrefix(arg, "--name="); ok {
				m.name = v
			}
			if v, ok := strings.CutPrefix(arg, "--listen-metrics-urls="); ok {
				m.metricsURL = v
			}
		}
		if m.name != "" {
			out = append(out, m)
		}
	}
	return out
}

func isLeader(m memberProc) bool {
	resp, err := http.Get(m.metricsURL + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return bytes.Contains(b, []byte("\netcd_server_is_leader 1\n"))
}

// TestReportSlowDiskAndPausedLeader runs chaosbench as a user would, slows one member's disk for real
// (strace delays its fdatasync calls by 40 ms) and pauses the leader, then checks that the report says
// why: the diagnosis names the disk and the member, the etcd-hardware threshold fails (exit 3), the
// availability table shows both faults, and junit.xml carries the failure.
func TestReportSlowDiskAndPausedLeader(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		testenv.Missing(t, testenv.Strace, "strace is not installed: it is what slows a member's disk in this test (apt-get install strace)")
	}
	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(binary, "run", "--workload", "put", "--rate", "150", "--duration", "14s", "--members", "3",
		"--etcd-flag", "heartbeat-interval=50", "--etcd-flag", "election-timeout=500",
		"--threshold", "etcd-hardware", "--threshold", "availability_gap:max<10s",
		"--out", out, "--progress", "lines")
	var stderr bytes.Buffer
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = &stderr
	var log strings.Builder
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	ready := make(chan struct{})
	var mu sync.Mutex
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if strings.HasPrefix(sc.Text(), "cluster ready") {
				once.Do(func() { close(ready) })
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		t.Fatalf("the cluster did not come up:\n%s", log.String())
	}
	var members []memberProc
	waitUntil(t, 10*time.Second, func() bool { members = membersOf(t, cmd.Process.Pid); return len(members) == 3 })
	var leader, slow memberProc
	waitUntil(t, 10*time.Second, func() bool {
		for _, m := range members {
			if isLeader(m) {
				leader = m
				return true
			}
		}
		return false
	})
	for _, m := range members {
		if m.name != leader.name {
			slow = m
			break
		}
	}

	type window struct {
		fault, target string
		start, end    time.Time
	}
	var windows []window

	// Slow the follower's disk for 5 s: every fdatasync waits 40 ms before it runs.
	time.Sleep(2 * time.Second)
	st := exec.Command(strace, "-f", "-qq", "-p", fmt.Sprint(slow.pid), "-e", "trace=fdatasync", "-e", "inject=fdatasync:delay_enter=40000", "-o", "/dev/null")
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	w := window{fault: "slowdisk", target: slow.name, start: time.Now()}
	time.Sleep(5 * time.Second)
	st.Process.Signal(syscall.SIGINT) // detaches and leaves the member running
	st.Wait()
	w.end = time.Now()
	windows = append(windows, w)

	// Pause the leader for 2 s: the others elect a new one.
	time.Sleep(500 * time.Millisecond)
	w = window{fault: "pause", target: leader.name, start: time.Now()}
	syscall.Kill(leader.pid, syscall.SIGSTOP)
	time.Sleep(2 * time.Second)
	syscall.Kill(leader.pid, syscall.SIGCONT)
	w.end = time.Now()
	windows = append(windows, w)

	err = cmd.Wait()
	<-readDone
	if code := cmd.ProcessState.ExitCode(); code != outcome.ExitThresholds {
		t.Fatalf("exit code %d (%v), want %d (the fsync threshold fails)\n%s", code, err, outcome.ExitThresholds, log.String())
	}
	if !strings.Contains(log.String(), "FAIL wal_fsync:p99<10ms") {
		t.Errorf("the run did not print the failed threshold:\n%s", log.String())
	}

	// Record the fault windows as the faults package would, then re-render.
	s, err := results.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	var faults bytes.Buffer
	for _, w := range windows {
		b, _ := json.Marshal(results.FaultWindow{
			Fault: w.fault, Targets: []string{w.target}, Start: w.start, End: w.end,
			StartNs: w.start.Sub(s.TimeBase).Nanoseconds(), EndNs: w.end.Sub(s.TimeBase).Nanoseconds(), Outcome: "recovered",
		})
		faults.Write(append(b, '\n'))
	}
	if err := os.WriteFile(filepath.Join(out, results.FaultsFile), faults.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var rout, rerr bytes.Buffer
	if code := execute([]string{"report", out}, &rout, &rerr); code != outcome.ExitThresholds {
		t.Fatalf("report exit code %d, want %d: %s", code, outcome.ExitThresholds, rerr.String())
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	report := string(md)
	for _, want := range []string{
		"**FAIL**",
		"WAL fsync p99",
		fmt.Sprintf("on %s > 10.0ms (etcd's hardware guidance): the disk", slow.name),
		"slowdisk " + slow.name, // the slow seconds are attributed to the fault window
		"pause " + leader.name,  // the availability table
		"| `wal_fsync:p99<10ms` | etcd-hardware |",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report.md lacks %q:\n%s", want, report)
		}
	}
	if !strings.Contains(report, "the leader changed") {
		t.Errorf("the diagnosis does not mention the election after pausing the leader:\n%s", report)
	}
	junit, _ := os.ReadFile(filepath.Join(out, "junit.xml"))
	if !bytes.Contains(junit, []byte(`name="etcd-hardware: wal_fsync:p99&lt;10ms"`)) || !bytes.Contains(junit, []byte("<failure")) {
		t.Errorf("junit.xml lacks the failed threshold:\n%s", junit)
	}
	// The run compared with itself: no operation is better or worse. Its own failed etcd-hardware thresholds
	// are part of the comparison's outcome (one judge): exit 3, not a pass.
	cmp := filepath.Join(t.TempDir(), "compare")
	rout.Reset()
	if code := execute([]string{"report", out, out, "--label", "a,b", "--out", cmp}, &rout, &rerr); code != outcome.ExitThresholds {
		t.Fatalf("comparison exit code %d: %s", code, rerr.String())
	}
	if strings.Contains(rout.String(), "| worse |") || strings.Contains(rout.String(), "| better |") || !strings.Contains(rout.String(), "| put:p99 |") {
		t.Errorf("comparison of a run with itself:\n%s", rout.String())
	}
	for _, f := range []string{"comparison.md", "comparison.html"} {
		if _, err := os.Stat(filepath.Join(cmp, f)); err != nil {
			t.Error(err)
		}
	}
	if *fixtureDir != "" {
		os.MkdirAll(*fixtureDir, 0o755)
		for _, f := range []string{"summary.json", "timeseries.jsonl", "latency.hlog", "faults.jsonl", "server_metrics.jsonl", "history.bin"} {
			b, err := os.ReadFile(filepath.Join(out, f))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(*fixtureDir, f), b, 0o644)
		}
	}
	if dir := os.Getenv("CHAOSBENCH_ARTIFACTS"); dir != "" {
		os.CopyFS(filepath.Join(dir, t.Name()), os.DirFS(out))
	}
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// TestOneOutcome drives each way a run can fail through a real run, and asserts that everything a user or a
// CI system reads says the same: the exit code, the headline of report.html and report.md, JUnit's outcome
// case and counts, summary.json's outcome and reasons, and the last lines the run printed. The cases run
// two at a time (t.Parallel): each has its own cluster, results directory and processes, none judges
// latency, and each run at 150 requests/s leaves most of a 2-core machine idle.
func TestOneOutcome(t *testing.T) {
	load := []string{"--workload", "put", "--rate", "150", "--clients", "8", "--conns", "2", "--progress", "none"}
	for _, tc := range []struct {
		name string
		args []string
		// setup prepares what the run needs and returns more arguments (nil: nothing).
		setup func(t *testing.T) []string
		// during acts on the running process once the load has begun (nil: nothing).
		during func(t *testing.T, cmd *exec.Cmd, out string)
		kind   outcome.Kind
		// reason is a piece of the reason that must be named; also, of another reason that must be listed
		// below it (what the outcome outranked).
		reason, also string
	}{
		{name: "ok", args: []string{"--duration", "3s", "--faults", "none"}, kind: outcome.OK},
		{
			name: "threshold failed",
			args: []string{"--duration", "3s", "--faults", "none", "--threshold", "put:p50<1us"},
			kind: outcome.ThresholdFailed, reason: "threshold put:p50<1us failed",
		},
		{
			// A check given no time cannot decide: never a pass.
			name: "undecided check",
			args: []string{"--workload", "range", "--key-space-size", "3", "--duration", "3s", "--faults", "none", "--check-timeout", "1ns"},
			kind: outcome.Undecided, reason: "linearizability could not decide",
		},
		{
			// The second fault (and its health check, a second before it) falls while the first has paused a
			// member: the cluster is not healthy, so it is skipped, and the run did not do what it was asked.
			name: "skipped fault",
			args: []string{"--duration", "6s", "--faults", "pause:m1@1s+4s,kill:m2@3s+1s", "--fault-health-timeout", "300ms"},
			kind: outcome.HarnessError, reason: "fault kill:m2@3s+1s: skipped",
		},
		{
			name: "skipped fault allowed",
			args: []string{"--duration", "6s", "--faults", "pause:m1@1s+4s,kill:m2@3s+1s", "--fault-health-timeout", "300ms", "--fault-skip-ok"},
			kind: outcome.OK,
		},
		{
			// One member holds different data (its bbolt file was changed while it was stopped), and the load
			// fails: the database is too small for the keys the range workload preloads. The load error is a
			// harness error, but the violation outranks it: exit 4.
			name: "violation after a load error",
			args: []string{"--workload", "range", "--key-space-size", "5000", "--val-size", "10000", "--duration", "3s", "--faults", "none"},
			setup: func(t *testing.T) []string {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				t.Cleanup(cancel)
				c, _ := startDivergedCluster(ctx, t, "quota-backend-bytes=33554432")
				return []string{"--cluster", "external", "--endpoints", strings.Join(c.Endpoints(), ",")}
			},
			kind: outcome.Violation, reason: "members-agree", also: "the load stopped early: set up workload range: preload keys: etcdserver: mvcc: database space exceeded",
		},
		{
			// A nemesis of network faults on one member has nothing it can inject: the run tested no fault.
			name: "nemesis with nothing to inject",
			args: []string{"--duration", "3s", "--members", "1", "--faults", "nemesis=partition|delay@1s+1s"},
			kind: outcome.HarnessError, reason: "nothing injected: no fault of the nemesis is available",
		},
		{
			// A member that dies by itself (here: SIGKILL from outside chaosbench's schedule) fails the run.
			name: "member crash",
			args: []string{"--duration", "5s", "--faults", "none"},
			during: func(t *testing.T, cmd *exec.Cmd, out string) {
				pid := memberPID(t, out, "m2", cmd.Process.Pid)
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatalf("kill member m2 (pid %d): %v", pid, err)
				}
			},
			kind: outcome.MemberCrashed, reason: "member m2",
		},
		{
			name: "interrupt",
			args: []string{"--duration", "60s", "--faults", "none"},
			during: func(t *testing.T, cmd *exec.Cmd, _ string) {
				cmd.Process.Signal(os.Interrupt)
			},
			kind: outcome.Incomplete, reason: "interrupted by signal",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "run")
			args := append(append([]string{"run", "--out", out}, load...), tc.args...)
			if tc.setup != nil {
				args = append(args, tc.setup(t)...)
			}
			code, printed := runWhile(t, args, tc.during, out)
			assertOneOutcome(t, out, code, printed, tc.kind, tc.reason)
			if tc.also != "" {
				s, _ := results.ReadSummary(out)
				if texts := s.Verdict().Texts(); len(texts) < 2 || !strings.Contains(strings.Join(texts[1:], "\n"), tc.also) {
					t.Fatalf("no lesser reason names %q: %v", tc.also, s.Reasons)
				}
			}
			if left := processesMentioning(out); len(left) > 0 {
				t.Fatalf("processes remain after the run: %v", left)
			}
		})
	}
}

// runWhile runs chaosbench with args, calls during (if any) once the load is running (1.5 s after the
// cluster is ready), and returns the exit
// code and everything the run printed.
func runWhile(t *testing.T, args []string, during func(*testing.T, *exec.Cmd, string), out string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	var mu sync.Mutex
	var printed strings.Builder
	loadRunning := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var once sync.Once
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			printed.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if strings.HasPrefix(sc.Text(), "cluster ready:") {
				once.Do(func() { close(loadRunning) })
			}
		}
	}()
	if during != nil {
		select {
		case <-loadRunning:
			time.Sleep(1500 * time.Millisecond) // into the load
			during(t, cmd, out)
		case <-done:
			t.Fatalf("the run ended before its load began:\n%s", printed.String())
		case <-time.After(90 * time.Second):
			t.Fatalf("the load did not begin within 90s")
		}
	}
	<-done
	cmd.Wait()
	return cmd.ProcessState.ExitCode(), printed.String() + stderr.String()
}

// memberPID returns the pid of the member process named name of the run writing into out.
func memberPID(t *testing.T, out, name string, not int) int {
	t.Helper()
	for _, p := range processesMentioning(filepath.Join(out, "members", name+".etcd")) {
		var pid int
		fmt.Sscan(p, &pid)
		if pid != not && pid > 0 {
			return pid
		}
	}
	t.Fatalf("no process of member %s", name)
	return 0
}

// assertOneOutcome checks that every output of the run in dir says outcome kind, with code as its exit code.
func assertOneOutcome(t *testing.T, dir string, code int, printed string, kind outcome.Kind, reason string) {
	t.Helper()
	want := outcome.Outcome{Kind: kind}
	s, err := results.ReadSummary(dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, printed)
	}
	got := s.Verdict()
	if s.Outcome != kind || code != want.ExitCode() {
		t.Fatalf("summary.json outcome %q, exit code %d; want %q and %d\nreasons: %v\n%s", s.Outcome, code, kind, want.ExitCode(), got.Reasons, printed)
	}
	if (kind == outcome.OK) != (len(s.Reasons) == 0) {
		t.Fatalf("outcome %s with reasons %v", kind, s.Reasons)
	}
	if reason != "" && !strings.Contains(strings.Join(got.Texts(), "\n"), reason) {
		t.Fatalf("no reason names %q: %v", reason, got.Reasons)
	}
	headline := want.Headline()
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(html, []byte(fmt.Sprintf(`<span class="badge %s">%s</span>`, want.Class(), headline))) {
		t.Errorf("report.html does not head with %s", headline)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(md, []byte(fmt.Sprintf("**%s** — ", headline))) || !bytes.Contains(md, []byte(fmt.Sprintf("outcome: %s (exit code %d)", kind, code))) {
		t.Errorf("report.md does not head with %s (%s, exit code %d):\n%.600s", headline, kind, code, md)
	}
	if !strings.Contains(printed, fmt.Sprintf("verdict: %s (%s, exit code %d)", headline, kind, code)) {
		t.Errorf("the run did not print its verdict %s:\n%s", headline, printed)
	}
	// JUnit: the outcome case fails or errs exactly when the run did not pass, and the suite's counts agree.
	b, err := os.ReadFile(filepath.Join(dir, "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Suites   []struct {
			Properties []struct {
				Name  string `xml:"name,attr"`
				Value string `xml:"value,attr"`
			} `xml:"properties>property"`
			Cases []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
				Error   *struct{} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil || len(doc.Suites) != 1 {
		t.Fatalf("junit.xml: %v", err)
	}
	suite := doc.Suites[0]
	prop := ""
	for _, p := range suite.Properties {
		if p.Name == "outcome" {
			prop = p.Value
		}
	}
	if prop != string(kind) || len(suite.Cases) == 0 || suite.Cases[0].Name != "outcome" {
		t.Fatalf("junit.xml: outcome property %q, first case %+v", prop, suite.Cases)
	}
	failed := suite.Cases[0].Failure != nil || suite.Cases[0].Error != nil
	if failed == (kind == outcome.OK) || (doc.Failures+doc.Errors > 0) == (kind == outcome.OK) {
		t.Fatalf("junit.xml: outcome case failed %v, %d failures and %d errors, for outcome %s", failed, doc.Failures, doc.Errors, kind)
	}
}

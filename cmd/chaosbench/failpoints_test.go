package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/faults"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// failpointRun runs chaosbench against a 3-member embedded cluster of etcd v3.6.16 built with failpoints
// (built from the module proxy on first use, then cached) and returns its output, exit code and summary.
func failpointRun(t *testing.T, duration string, specs ...string) (string, int, *results.Summary, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"run", "--out", out, "--members", "3", "--workload", "put", "--rate", "200", "--clients", "16",
		"--conns", "4", "--duration", duration, "--etcd-version", "v3.6.16", "--failpoints", "--progress", "none"}
	for _, s := range specs {
		args = append(args, "--faults", s)
	}
	b, err := exec.Command(binary, args...).CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("chaosbench: %v\n%s", err, b)
		}
		code = ee.ExitCode()
	}
	s, err := results.ReadSummary(out)
	if err != nil {
		t.Fatalf("summary: %v\n%s", err, b)
	}
	if left := processesMentioning(out); len(left) > 0 {
		t.Errorf("processes remain: %v", left)
	}
	return string(b), code, s, out
}

// TestFailpointPanicBetweenWALAndCommit: a panic after the WAL save and before the entry reaches the
// backend, three times under load on a 3-member cluster (a random member each time). Every time the
// member dies at that point (its log shows gofail's panic), is started again on its own data (etcd says
// it restarts the local member from its WAL), the cluster recovers, the history checks clean and the
// members' data agree after every window.
func TestFailpointPanicBetweenWALAndCommit(t *testing.T) {
	output, code, s, out := failpointRun(t, "17s", "failpoint:random=raftAfterSave:panic@2s+2s/5s")
	if code != 0 || s.Outcome != outcome.OK {
		t.Fatalf("exit %d, outcome %s %v:\n%s", code, s.Outcome, s.Reasons, output)
	}
	if len(s.Faults) != 3 {
		t.Fatalf("%d fault windows, want 3:\n%s", len(s.Faults), output)
	}
	for _, w := range s.Faults {
		if w.Outcome != faults.OutcomeRecovered {
			t.Errorf("window %s: %s", w.Spec, w.Outcome)
		}
	}
	if n := strings.Count(output, "panicked at raftAfterSave"); n != 3 {
		t.Errorf("%d panics reported, want 3:\n%s", n, output)
	}
	panics, restarts := 0, 0
	for _, m := range []string{"m1", "m2", "m3"} {
		log, err := os.ReadFile(filepath.Join(out, "members", m+".log"))
		if err != nil {
			t.Fatal(err)
		}
		p := strings.Count(string(log), "panic: failpoint panic")
		panics += p
		// Each start after a panic is on the member's data: etcd restarts the local member from its WAL.
		if r := strings.Count(string(log), "restarting local member"); r < p {
			t.Errorf("%s panicked %d times but restarted on its data %d times", m, p, r)
		} else {
			restarts += r
		}
	}
	if panics != 3 {
		t.Errorf("the members' logs show %d failpoint panics, want 3", panics)
	}
	requireChecks(t, s.Checks, map[string]string{"linearizability": results.VerdictOK, "members-agree": results.VerdictOK,
		"watch": results.VerdictNothing, "serializable-reads": results.VerdictNothing})
	t.Logf("3 panics at raftAfterSave, %d restarts on existing data, checks clean", restarts)
}

// TestFailpointSleepAndCount: sleep(D) stalls a follower's backend commits for the window; 1*sleep(D)
// stalls the leader's WAL save exactly once. Each is reported with how often it was reached, the cluster
// recovers, and the history checks clean.
func TestFailpointSleepAndCount(t *testing.T) {
	output, code, s, _ := failpointRun(t, "11s", "failpoint:follower=beforeCommit:sleep(200ms)@2s+3s",
		"failpoint:leader=raftBeforeSave:1*sleep(300ms)@6s+2s")
	if code != 0 || s.Outcome != outcome.OK {
		t.Fatalf("exit %d, outcome %s %v:\n%s", code, s.Outcome, s.Reasons, output)
	}
	m := regexp.MustCompile(`reached beforeCommit (\d+) times`).FindStringSubmatch(output)
	if m == nil {
		t.Fatalf("no report of the sleeping failpoint:\n%s", output)
	}
	if n, _ := strconv.Atoi(m[1]); n < 2 {
		t.Errorf("beforeCommit reached %d times in 3 s of 200 puts/s, want several", n)
	}
	if !strings.Contains(output, "reached raftBeforeSave 1 times") {
		t.Errorf("the count-limited failpoint should fire exactly once:\n%s", output)
	}
	requireChecks(t, s.Checks, map[string]string{"linearizability": results.VerdictOK, "members-agree": results.VerdictOK,
		"watch": results.VerdictNothing, "serializable-reads": results.VerdictNothing})
}

// TestFailpointNeverReached: a failpoint armed where the run never goes (defragmentation, which nothing
// runs) did not happen: the run says so and does not pass.
func TestFailpointNeverReached(t *testing.T) {
	output, code, s, _ := failpointRun(t, "6s", "failpoint:leader=defragBeforeCopy:panic@2s+2s")
	if code != outcome.ExitHarness || s.Outcome != outcome.HarnessError {
		t.Fatalf("exit %d, outcome %s, want %d and %s:\n%s", code, s.Outcome, outcome.ExitHarness, outcome.HarnessError, output)
	}
	if !strings.Contains(output, "never reached during the window") {
		t.Errorf("the output does not say the failpoint was never reached:\n%s", output)
	}
}

// TestFailpointBadInput: failpoints where they cannot be: one line, exit 2, nothing started.
func TestFailpointBadInput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown name", []string{"--etcd-version", "v3.6.16", "--failpoints", "--faults", "failpoint:leader=raftBeforeSav:panic@2s"},
			`no failpoint "raftBeforeSav" (did you mean raftBeforeSave?); it has afterCommit,`},
		{"builtin etcd", []string{"--failpoints", "--faults", "failpoint:leader=raftBeforeSave:panic@2s"}, "the builtin etcd has no failpoints"},
		{"no failpoint build", []string{"--faults", "failpoint:leader=raftBeforeSave:panic@2s"}, "needs members built with failpoints"},
		{"external cluster", []string{"--cluster", "external", "--endpoints", "127.0.0.1:1", "--failpoints"}, "failpoint builds run on clusters chaosbench starts"},
		{"docker builtin", []string{"--cluster", "docker", "--failpoints"}, "the builtin etcd has no failpoints"},
		{"bad action", []string{"--etcd-version", "v3.6.16", "--failpoints", "--faults", "failpoint:leader=raftBeforeSave:explode@2s"}, `failpoint action "explode"`},
		{"bad sleep", []string{"--etcd-version", "v3.6.16", "--failpoints", "--faults", "failpoint:leader=raftBeforeSave:sleep(soon)@2s"}, "failpoint sleep(soon)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			var stdout, stderr bytes.Buffer
			code := execute(append([]string{"run", "--out", out}, tt.args...), &stdout, &stderr)
			if code != outcome.ExitUsage {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, outcome.ExitUsage, stderr.String())
			}
			// A build of the release may say so on stdout; nothing else may.
			for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
				if line != "" && !strings.HasPrefix(line, "build") {
					t.Errorf("something was started or printed: %q", line)
				}
			}
			lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Fatalf("stderr %q, want one line containing %q", stderr.String(), tt.want)
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

// TestPartitionUntilSnapshot: a follower cut off until the leader has compacted its raft log past it
// (snapshot-count and snapshot-catchup-entries make that quick) is healed, the leader sends it a snapshot
// (etcd's snapshot metrics, and both members' logs say so), and the history checks clean.
func TestPartitionUntilSnapshot(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	b, err := exec.Command(binary, "run", "--out", out, "--members", "3", "--workload", "put", "--rate", "300",
		"--request-timeout", "1s", "--duration", "20s", "--etcd-flag", "snapshot-count=500", "--etcd-flag", "snapshot-catchup-entries=200",
		"--faults", "partition:follower=until-snapshot@3s+14s", "--progress", "none").CombinedOutput()
	output := string(b)
	if err != nil {
		t.Fatalf("chaosbench: %v\n%s", err, output)
	}
	s, err := results.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if s.Outcome != outcome.OK || len(s.Faults) != 1 || len(s.Faults[0].Targets) != 1 {
		t.Fatalf("outcome %s %v, faults %+v:\n%s", s.Outcome, s.Reasons, s.Faults, output)
	}
	if !regexp.MustCompile(`leader m\d compacted its log past index \d+`).MatchString(output) ||
		!regexp.MustCompile(`leader m\d sent [1-9]\d* snapshot\(s\) after the heal`).MatchString(output) {
		t.Fatalf("no compaction past the follower or no snapshot sent:\n%s", output)
	}
	target := s.Faults[0].Targets[0]
	log, err := os.ReadFile(filepath.Join(out, "members", target+".log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "applied incoming Raft snapshot") {
		t.Errorf("%s's log does not show the snapshot applied", target)
	}
	requireChecks(t, s.Checks, map[string]string{"linearizability": results.VerdictOK, "members-agree": results.VerdictOK,
		"watch": results.VerdictNothing, "serializable-reads": results.VerdictNothing})
}

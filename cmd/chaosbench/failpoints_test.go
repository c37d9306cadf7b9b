package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters/etcdbuild"
	"github.com/etcd-chaosbench/chaosbench/faults"
	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// needFailpointBuild builds etcd v3.6.16 with failpoints once (later calls find it in the cache) and
// skips the test only when the Go module proxy cannot serve it; a build that fails otherwise fails.
func needFailpointBuild(t *testing.T) {
	t.Helper()
	r, err := etcdbuild.Parse("v3.6.16")
	if err != nil {
		t.Fatal(err)
	}
	r.Failpoints = true
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if _, err := etcdbuild.Build(ctx, r, etcdbuild.Options{}); err != nil {
		if outcome.IsUsage(err) || proxyUnreachable.MatchString(err.Error()) {
			testenv.Missing(t, testenv.Failpoints, "skipping: the Go module proxy cannot serve etcd v3.6.16 and gofail v0.2.0 for a failpoint build: %v", err)
		}
		t.Fatalf("failpoint build of etcd v3.6.16: %v", err)
	}
}

// proxyUnreachable matches the go command's errors when it cannot reach the module proxy at all.
var proxyUnreachable = regexp.MustCompile(`dial tcp|no such host|connection refused|i/o timeout|proxyconnect|TLS handshake timeout`)

// failpointRun runs chaosbench against a 3-member embedded cluster of etcd v3.6.16 built with failpoints
// (built from the module proxy on first use, then cached) and returns its output, exit code and summary.
// extra holds more flags, then the fault specs.
func failpointRun(t *testing.T, duration string, extra ...string) (string, int, *results.Summary, string) {
	t.Helper()
	needFailpointBuild(t)
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"run", "--out", out, "--members", "3", "--workload", "put", "--rate", "200", "--clients", "16",
		"--conns", "4", "--duration", duration, "--etcd-version", "v3.6.16", "--failpoints", "--progress", "none"}
	for _, s := range extra {
		if strings.HasPrefix(s, "--") {
			args = append(args, strings.Fields(s)...)
			continue
		}
		args = append(args, "--faults", s)
	}
	start := time.Now()
	b, err := exec.Command(binary, args...).CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("chaosbench: %v\n%s", err, b)
		}
		code = ee.ExitCode()
	}
	t.Logf("chaosbench run took %.1f s", time.Since(start).Seconds())
	s, err := results.ReadSummary(out)
	if err != nil {
		t.Fatalf("summary: %v\n%s", err, b)
	}
	if left := processesMentioning(out); len(left) > 0 {
		t.Errorf("processes remain: %v", left)
	}
	return string(b), code, s, out
}

// requireFired checks that a failpoint window recorded what its failpoint did: its effect, with the
// total of its gofail counts (panics count one each) within [lo, hi], and returns that total.
func requireFired(t *testing.T, w results.FaultWindow, lo, hi int) int {
	t.Helper()
	if w.Effect == nil {
		t.Errorf("window %s recorded no effect", w.Spec)
		return 0
	}
	n := 0
	for _, h := range w.Effect.Hits {
		n += h
	}
	if n < lo || n > hi {
		t.Errorf("window %s: the failpoint fired %d times (%s), want %d to %d", w.Spec, n, w.Effect.Detail, lo, hi)
	}
	return n
}

// TestFailpointPanicBetweenWALAndCommit: the panic action. A panic after the WAL save and before the
// entry reaches the backend, three times under load on a 3-member cluster (a random member each time).
// Every time the member dies at that point (its log shows gofail's panic, its window records it), is
// started again on its own data (etcd says it restarts the local member from its WAL), the cluster
// recovers, the history checks clean and the members' data agree after every window.
func TestFailpointPanicBetweenWALAndCommit(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	output, code, s, out := failpointRun(t, "17s", "failpoint:random=raftAfterSave:panic@2s+2s/5s")
	if code != 0 || s.Outcome != outcome.OK {
		t.Fatalf("exit %d, outcome %s %v:\n%s", code, s.Outcome, s.Reasons, output)
	}
	if got := strings.Join(s.Cluster.EtcdVersions, ","); got != "v3.6.16 (failpoints),v3.6.16 (failpoints),v3.6.16 (failpoints)" {
		t.Errorf("summary's etcd_versions %q: the members' failpoint builds should show", got)
	}
	if len(s.Faults) != 3 {
		t.Fatalf("%d fault windows, want 3:\n%s", len(s.Faults), output)
	}
	for _, w := range s.Faults {
		if w.Outcome != faults.OutcomeRecovered {
			t.Errorf("window %s: %s", w.Spec, w.Outcome)
		}
		if w.Effect == nil || !slices.Equal(w.Effect.Panicked, w.Targets) {
			t.Errorf("window %s on %v: effect %+v, want its target panicked", w.Spec, w.Targets, w.Effect)
		}
		if w.Members == nil || w.Members.Verdict != results.VerdictOK {
			t.Errorf("window %s: members-agree after recovery %+v", w.Spec, w.Members)
		}
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

// TestFailpointSleep: the sleep action, at each kind of code point the issue names besides the WAL save:
// the backend commit, an entry's apply, the watch response send, defragmentation and compaction (the
// last two reached by a defrag and a compaction scheduled inside their windows). Every window records that
// its failpoint fired, the cluster recovers, and the history (watch events included) checks clean.
func TestFailpointSleep(t *testing.T) {
	output, code, s, _ := failpointRun(t, "15s", "--workload watch-latency --watch-streams 2 --watchers-per-stream 2",
		"failpoint:follower=beforeCommit:sleep(200ms)@2s+2s",
		"failpoint:all=beforeSendWatchResponse:sleep(20ms)@2s+2s",
		"failpoint:follower=beforeApplyOneEntryNormal:sleep(5ms)@5s+2s",
		"failpoint:all=defragBeforeCopy:sleep(300ms)@8s+3s", "defrag:all@8500ms",
		"failpoint:all=compactBeforeSetFinishedCompact:sleep(300ms)@11s+2s", "compact@11500ms")
	if code != 0 || s.Outcome != outcome.OK {
		t.Fatalf("exit %d, outcome %s %v:\n%s", code, s.Outcome, s.Reasons, output)
	}
	fired := map[string]int{}
	for _, w := range s.Faults {
		if w.Outcome != faults.OutcomeRecovered {
			t.Errorf("window %s: %s", w.Spec, w.Outcome)
		}
		if w.Fault != faults.KindFailpoint {
			continue
		}
		name, _, _ := strings.Cut(w.Spec[strings.Index(w.Spec, "=")+1:], ":")
		fired[name] = requireFired(t, w, 1, 1<<30)
		if w.Effect != nil && len(w.Effect.Panicked) > 0 {
			t.Errorf("window %s: a sleep panicked %v", w.Spec, w.Effect.Panicked)
		}
	}
	if len(fired) != 5 {
		t.Errorf("failpoint windows %v, want 5", fired)
	}
	requireChecks(t, s.Checks, map[string]string{"linearizability": results.VerdictOK, "members-agree": results.VerdictOK,
		"watch": results.VerdictOK, "serializable-reads": results.VerdictNothing})
	t.Logf("fired: %v", fired)
}

// TestFailpointCountLimited: N*ACTION runs the action the first N times only, however often the point is
// reached: 2*sleep on the leader's WAL save fires exactly twice at 200 puts/s, 1*panic at a follower's
// backend commit crashes it once (it is started again on its data). The nemesis arms the same
// count-limited terms when the members have failpoints: one pick among failpoints fires too.
func TestFailpointCountLimited(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	output, code, s, _ := failpointRun(t, "13s", "--seed 7",
		"failpoint:leader=raftBeforeSave:2*sleep(300ms)@2s+2s",
		"failpoint:follower=beforeCommit:1*panic@5s+2s",
		"nemesis=failpoint@9s+2s")
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
	requireFired(t, s.Faults[0], 2, 2)
	requireFired(t, s.Faults[1], 1, 1)
	if e := s.Faults[1].Effect; e == nil || !slices.Equal(e.Panicked, s.Faults[1].Targets) {
		t.Errorf("1*panic on %v: effect %+v, want the target panicked", s.Faults[1].Targets, e)
	}
	nem := s.Faults[2]
	if nem.Fault != faults.KindFailpoint || !strings.HasSuffix(nem.Spec, "(nemesis)") {
		t.Errorf("the nemesis picked %s (%s), want a failpoint", nem.Fault, nem.Spec)
	}
	requireFired(t, nem, 1, 1<<30)
	requireChecks(t, s.Checks, map[string]string{"linearizability": results.VerdictOK, "members-agree": results.VerdictOK,
		"watch": results.VerdictNothing, "serializable-reads": results.VerdictNothing})
	t.Logf("nemesis picked %s: %s", nem.Spec, nem.Effect.Detail)
}

// TestFailpointNeverReached: a failpoint armed where the run never goes (defragmentation, which nothing
// runs) did not happen: the run says so and does not pass.
func TestFailpointNeverReached(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
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
		{"nemesis of failpoints, no failpoint build", []string{"--faults", "nemesis=failpoint|kill@2s"}, "needs members built with failpoints"},
		{"external cluster", []string{"--cluster", "external", "--endpoints", "127.0.0.1:1", "--failpoints"}, "failpoint builds run on clusters chaosbench starts"},
		{"docker builtin", []string{"--cluster", "docker", "--failpoints"}, "the builtin etcd has no failpoints"},
		{"bad action", []string{"--etcd-version", "v3.6.16", "--failpoints", "--faults", "failpoint:leader=raftBeforeSave:explode@2s"}, `failpoint action "explode"`},
		{"bad sleep", []string{"--etcd-version", "v3.6.16", "--failpoints", "--faults", "failpoint:leader=raftBeforeSave:sleep(soon)@2s"}, "failpoint sleep(soon)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if slices.Contains(tt.args, "--etcd-version") {
				needFailpointBuild(t) // chaosbench reads the names from the build
			}
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
// (etcd's snapshot metrics, and both members' logs say so), and the history checks clean; with its links
// blackholed (their bytes delivered at the heal) or refused (connections reset, nothing delivered).
func TestPartitionUntilSnapshot(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	for _, mode := range []string{"until-snapshot", "until-snapshot|refuse"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			partitionUntilSnapshot(t, mode)
		})
	}
}

func partitionUntilSnapshot(t *testing.T, mode string) {
	out := filepath.Join(t.TempDir(), "run")
	b, err := exec.Command(binary, "run", "--out", out, "--members", "3", "--workload", "put", "--rate", "300",
		"--request-timeout", "1s", "--duration", "20s", "--etcd-flag", "snapshot-count=500", "--etcd-flag", "snapshot-catchup-entries=200",
		"--faults", "partition:follower="+mode+"@3s+14s", "--progress", "none").CombinedOutput()
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
		!regexp.MustCompile(`m\d sent [1-9]\d* snapshot\(s\) after the heal`).MatchString(output) {
		t.Fatalf("no compaction past the follower or no snapshot sent:\n%s", output)
	}
	if e := s.Faults[0].Effect; e == nil || e.SnapshotsSent < 1 {
		t.Errorf("the window's effect %+v records no snapshot sent", e)
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

// TestRegressionThroughSuite: the regression scenarios run as a suite. `--list` names every one; the
// crash between the WAL save and the backend commit, shortened to 18 s (two crashes), runs with its pinned
// release, failpoints and fixed seed, passes, and each crash is recorded in its run's fault windows.
func TestRegressionThroughSuite(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	needFailpointBuild(t)
	list, err := exec.Command(binary, "suite", "../../ci/chaos/regressions", "--list").CombinedOutput()
	if err != nil {
		t.Fatalf("suite --list: %v\n%s", err, list)
	}
	files, _ := filepath.Glob("../../ci/chaos/regressions/*.yaml")
	for _, f := range files {
		name := "regression-" + strings.TrimSuffix(filepath.Base(f), ".yaml")
		if !strings.Contains(string(list), name) {
			t.Errorf("suite --list does not name %s:\n%s", name, list)
		}
	}
	out := filepath.Join(t.TempDir(), "suite")
	const name = "regression-wal-saved-not-committed"
	// Its file alone: --set duration=18s would put other scenarios' faults after their load's end, and a
	// suite refuses a scenario file it reads that is invalid, selected or not.
	printed, err := exec.Command(binary, "suite", "../../ci/chaos/regressions/wal-saved-not-committed.yaml", "--only", name,
		"--set", "duration=18s", "--out", out).CombinedOutput()
	if err != nil {
		t.Fatalf("suite: %v\n%s", err, printed)
	}
	s, err := results.ReadSuite(out)
	if err != nil {
		t.Fatal(err)
	}
	if s.Outcome != outcome.OK || len(s.Scenarios) != 1 || s.Scenarios[0].Name != name || s.Scenarios[0].Seed != 180001 {
		t.Fatalf("suite: outcome %s, scenarios %+v\n%s", s.Outcome, s.Scenarios, printed)
	}
	sum, err := results.ReadSummary(filepath.Join(out, s.Scenarios[0].Dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Faults) != 2 {
		t.Fatalf("%d fault windows, want 2\n%s", len(sum.Faults), printed)
	}
	for _, w := range sum.Faults {
		if w.Effect == nil || len(w.Effect.Panicked) != 1 {
			t.Errorf("window %s: effect %+v, want one member panicked", w.Spec, w.Effect)
		}
	}
}

// TestImageBuildListsFailpoints: `image build --failpoints` builds (here: finds cached) a release's
// failpoint build and lists the failpoints it has, the names failpoint faults take; with the builtin etcd
// it is one line and exit 2.
func TestImageBuildListsFailpoints(t *testing.T) {
	needFailpointBuild(t)
	var stdout, stderr bytes.Buffer
	if code := execute([]string{"image", "build", "--etcd-version", "v3.6.16", "--failpoints", "--binary-only"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	m := regexp.MustCompile(`(?m)^v3\.6\.16 \(failpoints\)\t(\S+)\n  (\d+) failpoints: (.*)$`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no failpoint list in:\n%s", stdout.String())
	}
	names, err := etcdbuild.FailpointNames(m[1])
	if err != nil {
		t.Fatal(err)
	}
	if listed := strings.Fields(m[3]); !slices.Equal(listed, names) || m[2] != strconv.Itoa(len(names)) {
		t.Errorf("listed %s failpoints %v, the build has %v", m[2], listed, names)
	}
	for _, want := range []string{"raftAfterSave", "beforeCommit", "beforeSendWatchResponse"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s among %v", want, names)
		}
	}
	stdout.Reset()
	stderr.Reset()
	if code := execute([]string{"image", "build", "--failpoints", "--binary-only"}, &stdout, &stderr); code != outcome.ExitUsage ||
		strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 || !strings.Contains(stderr.String(), "the builtin etcd has no failpoints") {
		t.Errorf("builtin with --failpoints: exit %d, stderr %q", code, stderr.String())
	}
}

// TestImageBuildListsInsertedFailpoints: v3.5.12 has neither beforeSendWatchResponse nor
// compactBeforeSetFinishedCompact in its source; its failpoint build inserts them (etcdbuild's
// insertions), and `image build --failpoints` lists them among its failpoints.
func TestImageBuildListsInsertedFailpoints(t *testing.T) {
	needFailpointRelease(t, "v3.5.12")
	var stdout, stderr bytes.Buffer
	if code := execute([]string{"image", "build", "--binary-only", "--failpoints", "--etcd-version", "v3.5.12"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	m := regexp.MustCompile(`(?m)^v3\.5\.12 \(failpoints\)\t\S+\n  \d+ failpoints: (.*)$`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no failpoint list in:\n%s", stdout.String())
	}
	listed := strings.Fields(m[1])
	for _, want := range []string{"beforeSendWatchResponse", "compactBeforeSetFinishedCompact", "raftBeforeSave"} {
		if !slices.Contains(listed, want) {
			t.Errorf("no %s among %v", want, listed)
		}
	}
}

// TestFailpointCrashInsideDefrag: faults that meet. The leader is armed to panic before it renames its
// defragmented database into place, and a defragmentation of the leader runs inside that window: the
// member crashes inside its defragmentation, which is what the schedule asked for, not a defragmentation
// the harness failed to run. The run passes, the defrag window recovered, the failpoint window records the
// panic, and the member is started again on its data. About 20 s.
func TestFailpointCrashInsideDefrag(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	output, code, s, _ := failpointRun(t, "10s", "failpoint:leader=defragBeforeRename:panic@2s+4s", "defrag:leader@3s")
	if code != 0 || s.Outcome != outcome.OK {
		t.Fatalf("exit %d, outcome %s %v:\n%s", code, s.Outcome, s.Reasons, output)
	}
	var defrag, failpoint *results.FaultWindow
	for i, w := range s.Faults {
		switch w.Fault {
		case "defrag":
			defrag = &s.Faults[i]
		case "failpoint":
			failpoint = &s.Faults[i]
		}
	}
	if defrag == nil || failpoint == nil {
		t.Fatalf("windows %+v: want a defrag and a failpoint window", s.Faults)
	}
	if defrag.Outcome != "recovered" || failpoint.Outcome != "recovered" {
		t.Errorf("defrag window %q, failpoint window %q: want both recovered", defrag.Outcome, failpoint.Outcome)
	}
	if failpoint.Effect == nil || len(failpoint.Effect.Panicked) != 1 {
		t.Errorf("failpoint window effect %+v: want the leader's panic inside its defragmentation", failpoint.Effect)
	}
	if !strings.Contains(output, "crashed inside its defragmentation") {
		t.Errorf("the run does not say the member crashed inside its defragmentation:\n%s", output)
	}
}

package main

import (
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters/etcdbuild"
	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// TestSuiteVerdicts runs a real suite of three short scenarios, one with a threshold no run can meet:
// each scenario's verdict is its run's outcome, the suite's is the failed threshold (exit code 3), and
// suite.json, junit.xml, suite.md, suite.html and the printed text agree; the failed scenario prints the
// command that replays it.
func TestSuiteVerdicts(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	reg := t.TempDir()
	load := "rate: 100\nclients: 4\nconns: 2\nduration: 2s\nfaults: none\nprogress: none\nmembers: 1\n"
	for name, body := range map[string]string{
		"put.yaml":   "name: put-ok\nworkload: put\n" + load + "suite:\n  tags: [smoke]\n",
		"range.yaml": "name: range-ok\nworkload: range\n" + load + "suite:\n  tags: [smoke]\n",
		"slow.yaml": "name: put-too-slow\nworkload: put\n" + load + "threshold: [put:p50<1us]\nseed: 99\n" +
			"suite:\n  tags: [smoke]\n  seed-policy: fixed\n",
		"long.yaml": "name: not-selected\nworkload: put\n" + load + "suite:\n  tags: [long]\n",
	} {
		if err := os.WriteFile(filepath.Join(reg, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "suite")
	cmd := exec.Command(binary, "suite", reg, "--tags", "smoke", "--out", out)
	printed, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != outcome.ExitThresholds {
		t.Fatalf("exit code %d, want %d\n%s", code, outcome.ExitThresholds, printed)
	}
	s, err := results.ReadSuite(out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]outcome.Kind{"put-ok": outcome.OK, "range-ok": outcome.OK, "put-too-slow": outcome.ThresholdFailed}
	if s.Outcome != outcome.ThresholdFailed || len(s.Scenarios) != len(want) || s.Selection.Registry != 4 {
		t.Fatalf("suite.json: outcome %s, %d scenarios of %d\n%s", s.Outcome, len(s.Scenarios), s.Selection.Registry, printed)
	}
	for _, sc := range s.Scenarios {
		sum, err := results.ReadSummary(filepath.Join(out, sc.Dir))
		if err != nil {
			t.Fatal(err)
		}
		if sc.Outcome != want[sc.Name] || sum.Outcome != sc.Outcome || sum.Seed != sc.Seed || sc.Seed == 0 || len(sc.Attempts) != 1 {
			t.Errorf("%s: outcome %s (run: %s), seed %d (run: %d), %d attempts; want %s", sc.Name, sc.Outcome, sum.Outcome, sc.Seed, sum.Seed, len(sc.Attempts), want[sc.Name])
		}
		if _, err := os.Stat(filepath.Join(out, sc.Dir, "report.html")); err != nil {
			t.Errorf("%s: %v", sc.Name, err)
		}
	}
	slow := s.Scenarios[1]
	replay := "chaosbench run --config " + filepath.Join(reg, "slow.yaml") + " --seed 99"
	if slow.Name != "put-too-slow" || slow.Seed != 99 || slow.Replay != replay {
		t.Fatalf("scenarios are not in name order, or the fixed seed or replay is wrong: %+v", slow)
	}
	text := string(printed)
	for _, w := range []string{"replay: " + replay, "suite verdict: FAIL (threshold-failed, exit code 3)",
		fmt.Sprintf("seed %d (fresh)", s.Scenarios[0].Seed), "seed 99 (fixed)"} {
		if !strings.Contains(text, w) {
			t.Errorf("output lacks %q:\n%s", w, text)
		}
	}

	// JUnit: one testsuite per scenario, as its run's junit.xml has it.
	b, err := os.ReadFile(filepath.Join(out, "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	type tcase struct {
		Classname string    `xml:"classname,attr"`
		Name      string    `xml:"name,attr"`
		Failure   *struct{} `xml:"failure"`
		Error     *struct{} `xml:"error"`
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Suites   []struct {
			Name     string  `xml:"name,attr"`
			Failures int     `xml:"failures,attr"`
			Cases    []tcase `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil || len(doc.Suites) != 3 {
		t.Fatalf("junit.xml: %v\n%s", err, b)
	}
	for _, su := range doc.Suites {
		name := strings.TrimPrefix(su.Name, "chaosbench.")
		failed := want[name] != outcome.OK
		if su.Cases[0].Name != "outcome" || (su.Cases[0].Failure != nil) != failed || len(su.Cases) < 4 {
			t.Errorf("junit suite %s: cases %+v", su.Name, su.Cases)
		}
		if failed && (su.Failures != 2 || su.Cases[len(su.Cases)-1].Classname != "chaosbench.thresholds") {
			t.Errorf("junit suite %s: %d failures, cases %+v; want the outcome and the threshold", su.Name, su.Failures, su.Cases)
		}
	}
	if doc.Failures != 2 || doc.Errors != 0 {
		t.Errorf("junit totals: %d failures, %d errors", doc.Failures, doc.Errors)
	}
	md, _ := os.ReadFile(filepath.Join(out, "suite.md"))
	html, _ := os.ReadFile(filepath.Join(out, "suite.html"))
	if !strings.Contains(string(md), "**FAIL** — outcome: threshold-failed (exit code 3)") || !strings.Contains(string(md), "`"+replay+"`") {
		t.Errorf("suite.md:\n%s", md)
	}
	for _, sc := range s.Scenarios {
		if !strings.Contains(string(html), fmt.Sprintf(`href="%s/report.html"`, sc.Dir)) {
			t.Errorf("suite.html does not link %s's report", sc.Name)
		}
	}
}

// TestSuiteShardsAndBadInput: `--shard 1/2` and `--shard 2/2` list every scenario of ci/chaos exactly once
// between them; bad suite input is one line and exit code 2, and starts nothing.
func TestSuiteShardsAndBadInput(t *testing.T) {
	list := func(args ...string) []string {
		t.Helper()
		var stdout, stderr strings.Builder
		if code := execute(append([]string{"suite", "../../ci/chaos", "--list"}, args...), &stdout, &stderr); code != 0 {
			t.Fatalf("%v: exit code %d: %s", args, code, stderr.String())
		}
		var names []string
		for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
			names = append(names, strings.Fields(line)[0])
		}
		return names
	}
	all := list()
	seen := map[string]int{}
	for _, shard := range []string{"1/2", "2/2"} {
		for _, n := range list("--shard", shard) {
			seen[n]++
		}
	}
	for _, n := range all {
		if seen[n] != 1 {
			t.Errorf("%s listed %d times across the shards", n, seen[n])
		}
	}
	if len(seen) != len(all) || len(all) < 4 {
		t.Errorf("shards listed %v; all: %v", seen, all)
	}
	if smoke := list("--tags", "smoke"); len(smoke) < 2 {
		t.Errorf("smoke scenarios: %v", smoke)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"suite"}, "requires at least 1 arg"},
		{[]string{"suite", "../../ci/chaos", "--tags", "smoek"}, "no scenario has the tags smoek"},
		{[]string{"suite", "../../ci/chaos", "--only", "smoke-nemsis"}, `did you mean "smoke-nemesis"`},
		{[]string{"suite", "../../ci/chaos", "--shard", "2"}, `--shard "2"`},
		{[]string{"suite", "../../ci/chaos", "--set", "etcd-version"}, `--set "etcd-version"`},
		{[]string{"suite", "/nonexistent"}, "no such file"},
	} {
		var stdout, stderr strings.Builder
		code := execute(tc.args, &stdout, &stderr)
		lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
		if code != outcome.ExitUsage || len(lines) != 1 || !strings.Contains(lines[0], tc.want) || stdout.Len() != 0 {
			t.Errorf("%v: exit code %d, stderr %q, stdout %q; want exit 2 and one line containing %q", tc.args, code, stderr.String(), stdout.String(), tc.want)
		}
	}
}

// TestSuiteRetryHarness: with --retry-harness, a scenario whose run is a harness error (a fault skipped on
// an unhealthy cluster) runs once more, with the same seed, into <name>.retry1; it stays red, and the retry
// shows in suite.json, JUnit, suite.md and the printed text.
func TestSuiteRetryHarness(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	reg := t.TempDir()
	body := "name: skipped-fault\nworkload: put\nrate: 100\nclients: 4\nconns: 2\nduration: 6s\nprogress: none\n" +
		"faults: [pause:m1@1s+4s, kill:m2@3s+1s]\nfault-health-timeout: 300ms\n"
	if err := os.WriteFile(filepath.Join(reg, "skipped.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "suite")
	cmd := exec.Command(binary, "suite", reg, "--retry-harness", "--out", out)
	printed, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != outcome.ExitHarness {
		t.Fatalf("exit code %d, want %d\n%s", code, outcome.ExitHarness, printed)
	}
	s, err := results.ReadSuite(out)
	if err != nil {
		t.Fatal(err)
	}
	sc := s.Scenarios[0]
	if sc.Outcome != outcome.HarnessError || len(sc.Attempts) != 2 || sc.Dir != "skipped-fault.retry1" || sc.Attempts[0].Dir != "skipped-fault" {
		t.Fatalf("suite.json scenario: %+v", sc)
	}
	for _, a := range sc.Attempts {
		sum, err := results.ReadSummary(filepath.Join(out, a.Dir))
		if err != nil || sum.Seed != sc.Seed || sum.Outcome != outcome.HarnessError {
			t.Fatalf("attempt %s: %v, seed %d of %d, outcome %v", a.Dir, err, sum.Seed, sc.Seed, sum.Outcome)
		}
	}
	junit, _ := os.ReadFile(filepath.Join(out, "junit.xml"))
	md, _ := os.ReadFile(filepath.Join(out, "suite.md"))
	for name, w := range map[string][2]string{
		"text":     {string(printed), "retrying once (--retry-harness)"},
		"text end": {string(printed), "retried after harness-error"},
		"junit":    {string(junit), `name="attempt 1 of 2"`},
		"suite.md": {string(md), "2 (retried: attempt 1 was harness-error)"},
	} {
		if !strings.Contains(w[0], w[1]) {
			t.Errorf("%s lacks %q:\n%s", name, w[1], w[0])
		}
	}
}

// TestSuiteMemberPanicsByItself runs a suite scenario whose leader panics with no fault asking it to (a failpoint
// build armed through gofail's environment, as a bug in etcd would): the scenario's outcome is member-crashed,
// exit 4, it is not retried under --retry-harness, and the verdict line, suite.json, the scenario's summary and
// JUnit name the crash with the member's panic.
func TestSuiteMemberPanicsByItself(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	needFailpointBuild(t)
	reg := t.TempDir()
	body := "name: leader-panics\nworkload: put\nrate: 200\nclients: 8\nconns: 4\nduration: 8s\nprogress: none\n" +
		"members: 3\netcd-version: v3.6.16\nfailpoints: true\n"
	if err := os.WriteFile(filepath.Join(reg, "panics.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "suite")
	cmd := exec.Command(binary, "suite", reg, "--retry-harness", "--out", out)
	// Only the leader sends as leader: the first leader panics after 1000 sends, the next one has not sent as
	// many when the load ends.
	cmd.Env = append(os.Environ(), "GOFAIL_FAILPOINTS=raftBeforeLeaderSend=1000*off->panic")
	printed, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != outcome.ExitViolation {
		t.Fatalf("exit code %d, want %d\n%s", code, outcome.ExitViolation, printed)
	}
	s, err := results.ReadSuite(out)
	if err != nil {
		t.Fatal(err)
	}
	sc := s.Scenarios[0]
	if s.Outcome != outcome.MemberCrashed || sc.Outcome != outcome.MemberCrashed || len(sc.Attempts) != 1 {
		t.Fatalf("suite.json: suite %s, scenario %+v; want member-crashed, one attempt", s.Outcome, sc)
	}
	sum, err := results.ReadSummary(filepath.Join(out, sc.Dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Crashes) == 0 || sum.Crashes[0].Why() != "panic: failpoint panic: {}" {
		t.Fatalf("summary crashes %+v: want the leader's panic", sum.Crashes)
	}
	junit, _ := os.ReadFile(filepath.Join(out, "junit.xml"))
	for name, w := range map[string][2]string{
		"verdict line": {string(printed), "suite verdict: FAIL (member-crashed, exit code 4)"},
		"crash":        {string(printed), "crashed (exit status 2)"},
		"junit":        {string(junit), "member-crashed"},
	} {
		if !strings.Contains(w[0], w[1]) {
			t.Errorf("%s lacks %q:\n%s", name, w[1], w[0])
		}
	}
	if strings.Contains(string(printed), "retrying once") {
		t.Errorf("a crashed member was retried:\n%s", printed)
	}
}

// needFailpointRelease builds etcd release v with failpoints (cached), or skips when the module proxy
// cannot serve it.
func needFailpointRelease(t *testing.T, v string) {
	t.Helper()
	r, err := etcdbuild.Parse(v)
	if err != nil {
		t.Fatal(err)
	}
	r.Failpoints = true
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if _, err := etcdbuild.Build(ctx, r, etcdbuild.Options{}); err != nil {
		if outcome.IsUsage(err) || proxyUnreachable.MatchString(err.Error()) {
			testenv.Missing(t, testenv.Failpoints, "skipping: the Go module proxy cannot serve etcd %s: %v", v, err)
		}
		t.Fatalf("failpoint build of etcd %s: %v", v, err)
	}
}

// TestRegressionPairSingleMemberCrash is one pair of etcd's track record, as `suite --affected` and
// `suite --fixed` run it: etcd-io/etcd#14370 (a single member loses acknowledged writes on a crash) must be
// caught as a violation on v3.5.4, where the scenario passes, with its run's own outcome a violation kept
// as its attempt's; and the same file on v3.5.5 must pass clean. About 75 s (two 60 s loads side by side), plus the two
// failpoint builds on a cold cache (a few minutes).
func TestRegressionPairSingleMemberCrash(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	const name = "regression-single-member-crash-unsynced-write"
	for _, tc := range []struct {
		release, version string
		attempt          outcome.Kind
	}{
		{"affected", "v3.5.4", outcome.Violation},
		{"fixed", "v3.5.5", outcome.OK},
	} {
		t.Run(tc.release, func(t *testing.T) {
			t.Parallel() // two clusters of their own: the pair takes one load's time, not two
			needFailpointRelease(t, tc.version)
			out := filepath.Join(t.TempDir(), "suite")
			cmd := exec.Command(binary, "suite", "../../ci/chaos/regressions", "--"+tc.release, "--only", name, "--out", out)
			printed, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != outcome.ExitOK {
				t.Fatalf("exit code %d, want 0\n%s", code, printed)
			}
			s, err := results.ReadSuite(out)
			if err != nil {
				t.Fatal(err)
			}
			sc := s.Scenarios[0]
			if sc.Outcome != outcome.OK || sc.EtcdVersion != tc.version || sc.Issue != "etcd-io/etcd#14370" || sc.Attempts[0].Outcome != tc.attempt {
				t.Fatalf("suite.json scenario %+v: want ok on %s, its run %s", sc, tc.version, tc.attempt)
			}
			if tc.release == "affected" && !strings.Contains(string(printed), "caught as expected (violation)") {
				t.Errorf("the output does not say what caught the bug:\n%s", printed)
			}
			// JUnit says what the exit code and suite.json say: the bug caught as expected is a pass.
			junit, err := os.ReadFile(filepath.Join(out, "junit.xml"))
			if err != nil || !strings.Contains(string(junit), `<testsuites name="chaosbench.suite"`) ||
				!regexp.MustCompile(`<testsuites [^>]*failures="0" errors="0"`).Match(junit) {
				t.Errorf("suite junit.xml disagrees with exit code 0 (%v):\n%.600s", err, junit)
			}
		})
	}
}

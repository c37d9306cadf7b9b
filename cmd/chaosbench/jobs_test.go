package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// The job x outcome table: every command that ends in a verdict, driven to each outcome from real runs or
// recorded run directories, must say the same thing everywhere it says it. The exit code, the printed verdict
// line, the outcome in the JSON it writes, its JUnit and its HTML title all come from one decision; a job that
// decides on its own (a comparison returning its first failure's code, a qualification judging its smallest
// class only) fails its row. A new command cannot land without its row here, and docs/outcomes.md's table is
// this one.

// said is what one job said about its verdict, everywhere it says it.
type said struct {
	code    int
	printed string
	// json is the outcome in the JSON the job wrote ("" when it writes none); junit and html are the files'
	// contents ("" when it writes none).
	json  outcome.Kind
	junit string
	html  string
}

// agrees fails t unless every place the job said its verdict says want.
func (s said) agrees(t *testing.T, want outcome.Kind) {
	t.Helper()
	if want == "usage" {
		if s.code != outcome.ExitUsage {
			t.Fatalf("exit code %d, want %d (usage)\n%s", s.code, outcome.ExitUsage, s.printed)
		}
		lines := strings.Split(strings.TrimSpace(s.printed), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "chaosbench: ") {
			t.Fatalf("a usage error is one line starting with chaosbench:, got:\n%s", s.printed)
		}
		return
	}
	o := outcome.Outcome{Kind: want}
	if s.code != o.ExitCode() {
		t.Errorf("exit code %d, want %d (%s)", s.code, o.ExitCode(), want)
	}
	line := fmt.Sprintf("%s (%s", o.Headline(), want)
	if !strings.Contains(s.printed, line) {
		t.Errorf("the printed verdict lacks %q:\n%s", line, s.printed)
	}
	if s.json != "" && s.json != want {
		t.Errorf("the JSON outcome is %s, want %s", s.json, want)
	}
	if s.junit != "" {
		junitAgrees(t, s.junit, o)
	}
	if s.html != "" {
		m := regexp.MustCompile(`<title>([^<]*)</title>`).FindStringSubmatch(s.html)
		if m == nil || !strings.Contains(m[1], o.Headline()) {
			t.Errorf("the HTML title %q does not say %s", m, o.Headline())
		}
		for _, other := range []string{"PASS", "FAIL", "UNDECIDED", "ERROR", "INCOMPLETE"} {
			if m != nil && other != o.Headline() && strings.Contains(m[1], other) {
				t.Errorf("the HTML title %q says %s as well as %s", m[1], other, o.Headline())
			}
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", s.printed)
	}
}

// junitAgrees checks a JUnit file against o: its outcome property is o's kind, and it has a failure or an error
// exactly when o is not a pass.
func junitAgrees(t *testing.T, junit string, o outcome.Outcome) {
	t.Helper()
	var doc struct {
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Suites   []struct {
			Properties []struct {
				Name  string `xml:"name,attr"`
				Value string `xml:"value,attr"`
			} `xml:"properties>property"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(junit), &doc); err != nil {
		t.Fatalf("JUnit: %v", err)
	}
	kind := ""
	for _, s := range doc.Suites {
		for _, p := range s.Properties {
			if p.Name == "outcome" {
				kind = p.Value
			}
		}
	}
	if kind != "" && kind != string(o.Kind) {
		t.Errorf("JUnit's outcome property is %s, want %s", kind, o.Kind)
	}
	if failed := doc.Failures+doc.Errors > 0; failed == o.Passed() {
		t.Errorf("JUnit has %d failures and %d errors for a %s outcome", doc.Failures, doc.Errors, o.Kind)
	}
}

// job runs the binary with args and returns what it said, reading the JSON, JUnit and HTML files named (paths
// relative to dir; "" for none).
func job(t *testing.T, dir, jsonFile, junitFile, htmlFile string, args ...string) said {
	t.Helper()
	cmd := exec.Command(binary, args...)
	out, _ := cmd.CombinedOutput()
	s := said{code: cmd.ProcessState.ExitCode(), printed: string(out)}
	read := func(name string) string {
		if name == "" {
			return ""
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		return string(b)
	}
	if b := read(jsonFile); b != "" {
		var v struct {
			Outcome outcome.Kind `json:"outcome"`
		}
		if err := json.Unmarshal([]byte(b), &v); err != nil {
			t.Fatalf("%s: %v", jsonFile, err)
		}
		if v.Outcome == "" {
			t.Fatalf("%s carries no outcome", jsonFile)
		}
		s.json = v.Outcome
	}
	s.junit, s.html = read(junitFile), read(htmlFile)
	return s
}

// evidence is what makes a recorded run reach each outcome, added to a real run's summary: the job must decide
// it from the evidence (the stored outcome is cleared), as results.Decide does.
var evidence = map[outcome.Kind]func(s *results.Summary){
	outcome.OK: func(*results.Summary) {},
	outcome.ThresholdFailed: func(s *results.Summary) {
		s.Thresholds = append(s.Thresholds, results.ThresholdResult{Expr: "put:p99<1us", Verdict: results.ThresholdFail,
			Observed: "1.2ms", Value: 1.2, Unit: "ms", Subject: "put"})
	},
	outcome.Undecided: func(s *results.Summary) {
		s.Checks = append(s.Checks, results.Check{Name: "watch", Verdict: results.VerdictUnknown, Detail: "timed out after 5m"})
	},
	outcome.Violation: func(s *results.Summary) {
		s.Checks = append(s.Checks, results.Check{Name: "members-agree", Verdict: results.VerdictViolation,
			Detail: "m2 differs from m1 at revision 120 (hash 1 against 2)"})
	},
	outcome.MemberCrashed: func(s *results.Summary) {
		s.Crashes = append(s.Crashes, results.Crash{Member: "m1", PID: 4242, Time: s.End, Status: "exit status 2",
			Log: "members/m1.log", LogTail: []string{"panic: runtime error: index out of range", "goroutine 7 [running]:"}})
	},
	outcome.HarnessError: func(s *results.Summary) {
		s.Errors = append(s.Errors, "fault kill:m2@3s was skipped: m2 was not running")
	},
	outcome.Incomplete: func(s *results.Summary) {
		s.Interrupted, s.Incomplete, s.IncompleteReason = true, true, "interrupted by signal; results cover the load up to that moment"
	},
	outcome.KnownIssue: func(s *results.Summary) {
		s.Checks = append(s.Checks, results.Check{Name: "linearizability", Verdict: results.VerdictKnownIssue,
			Detail: "request applied twice, attributed to etcd-io/etcd#18424 by its attempts"})
		s.KnownIssues = append(s.KnownIssues, results.KnownIssueFinding{Issue: "etcd-io/etcd#18424",
			Title: "the client retries a request the server applied", Check: "linearizability",
			Finding:  "request applied twice: key k1 at revisions 7 and 9",
			Evidence: "2 attempts on the wire: the first failed with Unavailable after 1.2s, the second succeeded"})
	},
}

// recorded copies a real run directory and adds the evidence of kind to its summary, clearing the outcome it
// stored, so that a job reading it decides from the evidence.
func recorded(t *testing.T, base string, kind outcome.Kind) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), string(kind))
	if err := os.CopyFS(dir, os.DirFS(base)); err != nil {
		t.Fatal(err)
	}
	s, err := results.ReadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The base run passed; its checks stay, evidence is added to them.
	s.Outcome, s.Reasons = "", nil
	evidence[kind](s)
	if err := results.WriteSummary(dir, s); err != nil {
		t.Fatal(err)
	}
	return dir
}

// baseRun is one real, short run that passed: the recorded directories of the table are made from it.
func baseRun(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "base")
	cmd := exec.Command(binary, "run", "--workload", "put", "--duration", "2s", "--members", "1", "--rate", "300",
		"--seed", "36", "--out", out, "--progress", "none")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("base run: %v\n%s", err, b)
	}
	return out
}

// TestJobOutcomes is the job x outcome table (see the top of this file).
func TestJobOutcomes(t *testing.T) {
	base := baseRun(t)
	kinds := []outcome.Kind{outcome.OK, outcome.ThresholdFailed, outcome.Undecided, outcome.Violation,
		outcome.MemberCrashed, outcome.HarnessError, outcome.Incomplete, outcome.KnownIssue}
	t.Run("run", func(t *testing.T) { runRows(t) })
	t.Run("report", func(t *testing.T) {
		for _, k := range kinds {
			t.Run(string(k), func(t *testing.T) {
				t.Parallel() // a copy of the base run each
				dir := recorded(t, base, k)
				job(t, dir, "", "junit.xml", "report.html", "report", dir).agrees(t, k)
			})
		}
	})
	t.Run("usage", func(t *testing.T) { usageRows(t, base) })
}

// runRows drives `chaosbench run` itself to the outcomes a short real run can reach on its own: a pass, a
// failed threshold, a fault that could not happen, an interrupt. A violation and a crashed member of a real
// run are TestDivergedMemberExits4 and TestSuiteMemberPanicsByItself. The rows run two at a time: each has
// its own cluster and directory, and none judges latency.
func runRows(t *testing.T) {
	common := []string{"run", "--workload", "put", "--members", "1", "--rate", "200", "--progress", "none", "--seed", "36"}
	for _, row := range []struct {
		kind outcome.Kind
		args []string
	}{
		{outcome.OK, []string{"--duration", "2s"}},
		{outcome.ThresholdFailed, []string{"--duration", "2s", "--threshold", "put:p99<1us"}},
		// A pause of a member that a kill has stopped cannot be healed: the heal is left to the final sweep.
		{outcome.HarnessError, []string{"--members", "3", "--duration", "6s", "--faults", "pause:m1@1s+4s",
			"--faults", "kill:m2@3s+1s", "--fault-health-timeout", "300ms"}},
	} {
		t.Run(string(row.kind), func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "run")
			args := append(append(append([]string{}, common...), row.args...), "--out", out)
			job(t, out, results.SummaryFile, "junit.xml", "report.html", args...).agrees(t, row.kind)
		})
	}
	t.Run(string(outcome.Incomplete), func(t *testing.T) {
		t.Parallel()
		out := filepath.Join(t.TempDir(), "run")
		cmd := exec.Command(binary, append(common, "--duration", "30s", "--out", out)...)
		var b strings.Builder
		cmd.Stdout, cmd.Stderr = &b, &b
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(6 * time.Second)
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		s := said{code: cmd.ProcessState.ExitCode(), printed: b.String()}
		sum, err := results.ReadSummary(out)
		if err != nil {
			t.Fatal(err)
		}
		s.json = sum.Outcome
		junit, _ := os.ReadFile(filepath.Join(out, "junit.xml"))
		html, _ := os.ReadFile(filepath.Join(out, "report.html"))
		s.junit, s.html = string(junit), string(html)
		s.agrees(t, outcome.Incomplete)
	})
}

// usageRows gives every job bad input: one line, exit 2, nothing started.
func usageRows(t *testing.T, base string) {
	for name, args := range map[string][]string{
		"run":      {"run", "--rate", "-1"},
		"qualify":  {"qualify", "--class", "enormous"},
		"suite":    {"suite", filepath.Join(t.TempDir(), "absent")},
		"compare":  {"compare", "--rounds", "0"},
		"report":   {"report", filepath.Join(t.TempDir(), "absent")},
		"check":    {"check", filepath.Join(t.TempDir(), "absent")},
		"trend":    {"trend", "--min-effect", "-3", base},
		"merge":    {"merge", filepath.Join(t.TempDir(), "absent")},
		"fidelity": {"fidelity", "--scale", "gigantic"},
		"explore":  {"explore", "--max-load", "5s", "--count", "1"},
		// A profile of a newer format than this chaosbench reads, and metrics that are not Prometheus text.
		"qualify --profile": {"qualify", "--profile", newerProfile(t)},
		"run --profile":     {"run", "--profile", newerProfile(t), "--dry-run"},
		"profile":           {"profile", "--apiserver", notMetrics(t) + "," + notMetrics(t)},
	} {
		t.Run(name, func(t *testing.T) {
			job(t, "", "", "", "", args...).agrees(t, "usage")
		})
	}
}

// newerProfile writes a kube workload profile of a format version this chaosbench does not read.
func newerProfile(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "newer.yaml")
	if err := os.WriteFile(f, []byte("format: chaosbench/kube-profile\nversion: 99\nresources: {pods: {objects: 1}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// notMetrics writes a file that is not Prometheus text (a login page a scrape got instead).
func notMetrics(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "scrape.prom")
	if err := os.WriteFile(f, []byte("<html><body>Unauthorized</body></html>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

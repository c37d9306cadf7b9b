package report

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// TestSuiteRetryVisible: a scenario that passed on its retry is green, and the retry shows in JUnit (a
// skipped case for the first attempt, the attempts property), suite.md and suite.html.
func TestSuiteRetryVisible(t *testing.T) {
	dir := t.TempDir()
	harness := []outcome.Reason{outcome.New(outcome.HarnessError, "start cluster: member m2 exited")}
	s := &results.Suite{Schema: results.SuiteSchema, Selection: results.SuiteSelection{Paths: []string{"ci/chaos"}, Registry: 2, RetryHarness: true},
		Scenarios: []results.SuiteScenario{
			{Name: "flaky", File: "ci/chaos/flaky.yaml", Seed: 7, Outcome: outcome.OK, Dir: "flaky.retry1", Replay: "chaosbench run --config ci/chaos/flaky.yaml --seed 7",
				Attempts: []results.SuiteAttempt{{Dir: "flaky", Outcome: outcome.HarnessError, Reasons: harness}, {Dir: "flaky.retry1", Outcome: outcome.OK}}},
			{Name: "broken", File: "ci/chaos/broken.yaml", Seed: 8, Outcome: outcome.HarnessError, Reasons: harness,
				Replay:   "chaosbench run --config ci/chaos/broken.yaml --seed 8",
				Attempts: []results.SuiteAttempt{{Outcome: outcome.HarnessError, Reasons: harness}, {Outcome: outcome.HarnessError, Reasons: harness}}},
		}}
	s.SetOutcome()
	if s.Outcome != outcome.HarnessError {
		t.Fatalf("suite outcome %s", s.Outcome)
	}
	if err := WriteSuite(dir, s); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, JUnitFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(b, &doc); err != nil || len(doc.Suites) != 2 {
		t.Fatalf("junit.xml: %v, %d suites", err, len(doc.Suites))
	}
	for i, want := range []struct {
		cases, errors, skipped int
	}{{2, 0, 1}, {2, 1, 1}} {
		su := doc.Suites[i]
		if len(su.Cases) != want.cases || su.Errors != want.errors || su.Skipped != want.skipped {
			t.Errorf("suite %s: %d cases, %d errors, %d skipped; want %+v", su.Name, len(su.Cases), su.Errors, su.Skipped, want)
		}
		last := su.Cases[len(su.Cases)-1]
		if last.Name != "attempt 1 of 2" || last.Skipped == nil || !strings.Contains(last.Skipped.Message, "retried once after a harness error") {
			t.Errorf("suite %s: no visible retry: %+v", su.Name, last)
		}
	}
	if doc.Errors != 1 || doc.Failures != 0 {
		t.Errorf("totals: %d errors, %d failures", doc.Errors, doc.Failures)
	}
	md, _ := os.ReadFile(filepath.Join(dir, SuiteMarkdownFile))
	html, _ := os.ReadFile(filepath.Join(dir, SuiteHTMLFile))
	for name, text := range map[string]string{"suite.md": string(md), "suite.html": string(html)} {
		for _, want := range []string{"retried", "ERROR", "chaosbench run --config ci/chaos/broken.yaml --seed 8", "flaky.retry1/report.html"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s lacks %q:\n%s", name, want, text)
			}
		}
	}
	if !strings.Contains(string(md), "**ERROR** — outcome: harness-error (exit code 1)") {
		t.Errorf("suite.md headline:\n%s", md)
	}
}

// TestSuiteExpectedFindingPasses: a regression scenario run on the release that had its bug, whose run
// found it as expected, passes in the suite's JUnit as in its exit code and suite.json: the run's failed
// cases are kept as their outputs, not failures; a scenario that did not catch it fails.
func TestSuiteExpectedFindingPasses(t *testing.T) {
	dir := t.TempDir()
	crash := []outcome.Reason{outcome.New(outcome.MemberCrashed, "member m1 crashed (exit status 2): panic: unexpected error during txn")}
	for _, name := range []string{"caught", "missed"} {
		run := &results.Summary{Schema: results.SummarySchema, Name: name, Outcome: outcome.MemberCrashed, Reasons: crash}
		if name == "missed" {
			run.Outcome, run.Reasons = outcome.OK, nil
		}
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := results.WriteSummary(filepath.Join(dir, name), run); err != nil {
			t.Fatal(err)
		}
	}
	expect := []outcome.Kind{outcome.MemberCrashed}
	s := &results.Suite{Schema: results.SuiteSchema, Scenarios: []results.SuiteScenario{
		{Name: "caught", Dir: "caught", Outcome: outcome.OK, Expect: expect, Issue: "etcd-io/etcd#14110", EtcdVersion: "v3.5.4",
			Attempts: []results.SuiteAttempt{{Dir: "caught", Outcome: outcome.MemberCrashed, Reasons: crash}}},
		{Name: "missed", Dir: "missed", Outcome: outcome.HarnessError, Expect: expect, Issue: "etcd-io/etcd#14110", EtcdVersion: "v3.5.4",
			Reasons:  []outcome.Reason{outcome.New(outcome.HarnessError, "expected member-crashed, the run passed")},
			Attempts: []results.SuiteAttempt{{Dir: "missed", Outcome: outcome.OK}}},
	}}
	var b strings.Builder
	if err := WriteSuiteJUnit(&b, dir, s); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal([]byte(b.String()), &doc); err != nil || len(doc.Suites) != 2 {
		t.Fatalf("junit: %v, %d suites", err, len(doc.Suites))
	}
	caught := doc.Suites[0]
	if caught.Failures+caught.Errors != 0 || !strings.Contains(caught.Cases[0].SystemOut, "expected on v3.5.4") ||
		!strings.Contains(caught.Cases[0].SystemOut, "unexpected error during txn") {
		t.Errorf("a caught expected finding: %d failures, %d errors, outcome case %+v", caught.Failures, caught.Errors, caught.Cases[0])
	}
	if doc.Suites[1].Failures+doc.Suites[1].Errors == 0 {
		t.Errorf("a missed expected finding passes in JUnit: %+v", doc.Suites[1])
	}
}

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

package chaosbench

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// The recorded run directories every job's outcome is tested with (testdata/outcomes, see its README):
// one real run (results/compare/testdata/slowdisk/base: 30 s of put on one member), copied once per
// outcome with that outcome's evidence written into its summary, and decided by results.Decide. Two more
// hold a real recorded history beside a summary that a re-check must overturn.
const (
	outcomesDir   = "testdata/outcomes"
	outcomeSource = "results/compare/testdata/slowdisk/base"
)

// outcomeEvidence writes into a summary the evidence of each outcome kind, as a run records it.
var outcomeEvidence = map[outcome.Kind]func(s *results.Summary){
	outcome.OK: func(*results.Summary) {},
	outcome.ThresholdFailed: func(s *results.Summary) {
		s.Thresholds = []results.ThresholdResult{{Expr: "put:p99<1ms", Verdict: results.ThresholdFail, Observed: "5.87ms", Value: 5.87, Unit: "ms", Subject: "put"}}
	},
	outcome.Undecided: func(s *results.Summary) {
		s.Checks = []results.Check{{Name: "linearizability", Verdict: results.VerdictUnknown, Detail: "timed out after 1ns: 0 of 1 keys decided"}}
	},
	outcome.Violation: func(s *results.Summary) {
		s.Checks = []results.Check{{Name: "linearizability", Verdict: results.VerdictViolation, Detail: "key /k/7: a write acknowledged at revision 212 is never seen by a later read"}}
	},
	outcome.MemberCrashed: func(s *results.Summary) {
		s.Crashes = []results.Crash{{Member: "m1", PID: 4242, Time: s.Start.Add(12 * time.Second), Status: "exit status 2",
			Log: "members/m1.log", LogTail: []string{`{"level":"info","msg":"applied snapshot"}`, "panic: runtime error: index out of range [3] with length 3"}}}
	},
	outcome.HarnessError: func(s *results.Summary) {
		s.Errors = []string{"fault kill:m1@3s+1s: skipped: the cluster was not healthy before it (m1: context deadline exceeded)"}
	},
	outcome.Incomplete: func(s *results.Summary) {
		s.Interrupted, s.Incomplete, s.IncompleteReason = true, true, "interrupted by signal after 12.0s of load"
	},
	outcome.KnownIssue: func(s *results.Summary) {
		s.Checks = []results.Check{{Name: "linearizability", Verdict: results.VerdictKnownIssue, Detail: "1 request applied twice, attributed to etcd-io/etcd#18424"}}
		s.KnownIssues = []results.KnownIssueFinding{{Issue: "etcd-io/etcd#18424", Title: "a retried request applied twice", Check: "linearizability",
			Finding: "request applied twice: put /k/3 at revisions 118 and 119", Evidence: "2 attempts on the wire: the first failed with Unavailable, the client retried"}}
		s.KnownIssuePolicy = string(outcome.KnownIssuesReport)
	},
}

// outcomeFixture returns the recorded run directory of kind k (testdata/outcomes/<kind>).
func outcomeFixture(k outcome.Kind) string { return filepath.Join(outcomesDir, string(k)) }

// Check fixtures: a recorded history beside a summary whose stored verdict the re-check overturns.
var checkFixtures = []struct {
	dir, history string
	stored       outcome.Kind // what the summary says before the re-check
}{
	// A run decided ok, whose history loses a write: the re-check finds the violation.
	{"check-violation", "linearizability/testdata/fail/lost-write", outcome.OK},
	// A run whose check timed out, whose history is linearizable: the re-check decides it.
	{"check-ok", "linearizability/testdata/pass/healthy", outcome.Undecided},
}

// TestOutcomeFixtures: every fixture's stored outcome is what the judge decides from its evidence, so the
// fixtures stay true as the judge grows; -update writes them again from the recorded run.
func TestOutcomeFixtures(t *testing.T) {
	if *updateGolden {
		writeOutcomeFixtures(t)
	}
	for k := range outcomeEvidence {
		s, err := results.ReadSummary(outcomeFixture(k))
		if err != nil {
			t.Fatalf("%v (go test -run TestOutcomeFixtures -update writes it)", err)
		}
		if d := results.Decide(s); s.Outcome != k || d.Kind != k || len(d.Reasons) != len(s.Reasons) {
			t.Errorf("%s: stored %s %v, decided %v", k, s.Outcome, s.Reasons, d)
		}
	}
	for _, f := range checkFixtures {
		s, err := results.ReadSummary(filepath.Join(outcomesDir, f.dir))
		if err != nil || s.Outcome != f.stored || results.Decide(s).Kind != f.stored {
			t.Errorf("%s: %v %v, want a stored %s", f.dir, s, err, f.stored)
		}
	}
}

func writeOutcomeFixtures(t *testing.T) {
	t.Helper()
	write := func(dir string, edit func(*results.Summary)) {
		t.Helper()
		s, err := results.ReadSummary(outcomeSource)
		if err != nil {
			t.Fatal(err)
		}
		s.Outcome, s.Reasons = "", nil
		edit(s)
		s.SetOutcome()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := results.WriteSummary(dir, s); err != nil {
			t.Fatal(err)
		}
		copyFile(t, filepath.Join(outcomeSource, results.TimeSeriesFile), filepath.Join(dir, results.TimeSeriesFile))
	}
	for k, edit := range outcomeEvidence {
		write(outcomeFixture(k), edit)
	}
	for _, f := range checkFixtures {
		dir := filepath.Join(outcomesDir, f.dir)
		write(dir, outcomeEvidence[f.stored])
		for _, name := range []string{"history.jsonl", "watch.jsonl"} {
			copyFile(t, filepath.Join(f.history, name), filepath.Join(dir, name))
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

package results

import (
	"slices"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// Each area of the verdict is decided from its own part of the summary, and together they are the outcome:
// its kind is the most severe area's, and its reasons are the areas' reasons, each once.
func TestAreas(t *testing.T) {
	tests := []struct {
		name string
		edit func(s *Summary)
		want map[string]outcome.Kind // areas not named: ok
	}{
		{"ok", func(s *Summary) {}, nil},
		{"violation and a failed threshold", func(s *Summary) {
			s.Checks = []Check{{Name: "linearizability", Verdict: VerdictViolation, Detail: "x"}, {Name: "watch", Verdict: VerdictUnknown}}
			s.Thresholds = []ThresholdResult{{Expr: "put:p99<1ms", Verdict: ThresholdFail}}
		}, map[string]outcome.Kind{AreaConsistency: outcome.Violation, AreaThresholds: outcome.ThresholdFailed}},
		{"known issue reported", func(s *Summary) {
			s.Checks = []Check{{Name: "linearizability", Verdict: VerdictKnownIssue}}
			s.KnownIssues = []KnownIssueFinding{{Issue: "etcd-io/etcd#18424", Check: "linearizability"}}
		}, map[string]outcome.Kind{AreaConsistency: outcome.KnownIssue}},
		{"known issue failing by policy", func(s *Summary) {
			s.Checks = []Check{{Name: "linearizability", Verdict: VerdictKnownIssue}}
			s.KnownIssues = []KnownIssueFinding{{Issue: "etcd-io/etcd#18424", Check: "linearizability"}}
			s.KnownIssuePolicy = string(outcome.KnownIssuesFail)
		}, map[string]outcome.Kind{AreaConsistency: outcome.Violation}},
		{"known issue without evidence", func(s *Summary) {
			s.Checks = []Check{{Name: "linearizability", Verdict: VerdictKnownIssue}}
		}, map[string]outcome.Kind{AreaConsistency: outcome.Undecided}},
		{"crash, interrupt and errors", func(s *Summary) {
			s.Crashes = []Crash{{Member: "m1", Status: "exit status 2"}}
			s.Interrupted, s.Incomplete, s.IncompleteReason = true, true, "signal"
			s.Errors = []string{"fault skipped"}
		}, map[string]outcome.Kind{AreaMembers: outcome.MemberCrashed, AreaRun: outcome.Incomplete}},
		{"load stopped early", func(s *Summary) { s.Incomplete, s.IncompleteReason = true, "cluster gone" },
			map[string]outcome.Kind{AreaRun: outcome.HarnessError}},
		{"not recovered", func(s *Summary) { s.NotRecovered = []string{"kill m1: not recovered"} },
			map[string]outcome.Kind{AreaAvailability: outcome.ThresholdFailed}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Summary{Checks: []Check{{Name: "linearizability", Verdict: VerdictOK}}}
			tt.edit(s)
			o := Decide(s)
			areas := Areas(s)
			var names []string
			var reasons []outcome.Reason
			worst := outcome.OK
			for _, a := range areas {
				names = append(names, a.Name)
				want := tt.want[a.Name]
				if want == "" {
					want = outcome.OK
				}
				if a.Outcome.Kind != want {
					t.Errorf("area %s: %v, want %s", a.Name, a.Outcome, want)
				}
				reasons = append(reasons, a.Outcome.Reasons...)
				if slices.Index(outcome.Kinds(), a.Outcome.Kind) > slices.Index(outcome.Kinds(), worst) {
					worst = a.Outcome.Kind
				}
			}
			if !slices.Equal(names, []string{AreaConsistency, AreaMembers, AreaRun, AreaAvailability, AreaThresholds}) {
				t.Fatalf("areas %v", names)
			}
			if worst != o.Kind {
				t.Errorf("the most severe area is %s, the outcome %s", worst, o.Kind)
			}
			if len(reasons) != len(o.Reasons) {
				t.Fatalf("the areas hold %d reasons, the outcome %d", len(reasons), len(o.Reasons))
			}
			for _, r := range o.Reasons {
				if !slices.Contains(reasons, r) {
					t.Errorf("the outcome's reason %v is no area's", r)
				}
			}
		})
	}
}

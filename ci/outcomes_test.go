package ci

import (
	"testing"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// TestNightlyOutcomes: what the three nightly assets rely on from chaosbench, which they never decide
// again. They go red on the suite's exit code and retry only through --retry-harness. So a night in which
// one scenario had each outcome (beside a green one) is green exactly for ok and a known issue; a violation
// or a crashed member exits 4 whatever else happened in the night; and --retry-harness runs again only a
// harness error, once.
func TestNightlyOutcomes(t *testing.T) {
	green := outcome.Part{Label: "smoke-leader-kill", Outcome: outcome.Decide()}
	for _, k := range outcome.Kinds() {
		t.Run(string(k), func(t *testing.T) {
			o := outcome.Decide(outcome.New(k, "what the scenario found"))
			night := outcome.Combine([]outcome.Part{green, {Label: "smoke-nemesis", Outcome: o}})
			wantGreen := k == outcome.OK || k == outcome.KnownIssue
			if code := night.ExitCode(); (code == outcome.ExitOK) != wantGreen {
				t.Errorf("a night with a %s scenario exits %d: want green %v", k, code, wantGreen)
			}
			if k.Severe() && night.ExitCode() != outcome.ExitViolation {
				t.Errorf("a night with a %s scenario exits %d, want %d", k, night.ExitCode(), outcome.ExitViolation)
			}
			if k.Severe() {
				harness := outcome.Part{Label: "kube", Outcome: outcome.Decide(outcome.New(outcome.HarnessError, "the load failed"))}
				if code := outcome.Combine([]outcome.Part{harness, {Label: "smoke-nemesis", Outcome: o}}).ExitCode(); code != outcome.ExitViolation {
					t.Errorf("a %s beside a harness error exits %d, want %d", k, code, outcome.ExitViolation)
				}
			}
			if got, want := chaosbench.ShouldRetry(o, true, 1), k == outcome.HarnessError; got != want {
				t.Errorf("--retry-harness retries a %s: %v, want %v", k, got, want)
			}
			if chaosbench.ShouldRetry(o, true, 2) || chaosbench.ShouldRetry(o, false, 1) {
				t.Errorf("a %s is retried twice, or without --retry-harness", k)
			}
		})
	}
}

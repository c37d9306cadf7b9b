package results

import (
	"fmt"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// Decide is the one place a run's outcome is decided. It reads the summary and nothing else, so that a run
// finishing and `chaosbench report DIR` re-reading its directory reach the same verdict:
//   - a check with a violation (linearizability, watches, members that disagree) is a violation;
//   - a finding attributed by evidence to a known upstream issue is a known issue (a pass, named), or a
//     violation under the fail policy (--known-issues=fail);
//   - a member that crashed when no fault asked it to is member-crashed (exit 4, as a violation);
//   - a check that could not decide is undecided; a check that had nothing to check is neither;
//   - an interrupted run is incomplete;
//   - every entry of Errors (the load or the cluster failed, a fault was skipped or injected nothing, a
//     member exited by itself, a heal was left to the final sweep, a file could not be written) is a
//     harness error, and so is a load that stopped early for any reason but an interrupt;
//   - a fault window after which the cluster did not recover (NotRecovered), and every failed threshold,
//     fail a threshold.
//
// outcome.Decide orders them by precedence.
func Decide(s *Summary) outcome.Outcome {
	var rs []outcome.Reason
	for _, a := range areaReasons(s) {
		rs = append(rs, a.reasons...)
	}
	return outcome.Decide(rs...)
}

// Areas of a run's verdict: the parts of the summary Decide reads, each decided alone.
const (
	// AreaConsistency: the checks and the known-issue findings.
	AreaConsistency = "consistency"
	// AreaMembers: the members that crashed.
	AreaMembers = "members"
	// AreaRun: an interrupt, a load that stopped early, the harness errors.
	AreaRun = "run"
	// AreaAvailability: the fault windows after which the cluster did not recover.
	AreaAvailability = "availability"
	// AreaThresholds: the thresholds.
	AreaThresholds = "thresholds"
)

// Area is the decision of one area of a run's verdict, as Decide makes it from that area's part of the
// summary alone. A report's verdict cards show these and nothing of their own, so that no card can say
// other than the outcome: the outcome's kind is the most severe of the areas' kinds, and every reason of
// the outcome is a reason of exactly one area.
type Area struct {
	Name    string
	Outcome outcome.Outcome
}

// Areas decides each area of the run's verdict on its own, in the order AreaConsistency, AreaMembers,
// AreaRun, AreaAvailability, AreaThresholds.
func Areas(s *Summary) []Area {
	var out []Area
	for _, a := range areaReasons(s) {
		out = append(out, Area{Name: a.name, Outcome: outcome.Decide(a.reasons...)})
	}
	return out
}

type areaReason struct {
	name    string
	reasons []outcome.Reason
}

// areaReasons lists the reasons of every area, in an order that keeps Decide's reasons of one kind in the
// order they always had (the checks before the known issues, an interrupt before the errors, the windows
// not recovered before the thresholds).
func areaReasons(s *Summary) []areaReason {
	return []areaReason{
		{AreaConsistency, consistencyReasons(s)},
		{AreaMembers, crashReasons(s)},
		{AreaRun, runReasons(s)},
		{AreaAvailability, recoveryReasons(s)},
		{AreaThresholds, thresholdReasons(s)},
	}
}

func consistencyReasons(s *Summary) []outcome.Reason {
	var rs []outcome.Reason
	for _, c := range s.Checks {
		switch c.Verdict {
		case VerdictViolation:
			rs = append(rs, outcome.New(outcome.Violation, "%s: %s", c.Name, oneLine(c.Detail)))
		case VerdictUnknown:
			rs = append(rs, outcome.New(outcome.Undecided, "%s could not decide: %s", c.Name, oneLine(c.Detail)))
		case VerdictKnownIssue:
			// Reported by the known-issue findings below; a check that says so without any is not a pass.
			if !hasKnown(s.KnownIssues, c.Name) {
				rs = append(rs, outcome.New(outcome.Undecided, "%s: known issue without evidence: %s", c.Name, oneLine(c.Detail)))
			}
		case VerdictOK, VerdictNothing:
		default:
			rs = append(rs, outcome.New(outcome.Undecided, "%s: unknown verdict %q", c.Name, c.Verdict))
		}
	}
	policy := outcome.KnownIssuePolicy(s.KnownIssuePolicy)
	for _, k := range s.KnownIssues {
		rs = append(rs, outcome.New(policy.Kind(), "%s: %s", k.Check, k.Text()))
	}
	return rs
}

func crashReasons(s *Summary) []outcome.Reason {
	var rs []outcome.Reason
	for _, c := range s.Crashes {
		rs = append(rs, outcome.New(outcome.MemberCrashed, "%s", c.Text()))
	}
	return rs
}

func runReasons(s *Summary) []outcome.Reason {
	var rs []outcome.Reason
	switch {
	case s.Interrupted:
		rs = append(rs, outcome.New(outcome.Incomplete, "%s", oneLine(s.IncompleteReason)))
	case s.Incomplete:
		rs = append(rs, outcome.New(outcome.HarnessError, "the load stopped early: %s", oneLine(s.IncompleteReason)))
	}
	for _, e := range s.Errors {
		rs = append(rs, outcome.New(outcome.HarnessError, "%s", oneLine(e)))
	}
	return rs
}

func recoveryReasons(s *Summary) []outcome.Reason {
	var rs []outcome.Reason
	for _, n := range s.NotRecovered {
		rs = append(rs, outcome.New(outcome.ThresholdFailed, "%s", oneLine(n)))
	}
	return rs
}

func thresholdReasons(s *Summary) []outcome.Reason {
	var rs []outcome.Reason
	for _, t := range s.Thresholds {
		if t.Verdict == ThresholdFail {
			text := fmt.Sprintf("threshold %s failed: observed %s", t.Expr, t.Observed)
			if t.Subject != "" {
				text += " (" + t.Subject + ")"
			}
			if t.Detail != "" {
				text += ": " + oneLine(t.Detail)
			}
			rs = append(rs, outcome.New(outcome.ThresholdFailed, "%s", text))
		}
	}
	return rs
}

// SetOutcome decides the summary's outcome and stores it in the summary.
func (s *Summary) SetOutcome() outcome.Outcome {
	o := Decide(s)
	s.Outcome, s.Reasons = o.Kind, o.Reasons
	return o
}

// Verdict returns the outcome stored in the summary; a summary written before outcomes existed (or not yet
// decided) is decided now.
func (s *Summary) Verdict() outcome.Outcome {
	if s.Outcome == "" {
		return Decide(s)
	}
	return outcome.Outcome{Kind: s.Outcome, Reasons: s.Reasons}
}

// oneLine keeps the first line of a multi-line text, so that every reason is one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// hasKnown reports whether a known-issue finding of the check is recorded.
func hasKnown(ks []KnownIssueFinding, check string) bool {
	for _, k := range ks {
		if k.Check == check {
			return true
		}
	}
	return false
}

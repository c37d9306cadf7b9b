// Package outcome is the verdict vocabulary of every chaosbench command, at the bottom of the house: the
// outcome of a run with its reasons, the exit codes it maps to, and usage errors (bad input, exit 2).
//
// A run's outcome is decided in one place, as a value (Decide), and everything a user or a CI system reads
// (the exit code, the report's headline, JUnit, summary.json, the text summary) is derived from that value
// and nothing else, so that they cannot disagree.
package outcome

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Exit codes of every chaosbench command. docs/outcomes.md documents them in one table; keep both in step.
const (
	// ExitOK: the run completed and every check and threshold passed.
	ExitOK = 0
	// ExitHarness: the run did not do what it was asked (a cluster did not start, a fault did not happen,
	// a member exited by itself, a file could not be written), or a consistency check could not decide.
	ExitHarness = 1
	// ExitUsage: a flag, scenario file or endpoint was wrong; nothing was started.
	ExitUsage = 2
	// ExitThresholds: the run completed but a threshold failed.
	ExitThresholds = 3
	// ExitViolation: a consistency check found a violation (members disagreeing included), or a member
	// crashed when no fault asked it to: etcd failed.
	ExitViolation = 4
	// ExitInterrupted: the run was interrupted (SIGINT/SIGTERM); partial results were written.
	ExitInterrupted = 130
)

// Kind is the class of an outcome, and of each reason that leads to one.
type Kind string

// The kinds, from the least to the most severe (see Decide for the precedence).
const (
	// OK: the run did everything it was asked, and every check and threshold passed.
	OK Kind = "ok"
	// KnownIssue: a check found what a known upstream issue does, and the evidence the run recorded proves
	// that issue (see the catalog of known issues). It passes by default, named with its evidence wherever a
	// violation would be; a policy of failing on known issues turns it into a Violation before Decide.
	KnownIssue Kind = "known-issue"
	// ThresholdFailed: the run completed, its checks passed, but a threshold failed.
	ThresholdFailed Kind = "threshold-failed"
	// Undecided: a consistency check could not decide (it timed out, its input was unreadable). Never a pass.
	Undecided Kind = "undecided"
	// HarnessError: the run did not do what it was asked: the cluster or the load failed, a fault was
	// skipped or injected nothing, a member exited by itself, a heal was left to the final sweep.
	HarnessError Kind = "harness-error"
	// Incomplete: the run was interrupted; what it wrote covers the load up to that moment.
	Incomplete Kind = "incomplete"
	// MemberCrashed: a member process exited or panicked when no fault asked it to: etcd failing, ranked with
	// violations (exit 4) and never retried.
	MemberCrashed Kind = "member-crashed"
	// Violation: a consistency check found a violation. Nothing else that went wrong hides it.
	Violation Kind = "violation"
)

// precedence orders the kinds: the outcome of a run is its most severe reason's kind. A violation outranks
// everything (it is what the tool exists to find, and it stays true whatever else failed); a crashed member
// is etcd failing too, and outranks what our own side did wrong; an interrupt outranks the harness errors it
// causes; a harness error outranks an undecided check (the check may have been undecided because of it); an
// undecided check outranks a failed threshold (no pass without checks); a known issue outranks only OK (it is
// reported, and passes unless a policy made it a violation).
var precedence = []Kind{OK, KnownIssue, ThresholdFailed, Undecided, HarnessError, Incomplete, MemberCrashed, Violation}

// Kinds returns every kind, from the least to the most severe.
func Kinds() []Kind { return slices.Clone(precedence) }

// Severe reports whether k is etcd failing (a violation or a crashed member): exit 4 in every job, whatever
// else happened, and never retried.
func (k Kind) Severe() bool { return k == Violation || k == MemberCrashed }

// Retryable reports whether an outcome of kind k may be retried by a job that retries its own failures:
// only a harness error, which is ours, never etcd's.
func (k Kind) Retryable() bool { return k == HarnessError }

// rank is the position of k in the precedence; unknown kinds rank as harness errors, never as a pass.
func rank(k Kind) int {
	if i := slices.Index(precedence, k); i >= 0 {
		return i
	}
	return slices.Index(precedence, HarnessError)
}

// Valid reports whether k is one of the kinds.
func (k Kind) Valid() bool { return slices.Contains(precedence, k) }

// Reason is one thing that decided an outcome, in one line.
type Reason struct {
	Kind Kind   `json:"kind"`
	Text string `json:"text"`
}

func (r Reason) String() string { return fmt.Sprintf("%s: %s", r.Kind, r.Text) }

// Outcome is the verdict of a run: its kind and every reason for it, most severe first.
type Outcome struct {
	Kind    Kind     `json:"outcome"`
	Reasons []Reason `json:"reasons,omitempty"`
}

// Decide returns the outcome of a run from all its reasons: the kind of the most severe one (OK without
// any), and the reasons sorted most severe first, stably. Reasons of kind OK are dropped.
func Decide(reasons ...Reason) Outcome {
	o := Outcome{Kind: OK}
	for _, r := range reasons {
		if r.Kind == OK {
			continue
		}
		if !r.Kind.Valid() {
			r.Text = fmt.Sprintf("(unknown kind %q) %s", r.Kind, r.Text)
			r.Kind = HarnessError
		}
		o.Reasons = append(o.Reasons, r)
		if rank(r.Kind) > rank(o.Kind) {
			o.Kind = r.Kind
		}
	}
	slices.SortStableFunc(o.Reasons, func(a, b Reason) int { return rank(b.Kind) - rank(a.Kind) })
	return o
}

// New returns a reason of kind k.
func New(k Kind, format string, args ...any) Reason {
	return Reason{Kind: k, Text: fmt.Sprintf(format, args...)}
}

// ExitCode is the process exit code of the outcome.
func (o Outcome) ExitCode() int {
	switch o.Kind {
	case OK, KnownIssue:
		return ExitOK
	case ThresholdFailed:
		return ExitThresholds
	case Violation, MemberCrashed:
		return ExitViolation
	case Incomplete:
		return ExitInterrupted
	}
	return ExitHarness
}

// Passed reports whether the outcome is a pass: OK, or known issues only (which are named, not hidden).
func (o Outcome) Passed() bool { return o.Kind == OK || o.Kind == KnownIssue }

// Headline is the one word every report leads with.
func (o Outcome) Headline() string {
	switch o.Kind {
	case OK, KnownIssue:
		return "PASS"
	case ThresholdFailed, Violation, MemberCrashed:
		return "FAIL"
	case Undecided:
		return "UNDECIDED"
	case Incomplete:
		return "INCOMPLETE"
	}
	return "ERROR"
}

// Class is the colour class of the headline: ok, fail or warn.
func (o Outcome) Class() string {
	switch o.Kind {
	case OK:
		return "ok"
	case Incomplete, KnownIssue:
		return "warn"
	}
	return "fail"
}

// Texts returns the reasons' texts, of the given kinds (all of them when none is given).
func (o Outcome) Texts(kinds ...Kind) []string {
	var out []string
	for _, r := range o.Reasons {
		if len(kinds) == 0 || slices.Contains(kinds, r.Kind) {
			out = append(out, r.Text)
		}
	}
	return out
}

// String is the outcome in one line: "FAIL (violation): members disagree ...; 1 of 3 thresholds failed".
func (o Outcome) String() string {
	if len(o.Reasons) == 0 {
		return fmt.Sprintf("%s (%s)", o.Headline(), o.Kind)
	}
	return fmt.Sprintf("%s (%s): %s", o.Headline(), o.Kind, strings.Join(o.Texts(), "; "))
}

// Part is the outcome of one part of a job (a run of a comparison, a scenario of a suite, a step of a
// qualification), named by Label.
type Part struct {
	Label   string
	Outcome Outcome
}

// Combine decides the outcome of a job made of parts, with extra reasons of the job's own (a comparison's
// gate, a suite's selection): every reason of every part, prefixed with the part's label, and the extra ones,
// by the same precedence as Decide. A violation or a crashed member in any part is the job's outcome, whatever
// order the parts ran in and whatever else failed.
func Combine(parts []Part, extra ...Reason) Outcome {
	var rs []Reason
	for _, p := range parts {
		for _, r := range p.Outcome.Reasons {
			if p.Label != "" {
				r.Text = p.Label + ": " + r.Text
			}
			rs = append(rs, r)
		}
		if len(p.Outcome.Reasons) == 0 && p.Outcome.Kind != OK && p.Outcome.Kind != "" {
			rs = append(rs, Reason{Kind: p.Outcome.Kind, Text: p.Label + ": " + string(p.Outcome.Kind)})
		}
	}
	return Decide(append(rs, extra...)...)
}

// Error is an error carrying a run's outcome, for commands that return errors: it maps to the outcome's
// exit code (Code) wherever it is wrapped. Cause, when set, is the error behind it (errors.Is sees it).
type Error struct {
	Outcome Outcome
	Cause   error
}

func (e *Error) Error() string { return e.Outcome.String() }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// Err returns nil for a pass and an *Error carrying o otherwise.
func (o Outcome) Err() error { return o.ErrWith(nil) }

// ErrWith returns nil for a pass and an *Error carrying o and its cause otherwise.
func (o Outcome) ErrWith(cause error) error {
	if o.Passed() {
		return nil
	}
	return &Error{Outcome: o, Cause: cause}
}

// Code maps an error returned by a chaosbench command to the process exit code: 0 for nil, ExitUsage for a
// usage error, the outcome's code for an *Error, ExitHarness for anything else.
func Code(err error) int {
	var oe *Error
	switch {
	case err == nil:
		return ExitOK
	case IsUsage(err):
		return ExitUsage
	case errors.As(err, &oe):
		return oe.Outcome.ExitCode()
	}
	return ExitHarness
}

// KnownIssuePolicy is what a known issue does to an outcome: KnownIssuesReport (the default) names it and
// passes; KnownIssuesFail makes it a violation (exit 4).
type KnownIssuePolicy string

// The known-issue policies (--known-issues).
const (
	KnownIssuesReport KnownIssuePolicy = "report"
	KnownIssuesFail   KnownIssuePolicy = "fail"
)

// ParseKnownIssuePolicy reads --known-issues: "" is the default (report); anything but report or fail is a
// usage error.
func ParseKnownIssuePolicy(s string) (KnownIssuePolicy, error) {
	switch KnownIssuePolicy(s) {
	case "", KnownIssuesReport:
		return KnownIssuesReport, nil
	case KnownIssuesFail:
		return KnownIssuesFail, nil
	}
	return "", Usagef("--known-issues %q: expected report or fail", s)
}

// Kind is the kind a known issue's reason takes under the policy.
func (p KnownIssuePolicy) Kind() Kind {
	if p == KnownIssuesFail {
		return Violation
	}
	return KnownIssue
}

// Expect judges a run that exists to find something: a regression scenario on the etcd release that had
// the bug. It passes when the run's outcome is of a kind in want (it caught the bug, and the right way),
// naming what it found; a run that found nothing, or found something of another kind, is a harness error
// (the scenario did not reproduce what it names: a gate that no longer bites is broken, never fine). An
// undecided, interrupted or broken run stays what it is: it neither caught nor missed anything.
func Expect(o Outcome, want []Kind) Outcome {
	names := make([]string, len(want))
	for i, k := range want {
		names[i] = string(k)
	}
	expected := strings.Join(names, " or ")
	switch {
	case slices.Contains(want, o.Kind):
		caught := Outcome{Kind: OK}
		for _, t := range o.Texts(o.Kind) {
			caught.Reasons = append(caught.Reasons, New(OK, "caught as expected (%s): %s", o.Kind, t))
		}
		return caught
	case o.Kind == Undecided || o.Kind == HarnessError || o.Kind == Incomplete:
		return Decide(append(o.Reasons, New(o.Kind, "expected %s: the run could not tell", expected))...)
	case o.Passed() || o.Kind == ThresholdFailed:
		return Decide(New(HarnessError, "not caught: expected %s, the run ended %s", expected, o.Kind))
	}
	return Decide(New(HarnessError, "caught as %s, expected %s: %s", o.Kind, expected, strings.Join(o.Texts(), "; ")))
}

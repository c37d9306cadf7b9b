package outcome

import (
	"errors"
	"fmt"
	"testing"
)

func TestDecidePrecedence(t *testing.T) {
	threshold := New(ThresholdFailed, "1 of 3 thresholds failed")
	undecided := New(Undecided, "linearizability: timed out")
	harness := New(HarnessError, "fault kill:leader@10s skipped")
	interrupted := New(Incomplete, "interrupted by signal")
	violation := New(Violation, "members disagree at revision 120")
	crashed := New(MemberCrashed, "member m2 crashed (exit status 2): panic: boom")
	known := New(KnownIssue, "linearizability: known issue etcd-io/etcd#18424")
	for _, tc := range []struct {
		name     string
		reasons  []Reason
		kind     Kind
		code     int
		headline string
	}{
		{"nothing went wrong", nil, OK, ExitOK, "PASS"},
		{"ok reasons are dropped", []Reason{New(OK, "fine")}, OK, ExitOK, "PASS"},
		{"threshold", []Reason{threshold}, ThresholdFailed, ExitThresholds, "FAIL"},
		{"undecided is never a pass", []Reason{undecided}, Undecided, ExitHarness, "UNDECIDED"},
		{"undecided outranks a threshold", []Reason{threshold, undecided}, Undecided, ExitHarness, "UNDECIDED"},
		{"harness outranks undecided", []Reason{undecided, harness}, HarnessError, ExitHarness, "ERROR"},
		{"interrupt outranks harness", []Reason{harness, interrupted}, Incomplete, ExitInterrupted, "INCOMPLETE"},
		{"violation after a load error", []Reason{harness, violation}, Violation, ExitViolation, "FAIL"},
		{"violation outranks everything", []Reason{threshold, undecided, harness, interrupted, violation}, Violation, ExitViolation, "FAIL"},
		{"a known issue passes, named", []Reason{known}, KnownIssue, ExitOK, "PASS"},
		{"a known issue hides no threshold", []Reason{known, threshold}, ThresholdFailed, ExitThresholds, "FAIL"},
		{"a crashed member is exit 4", []Reason{crashed}, MemberCrashed, ExitViolation, "FAIL"},
		{"a crash outranks an interrupt and a harness error", []Reason{harness, interrupted, crashed}, MemberCrashed, ExitViolation, "FAIL"},
		{"a violation outranks a crash", []Reason{crashed, violation}, Violation, ExitViolation, "FAIL"},
		{"unknown kinds are harness errors", []Reason{{Kind: "bogus", Text: "x"}}, HarnessError, ExitHarness, "ERROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Decide(tc.reasons...)
			if o.Kind != tc.kind || o.ExitCode() != tc.code || o.Headline() != tc.headline {
				t.Fatalf("Decide = %s (exit %d, %s), want %s (exit %d, %s)", o.Kind, o.ExitCode(), o.Headline(), tc.kind, tc.code, tc.headline)
			}
			if o.Passed() != (tc.kind == OK || tc.kind == KnownIssue) {
				t.Fatalf("Passed = %v for %s", o.Passed(), o.Kind)
			}
			if len(o.Reasons) > 0 && o.Reasons[0].Kind != o.Kind {
				t.Fatalf("first reason %v is not the outcome's kind %s", o.Reasons[0], o.Kind)
			}
			err := fmt.Errorf("run: %w", o.Err())
			if o.Passed() {
				err = o.Err()
			}
			if got := Code(err); got != tc.code {
				t.Fatalf("Code(%v) = %d, want %d", err, got, tc.code)
			}
		})
	}
}

func TestCode(t *testing.T) {
	if got := Code(Usagef("--rate -1: must not be negative")); got != ExitUsage {
		t.Fatalf("usage error: exit %d", got)
	}
	if got := Code(errors.New("disk full")); got != ExitHarness {
		t.Fatalf("plain error: exit %d", got)
	}
}

func TestCombine(t *testing.T) {
	threshold := Outcome{Kind: ThresholdFailed, Reasons: []Reason{New(ThresholdFailed, "put:p99 38ms")}}
	undecided := Outcome{Kind: Undecided, Reasons: []Reason{New(Undecided, "linearizability timed out")}}
	violation := Outcome{Kind: Violation, Reasons: []Reason{New(Violation, "stale read")}}
	for _, tc := range []struct {
		name  string
		parts []Part
		extra []Reason
		kind  Kind
	}{
		{"all ok", []Part{{"a", Outcome{Kind: OK}}, {"b", Outcome{Kind: OK}}}, nil, OK},
		{"threshold then violation", []Part{{"a", threshold}, {"b", violation}}, nil, Violation},
		{"undecided then violation", []Part{{"a", undecided}, {"b", violation}}, nil, Violation},
		{"violation then threshold", []Part{{"a", violation}, {"b", threshold}}, nil, Violation},
		{"an undecided gate is undecided", []Part{{"a", Outcome{Kind: OK}}}, []Reason{New(Undecided, "put:p99 undecided")}, Undecided},
		{"a kind without reasons keeps its kind", []Part{{"a", Outcome{Kind: MemberCrashed}}}, nil, MemberCrashed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Combine(tc.parts, tc.extra...)
			if o.Kind != tc.kind {
				t.Fatalf("Combine = %s, want %s (%v)", o.Kind, tc.kind, o.Reasons)
			}
			for _, r := range o.Reasons {
				if r.Kind != Undecided && r.Text[:2] != "a:" && r.Text[:2] != "b:" {
					t.Fatalf("reason %q is not labelled with its part", r.Text)
				}
			}
		})
	}
}

func TestKnownIssuePolicy(t *testing.T) {
	for in, want := range map[string]Kind{"": KnownIssue, "report": KnownIssue, "fail": Violation} {
		p, err := ParseKnownIssuePolicy(in)
		if err != nil || p.Kind() != want {
			t.Fatalf("ParseKnownIssuePolicy(%q) = %v, %v; kind %s, want %s", in, p, err, p.Kind(), want)
		}
	}
	if _, err := ParseKnownIssuePolicy("ignore"); !IsUsage(err) {
		t.Fatalf("ParseKnownIssuePolicy(ignore) = %v, want a usage error", err)
	}
}

// TestExpect: a regression scenario on its affected release passes only when it finds the kind it names;
// clean, or found another way, it is a harness error; undecided stays undecided (never a pass).
func TestExpect(t *testing.T) {
	violation := Decide(New(Violation, "watch event lost at revision 7"))
	for _, tc := range []struct {
		name string
		run  Outcome
		want []Kind
		kind Kind
		text string
	}{
		{"caught", violation, []Kind{Violation}, OK, "caught as expected (violation): watch event lost at revision 7"},
		{"caught either way", Decide(New(MemberCrashed, "m1 panicked")), []Kind{Violation, MemberCrashed}, OK, "caught as expected (member-crashed): m1 panicked"},
		{"clean", Decide(), []Kind{Violation}, HarnessError, "not caught: expected violation, the run ended ok"},
		{"known issue", Decide(New(KnownIssue, "etcd-io/etcd#18424")), []Kind{Violation}, HarnessError, "not caught: expected violation, the run ended known-issue"},
		{"threshold", Decide(New(ThresholdFailed, "p99")), []Kind{Violation}, HarnessError, "not caught: expected violation, the run ended threshold-failed"},
		{"other finding", Decide(New(MemberCrashed, "m2 exited")), []Kind{Violation}, HarnessError, "caught as member-crashed, expected violation: m2 exited"},
		{"undecided", Decide(New(Undecided, "check timed out")), []Kind{Violation}, Undecided, "check timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Expect(tc.run, tc.want)
			if got.Kind != tc.kind || len(got.Reasons) == 0 || got.Reasons[0].Text != tc.text {
				t.Fatalf("Expect = %+v, want %s with %q first", got, tc.kind, tc.text)
			}
		})
	}
}

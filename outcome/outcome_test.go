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
		{"unknown kinds are harness errors", []Reason{{Kind: "bogus", Text: "x"}}, HarnessError, ExitHarness, "ERROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Decide(tc.reasons...)
			if o.Kind != tc.kind || o.ExitCode() != tc.code || o.Headline() != tc.headline {
				t.Fatalf("Decide = %s (exit %d, %s), want %s (exit %d, %s)", o.Kind, o.ExitCode(), o.Headline(), tc.kind, tc.code, tc.headline)
			}
			if o.Passed() != (tc.kind == OK) {
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

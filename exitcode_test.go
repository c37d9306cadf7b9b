package chaosbench

import (
	"errors"
	"fmt"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// TestExitCode pins every exit code to the error that causes it (docs/outcomes.md's table is the documentation).
func TestExitCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"ok", nil, outcome.ExitOK},
		{"usage", outcome.Usagef("--rate: bad"), outcome.ExitUsage},
		{"wrapped usage", fmt.Errorf("load scenario: %w", outcome.Usagef("bad")), outcome.ExitUsage},
		{"interrupted", ErrInterrupted, outcome.ExitInterrupted},
		{"thresholds outcome", fmt.Errorf("run: %w", outcome.Decide(outcome.New(outcome.ThresholdFailed, "put:p99<25ms")).Err()), outcome.ExitThresholds},
		{"violation outcome", fmt.Errorf("run: %w", outcome.Decide(outcome.New(outcome.Violation, "x"), outcome.New(outcome.HarnessError, "y")).Err()), outcome.ExitViolation},
		{"undecided outcome", outcome.Decide(outcome.New(outcome.Undecided, "timed out")).Err(), outcome.ExitHarness},
		{"interrupted outcome", outcome.Decide(outcome.New(outcome.Incomplete, "signal")).ErrWith(ErrInterrupted), outcome.ExitInterrupted},
		{"harness", errors.New("write summary: disk full"), outcome.ExitHarness},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.err); got != tt.want {
			t.Errorf("%s: ExitCode(%v) = %d, want %d", tt.name, tt.err, got, tt.want)
		}
	}
}

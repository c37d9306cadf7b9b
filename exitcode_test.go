package chaosbench

import (
	"errors"
	"fmt"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	"github.com/etcd-chaosbench/chaosbench/faults"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// TestExitCode pins every exit code to the error that causes it (README's table is the documentation).
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
		{"thresholds", fmt.Errorf("judge: %w", results.ErrThresholds), outcome.ExitThresholds},
		{"not recovered", fmt.Errorf("partition: %w", faults.ErrNotRecovered), outcome.ExitThresholds},
		{"harness", errors.New("write summary: disk full"), outcome.ExitHarness},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.err); got != tt.want {
			t.Errorf("%s: ExitCode(%v) = %d, want %d", tt.name, tt.err, got, tt.want)
		}
	}
}

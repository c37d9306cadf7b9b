package chaosbench

import (
	"errors"
	"fmt"
	"testing"

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
		{"ok", nil, results.ExitOK},
		{"usage", results.Usagef("--rate: bad"), results.ExitUsage},
		{"wrapped usage", fmt.Errorf("load scenario: %w", results.Usagef("bad")), results.ExitUsage},
		{"interrupted", ErrInterrupted, results.ExitInterrupted},
		{"thresholds", fmt.Errorf("judge: %w", results.ErrThresholds), results.ExitThresholds},
		{"not recovered", fmt.Errorf("partition: %w", faults.ErrNotRecovered), results.ExitThresholds},
		{"harness", errors.New("write summary: disk full"), results.ExitHarness},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.err); got != tt.want {
			t.Errorf("%s: ExitCode(%v) = %d, want %d", tt.name, tt.err, got, tt.want)
		}
	}
}

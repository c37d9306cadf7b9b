package chaosbench

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"syscall"
	"time"

	lin "github.com/etcd-chaosbench/chaosbench/linearizability"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// CheckOptions are the settings of `chaosbench check`.
type CheckOptions struct {
	// Dir is a run directory holding history.bin (and watch.bin, faults.jsonl when the run had them), or a
	// legacy run's history.jsonl and watch.jsonl.
	Dir string
	// Timeout bounds the check (0: linearizability.DefaultTimeout).
	Timeout time.Duration
	// Out receives the verdicts and the figures.
	Out io.Writer
}

// Check re-checks the history recorded in a run directory, offline: linearizability, watch guarantees and
// serializable reads. It writes check.json (and linearizability.html for a linearizability violation)
// into the directory, prints one verdict per check with the time and memory the check took, and returns
// an error wrapping linearizability.ErrViolation or ErrUndecided when not every check passed.
func Check(ctx context.Context, o CheckOptions) (*lin.Report, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Timeout < 0 {
		return nil, outcome.Usagef("--timeout %s: must not be negative", o.Timeout)
	}
	if _, err := history.HistoryPath(o.Dir); err != nil {
		return nil, outcome.Usagef("%s: not a run directory with a recorded history (%s, or a legacy run's %s)", o.Dir, history.HistoryFile, history.LegacyHistoryFile)
	}
	start := time.Now()
	defer checkMemory()()
	rep, err := lin.CheckDir(ctx, o.Dir, lin.Options{Timeout: o.Timeout})
	if rep == nil {
		return nil, fmt.Errorf("check %s: %w", o.Dir, err)
	}
	lin.WriteVerdicts(o.Out, rep)
	fmt.Fprintf(o.Out, "checked %d operations and %d watch events in %.1fs (CPU %.1fs), peak memory %d MB; report: %s\n",
		rep.Stats.Operations, rep.Stats.WatchEvents, time.Since(start).Seconds(), cpuSeconds(), peakRSS()>>20, filepath.Join(o.Dir, lin.ReportFile))
	return rep, err
}

// peakRSS returns the process's peak resident set size in bytes.
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // kilobytes on Linux
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

package chaosbench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results/compare"
	"github.com/etcd-chaosbench/chaosbench/results/report"
	"github.com/etcd-chaosbench/chaosbench/results/trend"
)

// TrendOptions are the settings of `chaosbench trend`.
type TrendOptions struct {
	// Dirs are suite or run directories, or directories holding them (one night each), in any order.
	Dirs []string
	// Out is where trend.json, trend.md and trend.html go (default results/<time>-trend).
	Out string
	// MinEffect is the practical threshold as a fraction (0: the comparison engine's default).
	MinEffect float64
	// FailOnRegression makes a regression of the latest night decide the exit code (3); RegressionFigures
	// limits it to those figures (nil: all).
	FailOnRegression  bool
	RegressionFigures []string
}

// Trend follows the scenarios of a series of nightly results night by night, writes trend.json, trend.md
// and trend.html, prints the Markdown and the verdict, and returns an error carrying the trend's outcome
// (trend.Decide): the latest night's runs' own outcomes (a violation in one is exit 4, with or without a
// gate) and, with FailOnRegression, the gate's: a figure the latest night is worse on beyond the previous
// nights' noise fails a threshold (exit 3), a gated figure the trend cannot call is undecided (exit 1).
func Trend(opts TrendOptions, out io.Writer) error {
	if len(opts.Dirs) == 0 {
		return outcome.Usagef("trend: give the nights' suite or run directories (or a directory holding them)")
	}
	if opts.MinEffect < 0 || opts.MinEffect >= 1 {
		return outcome.Usagef("--min-effect %g%%: from 0 to under 100 (percent)", 100*opts.MinEffect)
	}
	for _, d := range opts.Dirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return outcome.Usagef("trend: %s is not a directory", d)
		}
	}
	// A gate on a figure no scenario has is bad input: Read says so before anything is written.
	t, err := trend.Read(opts.Dirs, trend.Options{MinEffect: opts.MinEffect,
		Gate: compare.NewGate(opts.FailOnRegression, opts.RegressionFigures)})
	if err != nil {
		return err
	}
	dir := opts.Out
	if dir == "" {
		dir = filepath.Join("results", time.Now().Format("20060102-150405")+"-trend")
	}
	o := t.Verdict()
	// What could not be written is a harness error of the trend; it hides nothing the nights found.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		o = outcome.Decide(append(o.Reasons, outcome.New(outcome.HarnessError, "trend: %v", err))...)
	} else if err := report.WriteTrend(dir, t); err != nil {
		o = outcome.Decide(append(o.Reasons, outcome.New(outcome.HarnessError, "trend: %v", err))...)
	}
	if err := report.WriteTrendMarkdown(out, t); err != nil {
		o = outcome.Decide(append(o.Reasons, outcome.New(outcome.HarnessError, "print the trend: %v", err))...)
	}
	fmt.Fprintf(out, "\ntrend: %s\n", filepath.Join(dir, report.TrendHTMLFile))
	writeVerdict(out, "trend", o)
	return o.Err()
}

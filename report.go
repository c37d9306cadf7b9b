package chaosbench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/compare"
	"github.com/etcd-chaosbench/chaosbench/results/report"
)

// ReportOptions is what `chaosbench report` renders.
type ReportOptions struct {
	// Dirs are run directories: one is re-rendered, several are compared (the first is the baseline).
	Dirs []string
	// Labels name the runs of a comparison (default: the directories' base names).
	Labels []string
	// Thresholds re-judge a single run; empty uses the thresholds it was run with.
	Thresholds []string
	// Out is where a comparison is written (default results/<time>-compare).
	Out string
	// MinEffect is the practical threshold of a comparison's verdicts (0.05 = 5%; 0: the default).
	MinEffect float64
	// FailOnRegression makes a comparison's significant regression larger than MinEffect, of a figure in
	// RegressionFigures (nil: any), decide the exit code (3).
	FailOnRegression  bool
	RegressionFigures []string
	// AcrossHosts says runs of different machines are compared on purpose (a note, not a warning).
	AcrossHosts bool
	// Bundle, when set, is the path of a .tar.gz written after the report: the report (or comparison),
	// every run's summary, series and histograms, and how to re-run them (see report.WriteBundle).
	Bundle string
	// Redact replaces the clusters' endpoints in the bundle.
	Redact bool
}

// Report re-renders one run's report files from its directory, or compares several runs. A re-rendered run
// is judged again (its thresholds, or those given) and its outcome decided again from its summary, as the
// run decided it: the error carries that outcome, so the exit code is the run's. summary.json is left as
// the run wrote it.
//
// A comparison is decided as `chaosbench compare` decides one (compare.Decide): every run's own outcome,
// labelled by its variant and round, with the gate's reasons when there is a gate; comparison.md and
// comparison.html lead with that outcome, and the error carries it. A violation in any run is exit 4, with
// or without a gate.
func Report(opts ReportOptions, out io.Writer) error {
	if len(opts.Dirs) == 0 {
		return outcome.Usagef("give a run directory, or several to compare")
	}
	if len(opts.Labels) > 0 && len(opts.Labels) != len(opts.Dirs) {
		return outcome.Usagef("--label: %d labels for %d run directories", len(opts.Labels), len(opts.Dirs))
	}
	for _, arg := range opts.Dirs {
		for _, d := range strings.Split(arg, ",") {
			if _, err := os.Stat(filepath.Join(d, results.SummaryFile)); err != nil {
				return outcome.Usagef("%s: not a run directory (no %s)", d, results.SummaryFile)
			}
		}
	}
	if opts.Redact && opts.Bundle == "" {
		return outcome.Usagef("--redact applies to --bundle")
	}
	if len(opts.Dirs) == 1 && !strings.Contains(opts.Dirs[0], ",") {
		if opts.FailOnRegression {
			return outcome.Usagef("--fail-on-regression gates a comparison; give two run directories or more")
		}
		if opts.Out != "" {
			return outcome.Usagef("--out is for comparisons; a run's report is written into its directory")
		}
		err := rerender(opts, out)
		if berr := writeBundle(opts, opts.Dirs, out); berr != nil {
			return errors.Join(err, berr)
		}
		return err
	}
	if len(opts.Thresholds) > 0 {
		return outcome.Usagef("--threshold judges a single run; compare runs without it")
	}
	if opts.MinEffect < 0 || opts.MinEffect >= 1 {
		return outcome.Usagef("--min-effect %g%%: from 0 to under 100 (percent)", 100*opts.MinEffect)
	}
	runs := make([]report.Labelled, len(opts.Dirs))
	for i, arg := range opts.Dirs {
		// A variant's rounds are its directories separated by commas, paired by position with the
		// other variants' rounds.
		dirs := strings.Split(arg, ",")
		runs[i] = report.Labelled{Dir: dirs[0], Rounds: dirs[1:]}
		if len(opts.Labels) > 0 {
			runs[i].Label = opts.Labels[i]
		}
	}
	dir := opts.Out
	if dir == "" {
		dir = filepath.Join("results", time.Now().Format("20060102-150405")+"-compare")
	}
	c, err := report.RenderComparison(dir, runs, compare.Options{MinEffect: opts.MinEffect, AcrossHosts: opts.AcrossHosts,
		Gate: compare.NewGate(opts.FailOnRegression, opts.RegressionFigures)})
	if c == nil || outcome.IsUsage(err) {
		return err
	}
	o := c.Outcome
	if err != nil {
		o = outcome.Decide(append(o.Reasons, outcome.New(outcome.HarnessError, "%v", err))...)
	}
	if err := report.WriteComparisonMarkdown(out, c); err != nil {
		o = outcome.Decide(append(o.Reasons, outcome.New(outcome.HarnessError, "print the comparison: %v", err))...)
	}
	fmt.Fprintf(out, "\ncomparison: %s\n", filepath.Join(dir, report.ComparisonHTMLFile))
	bundled := []string{dir}
	for _, arg := range opts.Dirs {
		bundled = append(bundled, strings.Split(arg, ",")...)
	}
	if err := writeBundle(opts, bundled, out); err != nil {
		o = outcome.Decide(append(o.Reasons, outcome.New(outcome.HarnessError, "%v", err))...)
	}
	writeVerdict(out, "comparison", o)
	return o.Err()
}

// writeVerdict prints a job's outcome as a run prints its own (results.WriteVerdict): the headline, the
// kind and the exit code, then every reason, most severe first.
func writeVerdict(w io.Writer, what string, o outcome.Outcome) {
	fmt.Fprintf(w, "%s verdict: %s (%s, exit code %d)\n", what, o.Headline(), o.Kind, o.ExitCode())
	for _, r := range o.Reasons {
		fmt.Fprintf(w, "  %s: %s\n", r.Kind, r.Text)
	}
}

func rerender(opts ReportOptions, out io.Writer) error {
	r, err := report.Load(opts.Dirs[0])
	if err != nil {
		return err
	}
	if len(opts.Labels) == 1 {
		r.Label = opts.Labels[0]
	}
	exprs := opts.Thresholds
	if len(exprs) == 0 {
		exprs = results.StoredThresholds(r.Summary)
	}
	ts, err := results.RunThresholds(exprs)
	switch {
	case err != nil && len(opts.Thresholds) > 0:
		return err
	case err != nil:
		// Thresholds another version stored may not parse here: keep the verdicts it stored.
		r.Diagnosis = report.Diagnose(r)
	default:
		report.Prepare(r, ts)
	}
	if err := results.WriteText(out, r.Summary); err != nil {
		return err
	}
	printVerdicts(out, r)
	if err := report.Write(r); err != nil {
		return err
	}
	files := []string{report.HTMLFile, report.MarkdownFile, report.JUnitFile, report.PerfdashFile}
	fmt.Fprintf(out, "report: %s (and %s in %s)\n", filepath.Join(r.Dir, files[0]), strings.Join(files[1:], ", "), r.Dir)
	results.WriteVerdict(out, r.Summary)
	return r.Summary.Verdict().Err()
}

// writeBundle writes the bundle of dirs when one was asked for.
func writeBundle(opts ReportOptions, dirs []string, out io.Writer) error {
	if opts.Bundle == "" {
		return nil
	}
	var buf bytes.Buffer
	if err := report.WriteBundle(&buf, dirs, report.BundleOptions{Redact: opts.Redact}); err != nil {
		return err
	}
	if err := os.WriteFile(opts.Bundle, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	fmt.Fprintf(out, "bundle: %s (%d KiB)\n", opts.Bundle, buf.Len()>>10)
	return nil
}

package chaosbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/outcome"

	"github.com/spf13/pflag"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/compare"
	"github.com/etcd-chaosbench/chaosbench/results/metrics"
	"github.com/etcd-chaosbench/chaosbench/results/report"
)

// bindReportFlags defines the settings of what a run reports: thresholds that decide its exit code, and
// how often etcd's own metrics are scraped.
func bindReportFlags(fs *pflag.FlagSet, s *Scenario) {
	fs.StringArrayVar(&s.Thresholds, "threshold", s.Thresholds, "a limit the run must meet, else it exits with code 3 (repeatable): "+report.ThresholdGrammar)
	fs.DurationVar(&s.ScrapeInterval, "scrape-interval", s.ScrapeInterval, "how often every member's /metrics is scraped (0: never)")
}

// validateReport checks the report settings before anything starts.
func (s *Scenario) validateReport() error {
	if _, err := report.ParseThresholds(s.Thresholds); err != nil {
		return err
	}
	if s.ScrapeInterval < 0 || (s.ScrapeInterval > 0 && s.ScrapeInterval < 100*time.Millisecond) {
		return outcome.Usagef("--scrape-interval %s: 0 (off) or at least 100ms", s.ScrapeInterval)
	}
	return nil
}

// startScraper starts scraping every member's metrics; the cluster is up and the collector exists.
func (r *run) startScraper(ctx context.Context) error {
	if r.s.ScrapeInterval <= 0 {
		return nil
	}
	var err error
	r.scraper, err = metrics.Start(ctx, metrics.Options{
		Targets:     metricsTargets(r.cluster),
		TLS:         r.cluster.TLS(),
		Interval:    r.s.ScrapeInterval,
		Dir:         r.dir,
		Base:        r.collector.Start(),
		MeasureFrom: r.collector.MeasureFrom,
	})
	return err
}

// metricsTargets returns the metrics endpoints of c's members: the separate metrics listener of the members
// chaosbench runs, the client URL (which serves /metrics too) of the others. Members without either
// (learners, members not started yet) have none.
func metricsTargets(c clusters.Cluster) []metrics.Target {
	var out []metrics.Target
	for _, m := range c.Members() {
		base := m.ClientURL()
		if p, ok := m.(clusters.Process); ok && p.MetricsURL() != "" {
			base = p.MetricsURL()
		}
		if base == "" {
			continue
		}
		out = append(out, metrics.Target{Member: m.Name(), URL: strings.TrimSuffix(base, "/") + "/metrics"})
	}
	return out
}

// stopScraper takes the last scrape and stores the summary; call it before the cluster stops.
func (r *run) stopScraper(ctx context.Context) error {
	if r.scraper == nil {
		return nil
	}
	sum, err := r.scraper.Stop(ctx)
	r.summary.Server = sum
	r.addThrottling(ctx)
	return err
}

// addThrottling adds to the members' figures how often their containers were CPU-throttled, where the
// cluster can tell (docker members under --member-cpus). A failure to read it leaves it unknown.
func (r *run) addThrottling(ctx context.Context) {
	t, ok := r.cluster.(clusters.CPUThrottler)
	if !ok || r.summary.Server == nil || r.s.MemberCPUs <= 0 {
		return
	}
	got, err := t.CPUThrottling(ctx)
	if err != nil {
		fmt.Fprintf(r.out, "could not read the members' CPU throttling: %v\n", err)
	}
	for i := range r.summary.Server.Members {
		m := &r.summary.Server.Members[i]
		if th, ok := got[m.Name]; ok && th.Periods > 0 {
			p := math.Round(10*th.Percent()) / 10
			m.CPUThrottledPercent = &p
		}
	}
}

// judge completes the summary with what a report needs (time base, machine), evaluates the thresholds and
// diagnoses the run. A report that cannot be prepared is an error of the run.
func (r *run) judge(s *results.Summary) {
	if r.collector != nil {
		s.TimeBase = r.collector.Start()
	}
	env := results.CollectEnvironment(r.dir)
	s.Environment = &env
	// Parsed before the run started: this cannot fail here. A worker's share is not judged against the
	// whole scenario's thresholds: the merged run is.
	ts, _ := report.ParseThresholds(r.s.Thresholds)
	if r.split != nil {
		ts = nil
	}
	rep, err := report.FromSummary(r.dir, s)
	if err != nil {
		s.Errors = append(s.Errors, err.Error())
		return
	}
	report.Prepare(rep, ts)
	r.report = rep
}

// writeReports writes report.md, report.html, junit.xml and perfdash.json, and prints the verdicts.
func (r *run) writeReports() error {
	if r.report == nil {
		return nil
	}
	printVerdicts(r.out, r.report)
	if err := report.Write(r.report); err != nil {
		return err
	}
	fmt.Fprintf(r.out, "report: %s\n", filepath.Join(r.dir, report.HTMLFile))
	return nil
}

// printVerdicts prints the thresholds and the diagnosis's problems and warnings after the text summary.
func printVerdicts(out io.Writer, r *report.Run) {
	if len(r.Thresholds) > 0 {
		failed := report.Failed(r.Thresholds)
		fmt.Fprintf(out, "thresholds: %d passed, %d failed\n", len(r.Thresholds)-failed, failed)
		for _, t := range r.Thresholds {
			if t.Verdict == results.ThresholdFail {
				fmt.Fprintf(out, "  FAIL %s: %s\n", t.Expr, t.Detail)
			}
		}
	}
	for _, f := range r.Diagnosis {
		if f.Severity != results.SeverityOK {
			fmt.Fprintf(out, "%s: %s\n", f.Severity, f.Message)
		}
	}
}

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
	c, err := report.RenderComparison(dir, runs, compare.Options{MinEffect: opts.MinEffect, AcrossHosts: opts.AcrossHosts})
	if err != nil {
		return err
	}
	if err := report.WriteComparisonMarkdown(out, c); err != nil {
		return err
	}
	fmt.Fprintf(out, "\ncomparison: %s\n", filepath.Join(dir, report.ComparisonHTMLFile))
	bundled := []string{dir}
	for _, arg := range opts.Dirs {
		bundled = append(bundled, strings.Split(arg, ",")...)
	}
	if err := writeBundle(opts, bundled, out); err != nil {
		return err
	}
	if opts.FailOnRegression {
		return compare.Gate(c.Effects, opts.RegressionFigures)
	}
	return nil
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
		exprs = report.StoredThresholds(r.Summary)
	}
	ts, err := report.ParseThresholds(exprs)
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

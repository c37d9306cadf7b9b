package chaosbench

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/metrics"
	"github.com/etcd-chaosbench/chaosbench/results/report"
)

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

// metricsTargets returns the metrics endpoints of c's members (clusters.MetricsURL); members without one
// (learners, members not started yet) have none.
func metricsTargets(c clusters.Cluster) []metrics.Target {
	var out []metrics.Target
	for _, m := range c.Members() {
		if u := clusters.MetricsURL(m); u != "" {
			out = append(out, metrics.Target{Member: m.Name(), URL: u})
		}
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
	// whole scenario's thresholds, nor the defaults (its faults' windows are the coordinator's): the merged
	// run is.
	ts, _ := results.RunThresholds(r.s.Thresholds)
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
		failed := results.FailedThresholds(r.Thresholds)
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

package chaosbench

import (
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// bindReportFlags defines the settings of what a run reports: thresholds that decide its exit code, and
// how often etcd's own metrics are scraped.
func bindReportFlags(fs *pflag.FlagSet, s *Scenario) {
	fs.StringArrayVar(&s.Thresholds, "threshold", s.Thresholds, "a limit the run must meet, else it exits with code 3 (repeatable): "+results.ThresholdGrammar+
		"; every run is also judged by "+strings.Join(results.DefaultThresholds(), " and ")+" unless a threshold of the same subject and statistic overrides them")
	fs.DurationVar(&s.ScrapeInterval, "scrape-interval", s.ScrapeInterval, "how often every member's /metrics is scraped (0: never)")
}

// validateReport checks the report settings before anything starts.
func (s *Scenario) validateReport() error {
	if _, err := results.RunThresholds(s.Thresholds); err != nil {
		return err
	}
	if s.ScrapeInterval < 0 || (s.ScrapeInterval > 0 && s.ScrapeInterval < 100*time.Millisecond) {
		return outcome.Usagef("--scrape-interval %s: 0 (off) or at least 100ms", s.ScrapeInterval)
	}
	return nil
}

// ThresholdGrammar is the one-line grammar of a threshold (--threshold of run and report), for help texts:
// named here so that they say exactly what the threshold parser accepts.
const ThresholdGrammar = results.ThresholdGrammar

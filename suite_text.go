package chaosbench

import (
	"fmt"
	"io"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/report"
)

// writeSuiteText prints the suite's verdicts, one line per scenario, and its overall verdict last.
func writeSuiteText(w io.Writer, dir string, s *results.Suite) {
	fmt.Fprintf(w, "\n=== suite: %d scenarios, results in %s (%s, %s)\n", len(s.Scenarios), dir, report.SuiteHTMLFile, report.SuiteMarkdownFile)
	for _, sc := range s.Scenarios {
		v := sc.Verdict()
		retry := ""
		if sc.Retried() {
			retry = fmt.Sprintf(", retried after %s", sc.Attempts[0].Outcome)
		}
		fmt.Fprintf(w, "%-10s %-28s seed %-20d %.0fs%s\n", v.Headline(), sc.Name, sc.Seed, sc.DurationSeconds, retry)
		for _, t := range v.Texts() {
			fmt.Fprintf(w, "           %s\n", t)
		}
		if !v.Passed() && sc.Replay != "" {
			fmt.Fprintf(w, "           replay: %s\n", sc.Replay)
		}
	}
	o := s.Verdict()
	fmt.Fprintf(w, "suite verdict: %s (%s, exit code %d)\n", o.Headline(), o.Kind, o.ExitCode())
}

package report

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// WriteMarkdown writes the report as Markdown: the verdicts, the diagnosis and every table of the HTML
// report, without the charts. It reads well in a CI log and renders in a pull request.
func WriteMarkdown(w io.Writer, r *Run) error {
	v := buildView(r)
	b := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("# chaosbench report: %s\n\n", v.Name)
	if bn := v.Banner; bn != nil {
		p("> **%s**: %s", bn.Title, bn.Text)
		link := bn.MarkdownLink
		if link == "" {
			link = bn.Link
		}
		if link != "" {
			p(" ([%s](%s))", filepath.Base(link), link)
		}
		p("\n\n")
	}
	p("**%s** — %s\n\n", v.Overall, v.Headline)
	for _, rs := range v.Reasons {
		p("- %s: %s\n", rs.Key, rs.Value)
	}
	if len(v.Reasons) > 0 {
		p("\n")
	}

	table(b, []string{"", "verdict", "detail"}, func(row func(...string)) {
		for _, vr := range v.Verdicts {
			row("**"+vr.Area+"**", vr.Verdict, vr.Detail)
		}
	})

	if len(v.Diagnosis) > 0 {
		p("\n## Diagnosis\n\n")
		for _, f := range v.Diagnosis {
			p("- %s (%s): %s\n", severityWord(f.Severity), f.Topic, f.Message)
		}
	}

	if len(v.Thresholds) > 0 {
		p("\n## Thresholds\n\n")
		table(b, []string{"threshold", "set", "observed", "verdict", "detail"}, func(row func(...string)) {
			for _, t := range v.Thresholds {
				obs := t.Observed
				if t.Subject != "" {
					obs += " (" + t.Subject + ")"
				}
				row("`"+t.Expr+"`", t.Set, obs, verdictWord(t.Verdict), t.Detail)
			}
		})
	}

	p("\n## Operations\n\n")
	title := "Response time (from the intended start, the latency a user of the cluster sees)"
	if !v.OpenLoop {
		title = "Latency (closed loop: response time equals service time)"
	}
	p("%s:\n\n", title)
	opTable(b, v.Ops, &v.Totals, true)
	if len(v.ServiceOps) > 0 {
		p("\nService time (from the actual send):\n\n")
		opTable(b, v.ServiceOps, nil, false)
	}

	if k := v.Kube; k != nil {
		p("\n## Kubernetes\n\n%s. The SLOs of Kubernetes API calls applied to the etcd requests behind them, on response time p99 over the run: **%s**.\n\n", k.Cluster, k.Verdict)
		table(b, []string{"class", "operation", "count", "p99", "limit", "verdict"}, func(row func(...string)) {
			for _, s := range k.SLO {
				row(s.Class, s.Op, s.Count, s.P99, s.Limit, s.Verdict)
			}
		})
		p("\nOperation mix against the plan (%s):\n\n", k.Counters)
		table(b, []string{"operation", "actors", "planned/s", "measured/s", "difference", "conflicts"}, func(row func(...string)) {
			for _, m := range k.Mix {
				row(m.Op, m.Actors, m.Planned, m.Measured, m.Diff, m.Conflicts)
			}
		})
	}

	if len(v.Gaps) > 0 {
		p("\n## Availability\n\n")
		cols := append([]string{"fault", "window", "write gap", "read gap", "recovered", "requests", "errors", "outcome"}, v.GapColumns...)
		table(b, cols, func(row func(...string)) {
			for _, g := range v.Gaps {
				row(append([]string{g.Fault, g.Window, g.Gap, g.ReadGap, g.Recovered, g.Requests, g.Errors, g.Outcome}, g.Extra...)...)
			}
		})
		p("\n%s\n", v.GapNote())
	}

	if len(v.Checks) > 0 {
		p("\n## Consistency checks\n\n")
		table(b, []string{"check", "verdict", "detail", "seconds"}, func(row func(...string)) {
			for _, c := range v.Checks {
				row(c.Name, c.Verdict, c.Detail, fmt.Sprintf("%.1f", c.Seconds))
			}
		})
	}

	if len(v.Members) > 0 {
		p("\n## etcd metrics (measured window, p99)\n\n")
		cols := []string{"member", "role", "WAL fsync", "backend commit", "apply", "peer RTT", "leader changes", "failed proposals", "pending max", "db size", "CPU", "RSS max", "scrapes"}
		table(b, cols, func(row func(...string)) {
			for _, m := range v.Members {
				row(m.Name, m.Role, markFailed(m.Fsync, m.FsyncClass), markFailed(m.Commit, m.CommitClass), m.Apply, m.RTT, m.LeaderChanges, m.ProposalsFailed, m.Pending, m.DB, m.CPU, m.RSS, m.Scrapes)
			}
			if c := v.Cluster; c != nil {
				row("**"+c.Name+"**", "", markFailed(c.Fsync, c.FsyncClass), markFailed(c.Commit, c.CommitClass), c.Apply, c.RTT, c.LeaderChanges, c.ProposalsFailed, c.Pending, c.DB, "", "", "")
			}
		})
		p("\netcd's guidance: WAL fsync p99 < 10ms, backend commit p99 < 25ms.\n")
		if len(v.Generator) > 0 {
			p("\n")
			table(b, []string{"generator and machine", ""}, func(row func(...string)) {
				for _, g := range v.Generator {
					row(g.Key, g.Value)
				}
			})
		}
	}

	for _, sec := range v.Extra {
		p("\n## %s\n\n", sec.Title)
		switch {
		case len(sec.Columns) > 0:
			table(b, sec.Columns, func(row func(...string)) {
				for _, r := range sec.Rows {
					row(r...)
				}
			})
		case len(sec.Pairs) > 0:
			table(b, []string{"", ""}, func(row func(...string)) {
				for _, kv := range sec.Pairs {
					row(kv.Key, kv.Value)
				}
			})
		default:
			p("%s\n", sec.Value)
		}
	}

	p("\n## Environment and configuration\n\n")
	table(b, []string{"", ""}, func(row func(...string)) {
		for _, e := range v.Env {
			val := e.Value
			if e.Key == "command" {
				val = "`" + val + "`"
			}
			row(e.Key, val)
		}
	})
	if len(v.Config) > 0 {
		p("\n<details><summary>Every setting of the run</summary>\n\n")
		table(b, []string{"setting", "value"}, func(row func(...string)) {
			for _, c := range v.Config {
				row(c.Key, c.Value)
			}
		})
		p("\n</details>\n")
	}
	if len(v.Warnings) > 0 {
		p("\n## Files that could not be read\n\n")
		for _, w := range v.Warnings {
			p("- %s\n", w)
		}
	}
	return b.Flush()
}

func markFailed(v, class string) string {
	if class == "fail" {
		return "**" + v + "** ✗"
	}
	return v
}

func severityWord(s string) string {
	switch s {
	case results.SeverityProblem:
		return "**problem**"
	case results.SeverityWarning:
		return "warning"
	}
	return "ok"
}

func verdictWord(v string) string {
	switch v {
	case results.ThresholdFail:
		return "**fail**"
	case results.ThresholdPass:
		return "pass"
	}
	return v
}

func opTable(b *bufio.Writer, ops []opRow, total *opRow, withErrors bool) {
	cols := []string{"operation", "count", "ops/s", "p50", "p90", "p99", "p99.9", "max"}
	if withErrors {
		cols = append(cols, "errors")
	}
	table(b, cols, func(row func(...string)) {
		for _, o := range ops {
			cells := []string{o.Name, o.Count, o.Throughput, o.P50, o.P90, markFailed(o.P99, o.P99Class), o.P999, o.Max}
			if withErrors {
				cells = append(cells, o.Errors)
			}
			row(cells...)
		}
		if total != nil && len(ops) > 1 {
			row("**total**", total.Count, total.Throughput, "", "", "", "", "", total.Errors)
		}
	})
}

// table writes a Markdown table; cells are escaped so that a value cannot break the layout.
func table(b *bufio.Writer, cols []string, rows func(row func(...string))) {
	esc := func(s string) string {
		s = strings.ReplaceAll(s, "|", `\|`)
		return strings.ReplaceAll(s, "\n", " ")
	}
	line := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + esc(c) + " |")
		}
		b.WriteString("\n")
	}
	line(cols)
	b.WriteString("|" + strings.Repeat(" --- |", len(cols)) + "\n")
	rows(func(cells ...string) {
		for len(cells) < len(cols) {
			cells = append(cells, "")
		}
		line(cells[:len(cols)])
	})
}

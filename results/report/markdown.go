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
	// The sections, in the HTML report's order less its charts; each writes nothing when the run has nothing
	// for it. The writer keeps its first error, which Flush returns.
	for _, section := range []func(*bufio.Writer, *view){
		markdownHeadline,
		markdownVerdicts,
		markdownCrashes,
		markdownKnown,
		markdownDiagnosis,
		markdownThresholds,
		markdownOperations,
		markdownKube,
		markdownAvailability,
		markdownChecks,
		markdownMembers,
		markdownExtra,
		markdownEnvironment,
		markdownWarnings,
	} {
		section(b, v)
	}
	return b.Flush()
}

// markdownHeadline writes the title, the banner (what the report is a part of, linked to it) and the
// outcome with its reasons: what a reader of a CI log must see first.
func markdownHeadline(b *bufio.Writer, v *view) {
	fmt.Fprintf(b, "# chaosbench report: %s\n\n", v.Name)
	if bn := v.Banner; bn != nil {
		fmt.Fprintf(b, "> **%s**: %s", bn.Title, bn.Text)
		link := bn.MarkdownLink
		if link == "" {
			link = bn.Link
		}
		if link != "" {
			fmt.Fprintf(b, " ([%s](%s))", filepath.Base(link), link)
		}
		fmt.Fprintf(b, "\n\n")
	}
	fmt.Fprintf(b, "**%s** — %s\n\n", v.Overall, v.Headline)
	for _, rs := range v.Reasons {
		fmt.Fprintf(b, "- %s: %s\n", rs.Key, rs.Value)
	}
	if len(v.Reasons) > 0 {
		fmt.Fprintf(b, "\n")
	}
}

// markdownVerdicts writes the verdict table, one row per area, right under the outcome and without a
// heading of its own; a figure the run was not judged on says it is informational.
func markdownVerdicts(b *bufio.Writer, v *view) {
	table(b, []string{"", "verdict", "detail"}, func(row func(...string)) {
		for _, vr := range v.Verdicts {
			area := "**" + vr.Area + "**"
			if vr.Informational {
				area += " (informational)"
			}
			row(area, vr.Verdict, vr.Detail)
		}
	})
}

// markdownCrashes writes every member that crashed with the last lines of its log (an indented block,
// which no log line can close), right under the verdicts: a member's panic is the first thing to read.
func markdownCrashes(b *bufio.Writer, v *view) {
	if len(v.Crashes) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Crashed members\n")
	for _, c := range v.Crashes {
		fmt.Fprintf(b, "\n%s. Last lines of its log (`%s`):\n\n", c.Title, c.Log)
		for _, l := range c.Tail {
			fmt.Fprintf(b, "    %s\n", l)
		}
	}
}

// markdownDiagnosis writes the diagnosis' findings as a list, the problems marked.
func markdownDiagnosis(b *bufio.Writer, v *view) {
	if len(v.Diagnosis) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Diagnosis\n\n")
	for _, f := range v.Diagnosis {
		fmt.Fprintf(b, "- %s (%s): %s\n", severityWord(f.Severity), f.Topic, f.Message)
	}
}

// markdownThresholds writes each threshold with what was observed and by whom (the worst operation or
// member), so that a failure names its culprit.
func markdownThresholds(b *bufio.Writer, v *view) {
	if len(v.Thresholds) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Thresholds\n\n")
	table(b, []string{"threshold", "set", "observed", "verdict", "detail"}, func(row func(...string)) {
		for _, t := range v.Thresholds {
			obs := t.Observed
			if t.Subject != "" {
				obs += " (" + t.Subject + ")"
			}
			row("`"+t.Expr+"`", t.Origin(), obs, verdictWord(t.Verdict), t.Detail)
		}
	})
}

// markdownOperations writes the latency of each operation. An open loop has two tables, since response
// time (from the intended start) and service time (from the actual send) differ exactly when the
// generator fell behind; a closed loop has one, and says why.
func markdownOperations(b *bufio.Writer, v *view) {
	fmt.Fprintf(b, "\n## Operations\n\n")
	title := "Response time (from the intended start, the latency a user of the cluster sees)"
	if !v.OpenLoop {
		title = "Latency (closed loop: response time equals service time)"
	}
	fmt.Fprintf(b, "%s:\n\n", title)
	opTable(b, v.Ops, &v.Totals, true)
	if len(v.ServiceOps) > 0 {
		fmt.Fprintf(b, "\nService time (from the actual send):\n\n")
		opTable(b, v.ServiceOps, nil, false)
	}
}

// markdownKube writes, for a kube workload run, the Kubernetes SLOs applied to the etcd requests behind
// the API calls and the operation mix against the plan.
func markdownKube(b *bufio.Writer, v *view) {
	k := v.Kube
	if k == nil {
		return
	}
	judgedBy := "informational; --threshold k8s-slo makes them decide the outcome"
	if k.Judged {
		judgedBy = "judged by the k8s-slo thresholds"
	}
	fmt.Fprintf(b, "\n## Kubernetes\n\n%s. The SLOs of Kubernetes API calls applied to the etcd requests behind them, on response time p99 over the run: **%s** (%s).\n\n", k.Cluster, k.Verdict, judgedBy)
	table(b, []string{"class", "operation", "count", "p99", "limit", "p99 against the limit"}, func(row func(...string)) {
		for _, s := range k.SLO {
			row(s.Class, s.Op, s.Count, s.P99, s.Limit, s.Verdict)
		}
	})
	fmt.Fprintf(b, "\nOperation mix against the plan (%s):\n\n", k.Counters)
	table(b, []string{"operation", "actors", "planned/s", "measured/s", "difference", "conflicts"}, func(row func(...string)) {
		for _, m := range k.Mix {
			row(m.Op, m.Actors, m.Planned, m.Measured, m.Diff, m.Conflicts)
		}
	})
}

// markdownAvailability writes each fault's gaps without a successful write and read, whether the cluster
// recovered, and the fields of the fault this version does not know as extra columns.
func markdownAvailability(b *bufio.Writer, v *view) {
	if len(v.Gaps) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Availability\n\n")
	cols := append([]string{"fault", "window", "write gap", "read gap", "recovered", "requests", "errors", "outcome"}, v.GapColumns...)
	table(b, cols, func(row func(...string)) {
		for _, g := range v.Gaps {
			row(append([]string{g.Fault, g.Window, g.Gap, g.ReadGap, g.Recovered, g.Requests, g.Errors, g.Outcome}, g.Extra...)...)
		}
	})
	fmt.Fprintf(b, "\n%s\n", v.GapNote())
}

// markdownChecks writes each consistency check's own verdict, which the verdict table only sums up.
func markdownChecks(b *bufio.Writer, v *view) {
	if len(v.Checks) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Consistency checks\n\n")
	table(b, []string{"check", "verdict", "detail", "seconds"}, func(row func(...string)) {
		for _, c := range v.Checks {
			row(c.Name, c.Verdict, c.Detail, fmt.Sprintf("%.1f", c.Seconds))
		}
	})
}

// markdownMembers writes etcd's own metrics per member and for the cluster's worst, against etcd's
// hardware guidance, then the load of the generator and its machine: a saturated generator explains
// latencies that etcd's figures do not.
func markdownMembers(b *bufio.Writer, v *view) {
	if len(v.Members) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## etcd metrics (measured window, p99)\n\n")
	cols := []string{"member", "role", "WAL fsync", "backend commit", "apply", "peer RTT", "leader changes", "failed proposals", "pending max", "db size", "CPU", "RSS max", "scrapes"}
	table(b, cols, func(row func(...string)) {
		for _, m := range v.Members {
			row(m.Name, m.Role, markFailed(m.Fsync, m.FsyncClass), markFailed(m.Commit, m.CommitClass), m.Apply, m.RTT, m.LeaderChanges, m.ProposalsFailed, m.Pending, m.DB, m.CPU, m.RSS, m.Scrapes)
		}
		if c := v.Cluster; c != nil {
			row("**"+c.Name+"**", "", markFailed(c.Fsync, c.FsyncClass), markFailed(c.Commit, c.CommitClass), c.Apply, c.RTT, c.LeaderChanges, c.ProposalsFailed, c.Pending, c.DB, "", "", "")
		}
	})
	fmt.Fprintf(b, "\netcd's guidance: WAL fsync p99 < 10ms, backend commit p99 < 25ms.\n")
	if len(v.Generator) > 0 {
		fmt.Fprintf(b, "\n")
		table(b, []string{"generator and machine", ""}, func(row func(...string)) {
			for _, g := range v.Generator {
				row(g.Key, g.Value)
			}
		})
	}
}

// markdownExtra writes the summary's fields this version has no section for, so that a newer run's
// figures are shown rather than dropped.
func markdownExtra(b *bufio.Writer, v *view) {
	for _, sec := range v.Extra {
		fmt.Fprintf(b, "\n## %s\n\n", sec.Title)
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
			fmt.Fprintf(b, "%s\n", sec.Value)
		}
	}
}

// markdownEnvironment writes what the run measured on and with; every setting of the run goes in a
// collapsed block, long and needed only to run it again.
func markdownEnvironment(b *bufio.Writer, v *view) {
	fmt.Fprintf(b, "\n## Environment and configuration\n\n")
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
		fmt.Fprintf(b, "\n<details><summary>Every setting of the run</summary>\n\n")
		table(b, []string{"setting", "value"}, func(row func(...string)) {
			for _, c := range v.Config {
				row(c.Key, c.Value)
			}
		})
		fmt.Fprintf(b, "\n</details>\n")
	}
}

// markdownWarnings lists the run's files that could not be read, last: the report above is missing what
// they held.
func markdownWarnings(b *bufio.Writer, v *view) {
	if len(v.Warnings) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Files that could not be read\n\n")
	for _, w := range v.Warnings {
		fmt.Fprintf(b, "- %s\n", w)
	}
}

// markFailed marks a figure that failed a threshold (class fail) or that is over a guidance the run was not
// judged by (class warn).
func markFailed(v, class string) string {
	switch class {
	case "fail":
		return "**" + v + "** ✗"
	case "warn":
		return v + " ⚠"
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

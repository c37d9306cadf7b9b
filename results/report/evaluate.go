package report

import (
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

func (t Threshold) holds(v float64) bool {
	switch t.Cmp {
	case "<":
		return v < t.Value
	case "<=":
		return v <= t.Value
	case ">":
		return v > t.Value
	case ">=":
		return v >= t.Value
	}
	return v == t.Value
}

// worse reports whether a is a worse observation than b for this threshold: larger for upper bounds,
// smaller for lower bounds.
func (t Threshold) worse(a, b float64) bool {
	if t.Cmp == ">" || t.Cmp == ">=" {
		return a < b
	}
	return a > b
}

// Evaluate judges every threshold against a run. Thresholds of a named set whose glob matches no operation
// are not applicable, unless no threshold of the set matches anything: then the set itself fails, since it
// judged nothing.
func Evaluate(ts []Threshold, r *Run) []results.ThresholdResult {
	out := make([]results.ThresholdResult, len(ts))
	for i, t := range ts {
		out[i] = evaluate(t, r)
	}
	sets := map[string]bool{} // set -> some threshold applied
	for i, t := range ts {
		if t.Set != "" {
			sets[t.Set] = sets[t.Set] || out[i].Verdict != results.ThresholdNotApplicable
		}
	}
	for i, t := range ts {
		if t.Set != "" && !sets[t.Set] {
			out[i].Verdict = results.ThresholdFail
			out[i].Detail = fmt.Sprintf("no operation of this run matches any threshold of %s (operations: %s)", t.Set, strings.Join(r.OperationNames(), ", "))
		}
	}
	return out
}

// Failed counts failed verdicts.
func Failed(rs []results.ThresholdResult) int {
	n := 0
	for _, r := range rs {
		if r.Verdict == results.ThresholdFail {
			n++
		}
	}
	return n
}

func evaluate(t Threshold, r *Run) results.ThresholdResult {
	res := results.ThresholdResult{Expr: t.Expr, Set: t.Set, Unit: t.Unit}
	fail := func(detail string) results.ThresholdResult {
		res.Verdict, res.Detail, res.Observed = results.ThresholdFail, detail, "no data"
		return res
	}
	judge := func(v float64, subject string) results.ThresholdResult {
		res.Value, res.Subject = round3(v), subject
		res.Observed = formatValue(v, t.Unit)
		if t.holds(v) {
			res.Verdict = results.ThresholdPass
		} else {
			res.Verdict = results.ThresholdFail
			who := ""
			if subject != "" {
				who = subject + " "
			}
			res.Detail = fmt.Sprintf("%s%s %s, limit %s %s", who, statLabel(t), res.Observed, cmpText(t.Cmp), formatValue(t.Value, t.Unit))
		}
		return res
	}
	s := r.Summary

	if _, ok := serverSubject(t.Subject); ok {
		if s.Server == nil || len(s.Server.Members) == 0 {
			return fail("no server metrics in this run (scraping was off or every scrape failed)")
		}
		best, who, found := 0.0, "", false
		for _, m := range s.Server.Members {
			b := serverHistogram(m, t.Subject)
			if b.Count == 0 {
				continue
			}
			v := bucketedStat(b, t.Stat)
			if !found || t.worse(v, best) {
				best, who, found = v, m.Name, true
			}
		}
		if !found {
			return fail(fmt.Sprintf("no member observed %s during the measured window", t.Subject))
		}
		return judge(best, who)
	}

	if t.Subject == subjectAvailability {
		g, ok := r.LongestGap()
		if !ok {
			return fail("no request history or time series to measure availability from")
		}
		return judge(g.Seconds*1000, g.Label())
	}

	switch t.Stat {
	case "missed":
		return judge(s.Schedule.MissedPercent, "")
	case "leader_changes":
		if s.Server == nil {
			return fail("no server metrics in this run")
		}
		return judge(float64(s.Server.Cluster.LeaderChanges), "")
	}

	if t.Subject == "" && !isLatencyStat(t.Stat) {
		total := &results.Operation{Count: s.Total.Count, Errors: s.Total.Errors, Throughput: s.Total.Throughput}
		if s.Total.Count == 0 {
			return fail("no operations recorded")
		}
		return judge(opStat(total, t), "")
	}

	ops := matchOps(t.Subject, s.Operations)
	if len(ops) == 0 {
		if t.Subject != "" && strings.ContainsAny(t.Subject, "*?[") && t.Set != "" {
			res.Verdict, res.Observed = results.ThresholdNotApplicable, "-"
			res.Detail = "no operation matches " + t.Subject
			return res
		}
		names := r.OperationNames()
		detail := fmt.Sprintf("no operation matches %q (operations: %s)", t.Subject, strings.Join(names, ", "))
		if t.Subject == "" {
			detail = "no operations recorded"
		} else if sug := outcome.Suggest(t.Subject, names); sug != "" {
			detail += fmt.Sprintf("; did you mean %s?", sug)
		}
		return fail(detail)
	}
	best, who := 0.0, ""
	for i, name := range ops {
		v := opStat(s.Operations[name], t)
		if i == 0 || t.worse(v, best) {
			best, who = v, name
		}
	}
	return judge(best, who)
}

func matchOps(subject string, ops map[string]*results.Operation) []string {
	var out []string
	for name := range ops {
		ok := subject == "" || subject == "*" || subject == name
		if !ok {
			ok, _ = path.Match(subject, name)
		}
		if ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func opStat(op *results.Operation, t Threshold) float64 {
	switch t.Stat {
	case "throughput":
		return op.Throughput
	case "count":
		return float64(op.Count)
	case "errors":
		if t.Unit == unitPercent {
			if op.Count == 0 {
				return 0
			}
			return 100 * float64(op.Errors) / float64(op.Count)
		}
		return float64(op.Errors)
	}
	l := op.Response
	stat := t.Stat
	if strings.HasPrefix(stat, "service_") {
		l, stat = op.Service, strings.TrimPrefix(stat, "service_")
	}
	return latencyStat(l, stat)
}

func latencyStat(l results.Latency, stat string) float64 {
	switch stat {
	case "p50":
		return l.P50
	case "p90":
		return l.P90
	case "p99":
		return l.P99
	case "p99.9":
		return l.P999
	case "max":
		return l.Max
	case "mean":
		return l.Mean
	}
	return l.Min
}

func serverHistogram(m results.MemberMetrics, subject string) results.Bucketed {
	switch subject {
	case "wal_fsync":
		return m.WALFsync
	case "backend_commit":
		return m.BackendCommit
	case "apply":
		return m.Apply
	}
	return m.PeerRTT
}

func bucketedStat(b results.Bucketed, stat string) float64 {
	switch stat {
	case "p50":
		return b.P50
	case "p90":
		return b.P90
	case "p99.9":
		return b.P999
	case "mean":
		return b.Mean
	}
	return b.P99
}

func statLabel(t Threshold) string {
	switch {
	case isServerSubject(t.Subject):
		names := map[string]string{"wal_fsync": "WAL fsync", "backend_commit": "backend commit", "apply": "apply", "peer_rtt": "peer round-trip"}
		return names[t.Subject] + " " + t.Stat
	case t.Subject == subjectAvailability:
		return "longest availability gap"
	case strings.HasPrefix(t.Stat, "service_"):
		return "service " + strings.TrimPrefix(t.Stat, "service_")
	}
	return t.Stat
}

func cmpText(c string) string {
	switch c {
	case "<":
		return "<"
	case "<=":
		return "≤"
	case ">":
		return ">"
	case ">=":
		return "≥"
	}
	return "="
}

func formatValue(v float64, unit string) string {
	switch unit {
	case unitMs:
		return fmtMs(v)
	case unitPercent:
		return strconv.FormatFloat(round3(v), 'f', -1, 64) + "%"
	case unitOps:
		return fmt.Sprintf("%.1f ops/s", v)
	}
	return strconv.FormatFloat(round3(v), 'f', -1, 64)
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// fmtMs formats milliseconds with a unit that keeps three significant figures.
func fmtMs(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 1:
		return fmt.Sprintf("%.0fµs", v*1000)
	case v < 10:
		return fmt.Sprintf("%.2fms", v)
	case v < 100:
		return fmt.Sprintf("%.1fms", v)
	case v < 1000:
		return fmt.Sprintf("%.0fms", v)
	case v < 10000:
		return fmt.Sprintf("%.2fs", v/1000)
	}
	return fmt.Sprintf("%.1fs", v/1000)
}

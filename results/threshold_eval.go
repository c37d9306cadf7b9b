package results

import (
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// ThresholdEvidence is what a run's thresholds are judged on: its summary, and what is measured from the
// run's files beside it (a report computes the availability gaps from the history). Everything else a
// threshold reads is in the summary, so that a run finishing and `chaosbench report DIR` judge alike.
type ThresholdEvidence struct {
	Summary *Summary
	// LongestGap is the run's longest availability gap (LongestGap's, of the class the run is judged by:
	// writes, or reads in a run that does not write); nil when none was measured.
	LongestGap *JudgedGap
}

// JudgedGap is an availability gap as a threshold judges it: its length and the fault window it belongs to
// ("kill m1", or "whole load" in a run without faults).
type JudgedGap struct {
	Label   string
	Seconds float64
}

// Holds reports whether an observed value v, in the threshold's unit, meets it.
func (t Threshold) Holds(v float64) bool {
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

// EvaluateThresholds judges every threshold against a run: one result per threshold, in order. Thresholds
// of a named set whose glob matches no operation are not applicable, unless no threshold of the set matches
// anything: then the set itself fails, since it judged nothing. Decide turns every failed one into a reason
// of the run's outcome.
func EvaluateThresholds(ts []Threshold, ev ThresholdEvidence) []ThresholdResult {
	s := ev.Summary
	out := make([]ThresholdResult, len(ts))
	for i, t := range ts {
		out[i] = evaluate(t, ev)
	}
	sets := map[string]bool{} // set -> some threshold applied
	for i, t := range ts {
		if t.Set != "" {
			sets[t.Set] = sets[t.Set] || out[i].Verdict != ThresholdNotApplicable
		}
	}
	for i, t := range ts {
		if t.Set != "" && !sets[t.Set] {
			out[i].Verdict = ThresholdFail
			out[i].Detail = fmt.Sprintf("no operation of this run matches any threshold of %s (operations: %s)", t.Set, strings.Join(operationNames(s), ", "))
		}
	}
	return out
}

// FailedThresholds counts failed verdicts.
func FailedThresholds(rs []ThresholdResult) int {
	n := 0
	for _, r := range rs {
		if r.Verdict == ThresholdFail {
			n++
		}
	}
	return n
}

// StoredThresholds returns the thresholds a run was judged by, as given, from its summary, so that a run
// judged again is judged the same way: named sets come back as their names, and the defaults are left out
// (RunThresholds adds them again unless a stored threshold overrides them).
func StoredThresholds(s *Summary) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range s.Thresholds {
		if t.Default {
			continue
		}
		e := t.Expr
		if t.Set != "" {
			e = t.Set
		}
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out
}

// judgement builds the result of one threshold.
type judgement struct {
	t   Threshold
	res ThresholdResult
}

// fail is a threshold that could not be observed: never a pass.
func (j *judgement) fail(detail string) ThresholdResult {
	j.res.Verdict, j.res.Detail, j.res.Observed = ThresholdFail, detail, "no data"
	return j.res
}

// judge compares the observed value v, of subject (the worst operation or member, or ""), with the limit.
func (j *judgement) judge(v float64, subject string) ThresholdResult {
	t := j.t
	j.res.Value, j.res.Subject = round3(v), subject
	j.res.Observed = formatValue(v, t.Unit)
	if t.Holds(v) {
		j.res.Verdict = ThresholdPass
		return j.res
	}
	j.res.Verdict = ThresholdFail
	who := ""
	if subject != "" {
		who = subject + " "
	}
	j.res.Detail = fmt.Sprintf("%s%s %s, limit %s %s", who, statLabel(t), j.res.Observed, cmpText(t.Cmp), formatValue(t.Value, t.Unit))
	return j.res
}

func evaluate(t Threshold, ev ThresholdEvidence) ThresholdResult {
	j := &judgement{t: t, res: ThresholdResult{Expr: t.Expr, Set: t.Set, Default: t.Default, Unit: t.Unit}}
	s := ev.Summary
	switch {
	case isServerSubject(t.Subject):
		return j.server(s)
	case t.Subject == subjectAvailability:
		g := ev.LongestGap
		if g == nil {
			return j.fail("no request history or time series to measure availability from")
		}
		return j.judge(g.Seconds*1000, g.Label)
	case t.Subject == subjectRequests:
		return j.requests(s)
	}
	switch t.Stat {
	case "missed":
		return j.judge(s.Schedule.MissedPercent, "")
	case "leader_changes":
		if s.Server == nil {
			return j.fail("no server metrics in this run")
		}
		return j.judge(float64(s.Server.Cluster.LeaderChanges), "")
	}
	if t.Subject == "" && !isLatencyStat(t.Stat) {
		total := &Operation{Count: s.Total.Count, Errors: s.Total.Errors, Throughput: s.Total.Throughput}
		if s.Total.Count == 0 {
			return j.fail("no operations recorded")
		}
		return j.judge(opStat(total, t), "")
	}
	return j.operations(s)
}

// server judges one of etcd's own histograms by its worst member.
func (j *judgement) server(s *Summary) ThresholdResult {
	t := j.t
	if s.Server == nil || len(s.Server.Members) == 0 {
		return j.fail("no server metrics in this run (scraping was off or every scrape failed)")
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
		return j.fail(fmt.Sprintf("no member observed %s during the measured window", t.Subject))
	}
	return j.judge(best, who)
}

// operations judges the operations the subject matches by the worst of them.
func (j *judgement) operations(s *Summary) ThresholdResult {
	t := j.t
	ops := matchOps(t.Subject, s.Operations)
	if len(ops) == 0 {
		if t.Subject != "" && strings.ContainsAny(t.Subject, "*?[") && t.Set != "" {
			j.res.Verdict, j.res.Observed = ThresholdNotApplicable, "-"
			j.res.Detail = "no operation matches " + t.Subject
			return j.res
		}
		names := operationNames(s)
		detail := fmt.Sprintf("no operation matches %q (operations: %s)", t.Subject, strings.Join(names, ", "))
		if t.Subject == "" {
			detail = "no operations recorded"
		} else if sug := outcome.Suggest(t.Subject, names); sug != "" {
			detail += fmt.Sprintf("; did you mean %s?", sug)
		}
		return j.fail(detail)
	}
	best, who := 0.0, ""
	for i, name := range ops {
		v := opStat(s.Operations[name], t)
		if i == 0 || t.worse(v, best) {
			best, who = v, name
		}
	}
	return j.judge(best, who)
}

// requests judges every request of the run together. A run without any request is observed, not
// unknown: it made none, and none succeeded.
func (j *judgement) requests(s *Summary) ThresholdResult {
	t := j.t
	all := requestTotal(s.Operations)
	if t.Stat != statOutsideFaults {
		res := j.judge(opStat(&all, t), "")
		if res.Verdict == ThresholdFail && t.Stat == "succeeded" {
			res.Detail = fmt.Sprintf("%d of %d requests succeeded, limit %s %s: a run that measured no answer of etcd is not a pass", all.Count-all.Errors, all.Count, cmpText(t.Cmp), formatValue(t.Value, t.Unit))
		}
		return res
	}
	out, where, ok := OutsideFaults(s)
	if !ok {
		return j.fail(where)
	}
	res := j.judge(opStat(&out, t), "")
	if res.Verdict == ThresholdFail {
		res.Detail = fmt.Sprintf("%d of %d requests failed %s, limit %s %s", out.Errors, out.Count, where, cmpText(t.Cmp), formatValue(t.Value, t.Unit))
	}
	return res
}

// OutsideFaults returns the requests of a run intended to start outside every fault's observation (the
// steady phase: neither while a fault was in effect nor while the cluster recovered from one) and their
// errors, with where they were counted, in words. Every request of a run without faults is outside. A
// summary without phase tables but with faults (a run whose load was never measured, a merge of older
// workers) counts the operations of the whole run less those of each fault's observation, when every
// fault recorded them and their observations do not overlap; ok is false, with why, when it cannot tell.
func OutsideFaults(s *Summary) (out Operation, where string, ok bool) {
	switch {
	case len(s.Phases) > 0:
		if ph := s.Phases[PhaseSteady]; ph != nil {
			out = requestTotal(ph.Operations)
		}
		return out, "outside fault windows", true
	case len(s.Faults) == 0:
		return requestTotal(s.Operations), "in a run without faults", true
	}
	out = Operation{Count: s.Total.Count, Errors: s.Total.Errors}
	prevEnd := int64(math.MinInt64)
	for _, f := range s.Faults {
		a := f.Availability
		if a == nil {
			return Operation{}, fmt.Sprintf("no phase table, and fault %s recorded no requests of its own: the errors outside fault windows cannot be told from the others", f.Fault), false
		}
		if f.StartNs < prevEnd {
			return Operation{}, "no phase table, and the faults' observations overlap: the errors outside fault windows cannot be told from the others", false
		}
		prevEnd = max(prevEnd, a.ObservedToNs)
		out.Count -= a.Ops
		out.Errors -= a.Errors
	}
	out.Count, out.Errors = max(out.Count, 0), max(out.Errors, 0)
	out.Errors = min(out.Errors, out.Count)
	return out, "outside fault windows (the run's operations less those of each fault's observation)", true
}

// requestTotal adds up the operations of ops that are requests (IsRequest).
func requestTotal(ops map[string]*Operation) Operation {
	var t Operation
	for name, op := range ops {
		if IsRequest(name) {
			t.Count += op.Count
			t.Errors += op.Errors
			t.Throughput += op.Throughput
		}
	}
	return t
}

// operationNames returns the run's operation names, sorted.
func operationNames(s *Summary) []string {
	names := make([]string, 0, len(s.Operations))
	for name := range s.Operations {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func matchOps(subject string, ops map[string]*Operation) []string {
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

func opStat(op *Operation, t Threshold) float64 {
	switch t.Stat {
	case "throughput":
		return op.Throughput
	case "count":
		return float64(op.Count)
	case "succeeded":
		return float64(op.Count - op.Errors)
	case "errors", statOutsideFaults:
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

func latencyStat(l Latency, stat string) float64 {
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

func serverHistogram(m MemberMetrics, subject string) Bucketed {
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

func bucketedStat(b Bucketed, stat string) float64 {
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
	case t.Subject == subjectRequests:
		return "requests " + strings.ReplaceAll(t.Stat, "_", " ")
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
		return FormatMs(v)
	case unitPercent:
		return strconv.FormatFloat(round3(v), 'f', -1, 64) + "%"
	case unitOps:
		return fmt.Sprintf("%.1f ops/s", v)
	}
	return strconv.FormatFloat(round3(v), 'f', -1, 64)
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// FormatMs formats milliseconds with a unit that keeps three significant figures, as reports show them
// ("850µs", "2.50ms", "38.2ms", "1.20s").
func FormatMs(v float64) string {
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

package report

import (
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// ThresholdGrammar is the one-line grammar of a threshold, for help texts and error messages.
const ThresholdGrammar = "[SUBJECT:]STAT OP VALUE, e.g. put:p99<25ms, errors<0.1%, availability_gap:max<3s, wal_fsync:p99<10ms, or a named set: " + setNames

const setNames = "etcd-hardware, k8s-slo"

// Threshold is one parsed threshold. A threshold passes when the observed value compares to Value as Cmp
// says; a value that cannot be observed fails it (an unknown is never a pass).
type Threshold struct {
	// Expr is the threshold as written (for thresholds of a named set, the set's member expression).
	Expr string
	// Set names the named set the threshold came from.
	Set string
	// Subject is what is measured: an operation name or glob ("put", "create/*"), "" for the whole run
	// (for latency statistics: every operation), or a server subject (wal_fsync, backend_commit, apply,
	// peer_rtt) or availability_gap.
	Subject string
	// Stat is the statistic: p50, p90, p99, p99.9, max, mean, min (response time), service_p50 ...
	// service_max (service time), throughput, errors, count, missed, leader_changes.
	Stat string
	Cmp  string
	// Value is the limit in Unit: ms for latencies, % or count for errors, ops/s for throughput.
	Value float64
	Unit  string
}

// Units of threshold values.
const (
	unitMs      = "ms"
	unitPercent = "%"
	unitOps     = "ops/s"
	unitCount   = "count"
)

// serverSubject returns the canonical name of a server subject (the worst member's figure of one of
// etcd's own histograms), accepting the short names fsync and commit.
func serverSubject(name string) (string, bool) {
	switch name {
	case "wal_fsync", "fsync":
		return "wal_fsync", true
	case "backend_commit", "commit":
		return "backend_commit", true
	case "apply", "peer_rtt":
		return name, true
	}
	return "", false
}

const subjectAvailability = "availability_gap"

// namedSets are the thresholds behind each set name. etcd-hardware is etcd's hardware guidance (WAL fsync p99
// under 10 ms, backend commit p99 under 25 ms); k8s-slo is Kubernetes' API call latency SLOs applied to the
// etcd requests behind them (mutating and single-object reads p99 <= 1 s, lists p99 <= 30 s): it judges the
// kube workload's operations, named verb/resource.
func namedSet(name string) []string {
	switch name {
	case "etcd-hardware":
		return []string{"wal_fsync:p99<10ms", "backend_commit:p99<25ms"}
	case "k8s-slo":
		var set []string
		for _, l := range results.SLOLimits() {
			set = append(set, fmt.Sprintf("%s/*:p99<=%s", l.Verb, time.Duration(l.LimitMS*float64(time.Millisecond))))
		}
		return set
	}
	return nil
}

func latencyStats() []string { return []string{"p50", "p90", "p99", "p99.9", "max", "mean", "min"} }

func isLatencyStat(stat string) bool {
	for _, s := range latencyStats() {
		if stat == s || stat == "service_"+s {
			return true
		}
	}
	return false
}

func allStats() []string {
	out := append([]string{"throughput", "errors", "count", "missed", "leader_changes"}, latencyStats()...)
	for _, s := range latencyStats() {
		out = append(out, "service_"+s)
	}
	return out
}

// ParseThresholds parses threshold expressions and expands named sets. Every problem is a usage error that
// quotes the expression.
func ParseThresholds(exprs []string) ([]Threshold, error) {
	var out []Threshold
	for _, e := range exprs {
		e = strings.TrimSpace(e)
		if set := namedSet(e); set != nil {
			for _, m := range set {
				t, err := parseThreshold(m)
				if err != nil {
					return nil, err
				}
				t.Set = e
				out = append(out, t)
			}
			continue
		}
		t, err := parseThreshold(e)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func parseThreshold(expr string) (Threshold, error) {
	bad := func(format string, args ...any) error {
		return outcome.Usagef("--threshold %q: %s (grammar: %s)", expr, fmt.Sprintf(format, args...), ThresholdGrammar)
	}
	s := strings.ReplaceAll(expr, " ", "")
	if s == "" {
		return Threshold{}, bad("empty")
	}
	i := strings.IndexAny(s, "<>=")
	if i < 0 {
		if sug := outcome.Suggest(s, strings.Split(setNames, ", ")); sug != "" {
			return Threshold{}, bad("unknown named set (did you mean %s?)", sug)
		}
		return Threshold{}, bad("no comparison")
	}
	lhs, rest := s[:i], s[i:]
	var cmp string
	for _, c := range []string{"<=", ">=", "==", "<", ">"} {
		if strings.HasPrefix(rest, c) {
			cmp = c
			break
		}
	}
	if cmp == "" {
		return Threshold{}, bad("comparison must be <, <=, >, >= or ==")
	}
	value := rest[len(cmp):]
	if value == "" {
		return Threshold{}, bad("no value after %s", cmp)
	}
	t := Threshold{Expr: expr, Cmp: cmp}
	if j := strings.LastIndex(lhs, ":"); j >= 0 {
		t.Subject, t.Stat = lhs[:j], lhs[j+1:]
		if t.Subject == "" {
			return Threshold{}, bad("empty subject before ':'")
		}
		if _, err := path.Match(t.Subject, ""); err != nil {
			return Threshold{}, bad("subject %q is not a valid glob", t.Subject)
		}
	} else {
		t.Stat = lhs
	}
	t.Stat = strings.ToLower(t.Stat)
	if t.Stat == "p999" {
		t.Stat = "p99.9"
	}
	if t.Stat == "" {
		return Threshold{}, bad("no statistic")
	}

	server, isServer := serverSubject(t.Subject)
	switch {
	case isServer:
		t.Subject = server
		if !slicesContains([]string{"p50", "p90", "p99", "p99.9", "mean"}, t.Stat) {
			return Threshold{}, bad("%s takes p50, p90, p99, p99.9 or mean", t.Subject)
		}
	case t.Subject == subjectAvailability:
		if t.Stat != "max" {
			return Threshold{}, bad("availability_gap takes max (the longest gap)")
		}
	default:
		if !slicesContains(allStats(), t.Stat) {
			if sug := outcome.Suggest(t.Stat, allStats()); sug != "" {
				return Threshold{}, bad("unknown statistic %q (did you mean %s?)", t.Stat, sug)
			}
			return Threshold{}, bad("unknown statistic %q", t.Stat)
		}
		if t.Subject != "" && (t.Stat == "missed" || t.Stat == "leader_changes") {
			return Threshold{}, bad("%s is a whole-run statistic: write it without a subject", t.Stat)
		}
	}

	var err error
	switch {
	case isServer || t.Subject == subjectAvailability || isLatencyStat(t.Stat):
		t.Unit = unitMs
		t.Value, err = parseDurationMs(value)
	case t.Stat == "errors":
		if strings.HasSuffix(value, "%") {
			t.Unit = unitPercent
			t.Value, err = parseNumber(strings.TrimSuffix(value, "%"))
		} else {
			t.Unit = unitCount
			t.Value, err = parseNumber(value)
		}
	case t.Stat == "missed":
		if !strings.HasSuffix(value, "%") {
			return Threshold{}, bad("missed is a percentage of the schedule, e.g. missed<1%%")
		}
		t.Unit = unitPercent
		t.Value, err = parseNumber(strings.TrimSuffix(value, "%"))
	case t.Stat == "throughput":
		t.Unit = unitOps
		t.Value, err = parseNumber(strings.TrimSuffix(strings.TrimSuffix(value, "/s"), "ops"))
	default: // count, leader_changes
		t.Unit = unitCount
		t.Value, err = parseNumber(value)
	}
	if err != nil {
		return Threshold{}, bad("%v", err)
	}
	if t.Value < 0 {
		return Threshold{}, bad("negative value")
	}
	if t.Unit == unitPercent && t.Value > 100 {
		return Threshold{}, bad("a percentage above 100")
	}
	return t, nil
}

func parseDurationMs(v string) (float64, error) {
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return 0, fmt.Errorf("%q needs a unit, e.g. %sms", v, v)
	}
	d, err := time.ParseDuration(strings.ReplaceAll(v, "µ", "u"))
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 25ms or 1.5s", v)
	}
	return float64(d) / 1e6, nil
}

func parseNumber(v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a number", v)
	}
	return f, nil
}

func slicesContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

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

func isServerSubject(s string) bool {
	_, ok := serverSubject(s)
	return ok
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

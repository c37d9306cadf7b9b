package results

import (
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// ThresholdGrammar is the one-line grammar of a threshold, for help texts and error messages.
const ThresholdGrammar = "[SUBJECT:]STAT OP VALUE, e.g. put:p99<25ms, errors<0.1%, requests:succeeded>0, availability_gap:max<3s, wal_fsync:p99<10ms, or a named set: " + setNames

const setNames = "etcd-hardware, k8s-slo"

// Threshold is one parsed threshold. A threshold passes when the observed value compares to Value as Cmp
// says; a value that cannot be observed fails it (an unknown is never a pass).
type Threshold struct {
	// Expr is the threshold as written (for thresholds of a named set, the set's member expression).
	Expr string
	// Set names the named set the threshold came from.
	Set string
	// Default marks a default threshold (DefaultThresholds), judged because no threshold given overrides it.
	Default bool
	// Subject is what is measured: an operation name or glob ("put", "create/*"), "" for the whole run
	// (for latency statistics: every operation), requests (every request of the run together, watch events
	// and cache syncs left out), or a server subject (wal_fsync, backend_commit, apply, peer_rtt) or
	// availability_gap.
	Subject string
	// Stat is the statistic: p50, p90, p99, p99.9, max, mean, min (response time), service_p50 ...
	// service_max (service time), throughput, errors, succeeded, count, missed, leader_changes, and
	// errors_outside_faults (of requests only).
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

// isServerSubject reports whether s names one of etcd's own histograms, by any of its names.
func isServerSubject(s string) bool {
	_, ok := serverSubject(s)
	return ok
}

const (
	subjectAvailability = "availability_gap"
	// subjectRequests is every request of a run together (IsRequest): what "nothing passes on nothing" judges.
	subjectRequests = "requests"
	// statOutsideFaults is the errors of the requests intended outside every fault's observation (see
	// OutsideFaults).
	statOutsideFaults = "errors_outside_faults"
)

// DefaultThresholds are the thresholds every run is judged by unless a threshold given overrides them (has
// the same subject and statistic, whatever its limit): nothing passes on nothing.
//
//   - requests:succeeded>0: a run in which no request succeeded measured nothing of etcd; whatever its
//     checks say (a history with no successful operation is trivially linearizable), it is not a pass.
//   - requests:errors_outside_faults<5%: outside the faults' windows (neither while a fault is in effect
//     nor while the cluster recovers from one) a healthy cluster answers essentially every request; more
//     than one error in twenty there means the load measured a broken cluster or a broken set-up (wrong
//     endpoints or credentials, a full database, a member stuck), not etcd's performance. The share is
//     loose on purpose: requests in flight when a fault strikes were intended before it and fail with it,
//     and a cluster driven beyond its capacity times some out; the errors a fault causes are judged by
//     availability (the gaps, not_recovered), not here.
//
// Override one with the same subject and statistic (requests:errors_outside_faults<1%, or
// requests:errors_outside_faults<=100% to judge nothing).
func DefaultThresholds() []string {
	return []string{subjectRequests + ":succeeded>0", subjectRequests + ":" + statOutsideFaults + "<5%"}
}

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
		for _, l := range SLOLimits() {
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
	out := append([]string{"throughput", "errors", "succeeded", "count", "missed", "leader_changes"}, latencyStats()...)
	for _, s := range latencyStats() {
		out = append(out, "service_"+s)
	}
	return out
}

// RunThresholds returns the thresholds a run is judged by: those of exprs (ParseThresholds) and every default
// threshold (DefaultThresholds) that none of them overrides, after them.
func RunThresholds(exprs []string) ([]Threshold, error) {
	ts, err := ParseThresholds(exprs)
	if err != nil {
		return nil, err
	}
	defaults, err := ParseThresholds(DefaultThresholds())
	if err != nil {
		panic(err) // the defaults are constants, tested
	}
	for _, d := range defaults {
		overridden := slices.ContainsFunc(ts, func(t Threshold) bool { return t.Subject == d.Subject && t.Stat == d.Stat })
		if !overridden {
			d.Default = true
			ts = append(ts, d)
		}
	}
	return ts, nil
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

// parseThreshold parses one expression of ThresholdGrammar: the comparison, then the subject and its
// statistic, then the limit in the statistic's unit. Each step says what is wrong in its own words; the
// usage error around it quotes the expression and the grammar.
func parseThreshold(expr string) (Threshold, error) {
	bad := func(err error) error {
		return outcome.Usagef("--threshold %q: %w (grammar: %s)", expr, err, ThresholdGrammar)
	}
	lhs, cmp, value, err := splitComparison(strings.ReplaceAll(expr, " ", ""))
	if err != nil {
		return Threshold{}, bad(err)
	}
	t := Threshold{Expr: expr, Cmp: cmp}
	if t.Subject, t.Stat, err = splitStatistic(lhs); err != nil {
		return Threshold{}, bad(err)
	}
	if err := checkStatistic(t.Subject, t.Stat); err != nil {
		return Threshold{}, bad(err)
	}
	if t.Value, t.Unit, err = parseLimit(t.Subject, t.Stat, value); err != nil {
		return Threshold{}, bad(err)
	}
	return t, nil
}

// splitComparison splits a threshold without spaces at its comparison: "put:p99<25ms" is "put:p99", "<"
// and "25ms". A word without a comparison was meant as a named set, and is answered as one.
func splitComparison(s string) (lhs, cmp, value string, err error) {
	if s == "" {
		return "", "", "", errors.New("empty")
	}
	i := strings.IndexAny(s, "<>=")
	if i < 0 {
		if sug := outcome.Suggest(s, strings.Split(setNames, ", ")); sug != "" {
			return "", "", "", fmt.Errorf("unknown named set (did you mean %s?)", sug)
		}
		return "", "", "", errors.New("no comparison")
	}
	lhs, rest := s[:i], s[i:]
	// The two-character comparisons first, so that "<=" is not read as "<" followed by a value "=...".
	for _, c := range []string{"<=", ">=", "==", "<", ">"} {
		if strings.HasPrefix(rest, c) {
			cmp = c
			break
		}
	}
	if cmp == "" {
		return "", "", "", errors.New("comparison must be <, <=, >, >= or ==")
	}
	value = rest[len(cmp):]
	if value == "" {
		return "", "", "", fmt.Errorf("no value after %s", cmp)
	}
	return lhs, cmp, value, nil
}

// splitStatistic splits "[SUBJECT:]STAT" at its last colon: a statistic never holds one, so a subject
// may. The statistic is read case-insensitively, p999 being p99.9; a server subject is given
// its canonical name.
func splitStatistic(lhs string) (subject, stat string, err error) {
	stat = lhs
	if j := strings.LastIndex(lhs, ":"); j >= 0 {
		subject, stat = lhs[:j], lhs[j+1:]
		if subject == "" {
			return "", "", errors.New("empty subject before ':'")
		}
		if _, err := path.Match(subject, ""); err != nil {
			return "", "", fmt.Errorf("subject %q is not a valid glob", subject)
		}
	}
	stat = strings.ToLower(stat)
	if stat == "p999" {
		stat = "p99.9"
	}
	if stat == "" {
		return "", "", errors.New("no statistic")
	}
	if server, ok := serverSubject(subject); ok {
		subject = server
	}
	return subject, stat, nil
}

// checkStatistic says whether a subject has the statistic: etcd's histograms have percentiles and a mean
// (no max: their buckets do not record one), an availability gap only its longest, operations every
// statistic, every request together its sums, and the schedule's and the leader's statistics belong to the
// whole run.
func checkStatistic(subject, stat string) error {
	switch {
	case isServerSubject(subject):
		if !slices.Contains([]string{"p50", "p90", "p99", "p99.9", "mean"}, stat) {
			return fmt.Errorf("%s takes p50, p90, p99, p99.9 or mean", subject)
		}
	case subject == subjectAvailability:
		if stat != "max" {
			return errors.New("availability_gap takes max (the longest gap)")
		}
	case subject == subjectRequests:
		if !slices.Contains(requestStats(), stat) {
			return fmt.Errorf("requests takes %s (every request of the run together)", strings.Join(requestStats(), ", "))
		}
	case stat == statOutsideFaults:
		return fmt.Errorf("%s is a statistic of every request together: write requests:%s", statOutsideFaults, statOutsideFaults)
	default:
		if !slices.Contains(allStats(), stat) {
			if sug := outcome.Suggest(stat, allStats()); sug != "" {
				return fmt.Errorf("unknown statistic %q (did you mean %s?)", stat, sug)
			}
			return fmt.Errorf("unknown statistic %q", stat)
		}
		if subject != "" && (stat == "missed" || stat == "leader_changes") {
			return fmt.Errorf("%s is a whole-run statistic: write it without a subject", stat)
		}
	}
	return nil
}

// parseLimit reads a threshold's value in the unit of its statistic: a duration for latencies and gaps,
// a count or a percentage for errors, a percentage of the schedule for missed starts, ops/s for
// throughput, a count otherwise. A limit no observation can have (negative, a percentage above 100) is
// refused rather than left to pass or fail every run.
func parseLimit(subject, stat, value string) (limit float64, unit string, err error) {
	switch {
	case isServerSubject(subject) || subject == subjectAvailability || isLatencyStat(stat):
		unit = unitMs
		limit, err = parseDurationMs(value)
	case stat == "errors" || stat == statOutsideFaults:
		if strings.HasSuffix(value, "%") {
			unit = unitPercent
			limit, err = parseNumber(strings.TrimSuffix(value, "%"))
		} else {
			unit = unitCount
			limit, err = parseNumber(value)
		}
	case stat == "missed":
		if !strings.HasSuffix(value, "%") {
			return 0, "", errors.New("missed is a percentage of the schedule, e.g. missed<1%")
		}
		unit = unitPercent
		limit, err = parseNumber(strings.TrimSuffix(value, "%"))
	case stat == "throughput":
		unit = unitOps
		limit, err = parseNumber(strings.TrimSuffix(strings.TrimSuffix(value, "/s"), "ops"))
	default: // count, succeeded, leader_changes
		unit = unitCount
		limit, err = parseNumber(value)
	}
	switch {
	case err != nil:
		return 0, "", err
	case limit < 0:
		return 0, "", errors.New("negative value")
	case unit == unitPercent && limit > 100:
		return 0, "", errors.New("a percentage above 100")
	}
	return limit, unit, nil
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

// requestStats are the statistics of the requests subject: sums over every request, not the worst one.
func requestStats() []string {
	return []string{"count", "succeeded", "errors", statOutsideFaults, "throughput"}
}

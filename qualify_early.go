package chaosbench

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// EarlyStop says why a step of the ladder ended before its full time: its verdict could not change with
// 95% confidence. The step is still judged by the one judge (results.Decide of its run's summary), over
// the time it measured.
type EarlyStop struct {
	// AtSeconds is the measured time when the step ended; Expected what the decision expects the judge
	// to find (pass or fail).
	AtSeconds float64 `json:"at_s"`
	Expected  string  `json:"expected"`
	Why       string  `json:"why"`
}

// earlyEvery is how often a step asks whether it is decided.
const earlyEvery = 5 * time.Second

// earlyMinCount is the fewest samples a p99 needs before its interval is computed at all.
const earlyMinCount = 20

// earlyRule decides, while a step's load runs, whether the step's verdict can still change. It looks every
// earlyEvery from MinStep on; a look spends its share of 5% (Bonferroni over the looks and over the
// limits it judges, so that the chance that any interval of any look misses its figure stays below 5%).
// Each limit is judged on an interval:
//
//   - a Kubernetes API call SLO (each operation's p99 against its limit): the distribution-free interval of
//     a quantile from the order statistics, ranks N·0.99 ∓ z·√(N·0.99·0.01) (the binomial's normal
//     approximation) read from the operation's response-time histogram; an upper rank beyond N has no
//     upper bound: too few requests to bound the p99 from above;
//   - etcd-hardware (WAL fsync p99 < 10 ms, backend commit p99 < 25 ms, worst member): etcd's histograms
//     have buckets that double, so the p99 is known to a bucket: decided below when it is under a quarter of
//     the limit (its bucket's upper edge under half of it) over at least 1000 observations, above when the
//     p90 is over twice the limit over at least 200 (the p99 is above the p90);
//   - the throughput floor (90% of the plan): the measured rate is the generator's, open loop: far above
//     when over 97% of the plan with under 0.5% of requests late, far below under 45%;
//   - leader changes: one is a failure that more time cannot undo; none decides nothing, and an early
//     pass says the rest of the step was not watched.
//
// A limit is far from its interval by a factor of 2 (the interval under half the limit, or over twice
// it): a step's load is not stationary (the database grows, compaction runs), so the first minute is not a
// sample of the whole step, and the margin covers that drift. The step ends early as a FAIL when any limit
// is decided failed, as a PASS when every limit is decided passed.
type earlyRule struct {
	planned float64 // requests/s
	looks   int
	minStep time.Duration
}

// newEarlyRule is the rule of a step of measured length step that may end after minStep.
func newEarlyRule(planned float64, step, minStep time.Duration) earlyRule {
	return earlyRule{planned: planned, minStep: minStep, looks: max(1, int((step-minStep)/earlyEvery)+1)}
}

// The limits the rule judges, besides each SLO operation's (results.SLOClass).
const (
	earlyWALLimitMs    = 10
	earlyCommitLimitMs = 25
)

// decide says whether the step is decided, and why.
func (e earlyRule) decide(v LoadView) (stop bool, expected, why string) {
	if v.Measured < e.minStep {
		return false, "", ""
	}
	var ops []string
	for op := range v.Responses {
		if _, limit := results.SLOClass(op); limit > 0 {
			ops = append(ops, op)
		}
	}
	sort.Strings(ops)
	limits := len(ops) + 3
	a := 0.05 / float64(e.looks*limits)
	z := distuv.UnitNormal.Quantile(1 - a/2)
	var pending, failed, passed []string
	for _, op := range ops {
		_, limit := results.SLOClass(op)
		h := v.Responses[op]
		n := float64(h.TotalCount())
		if n < earlyMinCount {
			pending = append(pending, fmt.Sprintf("%s: %d requests", op, int(n)))
			continue
		}
		half := z * math.Sqrt(n*0.99*0.01)
		lo, hi := math.Floor(n*0.99-half), math.Ceil(n*0.99+half)
		low := math.Inf(-1)
		if lo >= 1 {
			low = float64(h.ValueAtQuantile(100*lo/n)) / 1e6
		}
		high := math.Inf(1)
		if hi < n {
			high = float64(h.ValueAtQuantile(100*hi/n)) / 1e6
		}
		switch {
		case low > 2*limit:
			failed = append(failed, fmt.Sprintf("%s p99 over %s (limit %s)", op, ms(low), ms(limit)))
		case high < limit/2:
			passed = append(passed, fmt.Sprintf("%s p99 under %s", op, ms(high)))
		case math.IsInf(high, 1):
			pending = append(pending, fmt.Sprintf("%s: %d requests cannot bound its p99", op, int(n)))
		default:
			pending = append(pending, fmt.Sprintf("%s p99 in [%s, %s] near its %s limit", op, ms(low), ms(high), ms(limit)))
		}
	}
	if s := v.Server; s != nil {
		for _, d := range []struct {
			name  string
			l     results.Bucketed
			limit float64
		}{
			{"WAL fsync", s.Cluster.WALFsync, earlyWALLimitMs},
			{"backend commit", s.Cluster.BackendCommit, earlyCommitLimitMs},
		} {
			switch {
			case d.l.Count >= 200 && d.l.P90 > 2*d.limit:
				failed = append(failed, fmt.Sprintf("%s p90 %s, p99 %s (limit %s)", d.name, ms(d.l.P90), ms(d.l.P99), ms(d.limit)))
			case d.l.Count >= 1000 && d.l.P99 < d.limit/4:
				passed = append(passed, fmt.Sprintf("%s p99 %s", d.name, ms(d.l.P99)))
			default:
				pending = append(pending, fmt.Sprintf("%s p99 %s of %d observations", d.name, ms(d.l.P99), d.l.Count))
			}
		}
		if s.Cluster.LeaderChanges > 0 {
			failed = append(failed, fmt.Sprintf("%d leader changes", s.Cluster.LeaderChanges))
		}
	} else {
		pending = append(pending, "etcd's metrics are not scraped")
	}
	if e.planned > 0 && v.Measured > 0 {
		rate := float64(v.Requests) / v.Measured.Seconds()
		lateOK := v.Requests > 0 && float64(v.Lagged) < 0.005*float64(v.Requests)
		switch {
		case rate < 0.45*e.planned:
			failed = append(failed, fmt.Sprintf("%.0f of %.0f requests/s", rate, e.planned))
		case rate > 0.97*e.planned && lateOK:
			passed = append(passed, fmt.Sprintf("%.0f of %.0f requests/s", rate, e.planned))
		default:
			pending = append(pending, fmt.Sprintf("%.0f of %.0f requests/s", rate, e.planned))
		}
	}
	at := v.Measured.Round(time.Second)
	switch {
	case len(failed) > 0:
		return true, StepFail, fmt.Sprintf("decided FAIL after %s: %s, over twice the limit at 95%% confidence", at, strings.Join(failed, "; "))
	case len(pending) == 0:
		return true, StepPass, fmt.Sprintf("decided pass after %s: every limit at least twice its interval's bound at 95%% confidence (%s); later leader changes were not watched", at, strings.Join(passed, ", "))
	}
	return false, "", ""
}

// ms formats milliseconds for the early-stop reasons.
func ms(x float64) string {
	switch {
	case x < 1:
		return fmt.Sprintf("%.2f ms", x)
	case x < 100:
		return fmt.Sprintf("%.1f ms", x)
	}
	return fmt.Sprintf("%.0f ms", x)
}

package compare

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// Run is one run of a variant, as the comparison reads it: its summary and its per-interval rows, and,
// for a run that wrote no summary, why (Outcome reads it).
type Run struct {
	Summary *results.Summary
	Series  []results.TimeSeriesRow
	Err     error
}

// Variant is a labelled set of runs, one per round (a run without a summary failed and counts as a
// missing round).
type Variant struct {
	Label string
	Runs  []Run
}

// ReadRun reads the summary and the time series of run directory dir. A missing or torn time series is
// not an error: the run has no per-interval samples (or fewer).
func ReadRun(dir string) (Run, error) {
	s, err := results.ReadSummary(dir)
	if err != nil {
		return Run{}, err
	}
	series, err := ReadTimeSeries(dir)
	return Run{Summary: s, Series: series}, err
}

// ReadTimeSeries reads dir/timeseries.jsonl; a missing file has no rows, and a torn last line (a run
// killed mid-write) ends the rows.
func ReadTimeSeries(dir string) ([]results.TimeSeriesRow, error) {
	f, err := os.Open(filepath.Join(dir, results.TimeSeriesFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read time series: %w", err)
	}
	defer f.Close()
	var out []results.TimeSeriesRow
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var row results.TimeSeriesRow
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			break
		}
		out = append(out, row)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read time series: %w", err)
	}
	return out, nil
}

// etcdBuckets is the ratio between neighbouring buckets of etcd's WAL fsync and backend commit
// histograms (0.001 s doubling): their percentiles are interpolated within one bucket.
const etcdBuckets = 2

// Floors of Difference figures: changes smaller than these never matter, whatever the baseline.
const (
	errorRateFloor     = 0.1 // percentage points
	gapFloorMs         = 50
	leaderChangesFloor = 1
)

// extractor reads one figure from a run: its value and, when the run records it per interval, its
// per-interval samples.
type extractor struct {
	metric    Metric
	value     func(*results.Summary) (float64, bool)
	intervals func([]results.TimeSeriesRow) []float64
}

// Collect builds the metrics the variants share and each variant's figures: per operation its response
// time p50, p99 and p99.9, throughput and error rate; the totals' throughput and error rate; each fault's
// write gap and read gap (results.LongestGap, as the run measured them; matched by position: the same seed injects the same schedule); etcd's WAL fsync and backend
// commit p99 (the worst member) and its leader changes.
func Collect(variants []Variant) ([]Metric, []Figures) {
	exs := extractors(variants)
	out := make([]Figures, len(variants))
	for i, v := range variants {
		f := Figures{Label: v.Label, Values: map[string][]float64{}, Intervals: map[string][][]float64{}}
		for _, ex := range exs {
			vals := make([]float64, len(v.Runs))
			ivs := make([][]float64, len(v.Runs))
			for r, run := range v.Runs {
				vals[r] = math.NaN()
				if run.Summary == nil {
					continue
				}
				if x, ok := ex.value(run.Summary); ok {
					vals[r] = x
				}
				if ex.intervals != nil {
					ivs[r] = ex.intervals(run.Series)
				}
			}
			f.Values[ex.metric.ID], f.Intervals[ex.metric.ID] = vals, ivs
		}
		out[i] = f
	}
	metrics := make([]Metric, len(exs))
	for i, ex := range exs {
		metrics[i] = ex.metric
	}
	return metrics, out
}

// extractors lists every figure the runs of the variants have, in the order comparisons show them: per
// operation (sorted by name) its latency, throughput and error rate; the totals; each fault's
// availability; etcd's own metrics. Figures no run has are left out.
func extractors(variants []Variant) []extractor {
	var sums []*results.Summary
	for _, v := range variants {
		for _, r := range v.Runs {
			if r.Summary != nil {
				sums = append(sums, r.Summary)
			}
		}
	}
	var exs []extractor
	for _, op := range operationNames(sums) {
		exs = append(exs, latencyExtractors(op)...)
		exs = append(exs, operationLoadExtractors(op)...)
	}
	exs = append(exs, totalExtractors()...)
	exs = append(exs, availabilityExtractors(faultLabels(sums))...)
	exs = append(exs, serverExtractors()...)
	return dropAbsent(exs, sums)
}

// operationNames returns the operations any of the summaries has, sorted: a variant that never ran an
// operation still gets its figures, as missing ones.
func operationNames(sums []*results.Summary) []string {
	seen := map[string]bool{}
	var ops []string
	for _, s := range sums {
		for op := range s.Operations {
			if !seen[op] {
				seen[op] = true
				ops = append(ops, op)
			}
		}
	}
	sort.Strings(ops)
	return ops
}

// faultLabels names the faults by position, as far as the longest schedule goes, each from the first
// summary that has it: the same seed injects the same schedule, so fault i of every run is the same fault.
func faultLabels(sums []*results.Summary) []string {
	var labels []string
	for _, s := range sums {
		for i, w := range s.Faults {
			if i >= len(labels) {
				label := fmt.Sprintf("fault %d: %s", i+1, w.Fault)
				if len(w.Targets) > 0 {
					label += " " + strings.Join(w.Targets, ",")
				}
				labels = append(labels, label)
			}
		}
	}
	return labels
}

// measuredOperation returns the summary's figures of operation op, if it completed any request: an
// operation without one has no latency, throughput or error rate to compare.
func measuredOperation(s *results.Summary, op string) (*results.Operation, bool) {
	o, ok := s.Operations[op]
	return o, ok && o != nil && o.Count > 0
}

// operationSamples returns f of each of the time series' rows of operation op for which f has a sample.
func operationSamples(series []results.TimeSeriesRow, op string, f func(results.TimeSeriesRow) (float64, bool)) []float64 {
	var out []float64
	for _, r := range series {
		if r.Op != op {
			continue
		}
		if x, ok := f(r); ok {
			out = append(out, x)
		}
	}
	return out
}

// latencyExtractors are operation op's response time percentiles: p50, p99 and p99.9, in ms.
func latencyExtractors(op string) []extractor {
	var exs []extractor
	for _, q := range []struct {
		name string
		get  func(results.Latency) float64
		row  func(results.TimeSeriesRow) float64
	}{
		{"p50", func(l results.Latency) float64 { return l.P50 }, func(r results.TimeSeriesRow) float64 { return r.P50 }},
		{"p99", func(l results.Latency) float64 { return l.P99 }, func(r results.TimeSeriesRow) float64 { return r.P99 }},
		{"p99.9", func(l results.Latency) float64 { return l.P999 }, func(r results.TimeSeriesRow) float64 { return r.P999 }},
	} {
		exs = append(exs, extractor{
			metric: Metric{ID: op + ":" + q.name, Unit: "ms", Direction: LowerIsBetter, Scale: Ratio},
			value: func(s *results.Summary) (float64, bool) {
				o, ok := measuredOperation(s, op)
				if !ok {
					return 0, false
				}
				return q.get(o.Response), true
			},
			intervals: func(series []results.TimeSeriesRow) []float64 {
				// Runs recorded before p99.9 was kept per second have none (0).
				return operationSamples(series, op, func(r results.TimeSeriesRow) (float64, bool) { return q.row(r), r.Count > 0 && q.row(r) > 0 })
			},
		})
	}
	return exs
}

// operationLoadExtractors are what operation op carried: its throughput and its error rate.
func operationLoadExtractors(op string) []extractor {
	return []extractor{{
		metric: Metric{ID: op + ":throughput", Unit: "ops/s", Direction: HigherIsBetter, Scale: Ratio},
		value: func(s *results.Summary) (float64, bool) {
			o, ok := measuredOperation(s, op)
			if !ok {
				return 0, false
			}
			return o.Throughput, true
		},
		intervals: func(series []results.TimeSeriesRow) []float64 {
			// timeseries.jsonl has no line for a second in which the operation completed nothing:
			// in the seconds the run recorded, that is a throughput of zero.
			byT := map[float64]float64{}
			for _, r := range series {
				if r.Op == op {
					byT[r.T] = r.Throughput
				}
			}
			var out []float64
			for _, t := range seconds(series) {
				out = append(out, byT[t])
			}
			return out
		},
	}, {
		metric: Metric{ID: op + ":errors", Label: "error rate", Unit: "%", Direction: LowerIsBetter, Scale: Difference, Floor: errorRateFloor},
		value: func(s *results.Summary) (float64, bool) {
			o, ok := measuredOperation(s, op)
			if !ok {
				return 0, false
			}
			return 100 * float64(o.Errors) / float64(o.Count), true
		},
		intervals: func(series []results.TimeSeriesRow) []float64 {
			return operationSamples(series, op, func(r results.TimeSeriesRow) (float64, bool) {
				return 100 * float64(r.Errors) / float64(max(r.Count, 1)), r.Count > 0
			})
		},
	}}
}

// totalSamples returns f of each second of the time series, over all its operations, for the seconds f
// has a sample for.
func totalSamples(series []results.TimeSeriesRow, f func(count, errs int64, tput float64) (float64, bool)) []float64 {
	type agg struct {
		count, errs int64
		tput        float64
	}
	byT := map[float64]*agg{}
	var ts []float64
	for _, r := range series {
		a := byT[r.T]
		if a == nil {
			a = &agg{}
			byT[r.T] = a
			ts = append(ts, r.T)
		}
		a.count, a.errs, a.tput = a.count+r.Count, a.errs+r.Errors, a.tput+r.Throughput
	}
	sort.Float64s(ts)
	var out []float64
	for _, t := range ts {
		a := byT[t]
		if x, ok := f(a.count, a.errs, a.tput); ok {
			out = append(out, x)
		}
	}
	return out
}

// totalExtractors are what the whole run carried: its throughput and its error rate over all operations.
func totalExtractors() []extractor {
	return []extractor{{
		metric: Metric{ID: "total:throughput", Unit: "ops/s", Direction: HigherIsBetter, Scale: Ratio},
		value:  func(s *results.Summary) (float64, bool) { return s.Total.Throughput, s.Total.Count > 0 },
		intervals: func(series []results.TimeSeriesRow) []float64 {
			return totalSamples(series, func(_, _ int64, tput float64) (float64, bool) { return tput, true })
		},
	}, {
		metric: Metric{ID: "total:errors", Label: "error rate", Unit: "%", Direction: LowerIsBetter, Scale: Difference, Floor: errorRateFloor},
		value: func(s *results.Summary) (float64, bool) {
			return 100 * float64(s.Total.Errors) / float64(max(s.Total.Count, 1)), s.Total.Count > 0
		},
		intervals: func(series []results.TimeSeriesRow) []float64 {
			return totalSamples(series, func(count, errs int64, _ float64) (float64, bool) {
				return 100 * float64(errs) / float64(max(count, 1)), count > 0
			})
		},
	}}
}

// availabilityExtractors are each fault's longest gaps without a successful write and read, as the run
// measured them (results.LongestGap), the faults matched by position. They have no per-interval samples:
// a gap happens once per fault.
func availabilityExtractors(labels []string) []extractor {
	var exs []extractor
	for i, label := range labels {
		exs = append(exs, extractor{
			metric: Metric{ID: fmt.Sprintf("fault%d:write_gap", i+1), Label: label, Unit: "ms",
				Direction: LowerIsBetter, Scale: Difference, Floor: gapFloorMs},
			value: func(s *results.Summary) (float64, bool) {
				if i >= len(s.Faults) || s.Faults[i].Availability == nil {
					return 0, false
				}
				return s.Faults[i].Availability.WriteGapMs, true
			},
		}, extractor{
			metric: Metric{ID: fmt.Sprintf("fault%d:read_gap", i+1), Label: label + " (reads)", Unit: "ms",
				Direction: LowerIsBetter, Scale: Difference, Floor: gapFloorMs},
			value: func(s *results.Summary) (float64, bool) {
				if i >= len(s.Faults) || s.Faults[i].Availability == nil || s.Faults[i].Availability.Reads == 0 {
					return 0, false // a window without reads has no read gap
				}
				return s.Faults[i].Availability.ReadGapMs, true
			},
		})
	}
	return exs
}

// clusterMetrics returns etcd's own metrics of the run's cluster (the worst member's), if it scraped any.
func clusterMetrics(s *results.Summary) (*results.ClusterMetrics, bool) {
	if s.Server == nil || len(s.Server.Members) == 0 {
		return nil, false
	}
	return &s.Server.Cluster, true
}

// serverExtractors are etcd's own figures of the worst member: WAL fsync and backend commit p99, read
// from bucketed histograms (hence their Resolution), and the cluster's leader changes.
func serverExtractors() []extractor {
	return []extractor{{
		metric: Metric{ID: "etcd:wal_fsync_p99", Label: "worst member", Unit: "ms", Direction: LowerIsBetter, Scale: Ratio, Resolution: etcdBuckets},
		value: func(s *results.Summary) (float64, bool) {
			if c, ok := clusterMetrics(s); ok && c.WALFsync.Count > 0 {
				return c.WALFsync.P99, true
			}
			return 0, false
		},
	}, {
		metric: Metric{ID: "etcd:backend_commit_p99", Label: "worst member", Unit: "ms", Direction: LowerIsBetter, Scale: Ratio, Resolution: etcdBuckets},
		value: func(s *results.Summary) (float64, bool) {
			if c, ok := clusterMetrics(s); ok && c.BackendCommit.Count > 0 {
				return c.BackendCommit.P99, true
			}
			return 0, false
		},
	}, {
		metric: Metric{ID: "etcd:leader_changes", Unit: "", Direction: LowerIsBetter, Scale: Difference, Floor: leaderChangesFloor},
		value: func(s *results.Summary) (float64, bool) {
			c, ok := clusterMetrics(s)
			if !ok {
				return 0, false
			}
			return float64(c.LeaderChanges), true
		},
	}}
}

// seconds returns the times (T) of the run's time series, in order: the seconds some operation completed
// requests in.
func seconds(series []results.TimeSeriesRow) []float64 {
	seen := map[float64]bool{}
	var out []float64
	for _, r := range series {
		if !seen[r.T] {
			seen[r.T] = true
			out = append(out, r.T)
		}
	}
	sort.Float64s(out)
	return out
}

// dropAbsent leaves out the figures no run has (etcd's metrics of runs that did not scrape them).
func dropAbsent(exs []extractor, sums []*results.Summary) []extractor {
	var out []extractor
	for _, ex := range exs {
		for _, s := range sums {
			if _, ok := ex.value(s); ok {
				out = append(out, ex)
				break
			}
		}
	}
	return out
}

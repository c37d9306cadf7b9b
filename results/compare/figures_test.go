package compare

import (
	"math"
	"slices"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// Collect reads every figure the comparison knows from summaries and time series: per operation its
// percentiles, throughput and error rate (with per-second samples where timeseries.jsonl has them), the
// totals, each fault's write gap and etcd's figures; a figure no run has is left out.
func TestCollect(t *testing.T) {
	sum := func(p99, gap float64, server bool) *results.Summary {
		s := &results.Summary{
			Operations: map[string]*results.Operation{"put": {Count: 1000, Errors: 10, Throughput: 100,
				Response: results.Latency{P50: 1, P99: p99, P999: 2 * p99}}},
			Faults: []results.FaultWindow{{Fault: "kill", Targets: []string{"m1"}, Availability: &results.Availability{WriteGapMs: gap}}},
		}
		s.Total = results.Totals(s.Operations)
		if server {
			s.Server = &results.ServerMetrics{Members: []results.MemberMetrics{{Name: "m1"}},
				Cluster: results.ClusterMetrics{WALFsync: results.Bucketed{Count: 5, P99: 4}, LeaderChanges: 2}}
		}
		return s
	}
	series := []results.TimeSeriesRow{
		{T: 1, Op: "put", Count: 100, Errors: 1, Throughput: 100, P50: 1, P99: 9, P999: 20},
		{T: 2, Op: "range", Count: 10, Throughput: 10, P50: 1, P99: 2},
		{T: 3, Op: "put", Count: 100, Throughput: 100, P50: 1.1, P99: 11},
	}
	metrics, figs := Collect([]Variant{
		{Label: "A", Runs: []Run{{Summary: sum(10, 800, true), Series: series}, {Summary: nil}}},
		{Label: "B", Runs: []Run{{Summary: sum(12, 500, false)}}},
	})
	var ids []string
	for _, m := range metrics {
		ids = append(ids, m.ID)
	}
	want := []string{"put:p50", "put:p99", "put:p99.9", "put:throughput", "put:errors", "total:throughput", "total:errors",
		"fault1:write_gap", "etcd:wal_fsync_p99", "etcd:leader_changes"}
	if !slices.Equal(ids, want) {
		t.Fatalf("figures %q, want %q", ids, want)
	}
	a, b := figs[0], figs[1]
	if v := a.Values["put:p99"]; v[0] != 10 || !math.IsNaN(v[1]) {
		t.Errorf("A put p99 rounds %v (the failed round is missing)", v)
	}
	if v := a.Values["put:errors"][0]; v != 1 {
		t.Errorf("A error rate %v%%, want 1%%", v)
	}
	if iv := a.Intervals["put:p99"][0]; !slices.Equal(iv, []float64{9, 11}) {
		t.Errorf("A put p99 per second %v: seconds without requests have no latency", iv)
	}
	if iv := a.Intervals["put:throughput"][0]; !slices.Equal(iv, []float64{100, 0, 100}) {
		t.Errorf("A put throughput per second %v: a second without a put line is zero", iv)
	}
	if iv := a.Intervals["put:p99.9"][0]; !slices.Equal(iv, []float64{20}) {
		t.Errorf("A put p99.9 per second %v: seconds recorded without it have none", iv)
	}
	if g := b.Values["fault1:write_gap"][0]; g != 500 {
		t.Errorf("B gap %v", g)
	}
	if v := b.Values["etcd:wal_fsync_p99"][0]; !math.IsNaN(v) {
		t.Errorf("B scraped nothing, yet fsync p99 %v", v)
	}
	if m := metrics[slices.Index(ids, "fault1:write_gap")]; m.Label != "fault 1: kill m1" || m.Scale != Difference {
		t.Errorf("gap metric %+v", m)
	}
}

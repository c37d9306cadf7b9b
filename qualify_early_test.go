package chaosbench

import (
	"strings"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// TestEarlyRule: a step ends early only when every limit is far from its interval (pass) or one is far
// beyond it (fail), never before the minimum time, never on too few requests, never without etcd's own
// figures for a pass, and a leader change fails it at once. A table, no clock.
func TestEarlyRule(t *testing.T) {
	hist := func(n int, ms float64) *hdr.Histogram {
		h := results.NewHistogram()
		for i := range n {
			// Spread over ±20% so that the quantiles are not one value.
			h.RecordValue(int64(ms * 1e6 * (0.8 + 0.4*float64(i%10)/10)))
		}
		return h
	}
	fastServer := &results.ServerMetrics{Cluster: results.ClusterMetrics{
		WALFsync:      results.Bucketed{Count: 5000, P90: 1, P99: 2},
		BackendCommit: results.Bucketed{Count: 5000, P90: 2, P99: 4}}}
	view := func(mod func(*LoadView)) LoadView {
		v := LoadView{Measured: 40 * time.Second, Requests: 4000, Server: fastServer, Responses: map[string]*hdr.Histogram{
			"create/pods": hist(2000, 10), "get/pods": hist(2000, 5), "list/pods": hist(2000, 30), "watch-event/pods": hist(50, 9000)}}
		if mod != nil {
			mod(&v)
		}
		return v
	}
	rule := newEarlyRule(100, 3*time.Minute, 30*time.Second)
	for _, tt := range []struct {
		name     string
		v        LoadView
		expected string // "" for no stop
		says     string
	}{
		{"far under every limit", view(nil), StepPass, "decided pass after 40s"},
		{"before the minimum time", view(func(v *LoadView) { v.Measured = 20 * time.Second }), "", ""},
		{"a p99 ten times over its limit", view(func(v *LoadView) { v.Responses["create/pods"] = hist(2000, 10000) }), StepFail, "create/pods p99 over"},
		{"a p99 near its limit", view(func(v *LoadView) { v.Responses["get/pods"] = hist(2000, 800) }), "", ""},
		{"too few requests to bound a p99", view(func(v *LoadView) { v.Responses["get/pods"] = hist(60, 5) }), "", ""},
		{"etcd's figures missing", view(func(v *LoadView) { v.Server = nil }), "", ""},
		{"WAL fsync far over", view(func(v *LoadView) {
			v.Server = &results.ServerMetrics{Cluster: results.ClusterMetrics{WALFsync: results.Bucketed{Count: 300, P90: 30, P99: 40}}}
		}), StepFail, "WAL fsync p90"},
		{"a leader change", view(func(v *LoadView) {
			s := *fastServer
			s.Cluster.LeaderChanges = 1
			v.Server = &s
		}), StepFail, "1 leader changes"},
		{"throughput short of the plan", view(func(v *LoadView) { v.Requests = 1000 }), StepFail, "25 of 100 requests/s"},
		{"requests started late", view(func(v *LoadView) { v.Lagged = 100 }), "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stop, expected, why := rule.decide(tt.v)
			if stop != (tt.expected != "") || expected != tt.expected || !strings.Contains(why, tt.says) {
				t.Errorf("stop %v, expected %q, why %q; want %q saying %q", stop, expected, why, tt.expected, tt.says)
			}
		})
	}
}

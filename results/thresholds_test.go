package results

import (
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

func TestParseThresholds(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want Threshold
	}{
		{"operation percentile", "put:p99<25ms", Threshold{Subject: "put", Stat: "p99", Cmp: "<", Value: 25, Unit: unitMs}},
		{"spaces and seconds", " range : p99.9 <= 1.5s ", Threshold{Subject: "range", Stat: "p99.9", Cmp: "<=", Value: 1500, Unit: unitMs}},
		{"p999 alias", "put:p999<100ms", Threshold{Subject: "put", Stat: "p99.9", Cmp: "<", Value: 100, Unit: unitMs}},
		{"microseconds", "put:p50<800us", Threshold{Subject: "put", Stat: "p50", Cmp: "<", Value: 0.8, Unit: unitMs}},
		{"micro sign", "put:p50<800µs", Threshold{Subject: "put", Stat: "p50", Cmp: "<", Value: 0.8, Unit: unitMs}},
		{"service time", "put:service_p99<10ms", Threshold{Subject: "put", Stat: "service_p99", Cmp: "<", Value: 10, Unit: unitMs}},
		{"every operation", "p99<25ms", Threshold{Stat: "p99", Cmp: "<", Value: 25, Unit: unitMs}},
		{"glob", "create/*:p99<=1s", Threshold{Subject: "create/*", Stat: "p99", Cmp: "<=", Value: 1000, Unit: unitMs}},
		{"error rate", "errors<0.1%", Threshold{Stat: "errors", Cmp: "<", Value: 0.1, Unit: unitPercent}},
		{"error count", "errors==0", Threshold{Stat: "errors", Cmp: "==", Value: 0, Unit: unitCount}},
		{"operation error rate", "put:errors<1%", Threshold{Subject: "put", Stat: "errors", Cmp: "<", Value: 1, Unit: unitPercent}},
		{"throughput", "throughput>=900", Threshold{Stat: "throughput", Cmp: ">=", Value: 900, Unit: unitOps}},
		{"throughput per second", "put:throughput>900/s", Threshold{Subject: "put", Stat: "throughput", Cmp: ">", Value: 900, Unit: unitOps}},
		{"availability", "availability_gap:max<3s", Threshold{Subject: "availability_gap", Stat: "max", Cmp: "<", Value: 3000, Unit: unitMs}},
		{"fsync", "wal_fsync:p99<10ms", Threshold{Subject: "wal_fsync", Stat: "p99", Cmp: "<", Value: 10, Unit: unitMs}},
		{"fsync short name", "fsync:p99<10ms", Threshold{Subject: "wal_fsync", Stat: "p99", Cmp: "<", Value: 10, Unit: unitMs}},
		{"commit", "commit:p99<25ms", Threshold{Subject: "backend_commit", Stat: "p99", Cmp: "<", Value: 25, Unit: unitMs}},
		{"missed", "missed<1%", Threshold{Stat: "missed", Cmp: "<", Value: 1, Unit: unitPercent}},
		{"leader changes", "leader_changes<=1", Threshold{Stat: "leader_changes", Cmp: "<=", Value: 1, Unit: unitCount}},
		{"requests succeeded", "requests:succeeded>0", Threshold{Subject: "requests", Stat: "succeeded", Cmp: ">", Value: 0, Unit: unitCount}},
		{"operation succeeded", "put:succeeded>=100", Threshold{Subject: "put", Stat: "succeeded", Cmp: ">=", Value: 100, Unit: unitCount}},
		{"errors outside faults", "requests:errors_outside_faults<5%", Threshold{Subject: "requests", Stat: "errors_outside_faults", Cmp: "<", Value: 5, Unit: unitPercent}},
		{"errors outside faults counted", "requests:errors_outside_faults<=10", Threshold{Subject: "requests", Stat: "errors_outside_faults", Cmp: "<=", Value: 10, Unit: unitCount}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseThresholds([]string{tt.expr})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("got %d thresholds", len(got))
			}
			g := got[0]
			g.Expr = ""
			if g != tt.want {
				t.Fatalf("got %+v, want %+v", g, tt.want)
			}
		})
	}
}

func TestParseNamedSets(t *testing.T) {
	got, err := ParseThresholds([]string{"etcd-hardware", "put:p99<25ms", "k8s-slo"})
	if err != nil {
		t.Fatal(err)
	}
	var sets []string
	for _, th := range got {
		sets = append(sets, th.Set+"|"+th.Expr)
	}
	want := []string{"etcd-hardware|wal_fsync:p99<10ms", "etcd-hardware|backend_commit:p99<25ms", "|put:p99<25ms",
		"k8s-slo|create/*:p99<=1s", "k8s-slo|update/*:p99<=1s", "k8s-slo|delete/*:p99<=1s", "k8s-slo|get/*:p99<=1s", "k8s-slo|list/*:p99<=30s"}
	if strings.Join(sets, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v\nwant %v", sets, want)
	}
}

// Bad expressions are usage errors (exit 2) that quote the expression and say what is wrong.
func TestParseBadThresholds(t *testing.T) {
	tests := []struct {
		name, expr, want string
	}{
		{"empty", "", "empty"},
		{"no comparison", "put:p99", "no comparison"},
		{"misspelled set", "etcd-hardwar", "did you mean etcd-hardware"},
		{"bad comparison", "put:p99=<25ms", "comparison must be"},
		{"no value", "put:p99<", "no value"},
		{"no unit", "put:p99<25", `"25" needs a unit, e.g. 25ms`},
		{"not a duration", "put:p99<fast", "not a duration"},
		{"unknown statistic", "put:p98<25ms", `unknown statistic "p98" (did you mean p90?)`},
		{"misspelled statistic", "put:troughput>10", "did you mean throughput"},
		{"empty subject", ":p99<25ms", "empty subject"},
		{"bad glob", "put[:p99<25ms", "not a valid glob"},
		{"server stat", "wal_fsync:max<10ms", "wal_fsync takes p50, p90, p99, p99.9 or mean"},
		{"availability stat", "availability_gap:p99<3s", "availability_gap takes max"},
		{"missed without percent", "missed<1", "percentage of the schedule"},
		{"missed with subject", "put:missed<1%", "whole-run statistic"},
		{"throughput not a number", "throughput>lots", "not a number"},
		{"negative", "errors>-1", "negative value"},
		{"percent over 100", "errors<150%", "above 100"},
		{"NaN", "errors<NaN%", "not a number"},
		{"errors outside faults of an operation", "put:errors_outside_faults<5%", "write requests:errors_outside_faults"},
		{"errors outside faults of the run", "errors_outside_faults<5%", "write requests:errors_outside_faults"},
		{"latency of requests", "requests:p99<1s", "requests takes count, succeeded, errors, errors_outside_faults, throughput"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseThresholds([]string{tt.expr})
			if err == nil {
				t.Fatalf("%q parsed", tt.expr)
			}
			if !outcome.IsUsage(err) {
				t.Fatalf("not a usage error: %v", err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "--threshold") {
				t.Fatalf("error %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func testEvidence() ThresholdEvidence {
	s := &Summary{
		Name:     "t",
		Schedule: Schedule{Mode: "open", TargetRate: 1000, MissedPercent: 2.5},
		Total:    Total{Count: 10000, Errors: 20, Throughput: 990},
		Operations: map[string]*Operation{
			"put":         {Count: 6000, Errors: 20, Throughput: 594, Response: Latency{P50: 2, P99: 30, Max: 120}, Service: Latency{P99: 8}},
			"range":       {Count: 4000, Throughput: 396, Response: Latency{P50: 1, P99: 12, Max: 40}, Service: Latency{P99: 5}},
			"create/pods": {Count: 10, Throughput: 1, Response: Latency{P99: 900}},
		},
		Server: &ServerMetrics{
			Members: []MemberMetrics{
				{Name: "m1", WALFsync: Bucketed{Count: 10, P99: 4}, BackendCommit: Bucketed{Count: 10, P99: 30}},
				{Name: "m2", WALFsync: Bucketed{Count: 10, P99: 12}, BackendCommit: Bucketed{Count: 10, P99: 8}},
			},
			Cluster: ClusterMetrics{LeaderChanges: 2},
		},
	}
	return ThresholdEvidence{Summary: s, LongestGap: &JudgedGap{Label: "kill m1", Seconds: 2.5}}
}

func TestEvaluateThresholds(t *testing.T) {
	tests := []struct {
		expr, verdict, observed, subject string
	}{
		{"put:p99<25ms", ThresholdFail, "30.0ms", "put"},
		{"put:p99<50ms", ThresholdPass, "30.0ms", "put"},
		{"put:service_p99<10ms", ThresholdPass, "8.00ms", "put"},
		{"p99<25ms", ThresholdFail, "900ms", "create/pods"}, // every operation: the worst one decides
		{"range:p99<25ms", ThresholdPass, "12.0ms", "range"},
		{"errors<0.1%", ThresholdFail, "0.2%", ""},
		{"errors<1%", ThresholdPass, "0.2%", ""},
		{"range:errors==0", ThresholdPass, "0", "range"},
		{"throughput>=1000", ThresholdFail, "990.0 ops/s", ""},
		{"*:throughput>100", ThresholdFail, "1.0 ops/s", "create/pods"}, // lower bound: the smallest decides
		{"missed<1%", ThresholdFail, "2.5%", ""},
		{"leader_changes<=2", ThresholdPass, "2", ""},
		{"wal_fsync:p99<10ms", ThresholdFail, "12.0ms", "m2"},
		{"commit:p99<25ms", ThresholdFail, "30.0ms", "m1"},
		{"availability_gap:max<3s", ThresholdPass, "2.50s", "kill m1"},
		{"availability_gap:max<2s", ThresholdFail, "2.50s", "kill m1"},
		{"create/*:p99<=1s", ThresholdPass, "900ms", "create/pods"},
		{"puts:p99<25ms", ThresholdFail, "no data", ""}, // a typo is not a pass
		{"delete/*:p99<1s", ThresholdFail, "no data", ""},
		{"apply:p99<100ms", ThresholdFail, "no data", ""}, // no member observed it
	}
	r := testEvidence()
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			ts, err := ParseThresholds([]string{tt.expr})
			if err != nil {
				t.Fatal(err)
			}
			got := EvaluateThresholds(ts, r)[0]
			if got.Verdict != tt.verdict || got.Observed != tt.observed || got.Subject != tt.subject {
				t.Fatalf("got %s %q of %q (%s), want %s %q of %q", got.Verdict, got.Observed, got.Subject, got.Detail, tt.verdict, tt.observed, tt.subject)
			}
			if got.Verdict == ThresholdFail && got.Detail == "" {
				t.Fatal("a failure without detail")
			}
		})
	}
	t.Run("did you mean", func(t *testing.T) {
		ts, _ := ParseThresholds([]string{"puts:p99<25ms"})
		if got := EvaluateThresholds(ts, r)[0]; !strings.Contains(got.Detail, "did you mean put?") {
			t.Fatal(got.Detail)
		}
	})
}

// A named set applies when any of its thresholds matches; its globs that match nothing are not applicable.
// A set that matches nothing at all fails: it judged nothing.
func TestEvaluateNamedSets(t *testing.T) {
	r := testEvidence()
	ts, _ := ParseThresholds([]string{"k8s-slo"})
	got := EvaluateThresholds(ts, r)
	verdicts := map[string]string{}
	for _, g := range got {
		verdicts[g.Expr] = g.Verdict
	}
	want := map[string]string{"create/*:p99<=1s": "pass", "update/*:p99<=1s": "n/a", "delete/*:p99<=1s": "n/a", "get/*:p99<=1s": "n/a", "list/*:p99<=30s": "n/a"}
	for k, v := range want {
		if verdicts[k] != v {
			t.Errorf("%s: %s, want %s", k, verdicts[k], v)
		}
	}
	if FailedThresholds(got) != 0 {
		t.Fatalf("%d failed", FailedThresholds(got))
	}
	delete(r.Summary.Operations, "create/pods")
	got = EvaluateThresholds(ts, r)
	if FailedThresholds(got) != len(got) || !strings.Contains(got[0].Detail, "no operation of this run matches any threshold of k8s-slo") {
		t.Fatalf("a set that judged nothing: %+v", got)
	}
	r.Summary.Server = nil
	got = EvaluateThresholds(mustParse(t, "etcd-hardware"), r)
	if FailedThresholds(got) != 2 || !strings.Contains(got[0].Detail, "no server metrics") {
		t.Fatalf("etcd-hardware without metrics: %+v", got)
	}
}

func mustParse(t *testing.T, exprs ...string) []Threshold {
	t.Helper()
	ts, err := ParseThresholds(exprs)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

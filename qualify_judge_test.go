package chaosbench

import (
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/workloads"
)

// stepSummary is a run summary of a ladder step that passed everything: 100 of 100 requests/s.
func stepSummary() *results.Summary {
	s := &results.Summary{
		MeasuredSeconds: 10,
		Schedule:        results.Schedule{Mode: "open", TargetRate: 100},
		Total:           results.Total{Count: 1000},
		Operations:      map[string]*results.Operation{"update/leases": {Count: 1000}},
		Server: &results.ServerMetrics{
			Cluster: results.ClusterMetrics{WALFsync: results.Bucketed{Count: 100, P99: 2}, BackendCommit: results.Bucketed{Count: 100, P99: 4}},
			Members: []results.MemberMetrics{{Name: "m1", CPUPercentMean: 20, PeerRTT: results.Bucketed{Count: 10, P99: 0.4}}},
		},
	}
	return s
}

// TestJudgeStep decides steps from summaries: a violation first, then the database quota (NOSPACE), the
// run's outcome, the generator's lag, then the thresholds, throughput and disk probe, and attributes a
// failure to what the diagnosis found.
func TestJudgeStep(t *testing.T) {
	for _, tc := range []struct {
		name     string
		change   func(s *results.Summary)
		verdict  string
		resource string
		reason   string
	}{
		{name: "pass", change: func(*results.Summary) {}, verdict: StepPass},
		{
			name: "disk", verdict: StepFail, resource: "disk", reason: "m1 WAL fsync p99 14.2ms",
			change: func(s *results.Summary) {
				s.Thresholds = []results.ThresholdResult{{Expr: "wal_fsync:p99<10ms", Set: "etcd-hardware", Verdict: results.ThresholdFail, Observed: "14.2ms", Detail: "m1 WAL fsync p99 14.2ms, limit < 10.0ms"}}
				s.Diagnosis = []results.Finding{{Severity: results.SeverityOK, Topic: "cpu", Message: "CPU had headroom"}, {Severity: results.SeverityProblem, Topic: "disk", Message: "WAL fsync p99 14.2ms on m1 > 10.0ms"}}
			},
		},
		{
			name: "cpu before the network", verdict: StepFail, resource: "cpu", reason: "put:p99<1s",
			change: func(s *results.Summary) {
				s.Thresholds = []results.ThresholdResult{{Expr: "put:p99<1s", Verdict: results.ThresholdFail, Observed: "2s"}}
				s.Diagnosis = []results.Finding{{Severity: results.SeverityProblem, Topic: "network", Message: "slow peers"}, {Severity: results.SeverityProblem, Topic: "cpu", Message: "member m1 used 190% CPU"}}
			},
		},
		{
			name: "cpu at the container's limit", verdict: StepFail, resource: "cpu", reason: "get/*:p99<=1s",
			change: func(s *results.Summary) {
				s.Cluster.MemberCPUs = 0.1
				s.Server.Members[0].CPUPercentMean = 7
				s.Thresholds = []results.ThresholdResult{{Expr: "get/*:p99<=1s", Verdict: results.ThresholdFail, Observed: "3s"}}
				s.Diagnosis = []results.Finding{{Severity: results.SeverityProblem, Topic: "disk", Message: "WAL fsync p99 50ms on m1 > 10.0ms"}}
			},
		},
		{
			name: "throughput short", verdict: StepFail, resource: "unattributed", reason: "throughput 80 requests/s < 90% of the planned 100",
			change: func(s *results.Summary) { s.Operations["update/leases"].Count = 800 },
		},
		{
			name: "generator lag is undecided", verdict: StepUndecided, resource: "generator", reason: "generator lag",
			change: func(s *results.Summary) {
				s.Schedule.MissedLag = 50
				s.Thresholds = []results.ThresholdResult{{Expr: "put:p99<1s", Verdict: results.ThresholdFail, Observed: "2s"}}
			},
		},
		{
			name: "quota before generator lag", verdict: StepFail, resource: "memory", reason: "NOSPACE",
			change: func(s *results.Summary) {
				s.Schedule.MissedLag = 50
				s.Operations["update/leases"].ErrorsByClass = map[string]int64{workloads.ErrNoSpace: 3}
			},
		},
		{
			name: "violation fails", verdict: StepFail, resource: "consistency", reason: "linearizability",
			change: func(s *results.Summary) {
				s.Checks = []results.Check{{Name: "linearizability", Verdict: results.VerdictViolation, Detail: "key /a"}}
			},
		},
		{
			name: "harness error is undecided", verdict: StepUndecided, resource: "harness", reason: "member m1 exited",
			change: func(s *results.Summary) { s.Errors = []string{"member m1 exited unexpectedly"} },
		},
		{
			// The load stopped on NOSPACE: the cluster refused the class's data, a failure of the class, not
			// of the harness.
			name: "quota stops the load", verdict: StepFail, resource: "memory", reason: "database reached its quota",
			change: func(s *results.Summary) {
				s.Incomplete, s.IncompleteReason = true, "set up workload kube: preload: etcdserver: mvcc: database space exceeded"
			},
		},
		{
			name: "crashed member fails, whatever the thresholds", verdict: StepFail, resource: "crash", reason: "member m1 crashed (exit status 2): panic: boom",
			change: func(s *results.Summary) {
				s.Crashes = []results.Crash{{Member: "m1", Status: "exit status 2", LogTail: []string{"panic: boom"}}}
				s.Schedule.MissedLag = 50
				s.Thresholds = []results.ThresholdResult{{Expr: "put:p99<1s", Verdict: results.ThresholdFail, Observed: "2s"}}
			},
		},
		{
			name: "violation outranks the generator's lag", verdict: StepFail, resource: "consistency", reason: "lost write",
			change: func(s *results.Summary) {
				s.Schedule.MissedLag = 50
				s.Checks = []results.Check{{Name: "linearizability", Verdict: results.VerdictViolation, Detail: "lost write"}}
			},
		},
		{
			name: "undecided check", verdict: StepUndecided, resource: "check", reason: "linearizability could not decide",
			change: func(s *results.Summary) {
				s.Checks = []results.Check{{Name: "linearizability", Verdict: results.VerdictUnknown, Detail: "timed out"}}
			},
		},
		{
			name: "known issue passes, named", verdict: StepPass,
			change: func(s *results.Summary) { knownIssue(s, "") },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := stepSummary()
			tc.change(s)
			st := judgeStep("small", s, nil)
			if st.Verdict != stepVerdict(st.Outcome) {
				t.Fatalf("verdict %s, outcome %s: the verdict is not the outcome's", st.Verdict, st.Outcome.Kind)
			}
			if st.Verdict != tc.verdict || st.Resource != tc.resource || !strings.Contains(strings.Join(st.Reasons, "; "), tc.reason) {
				t.Fatalf("got %s (%s): %q; want %s (%s) naming %q", st.Verdict, st.Resource, st.Reasons, tc.verdict, tc.resource, tc.reason)
			}
		})
	}
}

// TestJudgeNetwork: the worst member's peer round trip against half the heartbeat interval, and the
// timeouts recommended for it.
func TestJudgeNetwork(t *testing.T) {
	steps := []Step{{Peers: map[string]float64{"m1": 0.4, "m2": 0.3}}, {Peers: map[string]float64{"m1": 0.2, "m3": 70}}}
	n := judgeNetwork(steps, nil, 3)
	if n.Pass || n.PeerRTTP99 != 70 || n.RecommendedHeartbeatMs != 140 || n.RecommendedElectionMs != 1400 {
		t.Fatalf("%+v", n)
	}
	n = judgeNetwork(steps, []string{"heartbeat-interval=200", "election-timeout=2000"}, 3)
	if !n.Pass {
		t.Fatalf("70 ms RTT with a 200 ms heartbeat: %+v", n)
	}
	if judgeNetwork([]Step{{}}, nil, 0) != nil {
		t.Fatal("no step observed the cluster: nothing to judge")
	}
	if n := judgeNetwork([]Step{{}}, nil, 1); n == nil || !n.Pass || n.outcome().Kind != outcome.OK {
		t.Fatalf("a single member has no peers to judge, and passes: %+v", n)
	}
	if n := judgeNetwork([]Step{{}}, nil, 3); n == nil || n.Pass || n.outcome().Kind != outcome.Undecided {
		t.Fatalf("three members whose peer round trips were not observed: %+v, want undecided", n)
	}
	if n := judgeNetwork(steps, nil, 3); n.outcome().Kind != outcome.ThresholdFailed {
		t.Fatalf("a network too slow for its heartbeat: %s, want a failed threshold", n.outcome().Kind)
	}
}

// TestJudgeFaultStep: the class holds under faults only if every fault recovered and writes resumed within
// the limit; a violation fails it, a skipped fault (harness error) leaves it undecided.
func TestJudgeFaultStep(t *testing.T) {
	window := func(spec string, gapMs float64, open bool, outcome string) results.FaultWindow {
		return results.FaultWindow{Spec: spec, Outcome: outcome, Availability: &results.Availability{WriteGapMs: gapMs, WriteGapOpen: open}}
	}
	for _, tc := range []struct {
		name    string
		s       results.Summary
		verdict string
		reason  string
	}{
		{"writes resumed", results.Summary{Faults: []results.FaultWindow{window("kill:leader@10s+3s", 966, false, "recovered"), window("partition:leader@20s+5s", 1227, false, "recovered")}}, StepPass, ""},
		{"gap too long", results.Summary{Faults: []results.FaultWindow{window("partition:leader@20s+5s", 2500, false, "recovered")}}, StepFail, "writes stopped for 2500 ms > 2000 ms"},
		{"never resumed", results.Summary{Faults: []results.FaultWindow{window("kill:leader@10s+3s", 9000, true, "not recovered within 30s")}}, StepFail, "writes had not resumed"},
		{"no fault", results.Summary{}, StepUndecided, "no fault was injected"},
		{"skipped", results.Summary{Errors: []string{"fault kill:leader@10s+3s: skipped"}}, StepUndecided, "skipped"},
		{"violation", results.Summary{Checks: []results.Check{{Name: "watch", Verdict: results.VerdictViolation, Detail: "gap"}}}, StepFail, "watch: gap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := judgeFaultStep("small", &tc.s, 2000)
			if st.Verdict != tc.verdict || !strings.Contains(strings.Join(st.Reasons, "; "), tc.reason) {
				t.Fatalf("got %s %q; want %s naming %q", st.Verdict, st.Reasons, tc.verdict, tc.reason)
			}
		})
	}
}

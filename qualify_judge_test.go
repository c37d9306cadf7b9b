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
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := stepSummary()
			tc.change(s)
			st := judgeStep("small", s, nil)
			if st.Verdict != tc.verdict || st.Resource != tc.resource || !strings.Contains(strings.Join(st.Reasons, "; "), tc.reason) {
				t.Fatalf("got %s (%s): %q; want %s (%s) naming %q", st.Verdict, st.Resource, st.Reasons, tc.verdict, tc.resource, tc.reason)
			}
		})
	}
}

// TestQualificationVerdict: the verdict line and the exit code from the steps, for auto and for one class.
func TestQualificationVerdict(t *testing.T) {
	pass := func(class string) Step { return Step{Class: class, Nodes: classNodes(class), Verdict: StepPass} }
	fail := Step{Class: "large", Nodes: 1000, Verdict: StepFail, Resource: "disk", Reasons: []string{"WAL fsync p99 14.2 ms > 10 ms"}, Context: "member CPU up to 41% of a core"}
	undecided := Step{Class: "small", Nodes: 50, Verdict: StepUndecided, Resource: "generator", Reasons: []string{"the generator could not keep its schedule"}}
	for _, tc := range []struct {
		name      string
		requested string
		steps     []Step
		verdict   string
		code      int
	}{
		{"climbed to large", "auto", []Step{pass("small"), pass("medium"), fail}, "qualified for medium (250 nodes); not large: WAL fsync p99 14.2 ms > 10 ms at the 1000-node load (disk: member CPU up to 41% of a core)", 0},
		{"every class", "auto", []Step{pass("small"), pass("medium"), pass("large"), pass("xlarge")}, "qualified for xlarge (3000 nodes), the largest class", 0},
		{"requested class fails", "large", []Step{fail}, "not qualified for large (1000 nodes): WAL fsync p99 14.2 ms > 10 ms at the 1000-node load (disk: member CPU up to 41% of a core)", outcome.ExitThresholds},
		{"undecided", "auto", []Step{undecided}, "small undecided (generator): the generator could not keep its schedule", outcome.ExitHarness},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &Qualification{Requested: tc.requested, Steps: tc.steps}
			q.decide(false, nil)
			if q.Verdict != tc.verdict || q.ExitCode != tc.code || ExitCode(q.Outcome.Err()) != tc.code {
				t.Fatalf("verdict %q, exit %d; want %q, %d", q.Verdict, q.ExitCode, tc.verdict, tc.code)
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
	if judgeNetwork([]Step{{}}, nil, 3) != nil {
		t.Fatal("a single member has no peers to judge")
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

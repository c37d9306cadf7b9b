package chaosbench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// knownIssue makes the summary's linearizability check find what a known upstream issue does, with the
// evidence that proves it; policy is the run's --known-issues.
func knownIssue(s *results.Summary, policy string) {
	s.Checks = append(s.Checks, results.Check{Name: "linearizability", Verdict: results.VerdictKnownIssue, Detail: "request applied twice"})
	s.KnownIssues = []results.KnownIssueFinding{{Issue: "etcd-io/etcd#18424", Title: "a retried request applied twice", Check: "linearizability",
		Finding: "request applied twice: key /registry/pods/a", Evidence: "2 attempts on the wire, the first failed with Unavailable"}}
	s.KnownIssuePolicy = policy
}

// recordedStep is a step's run directory in a recorded qualification: change turns a summary that passed
// everything into what the step recorded; nil leaves the directory without a summary (the step did not run).
type recordedStep struct {
	dir    string
	change func(s *results.Summary)
}

// observedSummary is a passing step's summary of a one-member external cluster, as its run observed it.
func observedSummary() *results.Summary {
	s := stepSummary()
	s.Cluster = results.ClusterInfo{Backend: "external", Members: 1, Endpoints: []string{"http://127.0.0.1:2379"}}
	s.Versions.EtcdServer = "3.6.4"
	s.Server.Members[0].PeerRTT = results.Bucketed{} // one member: no peers
	return s
}

var (
	pass = func(*results.Summary) {}
	// grown is a step of a growth ladder: the kube workload of a profile emulating nodes nodes.
	grown = func(nodes int) func(s *results.Summary) {
		return func(s *results.Summary) {
			s.Kube = &results.Kube{Cluster: fmt.Sprintf("profile mine at some growth: %d nodes, %d pods in 5 namespaces", nodes, 30*nodes)}
		}
	}
	overLatency = func(s *results.Summary) {
		s.Thresholds = []results.ThresholdResult{{Expr: "get/*:p99<=1s", Set: "k8s-slo", Verdict: results.ThresholdFail, Observed: "3s", Detail: "get p99 3s > 1s"}}
		s.Diagnosis = []results.Finding{{Severity: results.SeverityProblem, Topic: "disk", Message: "WAL fsync p99 50ms on m1 > 10.0ms"}}
	}
	lostWrites = func(s *results.Summary) {
		s.Checks = []results.Check{{Name: "linearizability", Verdict: results.VerdictViolation, Detail: "duplicate revision on key \"/registry/pods/a\" at revision 28: two writes took revision 28"}}
		overLatency(s) // a violation outranks what else failed
	}
	crashed = func(s *results.Summary) {
		s.Crashes = []results.Crash{{Member: "m1", Status: "exit status 2", LogTail: []string{"panic: boom"}}}
	}
	// putsAt is an etcdctl-compat load's run that put at rate, its slowest request taking slowestMs.
	putsAt = func(rate, slowestMs float64) func(s *results.Summary) {
		return func(s *results.Summary) {
			s.Schedule.TargetRate = rate
			s.Operations = map[string]*results.Operation{"put": {Count: int64(10 * rate), Throughput: rate, Service: results.Latency{Max: slowestMs}}}
		}
	}
	threeMembers = func(peerRTTMs float64) func(s *results.Summary) {
		return func(s *results.Summary) {
			s.Cluster.Members = 3
			s.Server.Members = nil
			for _, m := range []string{"m1", "m2", "m3"} {
				mm := results.MemberMetrics{Name: m, CPUPercentMean: 20}
				if peerRTTMs > 0 {
					mm.PeerRTT = results.Bucketed{Count: 10, P99: peerRTTMs}
				}
				s.Server.Members = append(s.Server.Members, mm)
			}
		}
	}
)

// TestDecideQualification decides qualifications from recorded step runs (summary.json in each step's
// directory, as qualify leaves them), through the function the job x outcome tests use, and checks that the
// outcome is the one judge's: every step of every class climbed counts, a violation or a crashed member is
// exit 4 wherever it is and is named in the verdict line, and the cluster's facts are the ones observed.
// Each case is then written (RedecideQualification) and every output must say the same.
func TestDecideQualification(t *testing.T) {
	for _, tc := range []struct {
		name      string
		requested string
		steps     []recordedStep
		// recorded is the qualification.json the qualification left, when it matters.
		recorded  *Qualification
		kind      outcome.Kind
		verdict   string // the verdict line begins so
		names     string // and names this
		qualified string
	}{
		{
			name: "auto: small passes, medium over its thresholds", requested: "auto",
			steps: []recordedStep{{"step-small", pass}, {"step-medium", overLatency}},
			kind:  outcome.OK, verdict: "PASS (ok): qualified for small (50 nodes); not medium: threshold get/*:p99<=1s failed", names: "(disk: ", qualified: "small",
		},
		{
			name: "auto: small passes, medium loses acknowledged writes", requested: "auto",
			steps: []recordedStep{{"step-small", pass}, {"step-medium", lostWrites}},
			kind:  outcome.Violation, verdict: "FAIL (violation): qualified for small (50 nodes); not medium: linearizability: duplicate revision", names: "(consistency", qualified: "small",
		},
		{
			name: "auto: small loses acknowledged writes", requested: "auto",
			steps: []recordedStep{{"step-small", lostWrites}},
			kind:  outcome.Violation, verdict: "FAIL (violation): not qualified for small (50 nodes): linearizability: duplicate revision", names: "two writes took revision 28",
		},
		{
			name: "class asked for loses acknowledged writes", requested: "large",
			steps: []recordedStep{{"step-large", lostWrites}},
			kind:  outcome.Violation, verdict: "FAIL (violation): not qualified for large (1000 nodes): linearizability: duplicate revision", names: "two writes took revision 28",
		},
		{
			name: "class asked for over its thresholds", requested: "large",
			steps: []recordedStep{{"step-large", overLatency}},
			kind:  outcome.ThresholdFailed, verdict: "FAIL (threshold-failed): not qualified for large (1000 nodes): threshold get/*:p99<=1s failed", names: "(disk: ",
		},
		{
			name: "auto: a member crashes at medium", requested: "auto",
			steps: []recordedStep{{"step-small", pass}, {"step-medium", crashed}},
			kind:  outcome.MemberCrashed, verdict: "FAIL (member-crashed): qualified for small (50 nodes); not medium: member m1 crashed (exit status 2): panic: boom", names: "(crash", qualified: "small",
		},
		{
			name: "network too slow for the timeouts", requested: "small",
			steps: []recordedStep{{"step-small", threeMembers(70)}},
			kind:  outcome.ThresholdFailed, verdict: "FAIL (threshold-failed): qualified for small (50 nodes); network: peer RTT p99 70.0 ms > half the 100 ms heartbeat interval", qualified: "small",
		},
		{
			name: "network not measured", requested: "small",
			steps: []recordedStep{{"step-small", threeMembers(0)}},
			kind:  outcome.Undecided, verdict: "UNDECIDED (undecided): qualified for small (50 nodes); network: not judged: no peer round trip was observed", qualified: "small",
		},
		{
			name: "network within the heartbeat", requested: "small",
			steps: []recordedStep{{"step-small", threeMembers(0.4)}},
			kind:  outcome.OK, verdict: "PASS (ok): qualified for small (50 nodes)", qualified: "small",
		},
		{
			name: "undecided check", requested: "auto",
			steps: []recordedStep{{"step-small", func(s *results.Summary) {
				s.Checks = []results.Check{{Name: "linearizability", Verdict: results.VerdictUnknown, Detail: "timed out"}}
			}}},
			kind: outcome.Undecided, verdict: "UNDECIDED (undecided): small undecided (check): linearizability could not decide: timed out",
		},
		{
			// The ladder did not finish: how far the hardware goes is not known. Undecided is never a pass.
			name: "auto: medium undecided after small", requested: "auto",
			steps: []recordedStep{{"step-small", pass}, {"step-medium", func(s *results.Summary) { s.Schedule.MissedLag = 50 }}},
			kind:  outcome.Undecided, verdict: "UNDECIDED (undecided): qualified for small (50 nodes); medium undecided (generator)", qualified: "small",
		},
		{
			name: "a step that did not run", requested: "small",
			steps: []recordedStep{{"step-small", nil}},
			kind:  outcome.HarnessError, verdict: "ERROR (harness-error): small undecided (harness): the step did not run",
		},
		{
			name: "interrupted", requested: "auto",
			steps: []recordedStep{{"step-small", func(s *results.Summary) {
				s.Interrupted, s.Incomplete, s.IncompleteReason = true, true, "interrupted by signal"
			}}},
			recorded: &Qualification{Requested: "auto", Interrupted: true},
			kind:     outcome.Incomplete, verdict: "INCOMPLETE (incomplete): small undecided (interrupted): interrupted by signal",
		},
		{
			name: "known issue passes, named", requested: "auto",
			steps: []recordedStep{{"step-small", func(s *results.Summary) { knownIssue(s, "") }}, {"step-medium", overLatency}},
			kind:  outcome.KnownIssue, verdict: "PASS (known-issue): qualified for small (50 nodes); not medium", names: "step small: linearizability: known issue etcd-io/etcd#18424", qualified: "small",
		},
		{
			name: "known issue under --known-issues=fail", requested: "auto",
			steps: []recordedStep{{"step-small", pass}, {"step-medium", func(s *results.Summary) { knownIssue(s, "fail") }}},
			kind:  outcome.Violation, verdict: "FAIL (violation): qualified for small (50 nodes); not medium: linearizability: known issue etcd-io/etcd#18424", qualified: "small",
		},
		{
			name: "etcdctl-compat: s passes, m fails check perf's rule", recorded: &Qualification{Requested: "auto", CompatLoad: "auto"},
			steps: []recordedStep{{"compat-s", putsAt(150, 20)}, {"compat-m", putsAt(1000, 900)}},
			kind:  outcome.OK, verdict: "PASS (ok): etcdctl check perf's rule: load s (150 writes/s, 50 clients) PASS",
		},
		{
			name: "etcdctl-compat s fails check perf's rule", recorded: &Qualification{Requested: "auto", CompatLoad: "s"},
			steps: []recordedStep{{"compat-s", putsAt(150, 900)}},
			kind:  outcome.ThresholdFailed, verdict: "FAIL (threshold-failed): etcdctl check perf's rule: load s (150 writes/s, 50 clients) FAIL: slowest request 900 ms > 500 ms",
		},
		{
			// Three members, and no ladder: the compat loads do not measure the peers, so there is no network
			// judgement to leave undecided.
			name: "etcdctl-compat: a member crashes", recorded: &Qualification{Requested: "auto", CompatLoad: "auto"},
			steps: []recordedStep{{"compat-s", func(s *results.Summary) { putsAt(150, 20)(s); threeMembers(0)(s); crashed(s) }}},
			kind:  outcome.MemberCrashed, verdict: "FAIL (member-crashed): etcdctl check perf's rule: load s (150 writes/s, 50 clients) PASS", names: "; etcdctl-compat s: member m1 crashed (exit status 2): panic: boom",
		},
		{
			// qualify --profile: the rungs are growth factors of the profile, judged as the classes are.
			name: "growth: 1.5x passes, 2x over its thresholds", recorded: &Qualification{Requested: "auto", Profile: "mine.yaml", Ladder: []string{"1x", "1.5x", "2x", "3x"}},
			steps: []recordedStep{{"step-1x", grown(50)}, {"step-1.5x", grown(75)}, {"step-2x", func(s *results.Summary) { grown(100)(s); overLatency(s) }}},
			kind:  outcome.OK, verdict: "PASS (ok): qualified for 1.5x this cluster's traffic (75 nodes); not 2x: threshold get/*:p99<=1s failed", names: "at the 100-node load (disk: ", qualified: "1.5x",
		},
		{
			name: "growth: 1x over its thresholds", recorded: &Qualification{Requested: "auto", Profile: "mine.yaml", Ladder: []string{"1x", "2x"}},
			steps: []recordedStep{{"step-1x", func(s *results.Summary) { grown(50)(s); overLatency(s) }}},
			kind:  outcome.ThresholdFailed, verdict: "FAIL (threshold-failed): not qualified for 1x (50 nodes): threshold get/*:p99<=1s failed",
		},
		{
			name: "growth: 2x loses acknowledged writes", recorded: &Qualification{Requested: "auto", Profile: "mine.yaml", Ladder: []string{"1x", "2x"}},
			steps: []recordedStep{{"step-1x", grown(50)}, {"step-2x", func(s *results.Summary) { grown(100)(s); lostWrites(s) }}},
			kind:  outcome.Violation, verdict: "FAIL (violation): qualified for 1x this cluster's traffic (50 nodes); not 2x: linearizability: duplicate revision", qualified: "1x",
		},
		{
			name: "under faults, writes stopped too long", requested: "small",
			steps: []recordedStep{{"step-small", pass}, {"faults-small", func(s *results.Summary) {
				s.Faults = []results.FaultWindow{{Spec: "kill:leader@10s+3s", Outcome: "recovered", Availability: &results.Availability{WriteGapMs: 2500}}}
			}}},
			kind: outcome.ThresholdFailed, verdict: "FAIL (threshold-failed): qualified for small (50 nodes); not under faults at small: kill:leader@10s+3s: writes stopped for 2500 ms > 2000 ms", qualified: "small",
		},
		{
			name: "under faults, a member crashes", requested: "small",
			steps: []recordedStep{{"step-small", pass}, {"faults-small", func(s *results.Summary) {
				s.Faults = []results.FaultWindow{{Spec: "kill:leader@10s+3s", Outcome: "recovered", Availability: &results.Availability{WriteGapMs: 900}}}
				crashed(s)
			}}},
			kind: outcome.MemberCrashed, verdict: "FAIL (member-crashed): qualified for small (50 nodes); not under faults at small: member m1 crashed", qualified: "small",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			members := 0 // the most members a step observed
			for _, st := range tc.steps {
				if err := os.MkdirAll(filepath.Join(dir, st.dir), 0o755); err != nil {
					t.Fatal(err)
				}
				if st.change == nil {
					continue
				}
				s := observedSummary()
				st.change(s)
				if strings.HasPrefix(st.dir, "compat-") {
					// The service-time distribution check perf's standard deviation is read from.
					os.WriteFile(filepath.Join(dir, st.dir, "put.service.hgrm"), []byte("#[Mean = 2.0, StdDeviation = 1.5]\n"), 0o644)
				}
				members = max(members, s.Cluster.Members)
				if err := results.WriteSummary(filepath.Join(dir, st.dir), s); err != nil {
					t.Fatal(err)
				}
			}
			if tc.recorded != nil {
				// What the qualification recorded of the cluster is a flag's default; the steps say otherwise.
				tc.recorded.Cluster.Members = 5
				b, _ := json.Marshal(tc.recorded)
				os.WriteFile(filepath.Join(dir, QualificationFile), b, 0o644)
			}
			q, err := DecideQualificationDir(dir, tc.requested)
			if err != nil {
				t.Fatal(err)
			}
			if q.Outcome.Kind != tc.kind || q.ExitCode != q.Outcome.ExitCode() || !strings.HasPrefix(q.Verdict, tc.verdict) ||
				!strings.Contains(q.Verdict, tc.names) || q.Qualified != tc.qualified {
				t.Fatalf("outcome %s (exit %d), qualified %q, verdict\n%q\nwant %s, qualified %q, a verdict beginning\n%q\nand naming %q\nreasons: %v",
					q.Outcome.Kind, q.ExitCode, q.Qualified, q.Verdict, tc.kind, tc.qualified, tc.verdict, tc.names, q.Outcome.Reasons)
			}
			if q.Cluster.Members != members || (members > 0) != (q.Cluster.EtcdVersion == "3.6.4") {
				t.Fatalf("cluster %+v: want the %d members and the etcd version the steps observed", q.Cluster, members)
			}
			assertQualificationOutputs(t, dir, tc.requested, q)
		})
	}
}

// assertQualificationOutputs writes the qualification decided from dir as qualify does at its end and
// checks that everything a user or CI reads says one outcome: the error's exit code, the verdict line
// printed before the table, the last lines printed, qualification.json, qualification.md's headline and
// qualification.html's badge and title.
func assertQualificationOutputs(t *testing.T, dir, requested string, want *Qualification) {
	t.Helper()
	var printed bytes.Buffer
	q, err := RedecideQualification(dir, requested, &printed)
	if err != nil && q == nil {
		t.Fatal(err)
	}
	o := want.Outcome
	if ExitCode(err) != o.ExitCode() || q.Outcome.Kind != o.Kind || q.Verdict != want.Verdict {
		t.Fatalf("written: exit %d, outcome %s, verdict %q; decided: exit %d, %s, %q", ExitCode(err), q.Outcome.Kind, q.Verdict, o.ExitCode(), o.Kind, want.Verdict)
	}
	out := printed.String()
	t.Logf("printed:\n%s", out)
	if !strings.Contains(out, "\n"+want.Verdict+"\n") || !strings.Contains(out, fmt.Sprintf("verdict: %s (%s, exit code %d)\n", o.Headline(), o.Kind, o.ExitCode())) {
		t.Fatalf("printed:\n%s\nwant the verdict line %q and the outcome %s", out, want.Verdict, o.Kind)
	}
	var written Qualification
	b, err := os.ReadFile(filepath.Join(dir, QualificationFile))
	if err != nil || json.Unmarshal(b, &written) != nil || written.Outcome.Kind != o.Kind || written.ExitCode != o.ExitCode() || written.Verdict != want.Verdict {
		t.Fatalf("%s: %v; outcome %s, exit %d, verdict %q", QualificationFile, err, written.Outcome.Kind, written.ExitCode, written.Verdict)
	}
	// As summary.json and every job's JSON: the outcome's kind at the top, and its reasons beside it.
	var top struct {
		Outcome outcome.Kind     `json:"outcome"`
		Reasons []outcome.Reason `json:"reasons"`
	}
	if err := json.Unmarshal(b, &top); err != nil || top.Outcome != o.Kind || len(top.Reasons) != len(o.Reasons) {
		t.Fatalf("%s: outcome %q with %d reasons (%v), want %s with %d", QualificationFile, top.Outcome, len(top.Reasons), err, o.Kind, len(o.Reasons))
	}
	md, _ := os.ReadFile(filepath.Join(dir, QualificationReport))
	if !bytes.HasPrefix(md, []byte(fmt.Sprintf("# Qualification: %s\n\n**%s**\n\noutcome: %s (exit code %d)\n", o.Headline(), want.Verdict, o.Kind, o.ExitCode()))) {
		t.Fatalf("%s heads otherwise:\n%.400s", QualificationReport, md)
	}
	page, _ := os.ReadFile(filepath.Join(dir, QualificationPage))
	if !bytes.Contains(page, []byte(fmt.Sprintf(`<span class="badge %s">%s</span>`, o.Class(), o.Headline()))) ||
		!bytes.Contains(page, []byte(fmt.Sprintf("<title>chaosbench qualification: %s (%s), ", o.Headline(), o.Kind))) ||
		!bytes.Contains(page, []byte(htmlEscape(want.Verdict))) {
		t.Fatalf("%s heads otherwise:\n%.600s", QualificationPage, page)
	}
	cluster := "members not observed (no step ran)"
	switch want.Cluster.Members {
	case 1:
		cluster = "Cluster: external, 1 member, etcd 3.6.4"
	case 3:
		cluster = "Cluster: external, 3 members, etcd 3.6.4"
	}
	if !bytes.Contains(md, []byte(cluster)) || written.Cluster.Members != want.Cluster.Members {
		t.Fatalf("%s does not state the cluster observed (%q), %s says %d members:\n%.600s", QualificationReport, cluster, QualificationFile, written.Cluster.Members, md)
	}
}

// htmlEscape escapes text as html/template does in an element.
func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;", "+", "&#43;").Replace(s)
}

// TestDecideQualificationDirBadClass: a class that is not one is a usage error.
func TestDecideQualificationDirBadClass(t *testing.T) {
	if _, err := DecideQualificationDir(t.TempDir(), "huge"); !outcome.IsUsage(err) {
		t.Fatalf("class huge: %v, want a usage error", err)
	}
}

package report

import (
	"bytes"
	"encoding/xml"
	"html"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// outcomeSummary is a healthy run: some requests, one fault it recovered from, a linearizability check
// that passed, a kube workload whose list SLO was missed (informational: no k8s-slo threshold judges it)
// and a member's fsync over etcd's guidance (informational too).
func outcomeSummary() *results.Summary {
	ops := map[string]*results.Operation{
		"put":       {Count: 900, Errors: 3, Throughput: 90, Response: results.Latency{P50: 2, P99: 20, Max: 40}},
		"list/pods": {Count: 100, Throughput: 10, Response: results.Latency{P99: 40000}},
	}
	slo, pass := results.JudgeSLO(ops)
	s := &results.Summary{
		Name: "outcomes", Operations: ops, Total: results.Totals(ops), MeasuredSeconds: 10,
		Schedule: results.Schedule{Mode: "open", TargetRate: 100, Clients: 8},
		Cluster:  results.ClusterInfo{Backend: "embed", Members: 3},
		Faults:   []results.FaultWindow{{Fault: "kill", Targets: []string{"m1"}, StartNs: 2e9, EndNs: 3e9, Outcome: "recovered"}},
		Phases: map[string]*results.Phase{
			results.PhaseSteady: {Operations: map[string]*results.Operation{"put": {Count: 800, Errors: 1}, "list/pods": {Count: 90}}},
			results.PhaseFault:  {Operations: map[string]*results.Operation{"put": {Count: 100, Errors: 2}, "list/pods": {Count: 10}}},
		},
		Checks: []results.Check{{Name: "linearizability", Verdict: results.VerdictOK}},
		Kube:   &results.Kube{Cluster: "10 nodes", SLO: slo, SLOPass: pass},
		Server: &results.ServerMetrics{
			Members: []results.MemberMetrics{{Name: "m1", WALFsync: results.Bucketed{Count: 10, P99: 30}, BackendCommit: results.Bucketed{Count: 10, P99: 5}}},
			Cluster: results.ClusterMetrics{WALFsync: results.Bucketed{Count: 10, P99: 30}, WALFsyncMember: "m1", BackendCommit: results.Bucketed{Count: 10, P99: 5}, BackendCommitBy: "m1"},
		},
	}
	return s
}

var crashTail = []string{
	`{"level":"info","msg":"applied snapshot"}`,
	"panic: runtime error: invalid memory address or nil pointer dereference",
	"goroutine 212 [running]:",
	"go.etcd.io/etcd/server/v3/etcdserver.(*EtcdServer).apply(0xc000123400)",
}

// Every outcome kind, rendered from a summary: the HTML title and badge, every card, the Markdown headline
// and JUnit say what summary.Verdict() says, and nothing contradicts it. A card that is part of the verdict
// shows the decision of its area; one that is not is informational and never says pass or fail.
func TestReportsAgreeWithTheOutcome(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(s *results.Summary)
		exprs []string
		want  outcome.Kind
		// shown must appear in report.html and report.md, and in junit.xml when it decided the outcome.
		shown []string
	}{
		{"ok", func(s *results.Summary) {}, nil, outcome.OK, nil},
		{"ok without faults, within the SLOs", func(s *results.Summary) {
			s.Faults, s.Phases = nil, nil
			s.Operations["list/pods"].Response.P99 = 900
			s.Kube.SLO, s.Kube.SLOPass = results.JudgeSLO(s.Operations)
		}, nil, outcome.OK, nil},
		{"ok without faults, stalled", func(s *results.Summary) { s.Faults, s.Phases = nil, nil }, nil, outcome.OK, nil},
		// The clients' view of a window (no write had succeeded again when its observation ended) is a
		// figure: the fault runner found the cluster healthy, and the run passes.
		{"ok, writes not back when the observation ended", func(s *results.Summary) {}, nil, outcome.OK,
			[]string{"no write had succeeded again when the observation ended"}},
		{"ok, judged by the SLOs", func(s *results.Summary) {
			s.Operations["list/pods"].Response.P99 = 900
			s.Kube.SLO, s.Kube.SLOPass = results.JudgeSLO(s.Operations)
		}, []string{"k8s-slo"}, outcome.OK, nil},
		{"failed by the SLOs", func(s *results.Summary) {}, []string{"k8s-slo"}, outcome.ThresholdFailed, []string{"list/*:p99&lt;=30s"}},
		{"threshold failed", func(s *results.Summary) {}, []string{"put:p99<10ms"}, outcome.ThresholdFailed, []string{"put:p99&lt;10ms"}},
		{"nothing succeeded", func(s *results.Summary) {
			s.Operations = map[string]*results.Operation{"put": {Count: 50, Errors: 50}}
			s.Total, s.Kube, s.Phases = results.Totals(s.Operations), nil, nil
		}, nil, outcome.ThresholdFailed, []string{"0 of 50 requests succeeded"}},
		{"not recovered", func(s *results.Summary) {
			s.Faults[0].Outcome = "not recovered within 30s: m1 unhealthy"
			s.NotRecovered = []string{"kill m1: not recovered within 30s: m1 unhealthy"}
		}, nil, outcome.ThresholdFailed, []string{"not recovered within 30s"}},
		{"undecided", func(s *results.Summary) {
			s.Checks[0] = results.Check{Name: "linearizability", Verdict: results.VerdictUnknown, Detail: "timed out after 5m"}
		}, nil, outcome.Undecided, []string{"timed out after 5m"}},
		{"violation", func(s *results.Summary) {
			s.Checks[0] = results.Check{Name: "linearizability", Verdict: results.VerdictViolation, Detail: "key /k: read 2 after 3 at revision 9"}
		}, []string{"put:p99<10ms"}, outcome.Violation, []string{"read 2 after 3 at revision 9"}},
		{"member crashed", func(s *results.Summary) {
			s.Crashes = []results.Crash{{Member: "m2", Status: "exit status 2", Time: time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC), Log: "members/m2.log", LogTail: crashTail}}
		}, nil, outcome.MemberCrashed, append([]string{"member m2 crashed (exit status 2)"}, crashTail[1:]...)},
		{"harness error", func(s *results.Summary) {
			s.Errors = []string{"fault pause m3 skipped: cluster not healthy"}
		}, nil, outcome.HarnessError, []string{"fault pause m3 skipped"}},
		{"incomplete", func(s *results.Summary) {
			s.Interrupted, s.Incomplete, s.IncompleteReason = true, true, "interrupted by signal"
		}, nil, outcome.Incomplete, []string{"interrupted by signal"}},
		{"known issue", func(s *results.Summary) {
			s.Checks[0] = results.Check{Name: "linearizability", Verdict: results.VerdictKnownIssue, Detail: "request applied twice"}
			s.KnownIssues = []results.KnownIssueFinding{{Issue: "etcd-io/etcd#18424", Title: "client retry applies a put twice", Check: "linearizability",
				Finding: "request applied twice: key /k at revisions 7 and 8", Evidence: "2 attempts on the wire: the first failed with Unavailable"}}
		}, nil, outcome.KnownIssue, []string{"etcd-io/etcd#18424", "2 attempts on the wire: the first failed with Unavailable"}},
		{"known issue failing by policy", func(s *results.Summary) {
			s.Checks[0] = results.Check{Name: "linearizability", Verdict: results.VerdictKnownIssue, Detail: "request applied twice"}
			s.KnownIssues = []results.KnownIssueFinding{{Issue: "etcd-io/etcd#18424", Check: "linearizability",
				Finding: "request applied twice: key /k at revisions 7 and 8", Evidence: "2 attempts on the wire: the first failed with Unavailable"}}
			s.KnownIssuePolicy = string(outcome.KnownIssuesFail)
		}, nil, outcome.Violation, []string{"etcd-io/etcd#18424", "a violation by policy"}},
	}
	// The availability gaps the runs' histories would give (none: not measured).
	gaps := map[string][]Gap{
		"ok without faults, within the SLOs": {{Index: -1, Seconds: 0.2, Recovered: true, Kind: "writes"}},
		"ok without faults, stalled":         {{Index: -1, Seconds: 2.5, Recovered: true, Kind: "writes"}},
		"ok, writes not back when the observation ended": {{Fault: "kill m1", Index: 0, Seconds: 3, Recovered: false, Kind: "writes", Resolution: "1ms",
			Writes: &ClassGap{Seconds: 3}}},
	}
	seen := map[outcome.Kind]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := outcomeSummary()
			tt.edit(s)
			r, err := FromSummary(t.TempDir(), s)
			if err != nil {
				t.Fatal(err)
			}
			r.Gaps = gaps[tt.name]
			ts, err := results.RunThresholds(tt.exprs)
			if err != nil {
				t.Fatal(err)
			}
			Prepare(r, ts)
			o := s.Verdict()
			if o.Kind != tt.want {
				t.Fatalf("outcome %v, want %s", o, tt.want)
			}
			seen[o.Kind] = true
			var htm, md, junit bytes.Buffer
			for _, w := range []struct {
				buf   *bytes.Buffer
				write func(*bytes.Buffer, *Run) error
			}{
				{&htm, func(b *bytes.Buffer, r *Run) error { return WriteHTML(b, r) }},
				{&md, func(b *bytes.Buffer, r *Run) error { return WriteMarkdown(b, r) }},
				{&junit, func(b *bytes.Buffer, r *Run) error { return WriteJUnit(b, r) }},
			} {
				if err := w.write(w.buf, r); err != nil {
					t.Fatal(err)
				}
			}
			checkCards(t, buildView(r).Verdicts, o)
			checkHTML(t, htm.String(), buildView(r).Verdicts, o)
			checkMarkdown(t, md.String(), o)
			checkJUnit(t, junit.Bytes(), s, o)
			docs := map[string]string{"report.html": htm.String(), "report.md": md.String()}
			if !o.Passed() || o.Kind == outcome.KnownIssue {
				// JUnit shows what decided the outcome; a passing run's figures are the report's.
				docs["junit.xml"] = junit.String()
			}
			for _, want := range tt.shown {
				for name, doc := range docs {
					if name != "report.html" {
						want = html.UnescapeString(want)
					}
					if !strings.Contains(doc, want) && !strings.Contains(doc, html.EscapeString(want)) {
						t.Errorf("%s does not show %q", name, want)
					}
				}
			}
		})
	}
	for _, k := range outcome.Kinds() {
		if !seen[k] {
			t.Errorf("no case renders the outcome %s", k)
		}
	}
}

// checkCards holds every card to the outcome: verdict cards show their area's decision, the most severe of
// them is the outcome, each is a reason's kind, and their words and colours say no more than their kind;
// informational cards never say pass or fail and are never coloured as a verdict.
func checkCards(t *testing.T, cards []verdictRow, o outcome.Outcome) {
	t.Helper()
	reasonKinds := map[outcome.Kind]bool{outcome.OK: true}
	for _, r := range o.Reasons {
		reasonKinds[r.Kind] = true
	}
	worst := outcome.OK
	for _, c := range cards {
		words := strings.ToLower(c.Verdict)
		if c.Informational {
			if c.Kind != "" || (c.Class != "info" && c.Class != "warn") || strings.Contains(words, "pass") || strings.Contains(words, "fail") {
				t.Errorf("informational card %+v says or looks like a verdict", c)
			}
			continue
		}
		if !c.Kind.Valid() || !reasonKinds[c.Kind] {
			t.Errorf("card %+v shows %q, which is no reason of the outcome %v", c, c.Kind, o)
		}
		if c.Class != (outcome.Outcome{Kind: c.Kind}).Class() && !(c.Kind == outcome.OK && c.Class == "info") {
			t.Errorf("card %+v is coloured %s for %s", c, c.Class, c.Kind)
		}
		// Every word a verdict card may say, and whether it is a pass: a new word is sorted here first.
		passes, known := verdictWords[words]
		switch {
		case !known:
			t.Errorf("card %+v says %q, a word this test does not know", c, c.Verdict)
		case passes != (c.Kind == outcome.OK || c.Kind == outcome.KnownIssue):
			t.Errorf("card %+v says %q for %s", c, c.Verdict, c.Kind)
		}
		if o.Passed() && c.Class == "fail" {
			t.Errorf("a red card %+v under %s", c, o.Headline())
		}
		if slices.Index(outcome.Kinds(), c.Kind) > slices.Index(outcome.Kinds(), worst) {
			worst = c.Kind
		}
	}
	if worst != o.Kind {
		t.Errorf("the cards' most severe decision is %s, the outcome %s", worst, o.Kind)
	}
}

// verdictWords are the words a verdict card says, and whether each is a pass (of kind ok or known-issue).
var verdictWords = map[string]bool{
	"pass": true, "ok": true, "recovered": true, "not checked": true, "nothing to check": true, "known issue": true,
	"fail": false, "violation": false, "undecided": false, "not recovered": false, "crashed": false,
	"harness error": false, "interrupted": false, "known issue, failing by policy": false,
}

var cardHTML = regexp.MustCompile(`<div class="card (\w+)( informational)?"><div class="area">([^<]*)</div><div class="verdict">([^<]*)</div>`)

// checkHTML reads the title, the badge and every card back from the page.
func checkHTML(t *testing.T, page string, cards []verdictRow, o outcome.Outcome) {
	t.Helper()
	if want := "<title>chaosbench: outcomes — " + o.Headline() + "</title>"; !strings.Contains(page, want) {
		t.Errorf("report.html lacks %s", want)
	}
	if want := `<span class="badge ` + o.Class() + `">` + o.Headline() + `</span>`; !strings.Contains(page, want) {
		t.Errorf("report.html lacks %s", want)
	}
	if i := strings.Index(page, `<ul class="findings reasons">`); o.Passed() && i >= 0 {
		if reasons := page[i : i+strings.Index(page[i:], "</ul>")]; strings.Contains(reasons, `class="fail"`) {
			t.Errorf("a red reason under %s: %s", o.Headline(), reasons)
		}
	}
	got := cardHTML.FindAllStringSubmatch(page, -1)
	if len(got) != len(cards) {
		t.Fatalf("report.html has %d cards, the view %d", len(got), len(cards))
	}
	for i, m := range got {
		c := cards[i]
		area := c.Area
		if c.Informational {
			area += " · informational"
		}
		if m[1] != c.Class || (m[2] != "") != c.Informational || html.UnescapeString(m[3]) != area || html.UnescapeString(m[4]) != c.Verdict {
			t.Errorf("card %d in report.html %q, the view's %+v", i, m[0], c)
		}
	}
}

func checkMarkdown(t *testing.T, md string, o outcome.Outcome) {
	t.Helper()
	lines := strings.Split(md, "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[2], "**"+o.Headline()+"** — ") ||
		!strings.Contains(lines[2], "outcome: "+string(o.Kind)+" (exit code "+strconv.Itoa(o.ExitCode())+")") {
		t.Errorf("report.md's headline %q, want %s and %s", lines[min(2, len(lines)-1)], o.Headline(), o.Kind)
	}
	for _, l := range lines {
		if strings.Contains(l, "(informational)") && strings.HasPrefix(l, "| **") {
			cells := strings.Split(l, "|")
			if w := strings.ToLower(cells[2]); strings.Contains(w, "pass") || strings.Contains(w, "fail") {
				t.Errorf("an informational row of report.md says %q", l)
			}
		}
	}
}

type junitDoc struct {
	Suites []struct {
		Properties []junitProperty `xml:"properties>property"`
		Cases      []junitCase     `xml:"testcase"`
	} `xml:"testsuite"`
}

// checkJUnit reads junit.xml back: its outcome property, its outcome case (a failure or an error exactly when
// the run did not pass, with the crashed members' log tails), and a case per known-issue finding.
func checkJUnit(t *testing.T, b []byte, s *results.Summary, o outcome.Outcome) {
	t.Helper()
	var doc junitDoc
	if err := xml.Unmarshal(b, &doc); err != nil || len(doc.Suites) != 1 {
		t.Fatalf("junit.xml: %v", err)
	}
	suite := doc.Suites[0]
	if i := slices.IndexFunc(suite.Properties, func(p junitProperty) bool { return p.Name == "outcome" }); i < 0 || suite.Properties[i].Value != string(o.Kind) {
		t.Errorf("junit.xml's outcome property: %+v", suite.Properties)
	}
	run := suite.Cases[0]
	switch {
	case run.Name != "outcome":
		t.Errorf("junit.xml's first case is %q", run.Name)
	case o.Passed() && (run.Failure != nil || run.Error != nil):
		t.Errorf("junit.xml's outcome case fails a passing run: %+v", run)
	case !o.Passed() && run.Failure == nil && run.Error == nil:
		t.Errorf("junit.xml's outcome case passes a run that did not: %+v", run)
	case (o.Kind == outcome.HarnessError || o.Kind == outcome.Undecided) != (run.Error != nil):
		t.Errorf("junit.xml: outcome %s as %+v", o.Kind, run)
	}
	for _, msg := range []*junitMessage{run.Failure, run.Error} {
		if msg != nil && msg.Type != string(o.Kind) {
			t.Errorf("junit.xml's outcome case is of type %s, the outcome %s", msg.Type, o.Kind)
		}
	}
	for _, c := range suite.Cases {
		if o.Passed() && (c.Failure != nil || c.Error != nil) {
			t.Errorf("junit.xml fails a case of a passing run: %+v", c)
		}
	}
	for _, c := range s.Crashes {
		msg := run.Failure
		if msg == nil || !strings.Contains(msg.Text, c.LogTail[len(c.LogTail)-1]) {
			t.Errorf("junit.xml's outcome case lacks %s's log tail: %+v", c.Member, msg)
		}
	}
	var known []junitCase
	for _, c := range suite.Cases {
		if c.Classname == "chaosbench.known-issues" {
			known = append(known, c)
		}
	}
	if len(known) != len(s.KnownIssues) {
		t.Fatalf("junit.xml has %d known-issue cases for %d findings", len(known), len(s.KnownIssues))
	}
	for i, c := range known {
		k := s.KnownIssues[i]
		if o.Kind == outcome.KnownIssue && (c.Failure != nil || !strings.Contains(c.SystemOut, k.Issue) || !strings.Contains(c.SystemOut, k.Evidence)) {
			t.Errorf("a reported known issue's case: %+v", c)
		}
		if o.Kind == outcome.Violation && (c.Failure == nil || !strings.Contains(c.Failure.Text, k.Evidence)) {
			t.Errorf("a known issue failing by policy passes in junit.xml: %+v", c)
		}
	}
}

// A summary whose stored outcome this version would decide otherwise keeps its headline (the run's exit
// code) and says so, instead of showing cards that silently disagree with it.
func TestStoredOutcomeDiffers(t *testing.T) {
	s := outcomeSummary()
	s.Outcome = outcome.ThresholdFailed
	s.Reasons = []outcome.Reason{outcome.New(outcome.ThresholdFailed, "a rule of another version")}
	r, err := FromSummary(t.TempDir(), s)
	if err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "**FAIL**") || !strings.Contains(md.String(), "- note: this report's version decides ok from the same summary") {
		t.Errorf("report.md:\n%s", md.String())
	}
}

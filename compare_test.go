package chaosbench

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/compare"
	"github.com/etcd-chaosbench/chaosbench/results/history"
	"github.com/etcd-chaosbench/chaosbench/results/report"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files")

func TestCompareVariants(t *testing.T) {
	base := DefaultScenario()
	base.EtcdFlags = []string{"heartbeat-interval=50"}
	tests := []struct {
		name     string
		versions []string
		sets     []string
		want     []string // labels
		flags    [][]string
		usage    string
	}{
		{name: "versions", versions: []string{"v3.5.35", "v3.6.16"}, want: []string{"v3.5.35", "v3.6.16"},
			flags: [][]string{{"heartbeat-interval=50"}, {"heartbeat-interval=50"}}},
		{name: "flag sets", sets: []string{"", "snapshot-count=5000 quota-backend-bytes=1000000"},
			want:  []string{"builtin (default flags)", "builtin snapshot-count=5000 quota-backend-bytes=1000000"},
			flags: [][]string{{"heartbeat-interval=50"}, {"heartbeat-interval=50", "snapshot-count=5000", "quota-backend-bytes=1000000"}}},
		{name: "cross product", versions: []string{"v3.5.35", "v3.6.16"}, sets: []string{"", "snapshot-count=5000"},
			want: []string{"v3.5.35 (default flags)", "v3.5.35 snapshot-count=5000", "v3.6.16 (default flags)", "v3.6.16 snapshot-count=5000"}},
		{name: "mixed members", versions: []string{"v3.5.35", "v3.5.35+v3.5.35+v3.6.16"}, want: []string{"v3.5.35", "v3.5.35+v3.5.35+v3.6.16"}},
		{name: "one variant", versions: []string{"v3.6.16"}, usage: "two variants or more"},
		{name: "nothing to compare", usage: "two variants or more"},
		{name: "twice", versions: []string{"v3.6.16", "v3.6.16"}, usage: "given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs, err := CompareOptions{Scenario: base, Versions: tt.versions, FlagSets: tt.sets}.variants("cmp")
			if tt.usage != "" {
				if !outcome.IsUsage(err) || !strings.Contains(err.Error(), tt.usage) {
					t.Fatalf("got %v, want a usage error about %q", err, tt.usage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var labels []string
			for i, v := range vs {
				labels = append(labels, v.label)
				if tt.flags != nil && strings.Join(v.scenario.EtcdFlags, " ") != strings.Join(tt.flags[i], " ") {
					t.Errorf("%s: flags %q, want %q", v.label, v.scenario.EtcdFlags, tt.flags[i])
				}
				if !strings.HasPrefix(v.dir, filepath.Join("cmp", "0")) || strings.ContainsAny(filepath.Base(v.dir), " +") {
					t.Errorf("%s: directory %q", v.label, v.dir)
				}
			}
			if strings.Join(labels, "|") != strings.Join(tt.want, "|") {
				t.Errorf("labels %q, want %q", labels, tt.want)
			}
		})
	}
}

// TestRoundPlan: rounds alternate ABBA, every variant of a round shares its seed, each round has a new
// seed, and the plan replays from the same seed.
func TestRoundPlan(t *testing.T) {
	plan := roundPlan([]string{"A", "B"}, 4, 42)
	var order []string
	seeds := map[int64]bool{}
	for _, r := range plan {
		order = append(order, r.Order...)
		seeds[r.Seed] = true
	}
	if strings.Join(order, "") != "ABBAABBA" {
		t.Errorf("order %s, want ABBAABBA", strings.Join(order, ""))
	}
	if plan[0].Seed != 42 || len(seeds) != 4 {
		t.Errorf("seeds %v", plan)
	}
	if again := roundPlan([]string{"A", "B"}, 4, 42); again[3].Seed != plan[3].Seed {
		t.Errorf("the plan does not replay: %v, %v", plan, again)
	}
}

// op is a history operation that returns at ms milliseconds, successfully unless failed.
func op(ms float64, failed bool) *history.Operation {
	o := &history.Operation{
		Call: int64((ms - 1) * 1e6), Return: int64(ms * 1e6),
		Request:  history.Request{Kind: history.KindPut, Put: &history.Put{Key: "k", Value: history.Value{ID: 1, Size: 8}}},
		Response: &history.Response{Revision: 2},
	}
	if failed {
		o.Response, o.Error = nil, "context deadline exceeded"
	}
	return o
}

func writeHistory(t *testing.T, dir string, ops []*history.Operation) {
	t.Helper()
	w, err := history.NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range ops {
		w.Operation(o)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// steady returns successes every 10 ms in [from, to) ms, failures in the outages.
func steady(from, to float64, outages ...[2]float64) []*history.Operation {
	var ops []*history.Operation
	for ms := from; ms < to; ms += 10 {
		failed := false
		for _, o := range outages {
			if ms >= o[0] && ms < o[1] {
				failed = true
			}
		}
		ops = append(ops, op(ms, failed))
	}
	return ops
}

func window(startMs, endMs float64) results.FaultWindow {
	return results.FaultWindow{Fault: "kill", StartNs: int64(startMs * 1e6), EndNs: int64(endMs * 1e6), Outcome: "recovered"}
}

// fakeRun writes a run directory as a run of etcd version ver would: a summary with one kill fault whose
// write gap lasts outageMs, a history, and 30 seconds of per-second figures scattered around the summary's
// (seeded by putP99).
func fakeRun(t *testing.T, dir, ver string, putP99, rate float64, outageMs float64, verdict string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &results.Summary{
		Schema: results.SummarySchema, Name: "put", Seed: 42, MeasuredSeconds: 10,
		Versions: results.Versions{EtcdServer: strings.TrimPrefix(ver, "v")},
		Cluster: results.ClusterInfo{Backend: "docker", Members: 3, EtcdVersions: []string{ver, ver, ver},
			MemberCPUs: 1, MemberMemoryBytes: 1 << 30},
		Schedule: results.Schedule{Mode: "open", TargetRate: 1000, MissedPercent: 0.5},
		Operations: map[string]*results.Operation{
			"put":   {Count: int64(rate * 10), Throughput: rate, Response: results.Latency{P50: 1.2, P90: 2.5, P99: putP99, P999: putP99 * 2, Max: 250}},
			"range": {Count: 5000, Throughput: 500, Errors: 3, Response: results.Latency{P50: 0.4, P90: 0.8, P99: 1.5, P999: 4, Max: 20}},
		},
		Faults: []results.FaultWindow{{Fault: "kill", Targets: []string{"m1"}, StartNs: 2e9, EndNs: 2.1e9, Outcome: "recovered",
			Availability: &results.Availability{WriteGapMs: outageMs + 10}}},
		Checks: []results.Check{{Name: "linearizability", Verdict: verdict}, {Name: "watch", Verdict: results.VerdictOK}},
	}
	s.Total = results.Totals(s.Operations)
	if err := results.WriteSummary(dir, s); err != nil {
		t.Fatal(err)
	}
	writeHistory(t, dir, steady(0, 5000, [2]float64{2000, 2000 + outageMs}))
	rng := rand.New(rand.NewPCG(uint64(putP99*1000), 1))
	var rows []byte
	for sec := 1; sec <= 30; sec++ {
		for _, name := range []string{"put", "range"} {
			o := s.Operations[name]
			k := math.Exp(0.1 * rng.NormFloat64())
			b, _ := json.Marshal(results.TimeSeriesRow{T: float64(sec), Op: name, Count: int64(o.Throughput), Throughput: o.Throughput * math.Exp(0.01*rng.NormFloat64()),
				P50: o.Response.P50 * k, P99: o.Response.P99 * k})
			rows = append(append(rows, b...), '\n')
		}
	}
	if err := os.WriteFile(filepath.Join(dir, results.TimeSeriesFile), rows, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestComparisonGolden lays out a comparison of fake runs (two variants, the second with two rounds), as
// markdown and as text, against golden files; -update rewrites them.
func TestComparisonGolden(t *testing.T) {
	dir := t.TempDir()
	fakeRun(t, filepath.Join(dir, "a"), "v3.5.35", 10, 990, 800, results.VerdictOK)
	fakeRun(t, filepath.Join(dir, "b1"), "v3.6.16", 8, 1000, 400, results.VerdictOK)
	fakeRun(t, filepath.Join(dir, "b2"), "v3.6.16", 12, 1002, 600, results.VerdictViolation)
	cmp, err := CompareRuns([]VariantDirs{
		{Label: "v3.5.35", Dirs: []string{filepath.Join(dir, "a")}},
		{Label: "v3.6.16", Dirs: []string{filepath.Join(dir, "b1"), filepath.Join(dir, "b2"), filepath.Join(dir, "missing")},
			Errs: []error{nil, nil, errors.New("start cluster: member exited")}},
	}, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The second round's violation is the comparison's outcome, above the third round's harness error.
	if o := cmp.Verdict(); o.Kind != outcome.Violation || !strings.HasPrefix(o.Reasons[0].Text, "v3.6.16, round 2: ") ||
		len(o.Texts(outcome.HarnessError)) != 1 || !strings.Contains(o.Texts(outcome.HarnessError)[0], "v3.6.16, round 3: no results: start cluster: member exited") {
		t.Errorf("outcome %v", o)
	}
	var md, text bytes.Buffer
	if err := cmp.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if err := cmp.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	golden(t, "compare.golden.md", strings.ReplaceAll(md.String(), dir, "DIR"))
	golden(t, "compare.golden.txt", strings.ReplaceAll(text.String(), dir, "DIR"))

	// Figures the golden files hold, checked by meaning too: one run against three rounds (one failed)
	// are paired by round (one pair) and fall back to per-second samples; the gap has no samples.
	if r := row(t, cmp, "linearizability"); r.Cells[1] != "ok / violation" || r.Diffs[1] != "differs" {
		t.Errorf("verdicts: %q %q", r.Cells, r.Diffs)
	}
	if e, ok := cmp.Effects.Find("v3.6.16", "fault1:write_gap"); !ok || e.Verdict != compare.Undecided || e.Value != 510 || e.Baseline != 810 {
		t.Errorf("kill gap: %+v", e)
	}
	if e, ok := cmp.Effects.Find("v3.6.16", "put:p99"); !ok || e.Method != compare.MethodIntervals {
		t.Errorf("put p99: %+v", e)
	}
}

func row(t *testing.T, cmp *Comparison, metric string) CompareRow {
	t.Helper()
	for _, sec := range cmp.Sections {
		for _, r := range sec.Rows {
			if r.Metric == metric {
				return r
			}
		}
	}
	t.Fatalf("no row %q", metric)
	return CompareRow{}
}

// TestCompareAndReportAgree: `chaosbench compare` and `chaosbench report A B` print the same figures for
// the same run directories, one run per variant and with rounds.
func TestCompareAndReportAgree(t *testing.T) {
	dir := t.TempDir()
	var a, b []string
	for i := range 3 {
		a = append(a, filepath.Join(dir, fmt.Sprintf("a%d", i)))
		b = append(b, filepath.Join(dir, fmt.Sprintf("b%d", i)))
		fakeRun(t, a[i], "v3.5.35", 10+0.1*float64(i), 990, 800, results.VerdictOK)
		fakeRun(t, b[i], "v3.6.16", 14+0.1*float64(i), 1000, 400+10*float64(i), results.VerdictOK)
	}
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d rounds", n), func(t *testing.T) {
			cmp, err := CompareRuns([]VariantDirs{{Label: "A", Dirs: a[:n]}, {Label: "B", Dirs: b[:n]}}, compare.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := report.RenderComparison(t.TempDir(), []report.Labelled{
				{Dir: a[0], Rounds: a[1:n], Label: "A"}, {Dir: b[0], Rounds: b[1:n], Label: "B"}}, compare.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var fromCompare, fromReport, effects bytes.Buffer
			if err := cmp.WriteMarkdown(&fromCompare); err != nil {
				t.Fatal(err)
			}
			if err := report.WriteComparisonMarkdown(&fromReport, rep); err != nil {
				t.Fatal(err)
			}
			if err := cmp.Effects.WriteMarkdown(&effects); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(fromCompare.String(), effects.String()) || !strings.Contains(fromReport.String(), effects.String()) {
				t.Fatalf("the effects differ:\ncompare:\n%s\nreport:\n%s", fromCompare.String(), fromReport.String())
			}
			// compare's page is report's page.
			pageDir := t.TempDir()
			if err := cmp.WriteHTML(pageDir, compare.Options{}); err != nil {
				t.Fatal(err)
			}
			page, _ := os.ReadFile(filepath.Join(pageDir, ComparisonHTML))
			var reportPage bytes.Buffer
			if err := report.WriteComparisonHTML(&reportPage, rep); err != nil {
				t.Fatal(err)
			}
			if string(page) != reportPage.String() || !strings.Contains(string(page), "put:p99") {
				t.Errorf("compare.html and report's comparison.html differ")
			}
			j1, _ := json.Marshal(cmp.Effects)
			j2, _ := json.Marshal(rep.Effects)
			if string(j1) != string(j2) {
				t.Fatalf("effects differ:\n%s\n%s", j1, j2)
			}
			if e, _ := cmp.Effects.Find("B", "put:p99"); e.Verdict != compare.Worse || e.Low <= 0 {
				t.Errorf("put p99 +30%%: %+v", e)
			}
		})
	}
}

// TestReportGate: `chaosbench report A B --fail-on-regression` exits 3 naming the regressed figure in one
// line; a gate on a figure that did not change passes; a gate on a figure the runs cannot decide is
// undecided (exit 1), never a pass; without a gate every figure is informational and the runs' own
// outcomes decide.
func TestReportGate(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	fakeRun(t, a, "v3.5.35", 10, 990, 800, results.VerdictOK)
	fakeRun(t, b, "v3.6.16", 15, 990, 800, results.VerdictOK)
	for i, tt := range []struct {
		gate    bool
		figures []string
		code    int
		says    string
	}{
		{true, nil, outcome.ExitThresholds, "regression: b put:p99 +"},
		{true, []string{"range:throughput"}, outcome.ExitOK, ""},
		{true, []string{"range:p99"}, outcome.ExitHarness, "gated figures undecided: b against a: range:p99 (too noisy"},
		{false, nil, outcome.ExitOK, ""},
	} {
		var out bytes.Buffer
		err := Report(ReportOptions{Dirs: []string{a, b}, Out: filepath.Join(dir, fmt.Sprint("cmp", i)), FailOnRegression: tt.gate, RegressionFigures: tt.figures}, &out)
		if ExitCode(err) != tt.code || (tt.says != "" && !strings.Contains(err.Error(), tt.says)) {
			t.Errorf("gate %v %v: exit %d: %v; want exit %d saying %q", tt.gate, tt.figures, ExitCode(err), err, tt.code, tt.says)
		}
		md, _ := os.ReadFile(filepath.Join(dir, fmt.Sprint("cmp", i), report.ComparisonMarkdownFile))
		if want := fmt.Sprintf("(exit code %d)", tt.code); !strings.Contains(strings.SplitN(string(md), "\n", 2)[0], want) {
			t.Errorf("gate %v %v: comparison.md does not lead with %s:\n%.200s", tt.gate, tt.figures, want, md)
		}
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (run with -update after checking):\n%s", name, got)
	}
}

// TestAvailabilityCallersAgree plays one stream of requests (puts, ranges, transactions that write and that
// only read, lease grants and watch events, which count in neither class) through a fault window and
// checks that the three places that report availability give the same write and read gaps: the fault
// runner's live figures (results.Phases, into summary.json), the report (from the history) and the
// comparison of runs.
func TestAvailabilityCallersAgree(t *testing.T) {
	dir := t.TempDir()
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	p, err := results.NewPhases(results.CollectorOptions{Start: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	p.Begin(0)
	hist, err := history.NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	put := history.Request{Kind: history.KindPut, Put: &history.Put{Key: "k", Value: history.Value{ID: 1, Size: 8}}}
	rng := history.Request{Kind: history.KindRange, Range: &history.Range{Key: "k"}}
	kinds := []struct {
		op  string
		req history.Request
	}{
		{"put", put},
		{"range", rng},
		{"txn-write", history.Request{Kind: history.KindTxn, Txn: &history.Txn{Then: []history.Request{rng, put}}}},
		{"txn-read", history.Request{Kind: history.KindTxn, Txn: &history.Txn{Then: []history.Request{rng}}}},
		{"lease-grant", history.Request{Kind: history.KindLeaseGrant, Lease: &history.Lease{TTL: 10}}},
	}
	// Writes fail from 2.0 s to 2.83 s, reads from 2.1 s to 2.35 s, lease grants from 1 s on (they count in
	// neither gap); the fault is injected at 2 s, healed at 2.5 s, observed until 3.5 s.
	fails := func(op string, end int64) bool {
		switch op {
		case "put", "txn-write":
			return end >= 2000 && end < 2830
		case "range", "txn-read":
			return end >= 2100 && end < 2350
		}
		return end >= 1000
	}
	var w *results.Window
	var late []*results.Record
	for i := int64(0); i < 600; i++ {
		at := 10 * i
		switch at {
		case 2000:
			w = p.Open(ms(at))
		case 2500:
			w.Heal(ms(at))
		case 3500:
			w.Close(ms(at))
		}
		k := kinds[i%int64(len(kinds))]
		end := at + 3
		failed := fails(k.op, end)
		op := &history.Operation{Client: int(i % 8), Op: k.op, Call: int64(ms(at)), Return: int64(ms(end)), Request: k.req}
		rec := &results.Record{Op: k.op, Intended: ms(at), Start: ms(at), End: ms(end), Access: access(k.req)}
		if failed {
			op.Error, rec.Outcome, rec.ErrClass = "unavailable", results.Error, "unavailable"
		} else {
			op.Response = &history.Response{Revision: i + 2}
		}
		hist.Operation(op)
		if i%7 == 0 {
			late = append(late, rec) // reported after later completions, as concurrent workers do
		} else {
			p.Record(int(i%8), rec)
		}
		p.Record(0, &results.Record{Op: "watch", Intended: ms(at), Start: ms(at), End: ms(end)})
		if len(late) > 2 {
			p.Record(1, late[0])
			late = late[1:]
		}
	}
	for _, rec := range late {
		p.Record(1, rec)
	}
	if err := hist.Close(); err != nil {
		t.Fatal(err)
	}
	a := w.Finalize(ms(6000))
	if err := p.Close(ms(6000)); err != nil {
		t.Fatal(err)
	}
	fault := results.FaultWindow{Fault: "kill", Targets: []string{"m1"}, StartNs: int64(ms(2000)), EndNs: int64(ms(2500)),
		Outcome: "recovered", Availability: &a}
	s := &results.Summary{Schema: results.SummarySchema, Name: "agree", MeasuredSeconds: 6,
		Operations: map[string]*results.Operation{"put": {Count: 120}}, Faults: []results.FaultWindow{fault}}
	if err := results.WriteSummary(dir, s); err != nil {
		t.Fatal(err)
	}

	// The definition, worked out by hand (requests every 10 ms, cycling through the kinds above, each taking
	// 3 ms): the last write before the outage completed at 1.973 s (txn-write sent at 1.97 s), the first
	// after it at 2.853 s (put at 2.85 s); reads: 2.083 s (txn-read at 2.08 s) to 2.363 s (range at 2.36 s).
	wantWrite, wantRead := 880.0, 280.0
	if a.WriteGapMs != wantWrite || a.ReadGapMs != wantRead || a.WriteGapOpen || a.ReadGapOpen {
		t.Errorf("fault runner: write gap %v ms, read gap %v ms; want %v and %v", a.WriteGapMs, a.ReadGapMs, wantWrite, wantRead)
	}
	r, err := report.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Gaps) != 1 || r.Gaps[0].Writes == nil || r.Gaps[0].Reads == nil {
		t.Fatalf("report gaps %+v (warnings %v)", r.Gaps, r.Warnings)
	}
	if g := r.Gaps[0]; g.Writes.Seconds*1000 != wantWrite || g.Reads.Seconds*1000 != wantRead || g.Seconds*1000 != wantWrite {
		t.Errorf("report: write gap %v s, read gap %v s, judged %v s; want %v and %v ms", g.Writes.Seconds, g.Reads.Seconds, g.Seconds, wantWrite, wantRead)
	}
	run, err := compare.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, figs := compare.Collect([]compare.Variant{{Label: "a", Runs: []compare.Run{run}}})
	for id, want := range map[string]float64{"fault1:write_gap": wantWrite, "fault1:read_gap": wantRead} {
		if got := figs[0].Values[id]; len(got) != 1 || got[0] != want {
			t.Errorf("comparison: %s %v, want %v ms", id, got, want)
		}
	}
}

// access classifies req as the workloads do.
func access(req history.Request) results.Access {
	a := results.AccessOf(string(req.Kind))
	if req.Txn != nil {
		for _, r := range append(req.Txn.Then, req.Txn.Else...) {
			a = a.Branch(string(r.Kind))
		}
	}
	return a
}

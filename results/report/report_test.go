package report

import (
	"bytes"
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
)

// writeHistory writes a history with the real writer: one operation per entry, (kind, call ms,
// return ms, error).
func writeHistory(t *testing.T, dir string, ops []histOp) {
	t.Helper()
	w, err := history.NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range ops {
		req := history.Request{Kind: o.kind}
		switch o.kind {
		case history.KindPut:
			req.Put = &history.Put{Key: "k", Value: history.Value{ID: uint64(i + 1), Size: 8}}
		default:
			req.Range = &history.Range{Key: "k"}
		}
		w.Operation(&history.Operation{Client: i % 4, Op: string(o.kind), Call: o.call * 1e6, Return: o.ret * 1e6, Request: req, Error: o.err})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

type histOp struct {
	kind      history.Kind
	call, ret int64 // ms
	err       string
}

// steady returns successful operations completing every step ms in [from, to), skipping [holeFrom, holeTo).
func steady(kind history.Kind, from, to, step, holeFrom, holeTo int64) []histOp {
	var out []histOp
	for t := from; t < to; t += step {
		if t >= holeFrom && t < holeTo {
			out = append(out, histOp{kind, t - 1, t + 5000, "deadline"}) // fails, long after
			continue
		}
		out = append(out, histOp{kind, t - 1, t, ""})
	}
	return out
}

func TestAvailabilityGaps(t *testing.T) {
	// A fault observed until 3.5 s, as the fault runner records it.
	fault := func(start, end int64) results.FaultWindow {
		return results.FaultWindow{Fault: "kill", Targets: []string{"m1"}, StartNs: start * 1e6, EndNs: end * 1e6,
			Availability: &results.Availability{ObservedToNs: 3500e6}}
	}
	tests := []struct {
		name      string
		ops       []histOp
		faults    []results.FaultWindow
		want      float64 // seconds
		recovered bool
		kind      string
		errors    int64
		readGap   float64 // seconds, -1: no reads
	}{
		{"writes stop during the fault", steady(history.KindPut, 0, 5000, 10, 1200, 1900), []results.FaultWindow{fault(1000, 2000)}, 0.71, true, "writes", 70, -1},
		{"the gap reaches past the window", steady(history.KindPut, 0, 5000, 10, 1500, 2600), []results.FaultWindow{fault(1000, 2000)}, 1.11, true, "writes", 51, -1},
		{"no outage", steady(history.KindPut, 0, 5000, 10, 0, 0), []results.FaultWindow{fault(1000, 2000)}, 0.01, true, "writes", 0, -1},
		// from the last success (1.49 s) to the end of the observation
		{"never recovers", steady(history.KindPut, 0, 5000, 10, 1500, 5000), []results.FaultWindow{fault(1000, 2000)}, 2.01, false, "writes", 51, -1},
		{"reads only", steady(history.KindRange, 0, 5000, 10, 1200, 1400), []results.FaultWindow{fault(1000, 2000)}, 0.21, true, "reads", 20, 0.21},
		{"reads do not hide a write outage", append(steady(history.KindPut, 0, 5000, 10, 1000, 3000), steady(history.KindRange, 0, 5000, 7, 0, 0)...), []results.FaultWindow{fault(1000, 2000)}, 2.01, true, "writes", 100, 0.007},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeHistory(t, dir, tt.ops)
			gaps, err := availabilityGaps(dir, tt.faults, nil)
			if err != nil {
				t.Fatal(err)
			}
			g := gaps[0]
			if math.Abs(g.Seconds-tt.want) > 0.0015 || g.Recovered != tt.recovered || g.Kind != tt.kind || g.Errors != tt.errors || g.Resolution != "1ms" {
				t.Fatalf("gap %+v, want %.3fs recovered=%v kind=%s errors=%d", g, tt.want, tt.recovered, tt.kind, tt.errors)
			}
			switch {
			case tt.readGap < 0 && g.Reads != nil:
				t.Fatalf("read gap %+v in a run without reads", *g.Reads)
			case tt.readGap >= 0 && (g.Reads == nil || math.Abs(g.Reads.Seconds-tt.readGap) > 0.0015):
				t.Fatalf("read gap %+v, want %.3fs", g.Reads, tt.readGap)
			case (tt.kind == "writes") != (g.Writes != nil):
				t.Fatalf("write gap %+v in a run of %s", g.Writes, tt.kind)
			}
		})
	}
	t.Run("from the time series without a history", func(t *testing.T) {
		var series []results.TimeSeriesRow
		for s := 1; s <= 10; s++ {
			if s == 4 || s == 5 {
				continue // no completions at all: no row
			}
			series = append(series, results.TimeSeriesRow{T: float64(s) + 0.001, Op: "put", Access: "write", Count: 100})
		}
		f := fault(3000, 4500)
		f.Availability = nil // not observed: measured until the end of the load
		gaps, err := availabilityGaps(t.TempDir(), []results.FaultWindow{f}, series)
		if err != nil {
			t.Fatal(err)
		}
		if g := gaps[0]; math.Abs(g.Seconds-2) > 1e-9 || g.Resolution != "1s" || !g.Recovered {
			t.Fatalf("gap %+v, want 2 s at 1 s resolution", g)
		}
	})
}

func healthyServer() *results.ServerMetrics {
	return &results.ServerMetrics{
		Members: []results.MemberMetrics{{Name: "m1", Scrapes: 10, Leader: true, WALFsync: results.Bucketed{Count: 100, P99: 2}, BackendCommit: results.Bucketed{Count: 100, P99: 5}, PeerRTT: results.Bucketed{Count: 5, P99: 0.5}}},
		Cluster: results.ClusterMetrics{
			WALFsync: results.Bucketed{Count: 100, P99: 2}, WALFsyncMember: "m1",
			BackendCommit: results.Bucketed{Count: 100, P99: 5}, BackendCommitBy: "m1",
			PeerRTT: results.Bucketed{Count: 5, P99: 0.5}, QuotaBackendBytes: 2 << 30, DBSizeBytes: 10 << 20,
		},
		Generator: &results.GeneratorMetrics{CPUPercentMean: 40, HostCPUBusyMean: 50, HostCPUBusyMax: 70, HostCPUs: 8, Intervals: 60},
	}
}

func TestDiagnose(t *testing.T) {
	tests := []struct {
		name   string
		change func(s *results.Summary, r *Run)
		topic  string
		sev    string
		want   string
	}{
		{"healthy disk is cleared", func(*results.Summary, *Run) {}, "disk", results.SeverityOK, "fast enough: WAL fsync p99 2.00ms"},
		{"slow fsync names the disk and the member", func(s *results.Summary, _ *Run) {
			s.Server.Cluster.WALFsync.P99, s.Server.Cluster.WALFsyncMember = 38, "m2"
		}, "disk", results.SeverityProblem, "WAL fsync p99 38.0ms on m2 > 10.0ms (etcd's hardware guidance): the disk (xfs) is too slow"},
		{"slow commit", func(s *results.Summary, _ *Run) { s.Server.Cluster.BackendCommit.P99 = 60 }, "disk", results.SeverityProblem, "backend commit p99 60.0ms on m1 > 25.0ms"},
		{"tmpfs", func(s *results.Summary, _ *Run) { s.Environment.RunDirFS = "tmpfs" }, "disk", results.SeverityWarning, "memory, not a disk"},
		{"elections without faults", func(s *results.Summary, _ *Run) { s.Server.Cluster.LeaderChanges = 4 }, "leader", results.SeverityProblem, "the leader changed 4 times in 60 s"},
		{"saturated machine", func(s *results.Summary, _ *Run) {
			s.Server.Generator.HostCPUBusyMean, s.Server.Generator.SaturatedIntervals = 97, 55
		}, "cpu", results.SeverityProblem, "the machine's CPU was saturated: 97% busy"},
		{"generator lag", func(s *results.Summary, _ *Run) {
			s.Schedule.MissedLag, s.Schedule.MissedPercent = 7200, 12
		}, "generator", results.SeverityProblem, "the generator missed 12.0% of its schedule with clients free (generator lag): its own CPU could not keep up (chaosbench used 40% of a core, the machine was 50% busy); latency figures are unreliable"},
		{"generator starved", func(s *results.Summary, _ *Run) {
			s.Schedule.MissedLag, s.Schedule.MissedPercent = 1200, 2
			s.Server.Generator.HostCPUBusyMean = 95
		}, "generator", results.SeverityWarning, "it was starved of CPU, the machine being 95% busy with other work (chaosbench itself used 40% of a core); response times include these delays"},
		{"too few clients", func(s *results.Summary, _ *Run) {
			s.Schedule.MissedBacklog, s.Schedule.MissedPercent = 6000, 10
			s.Operations["put"].Service.Mean = 100
		}, "generator", results.SeverityWarning, "needs about 100 clients in flight, more than --clients 64"},
		{"short throughput", func(s *results.Summary, _ *Run) { s.Operations["put"].Throughput = 800 }, "load", results.SeverityProblem, "throughput 800.0 requests/s is 80% of the 1000 requests/s target"},
		{"watch events do not make up for missing requests", func(s *results.Summary, _ *Run) {
			s.Operations["put"].Throughput = 800
			s.Operations["watch"] = &results.Operation{Count: 30000, Throughput: 500}
			s.Total = results.Totals(s.Operations)
		}, "load", results.SeverityProblem, "throughput 800.0 requests/s is 80% of the 1000 requests/s target"},
		{"errors by class", func(s *results.Summary, _ *Run) {
			s.Total.Errors = 30
			s.Operations["put"].Errors, s.Operations["put"].ErrorsByClass = 30, map[string]int64{"no_leader": 20, "deadline": 10}
		}, "errors", results.SeverityProblem, "30 of 60000 operations failed (0.05%): 20 no_leader: the cluster had no leader"},
		{"slow watchers", func(s *results.Summary, _ *Run) { s.Server.Cluster.SlowWatchers = 12 }, "watch", results.SeverityWarning, "up to 12 watchers were slow"},
		{"quota", func(s *results.Summary, _ *Run) {
			s.Server.Cluster.DBSizeBytes, s.Server.Cluster.DBInUseBytes = 1.8*(1<<30), 0.5*(1<<30)
		}, "quota", results.SeverityProblem, "the database reached 1.80 GiB of its 2.00 GiB quota (90%); only 512.0 MiB is in use: defragment"},
		{"slow network", func(s *results.Summary, _ *Run) { s.Server.Cluster.PeerRTT.P99 = 80 }, "network", results.SeverityProblem, "peer round-trip p99 80.0ms is more than half the 100ms heartbeat"},
		{"apply", func(s *results.Summary, _ *Run) { s.Server.Cluster.Apply = results.Bucketed{Count: 10, P99: 300} }, "apply", results.SeverityProblem, "apply p99 300ms > 100ms"},
		{"violation", func(s *results.Summary, _ *Run) {
			s.Checks = []results.Check{{Name: "linearizability", Verdict: results.VerdictViolation, Detail: "key k: read of a lost write"}}
		}, "consistency", results.SeverityProblem, "linearizability found a violation: key k: read of a lost write"},
		{"stall without faults", func(_ *results.Summary, r *Run) {
			r.Gaps = []Gap{{Index: -1, Seconds: 2.5, Start: 10, End: 12.5, Kind: "writes", Recovered: true,
				Writes: &ClassGap{Seconds: 2.5, Start: 10, End: 12.5, Recovered: true}}}
		}, "availability", results.SeverityProblem, "no write succeeded for 2.5 s (from 10 s to 12.5 s) without any fault injected"},
		{"no metrics", func(s *results.Summary, _ *Run) { s.Server = nil }, "run", results.SeverityWarning, "no etcd metrics were scraped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &results.Summary{
				MeasuredSeconds: 60,
				Cluster:         results.ClusterInfo{Backend: "embed", Members: 3},
				Schedule:        results.Schedule{Mode: "open", TargetRate: 1000, Clients: 64},
				Total:           results.Total{Count: 60000, Throughput: 1000},
				Operations:      map[string]*results.Operation{"put": {Count: 60000, Throughput: 1000, Service: results.Latency{Mean: 2}}},
				Server:          healthyServer(),
				Environment:     &results.Environment{RunDirFS: "xfs"},
			}
			r := &Run{Summary: s}
			tt.change(s, r)
			found := false
			var all []string
			for _, f := range Diagnose(r) {
				all = append(all, f.Severity+" "+f.Topic+": "+f.Message)
				if f.Topic == tt.topic && f.Severity == tt.sev && strings.Contains(f.Message, tt.want) {
					found = true
				}
			}
			if !found {
				t.Fatalf("no %s %s finding containing %q in:\n%s", tt.sev, tt.topic, tt.want, strings.Join(all, "\n"))
			}
		})
	}
}

// A healthy run gets no problem.
func TestDiagnoseHealthy(t *testing.T) {
	s := &results.Summary{
		MeasuredSeconds: 60, Schedule: results.Schedule{Mode: "open", TargetRate: 1000, Clients: 64},
		Total: results.Total{Count: 60000, Throughput: 999}, Operations: map[string]*results.Operation{"put": {Count: 60000, Throughput: 999}},
		Server: healthyServer(), Environment: &results.Environment{RunDirFS: "ext4"},
	}
	for _, f := range Diagnose(&Run{Summary: s}) {
		if f.Severity != results.SeverityOK {
			t.Errorf("%s %s: %s", f.Severity, f.Topic, f.Message)
		}
	}
}

// seriesRun is a run of one operation whose per-second p99 (and p50, a tenth of it) scatters around
// p99 ms: a run as the comparison reads it.
func seriesRun(label string, seconds int, p99 float64, seed uint64) *Run {
	rng := rand.New(rand.NewPCG(seed, 7))
	r := &Run{Label: label, Dir: label, Summary: &results.Summary{Operations: map[string]*results.Operation{
		"put": {Count: int64(seconds) * 1000, Throughput: 1000, Response: results.Latency{P50: p99 / 10, P99: p99, P999: 2 * p99}}}}}
	for i := range seconds {
		x := p99 * math.Exp(0.15*rng.NormFloat64())
		r.Series = append(r.Series, results.TimeSeriesRow{T: float64(i + 1), Op: "put", Count: 1000, Throughput: 1000, P50: x / 10, P99: x})
	}
	return r
}

// The report's comparison is the engine's: with one run per variant, per-second samples call a run twice
// as slow worse with an interval that excludes zero, and every renderer shows the engine's cells. Only a
// gated figure is shown as failing, and the page and the Markdown lead with the comparison's outcome.
func TestCompareUsesTheEngine(t *testing.T) {
	for _, tt := range []struct {
		name     string
		gate     *compare.Gate
		kind     outcome.Kind
		headline string
		cell     string // the verdict cell of put:p99 on the page
		role     string
	}{
		{"gated", &compare.Gate{Figures: []string{"put:p99"}}, outcome.ThresholdFailed, "FAIL", `<td class="fail">worse</td>`, `<td class="fail">FAIL</td>`},
		{"informational", nil, outcome.OK, "PASS", `<td class="">worse</td>`, `<td class="">informational</td>`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base, slow := seriesRun("base", 60, 2, 1), seriesRun("slow", 60, 4, 2)
			c, err := Compare([][]*Run{{base}, {slow}}, compare.Options{Gate: tt.gate})
			if err != nil || c.Outcome.Kind != tt.kind {
				t.Fatalf("outcome %v %v, want %s", c.Outcome, err, tt.kind)
			}
			e, ok := c.Effects.Find("slow", "put:p99")
			if !ok || e.Verdict != compare.Worse || e.Low <= 0 || e.Method != compare.MethodIntervals {
				t.Fatalf("put p99: %+v", e)
			}
			var md, want bytes.Buffer
			if err := WriteComparisonMarkdown(&md, c); err != nil {
				t.Fatal(err)
			}
			if err := c.Effects.WriteMarkdown(&want); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(md.String(), want.String()) || !strings.Contains(md.String(), "| worse |") ||
				!strings.HasPrefix(md.String(), "# chaosbench comparison: **"+tt.headline+"** — outcome: "+string(tt.kind)) {
				t.Fatalf("comparison table:\n%s", md.String())
			}
			md.Reset()
			if err := WriteComparisonHTML(&md, c); err != nil {
				t.Fatal(err)
			}
			page := md.String()
			if !strings.Contains(page, `<svg class="chart"`) || !strings.Contains(page, tt.cell) || !strings.Contains(page, tt.role) {
				t.Fatalf("the comparison page lacks its chart, %s or %s", tt.cell, tt.role)
			}
			if !strings.Contains(page, "<title>chaosbench comparison: "+tt.headline+" ("+string(tt.kind)+")") ||
				!strings.Contains(page, `<span class="badge `+c.Outcome.Class()+`">`+tt.headline+"</span>") {
				t.Fatalf("the page does not lead with the outcome %s", c.Outcome)
			}
		})
	}
}

// RenderComparison of two real run directories (the fixture against itself) finds no difference.
func TestRenderComparisonOfRunDirectories(t *testing.T) {
	dir := fixtureRun(t)
	out := t.TempDir()
	c, err := RenderComparison(out, []Labelled{{Dir: dir, Label: "a"}, {Dir: dir, Label: "b"}}, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range c.Effects.Variants[0].Effects {
		if e.Verdict == compare.Better || e.Verdict == compare.Worse {
			t.Errorf("a run compared with itself is %s", e)
		}
	}
	for _, f := range []string{ComparisonMarkdownFile, ComparisonHTMLFile} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// Fields other parts of chaosbench add to summary.json (or that a newer version writes) are rendered
// generically, and a run with only summary.json still renders.
func TestUnknownFieldsAndMissingFiles(t *testing.T) {
	dir := t.TempDir()
	summary := `{"name":"kube","schedule":{"mode":"closed","clients":4},"total":{"count":10,"throughput":5},
"operations":{"create/pods":{"count":10,"throughput":5,"response_ms":{"p99":12}}},
"faults":[{"fault":"kill","targets":["m1"],"start_ns":1000000000,"end_ns":2000000000,"outcome":"recovered","time_to_leader_ms":850}],
"slo":[{"verb":"create","resource":"pods","p99_ms":12,"limit_ms":1000,"verdict":"pass"}],
"phases":{"steady":{"p99_ms":3},"during":{"p99_ms":40}},
"note":"written by a newer chaosbench"}`
	os.WriteFile(filepath.Join(dir, results.SummaryFile), []byte(summary), 0o644)
	os.WriteFile(filepath.Join(dir, results.TimeSeriesFile), []byte("{\"t\":1,\"op\":\"create/pods\",\"count\":5}\n{\"t\":2,\"op\":\"crea"), 0o644)
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	Prepare(r, nil)
	var md bytes.Buffer
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## slo", "| verb | resource | p99_ms | limit_ms | verdict |", "| create | pods | 12 | 1000 | pass |",
		"## phases", "| steady | {\"p99_ms\":3} |",
		"## note", "written by a newer chaosbench",
		"time_to_leader_ms", "| 850 |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md.String())
		}
	}
	if err := Write(r); err != nil {
		t.Fatal(err)
	}
	if len(r.Series) != 1 {
		t.Errorf("a torn time series line: %d rows", len(r.Series))
	}
}

func TestChartHelpers(t *testing.T) {
	if got := percentileLabel(1 - 1/1000.0); got != "99.9%" {
		t.Errorf("percentile label %q", got)
	}
	var labels []string
	for _, tk := range (latencyTicks{}).Ticks(0.3, 40) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if strings.Join(labels, " ") != "500µs 1ms 2ms 5ms 10ms 20ms" {
		t.Errorf("latency ticks %v", labels)
	}
	long := make([]point, 10000)
	for i := range long {
		long[i] = point{float64(i), 1}
	}
	long[5555].y = 99
	red := reduce(long)
	spike := false
	for _, p := range red {
		spike = spike || p.y == 99
	}
	if len(red) > maxPoints+1 || !spike {
		t.Errorf("reduce kept %d points, spike %v", len(red), spike)
	}
	_ = time.Second
}

// BenchmarkAvailabilityGaps scans the history of a million operations for the gaps of a run's faults.
func BenchmarkAvailabilityGaps(b *testing.B) {
	dir := b.TempDir()
	w, err := history.NewWriter(dir)
	if err != nil {
		b.Fatal(err)
	}
	for i := range int64(1_000_000) {
		w.Operation(&history.Operation{Client: int(i % 64), Op: "put", Call: i * 1e6, Return: i*1e6 + 2e6,
			Request:  history.Request{Kind: history.KindPut, Put: &history.Put{Key: "/bench/0001", Value: history.Value{ID: uint64(i + 1), Size: 256}}},
			Response: &history.Response{Revision: i + 2}})
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(dir, history.HistoryFile))
	b.SetBytes(st.Size())
	faults := []results.FaultWindow{{Fault: "kill", StartNs: 3e11, EndNs: 3.1e11}, {Fault: "pause", StartNs: 6e11, EndNs: 6.2e11}}
	for b.Loop() {
		if _, err := availabilityGaps(dir, faults, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// A kube workload run's report has a Kubernetes section (the SLO per operation and the mix against the
// plan) and a verdict row naming the worst operation.
func TestKubeSection(t *testing.T) {
	ops := map[string]*results.Operation{
		"create/pods":   {Count: 100, Response: results.Latency{P99: 40}},
		"update/leases": {Count: 500, Response: results.Latency{P99: 1500}},
		"list/pods":     {Count: 10, Response: results.Latency{P99: 2000}},
		"get/leases":    {Count: 50, Response: results.Latency{P99: 5}},
		"compact":       {Count: 1, Response: results.Latency{P99: 30}},
	}
	slo, pass := results.JudgeSLO(ops)
	mix, worst := results.CompareMix(map[string]float64{"create/pods": 5, "update/leases": 26}, map[string][]string{"create/pods": {"churn"}, "update/leases": {"heartbeats", "election"}}, ops, 20)
	s := &results.Summary{Name: "kube", Operations: ops, Total: results.Total{Count: 661},
		Kube: &results.Kube{Cluster: "100 nodes", SLO: slo, SLOPass: pass, Mix: mix, MixDeviationPercent: worst, Conflicts: map[string]int64{"update/leases": 3}}}
	if pass || len(slo) != 4 || worst < 3.8 || worst > 3.9 {
		t.Fatalf("SLO pass %v over %d operations (compact has no API class), mix deviation %.2f%%", pass, len(slo), worst)
	}
	r, err := FromSummary(t.TempDir(), s)
	if err != nil {
		t.Fatal(err)
	}
	Prepare(r, nil)
	var md, html bytes.Buffer
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&html, r); err != nil {
		t.Fatal(err)
	}
	// Not judged by the SLOs: the card and the table are informational, and never say pass or fail.
	for _, want := range []string{
		"| **Kubernetes SLOs** (informational) | over an SLO | worst: update/leases p99 1.50s against 1.00s",
		"## Kubernetes", "| mutating | update/leases | 500 | 1.50s | 1.00s | over |", "| list | list/pods | 10 | 2.00s | 30.0s | within |",
		"| update/leases | heartbeats, election | 26 | 25 | -3.8% | 3 |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md.String())
		}
	}
	if !strings.Contains(html.String(), `<h2 id="kubernetes">Kubernetes</h2>`) || !strings.Contains(html.String(), "update/leases") {
		t.Error("report.html has no Kubernetes section")
	}
	if bytes.Contains(md.Bytes(), []byte("## kube")) {
		t.Error("the kube summary is also rendered generically")
	}
	for _, l := range strings.Split(md.String(), "\n") {
		if strings.Contains(l, "Kubernetes SLOs") || strings.HasPrefix(l, "| mutating") {
			if w := strings.ToLower(l); strings.Contains(w, "pass") || strings.Contains(w, "fail") {
				t.Errorf("an informational SLO line says pass or fail: %s", l)
			}
		}
	}

	// Judged by the k8s-slo thresholds: the card shows their decision, as the headline does.
	ts, err := results.RunThresholds([]string{"k8s-slo"})
	if err != nil {
		t.Fatal(err)
	}
	Prepare(r, ts)
	md.Reset()
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"**FAIL**", "| **Kubernetes SLOs** | fail | worst: update/leases p99 1.50s against 1.00s",
		"**fail** (judged by the k8s-slo thresholds)", "| mutating | update/leases | 500 | 1.50s | 1.00s | over |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report.md judged by k8s-slo lacks %q:\n%s", want, md.String())
		}
	}
}

// The throughput card sets requests against the target, which is a rate of requests, and shows watch
// events beside them: 77 puts/s and 109 watch events/s against a 77/s target are on target, not 241% of it.
func TestThroughputCard(t *testing.T) {
	tests := []struct {
		name        string
		ops         map[string]*results.Operation
		missed      int64
		verdict     string
		wantDetail  string
		avoidDetail string
	}{
		{"watch events beside the requests", map[string]*results.Operation{
			"put":   {Count: 770, Throughput: 77},
			"watch": {Count: 1090, Throughput: 109},
		}, 0, "on target", "77.0 requests/s of the 77 requests/s target (100.0%); 0.00% of requests started late; beside them 109.0 watch events/s", "241"},
		{"watch events do not make up for missing requests", map[string]*results.Operation{
			"put":              {Count: 400, Throughput: 40},
			"watch-event/pods": {Count: 2000, Throughput: 200},
			"cache-sync/pods":  {Count: 10, Throughput: 1},
		}, 0, "short of target", "40.0 requests/s of the 77 requests/s target (51.9%)", ""},
		{"late starts are a share of requests", map[string]*results.Operation{
			"put":   {Count: 770, Throughput: 77},
			"watch": {Count: 10000, Throughput: 1000},
		}, 77, "on target, late starts", "10.00% of requests started late", ""},
		{"events only", map[string]*results.Operation{"watch": {Count: 10, Throughput: 1}}, 0, "no request", "no request was measured", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &results.Summary{MeasuredSeconds: 10, Operations: tt.ops,
				Schedule: results.Schedule{Mode: "open", TargetRate: 77, Clients: 8, MissedBacklog: tt.missed}}
			s.Total = results.Totals(s.Operations)
			v := buildView(&Run{Summary: s})
			card := v.Verdicts[0]
			if card.Area != "Throughput" || card.Verdict != tt.verdict || !strings.Contains(card.Detail, tt.wantDetail) ||
				(tt.avoidDetail != "" && strings.Contains(card.Detail, tt.avoidDetail)) {
				t.Fatalf("card %+v, want %q containing %q", card, tt.verdict, tt.wantDetail)
			}
			// The throughput is never part of the verdict (a threshold is): never a verdict's colour.
			if !card.Informational || (card.Class != "info" && card.Class != "warn") {
				t.Fatalf("the throughput card is not informational: %+v", card)
			}
		})
	}
}

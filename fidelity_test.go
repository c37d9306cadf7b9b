package chaosbench

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// TestApiserverOpName: the emulation's operations are named as the apiservers' etcd request metrics name
// theirs, so that the fidelity table sets each against its real counterpart.
func TestApiserverOpName(t *testing.T) {
	for op, want := range map[string]string{
		"update/minions":          "update/nodes",
		"get/masterleases":        "get/apiServerIPInfo",
		"list/masterleases":       "list/apiServerIPInfo",
		"update/peerserverleases": "update/apiServerPeerIPInfo",
		"current-rv/pods":         "getCurrentResourceVersion/pods",
		"delete/pods":             "delete/pods",
		"compact":                 "compact",
		"count/events":            "listWithCount/events",
	} {
		if got := apiserverOpName(op); got != want {
			t.Errorf("%s: named %s, want %s", op, got, want)
		}
	}
}

// TestFidelityOutcome: fidelity's outcome is its two runs' own (read from their recorded directories, or
// their errors) with its own problems, by the one judge: a run that found etcd failing is exit 4 here too;
// the table's rows are informational and decide nothing. fidelity.md, fidelity.html and fidelity.json lead
// with that outcome.
func TestFidelityOutcome(t *testing.T) {
	run := func(wl string, k outcome.Kind) fidelityRun { return fidelityRun{workload: wl, dir: outcomeFixture(k)} }
	for _, tt := range []struct {
		name  string
		runs  [2]fidelityRun
		extra []outcome.Reason
		want  outcome.Kind
		says  string
	}{
		{name: "ok", runs: [2]fidelityRun{run("kube", outcome.OK), run("controlplane", outcome.OK)}, want: outcome.OK},
		{name: "violation in the real run", runs: [2]fidelityRun{run("kube", outcome.ThresholdFailed), run("controlplane", outcome.Violation)},
			want: outcome.Violation, says: "the controlplane run: linearizability"},
		{name: "member crashed in the emulation", runs: [2]fidelityRun{run("kube", outcome.MemberCrashed), run("controlplane", outcome.OK)},
			want: outcome.MemberCrashed, says: "the kube run: member m1 crashed"},
		{name: "known issue", runs: [2]fidelityRun{run("kube", outcome.KnownIssue), run("controlplane", outcome.OK)}, want: outcome.KnownIssue},
		{name: "a run without results", runs: [2]fidelityRun{run("kube", outcome.OK),
			{workload: "controlplane", dir: filepath.Join(t.TempDir(), "never"), err: errors.New("start the control plane: kube-apiserver exited")}},
			want: outcome.HarnessError, says: "the controlplane run: no results: start the control plane"},
		{name: "no samples", runs: [2]fidelityRun{run("kube", outcome.OK), run("controlplane", outcome.OK)},
			extra: []outcome.Reason{outcome.New(outcome.HarnessError, "no comparison")}, want: outcome.HarnessError},
		{name: "interrupted before the second run", runs: [2]fidelityRun{run("kube", outcome.Incomplete), {workload: "controlplane", skipped: true}},
			want: outcome.Incomplete},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := fidelityOutcome(tt.runs, tt.extra...)
			if o.Kind != tt.want || !strings.Contains(o.String(), tt.says) {
				t.Fatalf("%v, want %s saying %q", o, tt.want, tt.says)
			}
			// Rows that do not match decide nothing.
			rep := &FidelityReport{Preset: "small", Outcome: o.Kind, Reasons: o.Reasons, Runs: []string{tt.runs[0].dir, tt.runs[1].dir}}
			rep.add("etcd counters/s", "mvcc_put_total", 100, 300)
			dir := t.TempDir()
			if err := rep.write(dir); err != nil {
				t.Fatal(err)
			}
			md, _ := os.ReadFile(filepath.Join(dir, "fidelity.md"))
			page, _ := os.ReadFile(filepath.Join(dir, "fidelity.html"))
			js, _ := os.ReadFile(filepath.Join(dir, "fidelity.json"))
			var back FidelityReport
			if err := json.Unmarshal(js, &back); err != nil || back.Outcome != tt.want {
				t.Errorf("fidelity.json: %s %v", back.Outcome, err)
			}
			head := fmt.Sprintf("**%s** — outcome: %s (exit code %d)", o.Headline(), o.Kind, o.ExitCode())
			if first, _, _ := strings.Cut(string(md), "\n"); !strings.Contains(first, head) || !strings.Contains(string(md), "(informational)") {
				t.Errorf("fidelity.md: %q", first)
			}
			if !strings.Contains(string(page), fmt.Sprintf("<title>fidelity small: %s (%s)</title>", o.Headline(), o.Kind)) ||
				strings.Contains(string(page), "FAIL</td>") || strings.Contains(string(md), "| FAIL |") {
				t.Errorf("fidelity.html does not lead with the outcome, or a row says pass or fail")
			}
		})
	}
}

// sample parses one member's metrics text as a fidelity sample taken at second at.
func sample(t *testing.T, at int, text string) *etcdSample {
	t.Helper()
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return &etcdSample{at: time.Unix(int64(at), 0), families: []map[string]*dto.MetricFamily{fams}}
}

// TestFidelityCountsRequestsStarted: the gRPC rows count the requests begun during the load on both sides.
// The emulation ends its 186 watch streams with its load (handled), the real apiservers theirs after it;
// both opened them before: no Watch row, where the handled counts gave one on the emulated side alone.
func TestFidelityCountsRequestsStarted(t *testing.T) {
	side := func(watchHandled, rangesBefore, rangesAfter int) *fidelitySide {
		text := func(ranges, handled int) string {
			return fmt.Sprintf(`# TYPE grpc_server_started_total counter
grpc_server_started_total{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} %d
grpc_server_started_total{grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"} 186
# TYPE grpc_server_handled_total counter
grpc_server_handled_total{grpc_code="OK",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} %d
grpc_server_handled_total{grpc_code="OK",grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"} %d
`, ranges, ranges, handled)
		}
		return &fidelitySide{load: [2]*etcdSample{sample(t, 0, text(rangesBefore, 0)), sample(t, 100, text(rangesAfter, watchHandled))},
			mid: sample(t, 50, text(rangesBefore, 0))}
	}
	rep := &FidelityReport{}
	rep.addEtcdCounters(side(186, 1000, 2650), side(0, 500, 1870))
	rows := map[string]FidelityRow{}
	for _, r := range rep.Rows {
		if r.Group == "gRPC requests/s" {
			rows[r.Name] = r
		}
	}
	if _, ok := rows["Watch"]; ok {
		t.Errorf("a Watch row %+v: no stream was opened during either load", rows["Watch"])
	}
	// Ranges: 1650 and 1370 in 100 s.
	if r := rows["Range"]; r.Emulated != 16.5 || r.Real != 13.7 || r.Match {
		t.Errorf("Range row %+v, want 16.5 and 13.7 a second, 0.83: not within 15%%", r)
	}
	if len(rows) != 1 {
		t.Errorf("gRPC rows %v, want Range alone", rows)
	}
}

package trend

import (
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
)

// writeNight writes a suite directory for night i holding the given scenarios' runs: each put p99 is p99ms
// times a seeded noise factor, and a scenario's outcome is kinds[name] (ok when absent).
func writeNight(t *testing.T, root string, i int, names []string, p99ms float64, kinds map[string]outcome.Kind, rng *rand.Rand) string {
	t.Helper()
	dir := filepath.Join(root, fmt.Sprintf("suite-%d", i))
	start := time.Date(2026, 11, 1+i, 2, 0, 0, 0, time.UTC)
	s := &results.Suite{Schema: results.SuiteSchema, Chaosbench: "v0.9." + fmt.Sprint(i/3), Start: start}
	for _, name := range names {
		k := kinds[name]
		if k == "" {
			k = outcome.OK
		}
		run := filepath.Join(dir, name)
		if err := os.MkdirAll(run, 0o755); err != nil {
			t.Fatal(err)
		}
		noise := math.Exp(0.1 * rng.NormFloat64())
		sum := &results.Summary{Schema: results.SummarySchema, Name: name, Start: start, Outcome: k, Seed: int64(i),
			Versions: results.Versions{Chaosbench: s.Chaosbench, EtcdServer: "3.6.16"},
			Checks:   []results.Check{{Name: "linearizability", Verdict: results.VerdictOK}},
			Operations: map[string]*results.Operation{"put": {Count: 6000, Throughput: 100,
				Response: results.Latency{P50: noise, P99: p99ms * noise, P999: 2 * p99ms * noise}}}}
		if err := results.WriteSummary(run, sum); err != nil {
			t.Fatal(err)
		}
		s.Scenarios = append(s.Scenarios, results.SuiteScenario{Name: name, Dir: name, Outcome: k})
	}
	if err := results.WriteSuite(dir, s); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Suite directories given out of order are read in time order; a scenario missing from a night shows as
// missing there; a regression on the latest night is named, and a streak of failed outcomes says since when.
func TestReadSuites(t *testing.T) {
	root := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 1))
	var dirs []string
	for i := range 6 {
		names := []string{"smoke-kill", "smoke-partition"}
		if i == 2 {
			names = names[:1]
		}
		p99, kinds := 10.0, map[string]outcome.Kind{}
		if i == 5 {
			p99 = 60
		}
		if i >= 4 {
			kinds["smoke-partition"] = outcome.Violation
		}
		dirs = append(dirs, writeNight(t, root, i, names, p99, kinds, rng))
	}
	// Newest first, as an artifact listing might give them; and the oldest nights as a parent directory.
	hist := filepath.Join(root, "history")
	os.MkdirAll(hist, 0o755)
	for _, d := range dirs[:3] {
		if err := os.Rename(d, filepath.Join(hist, filepath.Base(d))); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := Read([]string{dirs[5], dirs[4], dirs[3], hist}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Nights) != 6 || len(tr.Scenarios) != 2 {
		t.Fatalf("%d nights, %d scenarios", len(tr.Nights), len(tr.Scenarios))
	}
	for i := 1; i < len(tr.Nights); i++ {
		if !tr.Nights[i-1].Start.Before(tr.Nights[i].Start) {
			t.Fatalf("nights out of order: %v", tr.Nights)
		}
	}
	kill, part := tr.Scenarios[0], tr.Scenarios[1]
	if kill.Name != "smoke-kill" || !part.Runs[2].Missing || part.Runs[3].Missing {
		t.Fatalf("runs: %+v", part.Runs)
	}
	if len(kill.Regressions) == 0 || kill.Regressions[0][:8] != "put:p99 " {
		t.Errorf("smoke-kill regressions %v: want put:p99", kill.Regressions)
	}
	if e, _ := kill.Latest.Find(tr.Nights[5].Label, "put:p99"); e.Verdict != compare.Worse || e.N != 5 {
		t.Errorf("smoke-kill put:p99: %s from %d nights", e, e.N)
	}
	if part.FailingSince != tr.Nights[4].Label || kill.FailingSince != "" {
		t.Errorf("failing since: %q and %q", part.FailingSince, kill.FailingSince)
	}
	// smoke-partition has four nights with figures before the latest (one missing): it is judged on them.
	if e, _ := part.Latest.Find(tr.Nights[5].Label, "put:p99"); e.N != 4 {
		t.Errorf("smoke-partition put:p99 from %d nights, want 4", e.N)
	}
	// Without a gate, the trend's outcome is the latest night's runs': smoke-partition's violation.
	if o := tr.Verdict(); o.Kind != outcome.Violation || !strings.HasPrefix(o.Reasons[0].Text, "smoke-partition: ") {
		t.Errorf("outcome without a gate: %v, want the latest night's violation", o)
	}
	if n := tr.Nights[5]; n.Outcomes[outcome.OK] != 1 || n.Outcomes[outcome.Violation] != 1 {
		t.Errorf("latest night's counts %v", n.Outcomes)
	}
	for _, tt := range []struct {
		figures []string
		kind    outcome.Kind
	}{
		// The violation outranks the regression the gate finds.
		{[]string{"put:p99"}, outcome.Violation},
		{[]string{"put:p50"}, outcome.Violation},
	} {
		tg, err := Read(dirs[3:], Options{Gate: &compare.Gate{Figures: tt.figures}})
		if err != nil {
			t.Fatal(err)
		}
		if tg.Outcome != tt.kind {
			t.Errorf("gate %v: %s %v, want %s", tt.figures, tg.Outcome, tg.Reasons, tt.kind)
		}
	}
	if _, err := Read(dirs[3:], Options{Gate: &compare.Gate{Figures: []string{"get:p99"}}}); !outcome.IsUsage(err) {
		t.Fatalf("gate on an absent figure: %v, want a usage error", err)
	}
}

// A directory with no night in it is bad input.
func TestReadNothing(t *testing.T) {
	if _, err := Read([]string{t.TempDir()}, Options{}); !outcome.IsUsage(err) {
		t.Fatalf("%v: want a usage error", err)
	}
}

// The trend's outcome is the latest night's runs' own and the gate's, by the one precedence: a violation in
// the latest night is exit 4 without a gate, one in an earlier night is history; a gated regression fails a
// threshold, a gated figure the trend cannot call yet (fewer than MinNights previous nights) is undecided;
// each night counts its outcomes by kind, known issues included.
func TestTrendOutcome(t *testing.T) {
	night := func(t *testing.T, root string, n int, p99 float64, kinds map[string]outcome.Kind) []string {
		rng := rand.New(rand.NewPCG(3, 4))
		var dirs []string
		for i := range n {
			k := map[string]outcome.Kind{}
			if i == n-1 {
				k = kinds
			}
			p := 10.0
			if i == n-1 {
				p = p99
			}
			dirs = append(dirs, writeNight(t, root, i, []string{"kill", "partition"}, p, k, rng))
		}
		return dirs
	}
	for _, tt := range []struct {
		name   string
		nights int
		p99    float64
		latest map[string]outcome.Kind
		early  bool // a violation in the first night
		gate   *compare.Gate
		want   outcome.Kind
		says   string
	}{
		{name: "ok", nights: 5, p99: 10, want: outcome.OK},
		{name: "violation in the latest night, no gate", nights: 5, p99: 10, latest: map[string]outcome.Kind{"partition": outcome.Violation},
			want: outcome.Violation, says: "partition: "},
		{name: "member crashed in the latest night", nights: 5, p99: 10, latest: map[string]outcome.Kind{"kill": outcome.MemberCrashed},
			want: outcome.MemberCrashed, says: "kill: "},
		{name: "violation in an earlier night", nights: 5, p99: 10, early: true, want: outcome.OK},
		{name: "known issue in the latest night", nights: 5, p99: 10, latest: map[string]outcome.Kind{"kill": outcome.KnownIssue},
			want: outcome.KnownIssue},
		{name: "regression, no gate", nights: 5, p99: 60, want: outcome.OK},
		{name: "regression, gated", nights: 5, p99: 60, gate: &compare.Gate{}, want: outcome.ThresholdFailed, says: "regression: kill put:p99 +"},
		{name: "regression, other figure gated", nights: 5, p99: 60, gate: &compare.Gate{Figures: []string{"put:throughput"}}, want: outcome.OK},
		{name: "too few nights, gated", nights: 3, p99: 10, gate: &compare.Gate{Figures: []string{"put:p99"}}, want: outcome.Undecided,
			says: "gated figures undecided: kill"},
		{name: "too few nights, not gated", nights: 3, p99: 10, want: outcome.OK},
		{name: "violation outranks the gate", nights: 5, p99: 60, gate: &compare.Gate{}, latest: map[string]outcome.Kind{"partition": outcome.Violation},
			want: outcome.Violation},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			dirs := night(t, root, tt.nights, tt.p99, tt.latest)
			if tt.early {
				s, err := results.ReadSummary(filepath.Join(dirs[0], "partition"))
				if err != nil {
					t.Fatal(err)
				}
				s.Outcome, s.Reasons = outcome.Violation, []outcome.Reason{outcome.New(outcome.Violation, "linearizability: lost write")}
				if err := results.WriteSummary(filepath.Join(dirs[0], "partition"), s); err != nil {
					t.Fatal(err)
				}
			}
			if tt.latest["kill"] == outcome.KnownIssue {
				dir := filepath.Join(dirs[len(dirs)-1], "kill")
				s, err := results.ReadSummary(dir)
				if err != nil {
					t.Fatal(err)
				}
				s.KnownIssues = []results.KnownIssueFinding{{Issue: "etcd-io/etcd#18424", Check: "linearizability", Finding: "request applied twice"}}
				if err := results.WriteSummary(dir, s); err != nil {
					t.Fatal(err)
				}
			}
			tr, err := Read([]string{root}, Options{Gate: tt.gate})
			if err != nil {
				t.Fatal(err)
			}
			o := tr.Verdict()
			if o.Kind != tt.want || !strings.Contains(o.String(), tt.says) {
				t.Fatalf("%v, want %s saying %q", o, tt.want, tt.says)
			}
			latest := tr.Nights[len(tr.Nights)-1]
			total := 0
			for _, n := range latest.Outcomes {
				total += n
			}
			if total != 2 {
				t.Errorf("latest night counts %v: want its 2 scenarios", latest.Outcomes)
			}
			for name, k := range tt.latest {
				if latest.Outcomes[k] != 1 {
					t.Errorf("%s: latest night counts %v, want one %s", name, latest.Outcomes, k)
				}
			}
			if tt.latest["kill"] == outcome.KnownIssue && latest.KnownIssues["etcd-io/etcd#18424"] != 1 {
				t.Errorf("known issues of the latest night: %v", latest.KnownIssues)
			}
			if tt.early && tr.Nights[0].Outcomes[outcome.Violation] != 1 {
				t.Errorf("first night's counts %v", tr.Nights[0].Outcomes)
			}
		})
	}
}

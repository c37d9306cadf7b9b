package trend

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
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
	err = tr.Gate([]string{"put:p99"})
	if outcome.Code(err) != outcome.ExitThresholds {
		t.Fatalf("gate: %v", err)
	}
	if err := tr.Gate([]string{"put:p50"}); err != nil {
		t.Fatalf("gate on put:p50: %v", err)
	}
	if err := tr.Gate([]string{"get:p99"}); !outcome.IsUsage(err) {
		t.Fatalf("gate on an absent figure: %v, want a usage error", err)
	}
}

// A directory with no night in it is bad input.
func TestReadNothing(t *testing.T) {
	if _, err := Read([]string{t.TempDir()}, Options{}); !outcome.IsUsage(err) {
		t.Fatalf("%v: want a usage error", err)
	}
}

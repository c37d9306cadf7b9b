package chaosbench

import (
	"context"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/faults"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// TestShrink: shrinking keeps only what the failure needs. With a failure that needs a kill fault and at
// least 10 s of load, a case with three faults, 40 s, 3 members, 32 clients and watch-latency shrinks to
// the kill alone, at most 20 s, one member, put, the fewest clients and keys; the predicate is asked only
// about smaller cases, and about a cut the failure needs only once. Instant.
func TestShrink(t *testing.T) {
	big := ExploreCase{Members: 3, Workload: "watch-latency", Rate: 400, Clients: 32, Duration: 40 * time.Second, KeySpace: 1000,
		DeleteRatio: 0.2, WatchReopen: 500 * time.Millisecond, WatchFrom: "past", WatchProgress: 50 * time.Millisecond,
		Faults: []string{"compact=1s@3s+5s", "kill:random@5s+2s", "partition:leader@8s+3s"}}
	asked := 0
	fails := func(c ExploreCase) bool {
		asked++
		if reflect.DeepEqual(c, big) {
			t.Errorf("asked about the original case: %+v", c)
		}
		return slices.ContainsFunc(c.Faults, func(f string) bool { return strings.HasPrefix(f, "kill") }) && c.Duration >= 10*time.Second
	}
	got := Shrink(context.Background(), big, fails)
	if !slices.Equal(got.Faults, []string{"kill:random@5s+2s"}) || got.Duration > 20*time.Second || got.Duration < 10*time.Second ||
		got.Workload != "put" || got.Clients > 2 || got.KeySpace > 10 || got.DeleteRatio != 0 || got.WatchReopen != 0 || got.WatchProgress != 0 ||
		got.Members != 1 {
		t.Fatalf("shrunk to %+v", got)
	}
	// Nothing smaller fails: the case stays as it is.
	if same := Shrink(context.Background(), big, func(ExploreCase) bool { return false }); !slices.Equal(same.Faults, big.Faults) || same.Duration != big.Duration {
		t.Fatalf("nothing smaller failed, but it shrank to %+v", same)
	}
	t.Logf("%d candidates run", asked)

	// A cut the failure needs is tried once, not again after every step that follows: a failure that
	// needs progress requests is asked about a case without them twice (the simpler workload drops them
	// too, and so does their own cut), however many steps shrinking takes.
	withoutProgress := 0
	got = Shrink(context.Background(), big, func(c ExploreCase) bool {
		if c.WatchProgress == 0 {
			withoutProgress++
			return false
		}
		return true
	})
	if withoutProgress != 2 || got.WatchProgress == 0 || got.Workload != "watch-latency" || len(got.Faults) != 0 || got.Members != 1 {
		t.Fatalf("asked %d times about a case without progress requests (want 2); shrunk to %+v", withoutProgress, got)
	}
}

// TestRandomCaseSeeded: the search's draws follow its seed (the same seed, the same scenarios), every draw
// has one to three faults' worth of entries within its load, and a single member never gets a partition.
func TestRandomCaseSeeded(t *testing.T) {
	draw := func(seed uint64) []ExploreCase {
		r := rand.New(rand.NewPCG(seed, 1))
		var out []ExploreCase
		for range 400 {
			out = append(out, randomCase(r, true, time.Minute, ""))
		}
		return out
	}
	a, b := draw(7), draw(7)
	both, snapshots := 0, 0 // draws with both a kill and a failpoint; with a partition until a snapshot
	for i := range a {
		if !slices.Equal(a[i].Faults, b[i].Faults) || a[i].Workload != b[i].Workload || a[i].Duration != b[i].Duration {
			t.Fatalf("draw %d differs with the same seed: %+v vs %+v", i, a[i], b[i])
		}
		c := a[i]
		if len(c.Faults) == 0 || c.Duration < 20*time.Second || c.Duration > time.Minute {
			t.Errorf("draw %d: %+v", i, c)
		}
		if c.Members == 1 && slices.ContainsFunc(c.Faults, func(f string) bool { return strings.HasPrefix(f, "partition") }) {
			t.Errorf("draw %d partitions a single member: %+v", i, c)
		}
		if _, err := planFaults(ptr(c.Scenario("v3.6.16", true, 1, ""))); err != nil && !outcome.IsUsage(err) {
			t.Errorf("draw %d: %v", i, err)
		}
		s, err := faults.Parse(c.Faults)
		if err != nil {
			t.Fatalf("draw %d: %v", i, err)
		}
		for ki, k := range s.Entries {
			for fi, f := range s.Entries {
				meet := k.At < f.At+f.For+5*time.Second && f.At < k.At+k.For+5*time.Second
				if meet && ki != fi && (k.Kind == faults.KindKill || k.Kind == faults.KindFailpoint) && f.Kind == faults.KindFailpoint {
					t.Errorf("draw %d: %s may restart a member inside %s's window, which clears the failpoint", i, k.Spec, f.Spec)
				}
				// A leader does not compact its log for 30 s after it sent a snapshot, which a fault before
				// may have made it send.
				near := k.At < f.At+f.For+5*time.Second && f.At < k.At+k.For+35*time.Second
				if near && ki != fi && strings.Contains(f.Spec, "until-snapshot") && slices.Contains([]string{faults.KindKill, faults.KindPause, faults.KindPartition, faults.KindFailpoint}, k.Kind) {
					t.Errorf("draw %d: %s takes a member down inside %s's window or less than 35 s before it", i, k.Spec, f.Spec)
				}
			}
		}
		if slices.ContainsFunc(c.Faults, func(f string) bool { return strings.Contains(f, "until-snapshot") }) {
			snapshots++
		}
		has := func(kind string) bool {
			return slices.ContainsFunc(s.Entries, func(e faults.Entry) bool { return e.Kind == kind })
		}
		if has(faults.KindKill) && has(faults.KindFailpoint) {
			both++
		}
	}
	if both == 0 || snapshots == 0 {
		t.Errorf("of 400 draws, %d have both a kill and a failpoint and %d a partition until a snapshot: the rules keeping faults apart went untested", both, snapshots)
	}
}

// TestExploreWorkload: --workload keeps every draw to one workload, and a watch-latency case whose
// watchers ask for progress notifications runs one watcher a stream (as --watch-progress requires) and
// renders to a scenario file that loads as the same scenario.
func TestExploreWorkload(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 1))
	progress := 0
	for i := range 40 {
		c := randomCase(r, false, 40*time.Second, "watch-latency")
		if c.Workload != "watch-latency" {
			t.Fatalf("draw %d: workload %s, want watch-latency only", i, c.Workload)
		}
		if c.WatchProgress == 0 {
			continue
		}
		progress++
		s := c.Scenario("", false, 1, "")
		if s.Micro.WatchersPerStream != 1 || s.Micro.WatchProgress != c.WatchProgress {
			t.Fatalf("draw %d: %d watchers a stream, progress %v: want 1 and %v", i, s.Micro.WatchersPerStream, s.Micro.WatchProgress, c.WatchProgress)
		}
		res := &ExploreResult{Seed: 11, Finding: outcome.Decide(outcome.New(outcome.Violation, "watch progress before its start"))}
		loaded, err := loadScenario(t, string(scenarioFile(c, ExploreOptions{}, res)))
		if err != nil {
			t.Fatal(err)
		}
		if err := loaded.validate(); err != nil {
			t.Fatalf("draw %d's scenario file: %v", i, err)
		}
		if loaded.Micro.WatchProgress != c.WatchProgress || loaded.Micro.WatchersPerStream != 1 || loaded.Micro.WatchReopen != c.WatchReopen {
			t.Fatalf("draw %d: the file gives progress %v, %d watchers a stream, re-open %v", i, loaded.Micro.WatchProgress, loaded.Micro.WatchersPerStream, loaded.Micro.WatchReopen)
		}
	}
	if progress == 0 {
		t.Fatal("no draw of 40 asked for progress notifications")
	}
	if _, err := Explore(context.Background(), ExploreOptions{Count: 1, MaxLoad: time.Minute, Tries: 1, Workload: "watch", Out: t.TempDir()}, Env{}); !outcome.IsUsage(err) {
		t.Fatalf("--workload watch: %v, want a usage error", err)
	}
}

// TestExploreOutcome: the search's verdict from what it met: a finding is etcd failing, whatever else
// happened; known issues alone pass, named; broken runs are harness errors; nothing found passes.
func TestExploreOutcome(t *testing.T) {
	ctx := context.Background()
	found := outcome.Decide(outcome.New(outcome.Violation, "members disagree"))
	for _, tc := range []struct {
		name string
		r    ExploreResult
		want outcome.Kind
	}{
		{"clean", ExploreResult{Runs: 5}, outcome.OK},
		{"known issue", ExploreResult{Known: []string{"etcd-io/etcd#18424"}}, outcome.KnownIssue},
		{"broken runs", ExploreResult{Problems: []string{"run 2: the cluster did not start"}}, outcome.HarnessError},
		{"found", ExploreResult{Found: &ExploreCase{}, Finding: found, Problems: []string{"run 1: ..."}}, outcome.Violation},
	} {
		if got := tc.r.Outcome(ctx); got.Kind != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestReproduces: a shrinking candidate is kept when at least half of its tries fail, and its runs stop as
// soon as that is decided either way.
func TestReproduces(t *testing.T) {
	for _, tc := range []struct {
		fails  []bool // what each try returns, in order
		tries  int
		ok     bool
		failed int
		ran    int
	}{
		{[]bool{true, true, false}, 3, true, 2, 2},
		{[]bool{false, false, true}, 3, false, 0, 2},
		{[]bool{true, false, true}, 3, true, 2, 3},
		{[]bool{false, true, false}, 3, false, 1, 3},
		{[]bool{true}, 1, true, 1, 1},
		{[]bool{false}, 1, false, 0, 1},
		{[]bool{false, true, false, false}, 4, false, 1, 4},
		{[]bool{false, true, true, false}, 4, true, 2, 3},
	} {
		ran := 0
		failed, ok := reproduces(tc.tries, func() bool { ran++; return tc.fails[ran-1] })
		if ok != tc.ok || failed != tc.failed || ran != tc.ran {
			t.Errorf("%v of %d: ok %v, %d failed, %d ran; want %v, %d, %d", tc.fails, tc.tries, ok, failed, ran, tc.ok, tc.failed, tc.ran)
		}
	}
}

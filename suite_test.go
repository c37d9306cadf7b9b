package chaosbench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// writeRegistry writes n scenario files named s00..s<n-1> into a directory, every third tagged smoke.
func writeRegistry(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		tags := "[nightly]"
		if i%3 == 0 {
			tags = "[nightly, smoke]"
		}
		body := fmt.Sprintf("workload: put\nduration: 2s\nfaults: none\nsuite:\n  tags: %s\n", tags)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("s%02d.yaml", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func names(es []SuiteEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name)
	}
	return out
}

// TestSuiteShards: for every shard count, the shards together select every scenario exactly once, and
// the split depends on the names only (files given in another order shard the same way).
func TestSuiteShards(t *testing.T) {
	dir := writeRegistry(t, 7)
	entries, err := LoadSuite([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reversed := slices.Clone(entries)
	slices.Reverse(reversed)
	all := names(entries)
	for _, tags := range [][]string{nil, {"smoke"}} {
		want := all
		if tags != nil {
			want = []string{"s00", "s03", "s06"}
		}
		for n := 1; n <= 4; n++ {
			seen := map[string]int{}
			for i := 1; i <= n; i++ {
				opts := SuiteOptions{Tags: tags, Shard: fmt.Sprintf("%d/%d", i, n)}
				sel, err := SelectSuite(entries, opts)
				if err != nil {
					t.Fatal(err)
				}
				again, _ := SelectSuite(reversed, opts)
				if !slices.Equal(names(sel), names(again)) {
					t.Fatalf("shard %s depends on the files' order: %v and %v", opts.Shard, names(sel), names(again))
				}
				for _, e := range sel {
					seen[e.Name]++
				}
			}
			for _, name := range want {
				if seen[name] != 1 {
					t.Errorf("tags %v, %d shards: %s selected %d times", tags, n, name, seen[name])
				}
			}
			if len(seen) != len(want) {
				t.Errorf("tags %v, %d shards: selected %v, want %v", tags, n, seen, want)
			}
		}
	}
}

func TestSuiteSelection(t *testing.T) {
	dir := writeRegistry(t, 4)
	entries, err := LoadSuite([]string{dir}, []string{"rate=50"})
	if err != nil {
		t.Fatal(err)
	}
	if entries[0].Scenario.Rate != 50 || entries[0].Scenario.Name != "s00" || entries[0].SeedPolicy != SeedFresh {
		t.Fatalf("entry: %+v", entries[0])
	}
	for _, tc := range []struct {
		name string
		opts SuiteOptions
		want []string
		err  string
	}{
		{name: "all", want: []string{"s00", "s01", "s02", "s03"}},
		{name: "tag", opts: SuiteOptions{Tags: []string{"smoke"}}, want: []string{"s00", "s03"}},
		{name: "any tag", opts: SuiteOptions{Tags: []string{"smoke", "nightly"}}, want: []string{"s00", "s01", "s02", "s03"}},
		{name: "only", opts: SuiteOptions{Only: []string{"s02"}}, want: []string{"s02"}},
		{name: "only and tag", opts: SuiteOptions{Only: []string{"s02"}, Tags: []string{"smoke"}}, err: "no scenario has the tags smoke"},
		{name: "unknown tag", opts: SuiteOptions{Tags: []string{"smok"}}, err: "no scenario has the tags smok"},
		{name: "unknown name", opts: SuiteOptions{Only: []string{"s2"}}, err: `--only "s2": no such scenario`},
		{name: "bad shard", opts: SuiteOptions{Shard: "3/2"}, err: `--shard "3/2"`},
		{name: "zero shard", opts: SuiteOptions{Shard: "0/2"}, err: `--shard "0/2"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := SelectSuite(entries, tc.opts)
			if tc.err != "" {
				if err == nil || !outcome.IsUsage(err) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want a usage error containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(names(sel), tc.want) {
				t.Fatalf("selected %v (%v), want %v", names(sel), err, tc.want)
			}
		})
	}
}

// TestSuiteFileErrors: a bad suite block or registry is one usage error naming the file; a suite block
// does not stop `chaosbench run --config` from reading the same file.
func TestSuiteFileErrors(t *testing.T) {
	for _, tc := range []struct{ name, body, err string }{
		{"unknown key", "workload: put\nsuite:\n  tag: [smoke]\n", `unknown key "tag" (did you mean "tags"?)`},
		{"seed policy", "workload: put\nsuite:\n  seed-policy: random\n", `seed-policy "random": fixed or fresh`},
		{"fixed without seed", "workload: put\nsuite:\n  seed-policy: fixed\n", "seed-policy fixed needs a seed"},
		{"tag", "workload: put\nsuite:\n  tags: [Smoke]\n", `tag "Smoke"`},
		{"not a mapping", "workload: put\nsuite: smoke\n", "suite: expected a mapping"},
		{"setting", "workload: put\nduraton: 1s\nsuite:\n  tags: [smoke]\n", `unknown setting "duraton"`},
		{"affected alone", "workload: put\nsuite:\n  affected: v3.5.4\n", "names its affected release, what catches it there (expect) and its fixed release, all three"},
		{"expect ok", "workload: put\nsuite:\n  affected: v3.5.4\n  fixed: v3.5.5\n  expect: [ok]\n", `expect: "ok": a regression is caught as violation or member-crashed`},
		{"issue list", "workload: put\nsuite:\n  issue: [1]\n", "issue: expected one value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.yaml")
			os.WriteFile(path, []byte(tc.body), 0o644)
			_, err := LoadSuite([]string{path}, nil)
			if err == nil || !outcome.IsUsage(err) || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v, want a usage error naming %s and containing %q", err, path, tc.err)
			}
		})
	}
	dir := t.TempDir()
	for _, f := range []string{"a.yaml", "b.yaml"} {
		os.WriteFile(filepath.Join(dir, f), []byte("name: same\nworkload: put\n"), 0o644)
	}
	if _, err := LoadSuite([]string{dir}, nil); err == nil || !strings.Contains(err.Error(), `scenario name "same"`) {
		t.Fatalf("duplicate names: %v", err)
	}
	if _, err := LoadSuite([]string{dir}, []string{"bogus=1"}); err == nil || !strings.Contains(err.Error(), `--set "bogus=1"`) {
		t.Fatalf("bad --set: %v", err)
	}
	s, err := loadScenario(t, "workload: range\nsuite:\n  tags: [smoke]\n  seed-policy: fresh\n")
	if err != nil || s.Workload != "range" {
		t.Fatalf("run --config with a suite block: %v, workload %q", err, s.Workload)
	}
}

// TestSuiteRegressionRelease: --affected and --fixed select the regression scenarios (those naming an
// affected release) and move each to its bug's release, over its file's etcd-version; a suite that also
// sets etcd-version, or selects none, is refused.
func TestSuiteRegressionRelease(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "bug.yaml"), []byte("workload: put\netcd-version: v3.6.16\nsuite:\n  issue: etcd-io/etcd#14370\n  affected: v3.5.4\n  expect: [violation]\n  fixed: v3.5.5\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "plain.yaml"), []byte("workload: put\n"), 0o644)
	entries, err := LoadSuite([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ release, version string }{{"", "v3.6.16"}, {ReleaseAffected, "v3.5.4"}, {ReleaseFixed, "v3.5.5"}} {
		sel, err := SelectSuite(entries, SuiteOptions{Release: tc.release, Only: []string{"bug"}})
		if err != nil || len(sel) != 1 || sel[0].Scenario.EtcdVersion != tc.version || sel[0].Issue != "etcd-io/etcd#14370" || !slices.Equal(sel[0].Expect, []outcome.Kind{outcome.Violation}) {
			t.Fatalf("release %q: %v, %+v; want bug on %s", tc.release, err, sel, tc.version)
		}
	}
	if sel, err := SelectSuite(entries, SuiteOptions{Release: ReleaseAffected}); err != nil || len(sel) != 1 {
		t.Fatalf("--affected selects %d scenarios (%v), want the one regression scenario", len(sel), err)
	}
	if _, err := SelectSuite(entries, SuiteOptions{Release: ReleaseAffected, Set: []string{"etcd-version=v3.5.9"}}); !outcome.IsUsage(err) {
		t.Fatalf("--affected with --set etcd-version: %v, want a usage error", err)
	}
	if _, err := SelectSuite(entries, SuiteOptions{Release: ReleaseFixed, Only: []string{"plain"}}); !outcome.IsUsage(err) {
		t.Fatalf("--fixed selecting no regression scenario: %v, want a usage error", err)
	}
}

// TestSuiteRetryDecision: only a harness error is retried, only when allowed, only once; a violation is
// never retried, even when the run also had harness errors.
func TestSuiteRetryDecision(t *testing.T) {
	harness := outcome.New(outcome.HarnessError, "member m2 exited unexpectedly")
	for _, tc := range []struct {
		name     string
		o        outcome.Outcome
		allowed  bool
		attempts int
		want     bool
	}{
		{"harness error", outcome.Decide(harness), true, 1, true},
		{"harness error, not allowed", outcome.Decide(harness), false, 1, false},
		{"harness error, second attempt", outcome.Decide(harness), true, 2, false},
		{"violation", outcome.Decide(outcome.New(outcome.Violation, "linearizability: ...")), true, 1, false},
		{"violation after a harness error", outcome.Decide(harness, outcome.New(outcome.Violation, "members disagree")), true, 1, false},
		{"threshold", outcome.Decide(outcome.New(outcome.ThresholdFailed, "put:p99<1ms")), true, 1, false},
		{"undecided", outcome.Decide(outcome.New(outcome.Undecided, "linearizability could not decide")), true, 1, false},
		{"incomplete", outcome.Decide(outcome.New(outcome.Incomplete, "interrupted")), true, 1, false},
		{"ok", outcome.Decide(), true, 1, false},
	} {
		if got := ShouldRetry(tc.o, tc.allowed, tc.attempts); got != tc.want {
			t.Errorf("%s: retry %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSuiteVerdict: the suite's outcome is the most severe of its scenarios'.
func TestSuiteVerdict(t *testing.T) {
	sc := func(name string, k outcome.Kind) results.SuiteScenario {
		s := results.SuiteScenario{Name: name, Outcome: k}
		if k != outcome.OK {
			s.Reasons = []outcome.Reason{outcome.New(k, "why %s", name)}
		}
		return s
	}
	for _, tc := range []struct {
		name      string
		scenarios []results.SuiteScenario
		want      outcome.Kind
		code      int
	}{
		{"all ok", []results.SuiteScenario{sc("a", outcome.OK), sc("b", outcome.OK)}, outcome.OK, 0},
		{"threshold", []results.SuiteScenario{sc("a", outcome.OK), sc("b", outcome.ThresholdFailed)}, outcome.ThresholdFailed, 3},
		{"harness over threshold", []results.SuiteScenario{sc("a", outcome.HarnessError), sc("b", outcome.ThresholdFailed)}, outcome.HarnessError, 1},
		{"violation anywhere", []results.SuiteScenario{sc("a", outcome.HarnessError), sc("b", outcome.Violation), sc("c", outcome.Incomplete)}, outcome.Violation, 4},
		{"undecided is no pass", []results.SuiteScenario{sc("a", outcome.OK), sc("b", outcome.Undecided)}, outcome.Undecided, 1},
	} {
		o := results.DecideSuite(tc.scenarios)
		if o.Kind != tc.want || o.ExitCode() != tc.code {
			t.Errorf("%s: %s (exit %d), want %s (exit %d)", tc.name, o.Kind, o.ExitCode(), tc.want, tc.code)
		}
		if tc.want != outcome.OK && !strings.Contains(o.Reasons[0].Text, "why") {
			t.Errorf("%s: reasons do not carry the scenario's: %v", tc.name, o.Reasons)
		}
	}
}

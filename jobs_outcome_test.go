package chaosbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/report"
	"github.com/etcd-chaosbench/chaosbench/results/trend"
)

// agrees checks that everything a user or a CI system reads of a job's outcome says the same: the exit
// code of err, the printed verdict line, and the outcome of the job's files (their JSON outcome, the first
// line of their Markdown, the title of their page; "" where the job has no such file).
func agrees(t *testing.T, want outcome.Kind, err error, printed string, jsonKind outcome.Kind, md, page string) {
	t.Helper()
	o := outcome.Outcome{Kind: want}
	if code := ExitCode(err); code != o.ExitCode() {
		t.Errorf("exit code %d (%v), want %d (%s)", code, err, o.ExitCode(), want)
	}
	line := fmt.Sprintf("verdict: %s (%s, exit code %d)", o.Headline(), want, o.ExitCode())
	if !strings.Contains(printed, line) {
		t.Errorf("the printed verdict is not %q:\n%s", line, printed)
	}
	if jsonKind != "" && jsonKind != want {
		t.Errorf("the JSON outcome is %s, want %s", jsonKind, want)
	}
	if first, _, _ := strings.Cut(md, "\n"); md != "" && !strings.Contains(first, fmt.Sprintf("**%s** — outcome: %s (exit code %d)", o.Headline(), want, o.ExitCode())) {
		t.Errorf("the Markdown does not lead with the outcome: %q", first)
	}
	if page != "" && !strings.Contains(page, fmt.Sprintf("<title>chaosbench comparison: %s (%s)", o.Headline(), want)) {
		t.Errorf("the page's title is not the outcome's:\n%.300s", page)
	}
}

// TestCompareOutcome drives `chaosbench compare`'s decision (CompareDirs, what Compare does once its runs
// are over) with recorded runs of every outcome: the comparison's outcome is every run's own with the
// gate's, whatever the order of the runs, and the exit code, compare.json, compare.md, compare.html and the
// verdict line agree on it.
func TestCompareOutcome(t *testing.T) {
	fx := func(kinds ...outcome.Kind) []string {
		var dirs []string
		for _, k := range kinds {
			dirs = append(dirs, outcomeFixture(k))
		}
		return dirs
	}
	type tc struct {
		name string
		a, b []string
		errs []error // of b's runs
		gate string
		want outcome.Kind
		says string
	}
	tests := []tc{
		{name: "threshold then violation", a: fx(outcome.ThresholdFailed), b: fx(outcome.Violation), want: outcome.Violation, says: "B: linearizability"},
		{name: "undecided then violation", a: fx(outcome.Undecided), b: fx(outcome.Violation), want: outcome.Violation},
		{name: "violation then threshold", a: fx(outcome.Violation), b: fx(outcome.ThresholdFailed), want: outcome.Violation, says: "A: linearizability"},
		{name: "member crashed then threshold", a: fx(outcome.MemberCrashed), b: fx(outcome.ThresholdFailed), want: outcome.MemberCrashed},
		{name: "violation in the second round", a: fx(outcome.OK, outcome.OK), b: fx(outcome.OK, outcome.Violation), want: outcome.Violation, says: "B, round 2: "},
		// put:p99.9 has no per-second samples: one run per variant cannot decide it.
		{name: "gated figure undecided", a: fx(outcome.OK), b: fx(outcome.OK), gate: "put:p99.9", want: outcome.Undecided, says: "gated figures undecided: B against A: put:p99.9"},
		{name: "gated figure decided", a: fx(outcome.OK), b: fx(outcome.OK), gate: "put:throughput", want: outcome.OK},
		{name: "undecided figure not gated", a: fx(outcome.OK), b: fx(outcome.OK), want: outcome.OK},
		{name: "gate outranked by a violation", a: fx(outcome.OK), b: fx(outcome.Violation), gate: "put:p99.9", want: outcome.Violation},
		{name: "a run without results", a: fx(outcome.OK), b: []string{filepath.Join(t.TempDir(), "never")},
			errs: []error{errors.New("start cluster: member m1 exited")}, want: outcome.HarnessError, says: "B: no results: start cluster: member m1 exited"},
	}
	for _, k := range outcome.Kinds() {
		tests = append(tests, tc{name: "ok then " + string(k), a: fx(outcome.OK), b: fx(k), want: k})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := CompareOptions{}
			if tt.gate != "" {
				var err error
				if opts.FailOnRegression, opts.RegressionFigures, err = ParseGate(tt.gate); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			_, err := CompareDirs(dir, []VariantDirs{{Label: "A", Dirs: tt.a}, {Label: "B", Dirs: tt.b, Errs: tt.errs}}, opts, &out)
			var written Comparison
			b, rerr := os.ReadFile(filepath.Join(dir, ComparisonJSON))
			if rerr != nil || json.Unmarshal(b, &written) != nil {
				t.Fatalf("compare.json: %v", rerr)
			}
			md, _ := os.ReadFile(filepath.Join(dir, ComparisonMarkdown))
			page, _ := os.ReadFile(filepath.Join(dir, ComparisonHTML))
			agrees(t, tt.want, err, out.String(), written.Outcome, string(md), string(page))
			if !strings.Contains(written.Verdict().String(), tt.says) {
				t.Errorf("compare.json's outcome %v does not say %q", written.Verdict(), tt.says)
			}
		})
	}
}

// TestCompareGateUsage: a gate naming a figure the runs lack is bad input (exit 2), unless a run found
// etcd failing: exit 4 then, the bad gate printed.
func TestCompareGateUsage(t *testing.T) {
	for _, tt := range []struct {
		b    outcome.Kind
		code int
	}{
		{outcome.OK, outcome.ExitUsage},
		{outcome.ThresholdFailed, outcome.ExitUsage},
		{outcome.Violation, outcome.ExitViolation},
	} {
		var out bytes.Buffer
		_, err := CompareDirs(t.TempDir(), []VariantDirs{{Label: "A", Dirs: []string{outcomeFixture(outcome.OK)}}, {Label: "B", Dirs: []string{outcomeFixture(tt.b)}}},
			CompareOptions{FailOnRegression: true, RegressionFigures: []string{"nosuch:p99"}}, &out)
		if ExitCode(err) != tt.code || !strings.Contains(err.Error()+out.String(), `no figure "nosuch:p99"`) {
			t.Errorf("%s: exit %d: %v\n%s", tt.b, ExitCode(err), err, out.String())
		}
	}
}

// TestReportCompareOutcome drives `chaosbench report A B` with recorded runs of every outcome: the runs'
// own outcomes decide it with or without a gate (a violation is exit 4 without one), and the exit code,
// comparison.md, comparison.html and the verdict line agree.
func TestReportCompareOutcome(t *testing.T) {
	type tc struct {
		name string
		dirs []string
		gate bool
		figs []string
		want outcome.Kind
	}
	tests := []tc{
		{name: "violating run, no gate", dirs: []string{outcomeFixture(outcome.OK), outcomeFixture(outcome.Violation)}, want: outcome.Violation},
		{name: "violation in a round", dirs: []string{outcomeFixture(outcome.OK) + "," + outcomeFixture(outcome.OK),
			outcomeFixture(outcome.OK) + "," + outcomeFixture(outcome.Violation)}, want: outcome.Violation},
		{name: "threshold then violation", dirs: []string{outcomeFixture(outcome.ThresholdFailed), outcomeFixture(outcome.Violation)}, want: outcome.Violation},
		{name: "gated undecided figure", dirs: []string{outcomeFixture(outcome.OK), outcomeFixture(outcome.OK)}, gate: true, figs: []string{"put:p99.9"}, want: outcome.Undecided},
	}
	for _, k := range outcome.Kinds() {
		tests = append(tests, tc{name: "ok then " + string(k), dirs: []string{outcomeFixture(outcome.OK), outcomeFixture(k)}, want: k})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cmp")
			var out bytes.Buffer
			err := Report(ReportOptions{Dirs: tt.dirs, Labels: []string{"A", "B"}, Out: dir, FailOnRegression: tt.gate, RegressionFigures: tt.figs}, &out)
			md, _ := os.ReadFile(filepath.Join(dir, report.ComparisonMarkdownFile))
			page, _ := os.ReadFile(filepath.Join(dir, report.ComparisonHTMLFile))
			if len(md) == 0 || len(page) == 0 {
				t.Fatalf("no comparison written: %v", err)
			}
			agrees(t, tt.want, err, out.String(), "", string(md), string(page))
		})
	}
}

// night copies the recorded run of kind k into dir as the night starting at start.
func night(t *testing.T, dir string, k outcome.Kind, start time.Time) string {
	t.Helper()
	s, err := results.ReadSummary(outcomeFixture(k))
	if err != nil {
		t.Fatal(err)
	}
	s.Start = start
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := results.WriteSummary(dir, s); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestTrendJobOutcome drives `chaosbench trend` with nights made of recorded runs: the latest night's
// outcome decides it with or without a gate (a violation is exit 4, a known issue passes), an earlier
// night's is history, and the exit code, trend.json, trend.md and the verdict line agree.
func TestTrendJobOutcome(t *testing.T) {
	type tc struct {
		name          string
		earlier, last outcome.Kind
		gate          bool
		figs          []string
		few           bool // three nights: too few to call a figure (three previous nights are needed)
		want          outcome.Kind
	}
	tests := []tc{
		{name: "violation in an earlier night", earlier: outcome.Violation, last: outcome.OK, want: outcome.OK},
		{name: "gate with enough nights", earlier: outcome.OK, last: outcome.OK, gate: true, figs: []string{"put:p99"}, want: outcome.OK},
		{name: "gate with too few nights", earlier: outcome.OK, last: outcome.OK, gate: true, figs: []string{"put:p99"}, few: true, want: outcome.Undecided},
		{name: "too few nights, no gate", earlier: outcome.OK, last: outcome.OK, few: true, want: outcome.OK},
		{name: "violation outranks the gate", earlier: outcome.OK, last: outcome.Violation, gate: true, figs: []string{"put:p99"}, want: outcome.Violation},
	}
	for _, k := range outcome.Kinds() {
		tests = append(tests, tc{name: "latest " + string(k), earlier: outcome.OK, last: k, want: k})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			var dirs []string
			earlier := 3
			if tt.few {
				earlier = 2
			}
			for i := range earlier {
				k := outcome.OK
				if i == 0 {
					k = tt.earlier
				}
				dirs = append(dirs, night(t, filepath.Join(root, fmt.Sprintf("night-%d", i)), k, time.Date(2026, 11, 1+i, 2, 0, 0, 0, time.UTC)))
			}
			dirs = append(dirs, night(t, filepath.Join(root, "latest"), tt.last, time.Date(2026, 11, 4, 2, 0, 0, 0, time.UTC)))
			out := filepath.Join(root, "trend")
			var printed bytes.Buffer
			err := Trend(TrendOptions{Dirs: dirs, Out: out, FailOnRegression: tt.gate, RegressionFigures: tt.figs}, &printed)
			var written trend.Trend
			b, rerr := os.ReadFile(filepath.Join(out, trend.File))
			if rerr != nil || json.Unmarshal(b, &written) != nil {
				t.Fatalf("trend.json: %v", rerr)
			}
			md, _ := os.ReadFile(filepath.Join(out, report.TrendMarkdownFile))
			agrees(t, tt.want, err, printed.String(), written.Outcome, "", "")
			o := outcome.Outcome{Kind: tt.want}
			if first, _, _ := strings.Cut(string(md), "\n"); !strings.HasPrefix(first, fmt.Sprintf("# chaosbench trend: **%s** — outcome %s (exit code %d)", o.Headline(), tt.want, o.ExitCode())) {
				t.Errorf("trend.md does not lead with the outcome: %q", first)
			}
			if n := written.Nights[len(written.Nights)-1]; n.Outcomes[tt.last] != 1 {
				t.Errorf("the latest night's counts %v, want one %s", n.Outcomes, tt.last)
			}
			if n := written.Nights[len(written.Nights)-1]; tt.last == outcome.KnownIssue && n.KnownIssues["etcd-io/etcd#18424"] != 1 {
				t.Errorf("known issues of the latest night: %v", n.KnownIssues)
			}
		})
	}
}

// TestCheckOutcome drives `chaosbench check DIR` with recorded histories: it re-decides the run with what
// it found, rewrites summary.json (and the report files) with that outcome and exits with it; a directory
// without a summary is decided from the checks alone; an interrupted check changes nothing.
func TestCheckOutcome(t *testing.T) {
	for _, tt := range []struct {
		fixture    string
		noSummary  bool
		interrupt  bool
		want       outcome.Kind
		says       string
		wantStored outcome.Kind // summary.json's outcome afterwards
	}{
		{fixture: "check-violation", want: outcome.Violation, says: "linearizability", wantStored: outcome.Violation},
		{fixture: "check-ok", want: outcome.OK, wantStored: outcome.OK},
		{fixture: "check-violation", noSummary: true, want: outcome.Violation},
		{fixture: "check-violation", interrupt: true, want: outcome.Incomplete, wantStored: outcome.OK},
	} {
		t.Run(fmt.Sprintf("%s/no-summary=%v/interrupt=%v", tt.fixture, tt.noSummary, tt.interrupt), func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(filepath.Join(outcomesDir, tt.fixture))); err != nil {
				t.Fatal(err)
			}
			if tt.noSummary {
				os.Remove(filepath.Join(dir, results.SummaryFile))
			} else {
				// The run's report files, as the run wrote them: they are re-rendered with the outcome.
				r, err := report.Load(dir)
				if err != nil {
					t.Fatal(err)
				}
				if err := report.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			if tt.interrupt {
				cancel()
			}
			defer cancel()
			var out bytes.Buffer
			_, err := Check(ctx, CheckOptions{Dir: dir, Out: &out})
			if tt.interrupt {
				if ExitCode(err) != outcome.ExitInterrupted {
					t.Errorf("interrupted: exit %d: %v", ExitCode(err), err)
				}
			} else {
				agrees(t, tt.want, err, out.String(), "", "", "")
			}
			if !strings.Contains(fmt.Sprint(err), tt.says) {
				t.Errorf("%v does not say %q", err, tt.says)
			}
			s, rerr := results.ReadSummary(dir)
			if tt.noSummary {
				if rerr == nil {
					t.Errorf("check wrote a summary into a directory that had none")
				}
				return
			}
			if rerr != nil || s.Outcome != tt.wantStored || results.Decide(s).Kind != tt.wantStored {
				t.Fatalf("summary.json afterwards: %v %v, want %s", s.Verdict(), rerr, tt.wantStored)
			}
			if tt.interrupt {
				return
			}
			md, _ := os.ReadFile(filepath.Join(dir, report.MarkdownFile))
			if o := s.Verdict(); !strings.Contains(string(md), o.Headline()) || !strings.Contains(string(md), string(o.Kind)) {
				t.Errorf("report.md was not re-rendered with %s:\n%.400s", o, md)
			}
		})
	}
}

// TestMergeOutcome drives `chaosbench merge` with the recorded workers of a real split run
// (testdata/outcomes/split: two workers of a 3-second put load on one member): the merged run is decided by
// the one judge from what the workers recorded and the merged history's checks; a missing share is a
// harness error (its partial history unchecked), outranked by what etcd did in the shares that came; and the
// exit code, the merged summary.json, report.md and the verdict line agree.
func TestMergeOutcome(t *testing.T) {
	split := filepath.Join(outcomesDir, "split")
	for _, tt := range []struct {
		name string
		// w1 is worker 1's recorded directory ("" for a share that left no results); edit changes worker
		// w's summary before the merge.
		w1   string
		edit map[int]func(*results.Summary)
		want outcome.Kind
		says string
	}{
		{name: "ok", w1: filepath.Join(split, "1"), want: outcome.OK},
		{name: "a share missing", w1: "", want: outcome.HarnessError, says: "worker 1's share is missing"},
		{name: "violation in a worker's history", w1: filepath.Join(outcomesDir, "split-violation", "1"), want: outcome.Violation,
			says: "duplicate revision"},
		{name: "member crashed, a share missing", w1: "", want: outcome.MemberCrashed, says: "member m1 crashed",
			edit: map[int]func(*results.Summary){0: outcomeEvidence[outcome.MemberCrashed]}},
		{name: "a worker interrupted", w1: filepath.Join(split, "1"), want: outcome.Incomplete,
			edit: map[int]func(*results.Summary){1: outcomeEvidence[outcome.Incomplete]}},
		{name: "a worker's error", w1: filepath.Join(split, "1"), want: outcome.HarnessError, says: "worker 1: fault kill:m1",
			edit: map[int]func(*results.Summary){1: outcomeEvidence[outcome.HarnessError]}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var dirs []string
			for i, from := range []string{filepath.Join(split, "0"), tt.w1} {
				d := filepath.Join(dir, "workers", fmt.Sprint(i))
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
				if from != "" {
					if err := os.CopyFS(d, os.DirFS(from)); err != nil {
						t.Fatal(err)
					}
				}
				if edit := tt.edit[i]; edit != nil {
					s, err := results.ReadSummary(d)
					if err != nil {
						t.Fatal(err)
					}
					edit(s)
					if err := results.WriteSummary(d, s); err != nil {
						t.Fatal(err)
					}
				}
				dirs = append(dirs, d)
			}
			out := filepath.Join(dir, "merged")
			var printed bytes.Buffer
			_, err := Merge(context.Background(), MergeOptions{Dirs: dirs, Out: out}, &printed)
			s, rerr := results.ReadSummary(out)
			if rerr != nil {
				t.Fatalf("no merged summary: %v %v\n%s", rerr, err, printed.String())
			}
			agrees(t, tt.want, err, printed.String(), s.Outcome, "", "")
			if d := results.Decide(s); d.Kind != s.Outcome || !strings.Contains(d.String(), tt.says) {
				t.Errorf("merged summary: stored %s, decided %v; want it to say %q", s.Outcome, d, tt.says)
			}
			if tt.w1 == "" && (len(s.Checks) > 1 || strings.Contains(printed.String(), "checking the merged history")) {
				t.Errorf("a partial history was checked: %v", s.Checks)
			}
			md, _ := os.ReadFile(filepath.Join(out, report.MarkdownFile))
			if o := s.Verdict(); !strings.Contains(string(md), o.Headline()) {
				t.Errorf("report.md does not say %s", o.Headline())
			}
		})
	}
}

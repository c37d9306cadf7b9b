// Package trend reads a series of nightly results (suite directories, or run directories) and follows each
// scenario night by night: its latencies, throughput, availability gaps, check verdicts and the versions
// that ran, and whether the latest night is worse than the nights before it beyond their noise, judged by
// the comparison engine (compare.Trend) so that a trend and `chaosbench compare` speak the same statistics.
package trend

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/compare"
)

// Schema versions trend.json (results/SCHEMA.md documents it).
const (
	File   = "trend.json"
	Schema = "chaosbench.trend/v1"
)

// Trend is what `chaosbench trend` found: the nights it read, in time order, and each scenario's series,
// and its verdict.
type Trend struct {
	Schema string `json:"schema"`
	// Outcome and Reasons are the trend's verdict (Decide): the latest night's runs' own outcomes and the
	// gate's, by the one precedence. The exit code of `chaosbench trend` is this outcome's.
	Outcome outcome.Kind     `json:"outcome"`
	Reasons []outcome.Reason `json:"reasons,omitempty"`
	// Gate is the figures whose regression (or undecided call) is part of the outcome (nil: none; every
	// figure is informational).
	Gate      *compare.Gate `json:"gate,omitempty"`
	MinEffect float64       `json:"min_effect"`
	Nights    []Night       `json:"nights"`
	// Scenarios are in the order they first appear.
	Scenarios []*Scenario `json:"scenarios"`
}

// Night is one suite (or one run) of the series.
type Night struct {
	// Label names the night in tables: its start date and time, UTC ("11-24 02:00").
	Label string    `json:"label"`
	Dir   string    `json:"dir"`
	Start time.Time `json:"start"`
	// Chaosbench is the version of chaosbench that ran it.
	Chaosbench string `json:"chaosbench,omitempty"`
	// Outcome is the suite's (or the run's) verdict.
	Outcome outcome.Kind `json:"outcome"`
	// Outcomes counts the night's scenarios by their outcome, known issues included; KnownIssues counts the
	// known upstream issues its runs met, by issue ("etcd-io/etcd#18424": 2).
	Outcomes    map[outcome.Kind]int `json:"outcomes,omitempty"`
	KnownIssues map[string]int       `json:"known_issues,omitempty"`
}

// Scenario is one scenario followed over the nights.
type Scenario struct {
	Name string `json:"name"`
	// Runs has one entry per night, in the order of Trend.Nights; a night that did not run the scenario has
	// a run with Missing set.
	Runs []Run `json:"runs"`
	// Metrics are the figures followed; each run's Figures are keyed by their IDs.
	Metrics []compare.Metric `json:"metrics"`
	// Latest is the latest night that ran the scenario against the nights before it.
	Latest compare.Result `json:"latest"`
	// FailingSince is the first night of the current streak of non-ok outcomes ("" when the latest is ok).
	FailingSince string `json:"failing_since,omitempty"`
	// Regressions are the figures the latest night is significantly worse on, beyond the practical
	// threshold, in the gate's words ("put:p99 +210% [+80%, +430%]").
	Regressions []string `json:"regressions,omitempty"`
}

// Run is one night of a scenario.
type Run struct {
	Night   int    `json:"night"`
	Dir     string `json:"dir,omitempty"`
	Missing bool   `json:"missing,omitempty"`
	// Outcome and Reasons are the run's verdict, as its summary (or its suite) holds it; Checks its checks'
	// verdicts by name; KnownIssues the known upstream issues it met, by name.
	Outcome     outcome.Kind      `json:"outcome,omitempty"`
	Reasons     []outcome.Reason  `json:"reasons,omitempty"`
	Checks      map[string]string `json:"checks,omitempty"`
	KnownIssues []string          `json:"known_issues,omitempty"`
	// Etcd is the etcd version the cluster reported (or the members' builds).
	Etcd       string `json:"etcd,omitempty"`
	Chaosbench string `json:"chaosbench,omitempty"`
	Seed       int64  `json:"seed,omitempty"`
	// Figures are the run's values of the scenario's metrics (absent: the run has none).
	Figures map[string]float64 `json:"figures,omitempty"`
}

// Options tune a trend.
type Options struct {
	// MinEffect is the practical threshold (0: compare.DefaultMinEffect).
	MinEffect float64
	// Gate is the figures whose call on the latest night is part of the outcome (nil: none).
	Gate *compare.Gate
}

// night is a night as read: its directory, and its runs by scenario name.
type night struct {
	Night
	runs  map[string]string // scenario name -> run directory
	order []string          // scenario names in the night's order
	// listed are the outcomes the night's suite recorded for scenarios without a run directory (a run
	// that did not start).
	listed map[string]outcome.Outcome
}

// Read reads the nights in dirs, builds the trend and decides its outcome (Decide). Each dir is a suite
// directory (suite.json), a run directory (summary.json), or a directory whose subdirectories are such
// nights (a downloaded artifact history). Nights are ordered by their start time, whatever the order of
// dirs. A gate naming a figure no scenario has is a usage error.
func Read(dirs []string, opts Options) (*Trend, error) {
	var nights []night
	for _, d := range dirs {
		ns, err := readNights(d)
		if err != nil {
			return nil, err
		}
		nights = append(nights, ns...)
	}
	if len(nights) == 0 {
		return nil, outcome.Usagef("trend: no suite or run directory in %s", strings.Join(dirs, " "))
	}
	sort.SliceStable(nights, func(i, j int) bool { return nights[i].Start.Before(nights[j].Start) })
	t := &Trend{Schema: Schema, MinEffect: opts.MinEffect, Gate: opts.Gate}
	if t.MinEffect <= 0 {
		t.MinEffect = compare.DefaultMinEffect
	}
	byName := map[string]*Scenario{}
	for i, n := range nights {
		t.Nights = append(t.Nights, n.Night)
		for _, name := range n.order {
			sc := byName[name]
			if sc == nil {
				sc = &Scenario{Name: name}
				byName[name] = sc
				t.Scenarios = append(t.Scenarios, sc)
			}
			for len(sc.Runs) < i {
				sc.Runs = append(sc.Runs, Run{Night: len(sc.Runs), Missing: true})
			}
			r := Run{Night: i, Dir: n.runs[name]}
			if o, ok := n.listed[name]; ok {
				r.Outcome, r.Reasons = o.Kind, o.Reasons
			}
			sc.Runs = append(sc.Runs, r)
		}
	}
	for _, sc := range t.Scenarios {
		for len(sc.Runs) < len(nights) {
			sc.Runs = append(sc.Runs, Run{Night: len(sc.Runs), Missing: true})
		}
		if err := sc.judge(t.Nights, t.MinEffect, t.Gate); err != nil {
			return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
	}
	if err := t.checkGate(); err != nil {
		return nil, err
	}
	t.count()
	o := t.Decide()
	t.Outcome, t.Reasons = o.Kind, o.Reasons
	return t, nil
}

// readNights reads dir as one night, or its subdirectories as nights.
func readNights(dir string) ([]night, error) {
	if n, ok, err := readNight(dir); ok || err != nil {
		return []night{n}, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, outcome.Usagef("trend: %v", err)
	}
	var out []night
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n, ok, err := readNight(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, outcome.Usagef("trend: %s holds no %s or %s, nor subdirectories that do", dir, results.SuiteFile, results.SummaryFile)
	}
	return out, nil
}

// readNight reads dir as a suite or a run directory; ok is false when it is neither.
func readNight(dir string) (night, bool, error) {
	if _, err := os.Stat(filepath.Join(dir, results.SuiteFile)); err == nil {
		s, err := results.ReadSuite(dir)
		if err != nil {
			return night{}, true, outcome.Usagef("trend: %v", err)
		}
		n := night{Night: Night{Dir: dir, Start: s.Start, Chaosbench: s.Chaosbench, Outcome: s.Outcome},
			runs: map[string]string{}, listed: map[string]outcome.Outcome{}}
		for _, sc := range s.Scenarios {
			_, dup := n.runs[sc.Name]
			if _, listed := n.listed[sc.Name]; !dup && !listed {
				n.order = append(n.order, sc.Name)
			}
			if sc.Dir == "" {
				// A scenario that left no run directory is still a verdict of the night: the suite's.
				n.listed[sc.Name] = outcome.Outcome{Kind: sc.Outcome, Reasons: sc.Reasons}
				continue
			}
			delete(n.listed, sc.Name)
			n.runs[sc.Name] = filepath.Join(dir, sc.Dir)
		}
		n.Label = label(n.Start)
		return n, true, nil
	}
	if _, err := os.Stat(filepath.Join(dir, results.SummaryFile)); err == nil {
		s, err := results.ReadSummary(dir)
		if err != nil {
			return night{}, true, outcome.Usagef("trend: %v", err)
		}
		name := s.Name
		if name == "" {
			name = "run"
		}
		n := night{Night: Night{Dir: dir, Start: s.Start, Chaosbench: s.Versions.Chaosbench, Outcome: s.Outcome},
			runs: map[string]string{name: dir}, order: []string{name}}
		n.Label = label(n.Start)
		return n, true, nil
	}
	return night{}, false, nil
}

func label(t time.Time) string { return t.UTC().Format("01-02 15:04") }

// judge reads the scenario's runs, collects their figures with the comparison engine's extractors, and
// judges the latest night that ran it against the earlier ones.
func (sc *Scenario) judge(nights []Night, minEffect float64, gate *compare.Gate) error {
	var variants []compare.Variant
	var idx []int
	for i := range sc.Runs {
		r := &sc.Runs[i]
		if r.Missing || r.Dir == "" {
			continue
		}
		run, err := compare.ReadRun(r.Dir)
		if run.Summary == nil {
			// A night whose run left no summary is a night without figures, not a broken trend: it shows
			// as such, and its outcome says the harness failed.
			o := compare.Run{Err: err}.Outcome()
			r.Outcome, r.Reasons = o.Kind, o.Reasons
			r.Checks = map[string]string{"summary": err.Error()}
			continue
		}
		s := run.Summary
		o := s.Verdict()
		r.Outcome, r.Reasons, r.Seed, r.Chaosbench = o.Kind, o.Reasons, s.Seed, s.Versions.Chaosbench
		r.Etcd = etcdVersion(s)
		r.Checks = map[string]string{}
		for _, c := range s.Checks {
			r.Checks[c.Name] = c.Verdict
		}
		for _, k := range s.KnownIssues {
			if !slices.Contains(r.KnownIssues, k.Issue) {
				r.KnownIssues = append(r.KnownIssues, k.Issue)
			}
		}
		variants = append(variants, compare.Variant{Label: nights[r.Night].Label, Runs: []compare.Run{run}})
		idx = append(idx, i)
	}
	metrics, figures := compare.Collect(variants)
	sc.Metrics = metrics
	for k, f := range figures {
		r := &sc.Runs[idx[k]]
		r.Figures = map[string]float64{}
		for id, vs := range f.Values {
			if len(vs) > 0 && !math.IsNaN(vs[0]) {
				r.Figures[id] = vs[0]
			}
		}
	}
	sc.Latest = compare.Trend(metrics, figures, compare.Options{MinEffect: minEffect, Gate: gate})
	for _, v := range sc.Latest.Variants {
		for _, e := range v.Effects {
			if e.Verdict == compare.Worse {
				sc.Regressions = append(sc.Regressions, e.Metric.ID+" "+e.ChangeText())
			}
		}
	}
	sc.FailingSince = failingSince(sc.Runs, nights)
	return nil
}

// failingSince is the label of the first night of the latest streak of outcomes that did not pass (a known
// issue passes).
func failingSince(runs []Run, nights []Night) string {
	since := ""
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		if r.Missing {
			continue
		}
		if (outcome.Outcome{Kind: r.Outcome}).Passed() {
			break
		}
		since = nights[r.Night].Label
	}
	return since
}

// etcdVersion is the etcd the run measured: the server's reported version, or its members' builds.
func etcdVersion(s *results.Summary) string {
	if vs := slices.Compact(slices.Clone(s.Cluster.EtcdVersions)); len(vs) > 0 {
		return strings.Join(vs, ", ")
	}
	return s.Versions.EtcdServer
}

// checkGate returns a usage error when the gate names a figure no scenario has: a typo must not pass.
func (t *Trend) checkGate() error {
	var metrics [][]compare.Metric
	for _, sc := range t.Scenarios {
		metrics = append(metrics, sc.Metrics)
	}
	return t.Gate.Check(metrics, "in any scenario of the trend")
}

// Decide decides the trend: the outcome of every scenario's run in the latest night (what that night's
// suite decided for it; a violation or a crashed member is exit 4 with or without a gate), and the gate's
// call on the latest night's figures (a regression fails a threshold, a figure it could not call is
// undecided), by the one precedence. Earlier nights are history: they are counted, not judged again.
func (t *Trend) Decide() outcome.Outcome {
	latest := len(t.Nights) - 1
	var parts []outcome.Part
	var gate []outcome.Reason
	for _, sc := range t.Scenarios {
		if latest >= 0 && latest < len(sc.Runs) && !sc.Runs[latest].Missing {
			r := sc.Runs[latest]
			parts = append(parts, outcome.Part{Label: sc.Name, Outcome: outcome.Outcome{Kind: r.Outcome, Reasons: r.Reasons}})
		}
		gate = append(gate, sc.Latest.FigureReasons(sc.Name)...)
	}
	return outcome.Combine(parts, compare.DecideGate(gate)...)
}

// Verdict returns the trend's outcome as stored.
func (t *Trend) Verdict() outcome.Outcome {
	return outcome.Outcome{Kind: t.Outcome, Reasons: t.Reasons}
}

// count counts each night's scenarios by outcome and the known issues they met.
func (t *Trend) count() {
	for i := range t.Nights {
		n := &t.Nights[i]
		for _, sc := range t.Scenarios {
			if i >= len(sc.Runs) || sc.Runs[i].Missing || sc.Runs[i].Outcome == "" {
				continue
			}
			r := sc.Runs[i]
			if n.Outcomes == nil {
				n.Outcomes = map[outcome.Kind]int{}
			}
			n.Outcomes[r.Outcome]++
			for _, k := range r.KnownIssues {
				if n.KnownIssues == nil {
					n.KnownIssues = map[string]int{}
				}
				n.KnownIssues[k]++
			}
		}
	}
}

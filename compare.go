package chaosbench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results/compare"
)

// CompareOptions describes a comparison: one scenario, run once per variant with the same seed, so that
// every variant sees the same schedule of requests and faults.
type CompareOptions struct {
	// Scenario is what every variant runs; its Out is the comparison's directory, its EtcdVersion and
	// EtcdFlags the defaults that variants extend.
	Scenario Scenario
	// Versions are the variants' etcd versions, each as --etcd-version takes it, with "+" between the
	// versions of one variant's members (v3.5.35+v3.5.35+v3.6.16).
	Versions []string
	// FlagSets are the variants' etcd settings on top of the scenario's: each "name=value name=value"
	// ("" for none). With both Versions and FlagSets, every version runs with every flag set.
	FlagSets []string
	// Rounds runs every variant this many times, in ABBA order (A B, B A, A B, ...: each pair of rounds
	// is balanced, so a linear drift of the machine over time favours no variant). Every variant of a round
	// runs with the round's seed; each round has a new seed, derived from the scenario's, so that the rounds
	// sample different schedules while the variants of a round see the same one. 0 is auto (--rounds
	// auto): rounds are added until the sequential rule (compare.Sequential) has decided every gated figure
	// (without a gate, every headline figure), or MaxRounds are run.
	Rounds int
	// MaxRounds is auto's maximum (0: compare.DefaultMaxRounds).
	MaxRounds int
	// Cooldown is a pause between consecutive runs, for the machine (disk caches, thermal state) to settle.
	Cooldown time.Duration
	// MinEffect is the practical threshold of the verdicts (0.05 = 5%; 0: the default).
	MinEffect float64
	// FailOnRegression makes a significant regression larger than MinEffect, of a figure in
	// RegressionFigures (nil: any), decide the exit code (3).
	FailOnRegression  bool
	RegressionFigures []string
	// AcrossHosts says the variants run on different machines on purpose: the comparison notes it
	// instead of warning.
	AcrossHosts bool
}

// variant is one column of a comparison.
type variant struct {
	label    string
	scenario Scenario
	dir      string
}

// variants expands the options into the runs to make, in order.
func (o CompareOptions) variants(dir string) ([]variant, error) {
	versions := o.Versions
	if len(versions) == 0 {
		versions = []string{o.Scenario.EtcdVersion}
	}
	flagSets := o.FlagSets
	if len(flagSets) == 0 {
		flagSets = []string{""}
	}
	if len(versions)*len(flagSets) < 2 {
		return nil, outcome.Usagef("compare needs two variants or more: --etcd-version vA,vB and/or --etcd-flag-set twice")
	}
	var out []variant
	seen := map[string]bool{}
	for _, ver := range versions {
		for _, set := range flagSets {
			s := o.Scenario
			s.EtcdVersion = strings.TrimSpace(ver)
			s.EtcdFlags = append(append([]string{}, o.Scenario.EtcdFlags...), strings.Fields(set)...)
			label := s.EtcdVersion
			if label == "" {
				label = "builtin"
			}
			if len(flagSets) > 1 || set != "" {
				if f := strings.Join(strings.Fields(set), " "); f != "" {
					label += " " + f
				} else {
					label += " (default flags)"
				}
			}
			if seen[label] {
				return nil, outcome.Usagef("compare: variant %q is given twice", label)
			}
			seen[label] = true
			out = append(out, variant{label: label, scenario: s,
				dir: filepath.Join(dir, fmt.Sprintf("%02d-%s", len(out)+1, dirName(label)))})
		}
	}
	return out, nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._=-]+`)

func dirName(label string) string {
	name := strings.Trim(unsafeName.ReplaceAllString(label, "_"), "_")
	if len(name) > 60 {
		name = name[:60]
	}
	return name
}

// Compare runs the scenario once per variant and round, one after the other with the same seed, and writes
// the side-by-side comparison (compare.md, compare.json, compare.html) into the comparison's directory,
// each run in a subdirectory of its own. Every variant is validated, and its etcd built, before the first
// run starts: bad input starts nothing. A variant that fails is reported in its column and the others still
// run; an interrupt stops the comparison after writing what it has.
//
// The comparison's outcome is decided once (CompareRuns): every run's own outcome, labelled by variant and
// round, with the gate's reasons and the comparison's own (an interrupt, a file it could not write), by the
// one precedence; the error carries it, so the exit code is its code. A violation or a crashed member in any
// run is exit 4, whatever else happened and in whatever order the runs ran.
func Compare(ctx context.Context, opts CompareOptions, env Env) (*Comparison, error) {
	dir, err := opts.setDefaults()
	if err != nil {
		return nil, err
	}
	s := opts.Scenario
	vs, err := opts.variants(dir)
	if err != nil {
		return nil, err
	}
	if err := checkVariants(ctx, vs, env.Out); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, outcome.Usagef("--out %s: %v", dir, err)
	}
	rounds := fmt.Sprintf("%d round(s)", opts.Rounds)
	if opts.auto() {
		rounds = fmt.Sprintf("rounds auto (%d to %d, until decided)", compare.DefaultMinRounds, opts.MaxRounds)
	}
	fmt.Fprintf(env.Out, "comparing %d variants of %s, %s, seed %d: %s\n", len(vs), s.DisplayName(), rounds, s.Seed, dir)

	labels := make([]string, len(vs))
	for i, v := range vs {
		labels[i] = v.label
	}
	plan := roundPlan(labels, opts.planned(), s.Seed)
	runs, ran, why := opts.runRounds(ctx, vs, plan, env)
	plan = plan[:min(len(plan), (ran+len(vs)-1)/len(vs))]
	var extra []outcome.Reason
	if ctx.Err() != nil {
		extra = append(extra, outcome.New(outcome.Incomplete, "the comparison was interrupted after %d of %d runs", ran, len(vs)*opts.planned()))
	}
	return opts.finish(dir, runs, plan, env.Out, why, extra...)
}

// auto says the comparison adds rounds until it is decided (--rounds auto).
func (o CompareOptions) auto() bool { return o.Rounds == 0 }

// planned is the most rounds the comparison runs: its rounds, or auto's maximum.
func (o CompareOptions) planned() int {
	if o.auto() {
		return o.MaxRounds
	}
	return o.Rounds
}

// rule is the sequential rule of --rounds auto, nil for a fixed number of rounds.
func (o CompareOptions) rule() *compare.Sequential {
	if !o.auto() {
		return nil
	}
	return &compare.Sequential{MinRounds: compare.DefaultMinRounds, MaxRounds: o.MaxRounds}
}

// compareOptions are the comparison engine's options.
func (o CompareOptions) compareOptions() compare.Options {
	return compare.Options{MinEffect: o.MinEffect, AcrossHosts: o.AcrossHosts,
		Gate: compare.NewGate(o.FailOnRegression, o.RegressionFigures), Sequential: o.rule()}
}

// decided says, after a round of --rounds auto, whether to stop and why: a run whose own outcome is not a
// pass decides the comparison's outcome whatever more rounds find (undecided is never a pass, and a
// violation is exit 4), and otherwise the sequential rule decides.
func (o CompareOptions) decided(runs []VariantDirs) (bool, string) {
	for _, v := range runs {
		for i, dir := range v.Dirs {
			var err error
			if i < len(v.Errs) {
				err = v.Errs[i]
			}
			run, rerr := compare.ReadRun(dir)
			if run.Summary == nil && err == nil {
				err = rerr
			}
			run.Err = err
			if oc := run.Outcome(); !oc.Passed() {
				return true, fmt.Sprintf("stopped after %d rounds: run %s, round %d: %s (more rounds cannot change the outcome)", len(v.Dirs), v.Label, i+1, oc.Kind)
			}
		}
	}
	cmp, err := CompareRuns(runs, o.compareOptions())
	if err != nil {
		return true, fmt.Sprintf("stopped: %v", err)
	}
	if sq := cmp.Effects.Sequential; sq != nil {
		return sq.Stopped, sq.Why
	}
	return false, ""
}

// CompareDirs decides and writes the comparison of runs already made, as `chaosbench compare` does once its
// runs are over: runs are each variant's run directories (one per round, the first variant the baseline)
// and the error each run returned (none: nil); of opts it takes the practical threshold, the gate and
// AcrossHosts. It writes compare.md, compare.json and compare.html into dir, prints the comparison and its
// verdict line to out, and returns the comparison and the error carrying its outcome, whose exit code is
// `chaosbench compare`'s.
func CompareDirs(dir string, runs []VariantDirs, opts CompareOptions, out io.Writer) (*Comparison, error) {
	if opts.MinEffect < 0 || opts.MinEffect >= 1 {
		return nil, outcome.Usagef("--min-effect %g%%: from 0 to under 100 (percent)", 100*opts.MinEffect)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, outcome.Usagef("--out %s: %v", dir, err)
	}
	return opts.finish(dir, runs, nil, out, "")
}

// finish decides the comparison of the runs with the gate and the comparison's own reasons (extra: an
// interrupt), writes its files into dir and prints it: every exit path of a comparison whose runs are over.
func (o CompareOptions) finish(dir string, runs []VariantDirs, plan []CompareRound, out io.Writer, why string, extra ...outcome.Reason) (*Comparison, error) {
	copts := o.compareOptions()
	if plan == nil {
		copts.Sequential = nil // runs made before (CompareDirs) were not made by the rule's looks
	}
	cmp, gateErr := CompareRuns(runs, copts)
	cmp.Rounds = plan
	if o.auto() && plan != nil {
		cmp.Stopped = fmt.Sprintf("--rounds auto (%d to %d rounds): %d rounds; %s", compare.DefaultMinRounds, o.MaxRounds, len(plan), why)
	}
	cmp.addReasons(extra...)
	if err := cmp.WriteHTML(dir, copts); err != nil {
		cmp.addReasons(outcome.New(outcome.HarnessError, "%v", err))
	}
	if err := cmp.WriteFiles(dir); err != nil {
		cmp.addReasons(outcome.New(outcome.HarnessError, "%v", err))
	}
	fmt.Fprintf(out, "\n")
	if err := cmp.WriteText(out); err != nil {
		cmp.addReasons(outcome.New(outcome.HarnessError, "print the comparison: %v", err))
	}
	if cmp.Stopped != "" {
		fmt.Fprintf(out, "rounds: %s\n", cmp.Stopped)
	}
	fmt.Fprintf(out, "comparison written to %s\n", filepath.Join(dir, ComparisonMarkdown))
	v := cmp.Verdict()
	if gateErr != nil && !v.Kind.Severe() {
		// A gate on a figure the runs lack is bad input (compare.json holds the runs' outcome without it),
		// unless etcd failed in a run: that is exit 4 whatever else was wrong.
		return cmp, gateErr
	}
	if gateErr != nil {
		fmt.Fprintln(out, "error:", gateErr)
	}
	writeVerdict(out, "comparison", v)
	return cmp, v.Err()
}

// setDefaults picks the seed and the comparison's directory and checks the comparison's own settings; it
// returns the directory.
func (o *CompareOptions) setDefaults() (string, error) {
	if o.Scenario.Seed == 0 {
		o.Scenario.Seed = newSeed()
	}
	dir := o.Scenario.Out
	if dir == "" {
		dir = filepath.Join("results", time.Now().Format("20060102-150405")+"-compare-"+o.Scenario.DisplayName())
	}
	if _, err := os.Stat(filepath.Join(dir, ComparisonMarkdown)); err == nil {
		return "", outcome.Usagef("--out %s: already holds a comparison; choose another directory", dir)
	}
	if o.Rounds < 0 {
		return "", outcome.Usagef("--rounds %d: auto or at least 1", o.Rounds)
	}
	if o.MaxRounds == 0 {
		o.MaxRounds = compare.DefaultMaxRounds
	}
	if o.MaxRounds < compare.DefaultMinRounds {
		return "", outcome.Usagef("--max-rounds %d: at least %d (the first look of --rounds auto)", o.MaxRounds, compare.DefaultMinRounds)
	}
	if o.Cooldown < 0 {
		return "", outcome.Usagef("--cooldown %s: 0 or more", o.Cooldown)
	}
	if o.MinEffect < 0 || o.MinEffect >= 1 {
		return "", outcome.Usagef("--min-effect %g%%: from 0 to under 100 (percent)", 100*o.MinEffect)
	}
	return dir, nil
}

// checkVariants checks every variant before the first run starts: everything that can be checked without
// a build first, then the builds (and the flags each release accepts), so that a typo in the last variant
// does not wait for the first one's build.
func checkVariants(ctx context.Context, vs []variant, log io.Writer) error {
	for _, v := range vs {
		v.scenario.Out = v.dir
		if err := v.scenario.validate(); err != nil {
			return fmt.Errorf("variant %s: %w", v.label, err)
		}
	}
	for _, v := range vs {
		if _, _, err := v.scenario.resolveMembers(ctx, log); err != nil {
			return fmt.Errorf("variant %s: %w", v.label, err)
		}
	}
	return nil
}

// runRounds runs the variants of every round in the round's order and with its seed, each into a
// directory of its own, pausing between runs when asked, and returns the runs and how many it started. A
// variant that fails is recorded in its column (its error beside its directory) and the others still run;
// an interrupt stops the rounds between runs. With --rounds auto, every round from the rule's first look
// on is a look: the rounds stop when it says the comparison is decided, and why is returned.
func (o CompareOptions) runRounds(ctx context.Context, vs []variant, plan []CompareRound, env Env) ([]VariantDirs, int, string) {
	runs := make([]VariantDirs, len(vs))
	for i, v := range vs {
		runs[i].Label = v.label
	}
	n, total := 0, len(vs)*len(plan)
	for round, rp := range plan {
		for _, label := range rp.Order {
			i := slices.IndexFunc(vs, func(v variant) bool { return v.label == label })
			if ctx.Err() != nil {
				return runs, n, ""
			}
			if n > 0 && o.Cooldown > 0 {
				fmt.Fprintf(env.Out, "cooling down for %s\n", o.Cooldown)
				select {
				case <-ctx.Done():
					return runs, n, ""
				case <-time.After(o.Cooldown):
				}
			}
			v := vs[i]
			n++
			sc := v.scenario
			sc.Out = v.dir
			sc.Seed = rp.Seed
			what := v.label
			of := fmt.Sprint(len(plan))
			if o.auto() {
				of = fmt.Sprintf("at most %d", len(plan))
			}
			if len(plan) > 1 {
				sc.Out = filepath.Join(v.dir, fmt.Sprintf("round-%d", round+1))
				what = fmt.Sprintf("%s, round %d (%s), seed %d", v.label, round+1, of, rp.Seed)
			}
			fmt.Fprintf(env.Out, "\n=== run %d/%d: %s\n", n, total, what)
			renv := env // the load's bar says which run this is and how many are left
			renv.ProgressLabel = fmt.Sprintf("run %d/%d %s", n, total, v.label)
			_, err := Run(ctx, sc, renv)
			runs[i].Dirs, runs[i].Errs = append(runs[i].Dirs, sc.Out), append(runs[i].Errs, err)
		}
		if o.auto() && ctx.Err() == nil && round+1 >= compare.DefaultMinRounds {
			stop, why := o.decided(runs)
			fmt.Fprintf(env.Out, "\nrounds: %s\n", why)
			if stop {
				return runs, n, why
			}
		}
	}
	return runs, n, ""
}

// roundPlan returns the rounds of a comparison: the variants' order, ABBA (every other round reversed), and
// the round's seed: the scenario's seed for the first round, and for each later round a seed derived from
// it (splitmix64), so that a comparison replays with the same --seed.
func roundPlan(labels []string, rounds int, seed int64) []CompareRound {
	plan := make([]CompareRound, rounds)
	for r := range plan {
		order := slices.Clone(labels)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		plan[r] = CompareRound{Seed: roundSeed(seed, r), Order: order}
	}
	return plan
}

// roundSeed is the seed of round r (from 0) of a comparison seeded with seed: seed itself for the first
// round, a splitmix64 step of seed and r for the others (never 0, which would mean "pick one").
func roundSeed(seed int64, r int) int64 {
	if r == 0 {
		return seed
	}
	z := uint64(seed) + uint64(r)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	out := int64(z >> 1)
	if out == 0 {
		out = 1
	}
	return out
}

// DefaultMaxRounds is the most rounds `compare --rounds auto` runs by default (compare.DefaultMaxRounds).
const DefaultMaxRounds = compare.DefaultMaxRounds

// DefaultMinEffect is the practical threshold of compare, report and trend as a fraction (0.05 = 5%): a
// smaller change is no difference even when significant. It is the comparison engine's own default, named
// here so that a flag can show it.
const DefaultMinEffect = compare.DefaultMinEffect

// ParseGate reads a --fail-on-regression value into the FailOnRegression and RegressionFigures of
// CompareOptions, ReportOptions and TrendOptions: "" is no gate, "all" a gate on every figure (nil), else
// the comma-separated figures (put:p99) or operations (put) it watches. A malformed list is a usage error.
func ParseGate(spec string) (on bool, figures []string, err error) {
	if spec == "" {
		return false, nil, nil
	}
	figures, err = compare.ParseGate(spec)
	return err == nil, figures, err
}

package compare

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// noisyMetric is a figure of a synthetic round: its typical value and its round-to-round noise (the
// standard deviation of the log for ratios, of the value for differences).
type noisyMetric struct {
	metric Metric
	typ    float64
	noise  float64
}

// roundLike are figures of a 60 s run with round-to-round noise of the size we assume for back-to-back
// rounds on one machine (these are our assumptions, not measurements): medians move by about 1%, p99 by
// 2.5%, p99.9 by 3.5%, open-loop throughput by 0.5%, etcd's fsync and commit p99 by 3%, a kill's write gap
// by 20 ms, the error rate by 0.02 percentage points, leader changes by one now and then.
var roundLike = []noisyMetric{
	{Metric{ID: "put:p50", Unit: "ms", Scale: Ratio}, 1.2, 0.01},
	{Metric{ID: "put:p99", Unit: "ms", Scale: Ratio}, 10, 0.025},
	{Metric{ID: "put:p99.9", Unit: "ms", Scale: Ratio}, 25, 0.035},
	{Metric{ID: "put:throughput", Unit: "ops/s", Direction: HigherIsBetter, Scale: Ratio}, 990, 0.005},
	{Metric{ID: "put:errors", Unit: "%", Scale: Difference, Floor: errorRateFloor}, 0.05, 0.02},
	{Metric{ID: "range:p50", Unit: "ms", Scale: Ratio}, 0.4, 0.01},
	{Metric{ID: "range:p99", Unit: "ms", Scale: Ratio}, 1.5, 0.025},
	{Metric{ID: "range:p99.9", Unit: "ms", Scale: Ratio}, 4, 0.035},
	{Metric{ID: "range:throughput", Unit: "ops/s", Direction: HigherIsBetter, Scale: Ratio}, 500, 0.005},
	{Metric{ID: "total:throughput", Unit: "ops/s", Direction: HigherIsBetter, Scale: Ratio}, 1490, 0.005},
	{Metric{ID: "fault1:write_gap", Unit: "ms", Scale: Difference, Floor: gapFloorMs}, 800, 20},
	{Metric{ID: "etcd:wal_fsync_p99", Unit: "ms", Scale: Ratio}, 4, 0.03},
	{Metric{ID: "etcd:backend_commit_p99", Unit: "ms", Scale: Ratio}, 8, 0.03},
	{Metric{ID: "etcd:leader_changes", Scale: Difference, Floor: leaderChangesFloor}, 1, 0.3},
}

// rounds draws n rounds of the figures, each scaled by factor[id] (1 when absent).
func rounds(rng *rand.Rand, label string, n int, factor map[string]float64) ([]Metric, Figures) {
	f := Figures{Label: label, Values: map[string][]float64{}}
	var ms []Metric
	for _, nm := range roundLike {
		ms = append(ms, nm.metric)
		k := factor[nm.metric.ID]
		if k == 0 {
			k = 1
		}
		for range n {
			var x float64
			if nm.metric.Scale == Ratio {
				x = nm.typ * k * math.Exp(nm.noise*rng.NormFloat64())
			} else {
				x = max(0, nm.typ*k+nm.noise*rng.NormFloat64())
				if nm.metric.ID == "etcd:leader_changes" {
					x = math.Round(x)
				}
			}
			f.Values[nm.metric.ID] = append(f.Values[nm.metric.ID], x)
		}
	}
	return ms, f
}

func effect(t *testing.T, r Result, id string) Effect {
	t.Helper()
	e, ok := r.Find(r.Variants[0].Label, id)
	if !ok {
		t.Fatalf("no effect on %s", id)
	}
	return e
}

// A variant 30% slower on put p99 (and nothing else) is worse there, with an interval that excludes zero,
// and no different elsewhere.
func TestClearlyWorseFromRounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ms, a := rounds(rng, "A", 10, nil)
	_, b := rounds(rng, "B", 10, map[string]float64{"put:p99": 1.3})
	r := Compare(ms, []Figures{a, b}, Options{})
	e := effect(t, r, "put:p99")
	if e.Verdict != Worse || e.Low <= 0 || e.Change < 0.2 || e.Change > 0.4 || e.Method != MethodRounds || e.N != 10 {
		t.Fatalf("put p99: %+v", e)
	}
	if !strings.HasPrefix(e.ChangeText(), "+") || e.PAdjusted >= Alpha {
		t.Errorf("put p99: %s, p %.3g", e.ChangeText(), e.PAdjusted)
	}
	for _, e := range r.Variants[0].Effects {
		if e.Metric.ID != "put:p99" && e.Verdict == Worse {
			t.Errorf("%s: %s", e.Metric.ID, e)
		}
	}
	// Higher throughput is better, lower is worse.
	_, c := rounds(rng, "C", 10, map[string]float64{"put:throughput": 0.8, "range:throughput": 1.2})
	r = Compare(ms, []Figures{a, c}, Options{})
	if e := effect(t, r, "put:throughput"); e.Verdict != Worse {
		t.Errorf("put throughput -20%%: %s", e)
	}
	if e := effect(t, r, "range:throughput"); e.Verdict != Better {
		t.Errorf("range throughput +20%%: %s", e)
	}
}

// series is n per-second samples of a figure around typ: log-normal, with the noise of one second
// (sd of the log) and an AR(1) correlation between neighbouring seconds.
func series(rng *rand.Rand, n int, typ, noise, rho float64) []float64 {
	out := make([]float64, n)
	z := rng.NormFloat64()
	for i := range out {
		z = rho*z + math.Sqrt(1-rho*rho)*rng.NormFloat64()
		out[i] = typ * math.Exp(noise*z)
	}
	return out
}

// With one run per variant, per-second samples decide a clear difference and say so; a figure without
// per-interval samples is undecided.
func TestClearlyWorseFromIntervals(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ms := []Metric{{ID: "put:p99", Unit: "ms", Scale: Ratio}, {ID: "put:p99.9", Unit: "ms", Scale: Ratio}}
	a := Figures{Label: "A", Values: map[string][]float64{"put:p99": {10}, "put:p99.9": {20}},
		Intervals: map[string][][]float64{"put:p99": {series(rng, 60, 10, 0.2, 0.3)}}}
	b := Figures{Label: "B", Values: map[string][]float64{"put:p99": {15}, "put:p99.9": {30}},
		Intervals: map[string][][]float64{"put:p99": {series(rng, 60, 15, 0.2, 0.3)}}}
	r := Compare(ms, []Figures{a, b}, Options{})
	e := effect(t, r, "put:p99")
	if e.Verdict != Worse || e.Low <= 0 || e.Method != MethodIntervals || !strings.Contains(e.Note, "one run") {
		t.Fatalf("put p99: %+v", e)
	}
	if e.Change < 0.3 || e.Change > 0.7 {
		t.Errorf("put p99: change %.3f, want about +50%%", e.Change)
	}
	if e := effect(t, r, "put:p99.9"); e.Verdict != Undecided || e.RoundsNeeded == 0 || !strings.Contains(e.Note, "needs rounds") {
		t.Errorf("put p99.9 without samples: %+v", e)
	}
}

// A against A: over 20 seeded repetitions on round-like figures, every figure is "no difference" in at
// least 19 (Holm keeps the family-wise false-alarm rate at 5%, and the practical threshold lowers it).
func TestAAgainstANoDifference(t *testing.T) {
	clean := 0
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 42))
		ms, a := rounds(rng, "A", 10, nil)
		_, b := rounds(rng, "A'", 10, nil)
		r := Compare(ms, []Figures{a, b}, Options{})
		ok := true
		for _, e := range r.Variants[0].Effects {
			if e.Verdict != NoDifference {
				ok = false
				t.Logf("seed %d: %s (%s)", seed, e, e.Note)
			}
		}
		if ok {
			clean++
		}
	}
	if clean < 19 {
		t.Fatalf("A against A: no difference on every figure in %d of 20 repetitions, want at least 19", clean)
	}
}

// Too few rounds for the noise: undecided, with the rounds that would decide it estimated from the noise.
func TestTooFewRounds(t *testing.T) {
	ms := []Metric{{ID: "put:p99", Unit: "ms", Scale: Ratio}}
	a := Figures{Label: "A", Values: map[string][]float64{"put:p99": {10, 11, 9}}}
	b := Figures{Label: "B", Values: map[string][]float64{"put:p99": {10.5, 10, 10.2}}}
	e := effect(t, Compare(ms, []Figures{a, b}, Options{}), "put:p99")
	if e.Verdict != Undecided || !strings.Contains(e.Note, "rounds would decide") {
		t.Fatalf("%+v", e)
	}
	// The estimate (the change is below the threshold): the fewest pairs whose t interval, with the
	// measured spread of the log ratios, is within ±ln(1.05).
	d := []float64{math.Log(10.5 / 10), math.Log(10 / 11.0), math.Log(10.2 / 9)}
	est, _, _, _, sd := pairedT(d)
	if math.Abs(est) >= math.Log1p(0.05) {
		t.Fatalf("the example's change %.3f should be below the threshold", est)
	}
	n := e.RoundsNeeded
	half := func(n int) float64 { return tQuantile(0.975, float64(n-1)) * sd / math.Sqrt(float64(n)) }
	if n <= 3 || half(n) > math.Log1p(0.05) || half(n-1) <= math.Log1p(0.05) {
		t.Fatalf("rounds needed %d (sd %.3f)", n, sd)
	}
	if !strings.Contains(e.VerdictText(), "rounds") {
		t.Errorf("verdict text %q", e.VerdictText())
	}
	// A large change seen in too few rounds: the rounds that would make it significant at 5%/family.
	c := Figures{Label: "C", Values: map[string][]float64{"put:p99": {13, 9, 15}}}
	e = effect(t, Compare(ms, []Figures{a, c}, Options{}), "put:p99")
	if e.Verdict != Undecided || e.RoundsNeeded <= 3 || e.RoundsNeeded > 30 {
		t.Fatalf("+30%% in 3 noisy rounds: %+v", e)
	}
	// One round and no samples: undecided, asking for rounds.
	a1 := Figures{Label: "A", Values: map[string][]float64{"put:p99": {10}}}
	b1 := Figures{Label: "B", Values: map[string][]float64{"put:p99": {20}}}
	if e := effect(t, Compare(ms, []Figures{a1, b1}, Options{}), "put:p99"); e.Verdict != Undecided || e.RoundsNeeded < 2 {
		t.Fatalf("one round: %+v", e)
	}
}

// A significant change smaller than the practical threshold is no difference; raising the threshold
// turns a regression into no difference too.
func TestMinEffect(t *testing.T) {
	ms := []Metric{{ID: "put:p99", Unit: "ms", Scale: Ratio}}
	a := Figures{Label: "A", Values: map[string][]float64{"put:p99": {10, 10.01, 9.99, 10, 10.02}}}
	b := Figures{Label: "B", Values: map[string][]float64{"put:p99": {10.2, 10.21, 10.19, 10.2, 10.22}}}
	e := effect(t, Compare(ms, []Figures{a, b}, Options{}), "put:p99")
	if e.Verdict != NoDifference || e.PAdjusted >= Alpha || !strings.Contains(e.Note, "smaller than") {
		t.Fatalf("+2%%: %+v", e)
	}
	c := Figures{Label: "C", Values: map[string][]float64{"put:p99": {11, 11.01, 10.99, 11, 11.02}}}
	if e := effect(t, Compare(ms, []Figures{a, c}, Options{}), "put:p99"); e.Verdict != Worse {
		t.Fatalf("+10%%: %+v", e)
	}
	if e := effect(t, Compare(ms, []Figures{a, c}, Options{MinEffect: 0.2}), "put:p99"); e.Verdict != NoDifference {
		t.Fatalf("+10%% with --min-effect 20%%: %+v", e)
	}
}

// Holm's step-down on a textbook example: p = 0.01, 0.04, 0.03, 0.005 adjust to 0.03, 0.06, 0.06, 0.02,
// so at 5% the first and the last are rejected; a missing p-value is left out of the family.
func TestHolm(t *testing.T) {
	got := Holm([]float64{0.01, 0.04, math.NaN(), 0.03, 0.005})
	want := []float64{0.03, 0.06, math.NaN(), 0.06, 0.02}
	for i := range want {
		if math.IsNaN(want[i]) != math.IsNaN(got[i]) || (!math.IsNaN(want[i]) && math.Abs(got[i]-want[i]) > 1e-12) {
			t.Fatalf("Holm = %v, want %v", got, want)
		}
	}
	if got := Holm([]float64{0.5, 0.9}); got[0] != 1 || got[1] != 1 {
		t.Fatalf("monotone: %v", got)
	}
}

// Identical rounds are no difference (a zero-width interval), and constant differences are decided.
func TestDegenerateRounds(t *testing.T) {
	ms := []Metric{{ID: "etcd:leader_changes", Scale: Difference, Floor: 1}, {ID: "put:p99", Unit: "ms", Scale: Ratio}}
	a := Figures{Label: "A", Values: map[string][]float64{"etcd:leader_changes": {1, 1, 1}, "put:p99": {10, 10, 10}}}
	b := Figures{Label: "B", Values: map[string][]float64{"etcd:leader_changes": {1, 1, 1}, "put:p99": {20, 20, 20}}}
	r := Compare(ms, []Figures{a, b}, Options{})
	if e := effect(t, r, "etcd:leader_changes"); e.Verdict != NoDifference {
		t.Errorf("same leader changes: %+v", e)
	}
	if e := effect(t, r, "put:p99"); e.Verdict != Worse || math.Abs(e.Change-1) > 1e-9 {
		t.Errorf("p99 doubled in every round: %+v", e)
	}
}

// The gate fails (exit code 3) on a watched regression, names it in one line, marks the figures it watches
// (the others are informational and add nothing) and refuses figures the comparison does not have.
func TestGate(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	ms, a := rounds(rng, "A", 10, nil)
	_, b := rounds(rng, "B", 10, map[string]float64{"put:p99": 1.3})
	for _, tt := range []struct {
		spec string
		code int
	}{
		{"", outcome.ExitThresholds},
		{"put:p99,range:p99", outcome.ExitThresholds},
		{"put", outcome.ExitThresholds},
		{"range:p99", outcome.ExitOK},
		{"create/pods:p99", outcome.ExitUsage},
	} {
		figures, err := ParseGate(tt.spec)
		if err != nil {
			t.Fatal(err)
		}
		r := Compare(ms, []Figures{a, b}, Options{Gate: NewGate(true, figures)})
		o, err := Decide(nil, r)
		code := o.ExitCode()
		if err != nil {
			code = outcome.Code(err)
		}
		if code != tt.code {
			t.Errorf("%q: %v %v (exit %d), want exit %d", tt.spec, o, err, code, tt.code)
		}
		if tt.code == outcome.ExitThresholds && !strings.Contains(o.String(), "regression: B put:p99 +") {
			t.Errorf("%q: %v", tt.spec, o)
		}
		if e, _ := r.Find("B", "range:p50"); e.Gated != Watched(figures, "range:p50") || (!e.Gated && e.GateRole() != "informational") {
			t.Errorf("%q: range:p50 gated %v, role %s", tt.spec, e.Gated, e.GateRole())
		}
	}
	// Without a gate nothing is gated, whatever got worse: the outcome is the runs' own.
	r := Compare(ms, []Figures{a, b}, Options{})
	if o, err := Decide(nil, r); err != nil || o.Kind != outcome.OK {
		t.Errorf("no gate: %v %v", o, err)
	}
	if e, _ := r.Find("B", "put:p99"); e.Gated || e.Verdict != Worse || e.GateRole() != "informational" {
		t.Errorf("no gate: put:p99 %+v", e)
	}
	if _, err := ParseGate("put:,"); !outcome.IsUsage(err) {
		t.Errorf("bad spec: %v", err)
	}
}

// A gated figure the comparison could not decide is undecided (exit 1), never a pass; the same figure
// ungated is informational and passes; a gated regression outranks it (exit 3).
func TestGateUndecided(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	ms, a := rounds(rng, "A", 2, nil)
	_, b := rounds(rng, "B", 2, nil)
	// Two rounds of a noisy figure: the interval is far wider than the practical threshold.
	a.Values["put:p99"] = []float64{10, 14}
	b.Values["put:p99"] = []float64{13, 10}
	a.Values["range:p50"] = []float64{0.4, 0.4}
	b.Values["range:p50"] = []float64{0.4, 0.4}
	for _, tt := range []struct {
		name    string
		gate    *Gate
		kind    outcome.Kind
		reasons []string
	}{
		{"gated", &Gate{Figures: []string{"put:p99"}}, outcome.Undecided, []string{"gated figures undecided: B against A: put:p99 (too noisy: about"}},
		{"not gated", &Gate{Figures: []string{"range:p50"}}, outcome.OK, nil},
		{"no gate", nil, outcome.OK, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := Compare(ms, []Figures{a, b}, Options{Gate: tt.gate})
			if e, _ := r.Find("B", "put:p99"); e.Verdict != Undecided {
				t.Fatalf("put:p99 is %s, want undecided", e)
			}
			o, err := Decide(nil, r)
			if err != nil || o.Kind != tt.kind {
				t.Fatalf("%v %v, want %s", o, err, tt.kind)
			}
			for _, want := range tt.reasons {
				if !strings.Contains(o.String(), want) {
					t.Errorf("%v does not say %q", o, want)
				}
			}
		})
	}
	// A regression decides the gate however many figures are undecided: more rounds cannot make it pass.
	a.Values["put:p50"] = []float64{1.2, 1.2}
	b.Values["put:p50"] = []float64{2.4, 2.4}
	r := Compare(ms, []Figures{a, b}, Options{Gate: &Gate{Figures: []string{"put"}}})
	if o, _ := Decide(nil, r); o.Kind != outcome.ThresholdFailed || !strings.Contains(o.String(), "regression: B put:p50") {
		t.Errorf("a regression and an undecided figure: %v, want threshold-failed naming the regression", o)
	}
}

// The runs' own outcomes are part of the comparison's, whatever the gate says and in whatever order the
// runs ran: a violation in any run is exit 4.
func TestDecideRuns(t *testing.T) {
	run := func(k outcome.Kind, why string) Run {
		s := &results.Summary{}
		if k != outcome.OK {
			s.Outcome, s.Reasons = k, []outcome.Reason{outcome.New(k, "%s", why)}
		} else {
			s.Outcome = k
		}
		return Run{Summary: s}
	}
	ok, thr := run(outcome.OK, ""), run(outcome.ThresholdFailed, "threshold put:p99<1ms failed")
	und, vio := run(outcome.Undecided, "linearizability could not decide"), run(outcome.Violation, "linearizability: lost write")
	for _, tt := range []struct {
		name string
		a, b []Run
		want outcome.Kind
	}{
		{"all ok", []Run{ok}, []Run{ok}, outcome.OK},
		{"threshold then violation", []Run{thr}, []Run{vio}, outcome.Violation},
		{"undecided then violation", []Run{und}, []Run{vio}, outcome.Violation},
		{"violation then threshold", []Run{vio}, []Run{thr}, outcome.Violation},
		{"threshold in a later round", []Run{ok, ok}, []Run{ok, thr}, outcome.ThresholdFailed},
		{"no summary", []Run{ok}, []Run{{Err: errors.New("start cluster: member exited")}}, outcome.HarnessError},
		{"no summary, the run's outcome", []Run{ok}, []Run{{Err: outcome.Decide(outcome.New(outcome.Incomplete, "interrupted")).Err()}}, outcome.Incomplete},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vs := []Variant{{Label: "A", Runs: tt.a}, {Label: "B", Runs: tt.b}}
			o, err := Decide(vs, Runs(vs, Options{}))
			if err != nil || o.Kind != tt.want {
				t.Fatalf("%v %v, want %s", o, err, tt.want)
			}
			if tt.want != outcome.OK && !strings.HasPrefix(o.Reasons[0].Text, "B") && !strings.HasPrefix(o.Reasons[0].Text, "A") {
				t.Errorf("the reason does not name its run: %v", o.Reasons[0])
			}
		})
	}
}

// Runs measured on different machines are marked, loudly unless the comparison is across hosts on purpose.
func TestCheckMachines(t *testing.T) {
	run := func(cpus int) Run {
		return Run{Summary: &results.Summary{Environment: &results.Environment{OS: "linux", CPUs: cpus, CPUModel: "EPYC"}}}
	}
	same := []Variant{{Label: "A", Runs: []Run{run(2)}}, {Label: "B", Runs: []Run{run(2), run(2)}}}
	if w := CheckMachines(same, false); w != nil {
		t.Fatalf("same machine: %q", w)
	}
	differ := []Variant{{Label: "A", Runs: []Run{run(2)}}, {Label: "B", Runs: []Run{run(2), run(8)}}}
	w := CheckMachines(differ, false)
	if len(w) != 2 || !strings.HasPrefix(w[0], "WARNING") || !strings.Contains(w[1], "B round 2: cpus 8 (baseline 2)") {
		t.Fatalf("different machines: %q", w)
	}
	if w := CheckMachines(differ, true); len(w) != 2 || strings.HasPrefix(w[0], "WARNING") {
		t.Fatalf("across hosts: %q", w)
	}
	// A fact only one run recorded (an older chaosbench recorded no disk) is no difference.
	older := run(2)
	newer := run(2)
	newer.Summary.Environment.RunDirDisk = &results.Disk{Device: "/dev/vda", MountOptions: []string{"rw"}}
	if w := CheckMachines([]Variant{{Label: "A", Runs: []Run{older}}, {Label: "B", Runs: []Run{newer}}}, false); w != nil {
		t.Fatalf("a fact recorded by one run only: %q", w)
	}
}

// A against A from one run each: per-second samples with neighbouring seconds correlated (AR(1), ρ=0.5)
// call no false better or worse in at least 19 of 20 seeded repetitions over five figures: the variance
// inflation for the correlation keeps the intervals honest (undecided is allowed: one run is little).
func TestAAgainstAFromIntervals(t *testing.T) {
	ids := []string{"put:p50", "put:p99", "range:p50", "range:p99", "total:throughput"}
	var ms []Metric
	for _, id := range ids {
		ms = append(ms, Metric{ID: id, Unit: "ms", Scale: Ratio})
	}
	alarms := 0
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 99))
		fig := func(label string) Figures {
			f := Figures{Label: label, Values: map[string][]float64{}, Intervals: map[string][][]float64{}}
			for _, id := range ids {
				s := series(rng, 60, 10, 0.2, 0.5)
				f.Values[id] = []float64{median(s)}
				f.Intervals[id] = [][]float64{s}
			}
			return f
		}
		r := Compare(ms, []Figures{fig("A"), fig("A'")}, Options{})
		for _, e := range r.Variants[0].Effects {
			if e.Verdict == Better || e.Verdict == Worse {
				alarms++
				t.Logf("seed %d: %s", seed, e)
				break
			}
		}
	}
	if alarms > 1 {
		t.Fatalf("false alarms in %d of 20 repetitions, want at most 1", alarms)
	}
}

// TestRecordedAAgainstA: ten recorded runs of one configuration (testdata/aa-rounds), split at random
// (seeded) into two variants of five paired rounds, 20 times: no figure is called better or worse in at
// least 19 of the 20 splits. On that noisy machine the latencies are undecided (their rounds-needed
// estimates are large), which is the honest call; throughput and error rates are no difference.
func TestRecordedAAgainstA(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "aa-rounds", "*", "round-*"))
	if err != nil || len(dirs) != 10 {
		t.Fatalf("recorded rounds: %v %v", dirs, err)
	}
	var runs []Run
	for _, d := range dirs {
		r, err := ReadRun(d)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	alarms := 0
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 2026))
		perm := rng.Perm(len(runs))
		a, b := Variant{Label: "A"}, Variant{Label: "A'"}
		for i, p := range perm {
			if i < len(perm)/2 {
				a.Runs = append(a.Runs, runs[p])
			} else {
				b.Runs = append(b.Runs, runs[p])
			}
		}
		r := Runs([]Variant{a, b}, Options{})
		for _, e := range r.Variants[0].Effects {
			if e.Verdict == Better || e.Verdict == Worse {
				alarms++
				t.Logf("seed %d: %s", seed, e)
				break
			}
		}
		if e, _ := r.Find("A'", "put:throughput"); e.Verdict != NoDifference {
			t.Errorf("seed %d: put throughput %s", seed, e)
		}
	}
	if alarms > 1 {
		t.Fatalf("false alarms in %d of 20 splits, want at most 1", alarms)
	}
}

// TestRecordedSlowDisk: two recorded real runs, one with every fdatasync delayed by 5 ms (testdata/
// slowdisk), one run each: put p50 is worse with an interval that excludes zero, from the runs' per-second
// samples, and a gate on put fails with exit code 3 naming it. put p99, whose per-second values swing
// with the saturated machine, is not called better nor no different.
func TestRecordedSlowDisk(t *testing.T) {
	var vs []Variant
	for _, name := range []string{"base", "slowdisk"} {
		r, err := ReadRun(filepath.Join("testdata", "slowdisk", name))
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, Variant{Label: name, Runs: []Run{r}})
	}
	r := Runs(vs, Options{})
	e, _ := r.Find("slowdisk", "put:p50")
	if e.Verdict != Worse || e.Low <= 0 || e.Method != MethodIntervals {
		t.Fatalf("put p50: %+v", e)
	}
	if e, _ := r.Find("slowdisk", "put:p99"); e.Verdict == Better || e.Verdict == NoDifference {
		t.Errorf("put p99: %s", e)
	}
	r = Runs(vs, Options{Gate: &Gate{Figures: []string{"put"}}})
	o, err := Decide(vs, r)
	if err != nil || o.ExitCode() != outcome.ExitThresholds || !strings.Contains(o.String(), "regression: slowdisk put:p50 +") {
		t.Fatalf("gate: %v %v", o, err)
	}
}

// A result survives JSON (compare.json): unknown figures become null, directions and scales are words.
func TestResultJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	ms, a := rounds(rng, "A", 3, nil)
	_, b := rounds(rng, "B", 3, nil)
	ms = append(ms, Metric{ID: "put:missing", Direction: HigherIsBetter, Scale: Difference})
	r := Compare(ms, []Figures{a, b}, Options{})
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"direction":"higher-is-better","scale":"difference"`) || !strings.Contains(string(out), `"change":null`) {
		t.Fatalf("%s", out)
	}
	var back Result
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if e, _ := back.Find("B", "put:missing"); e.Metric.Direction != HigherIsBetter || e.Verdict != Undecided {
		t.Fatalf("round trip: %+v", e)
	}
}

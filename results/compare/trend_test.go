package compare

import (
	"math"
	"math/rand/v2"
	"testing"
)

// nights draws n nights of the round-like figures with night-to-night noise widened by spread (nights run
// on different days and machines of a CI pool: noisier than back-to-back rounds), one Figures per night.
func nights(rng *rand.Rand, n int, spread float64, factor map[string]float64) ([]Metric, []Figures) {
	var ms []Metric
	var out []Figures
	for i := range n {
		wide := rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))
		var f Figures
		ms, f = rounds(wide, "night", 1, nil)
		for _, nm := range roundLike {
			id := nm.metric.ID
			x := f.Values[id][0]
			if nm.metric.Scale == Ratio {
				x *= math.Exp((spread - 1) * nm.noise * wide.NormFloat64())
			}
			if k := factor[id]; k != 0 && i == n-1 {
				x *= k
			}
			f.Values[id][0] = x
		}
		f.Label = "night " + string(rune('1'+i))
		out = append(out, f)
	}
	return ms, out
}

// A latest night three times as slow on put p99 as five noisy nights before it (10% night-to-night noise)
// is flagged worse there, and only there. Five nights are few: t(4) and Holm's adjustment over the
// night's 14 figures need a change of about twice the nights' spread times six to call it, so a doubling
// of this p99 would still pass as noise; more nights narrow that.
func TestTrendFlagsRegression(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ms, ns := nights(rng, 6, 4, map[string]float64{"put:p99": 3})
	r := Trend(ms, ns, Options{})
	if r.Baseline != "previous 5 nights" || len(r.Variants) != 1 {
		t.Fatalf("result: %+v", r)
	}
	for _, e := range r.Variants[0].Effects {
		want := NoDifference
		if e.Metric.ID == "put:p99" {
			want = Worse
		}
		if e.Verdict != want {
			t.Errorf("%s: %s (%s), want %s", e.Metric.ID, e.VerdictText(), e.Note, want)
		}
		if e.Method != MethodNights || e.N != 5 {
			t.Errorf("%s: method %q n %d", e.Metric.ID, e.Method, e.N)
		}
	}
	if e := effect(t, r, "put:p99"); !(e.Low > 0) || e.Change < 0.5 {
		t.Errorf("put p99: %s", e)
	}
}

// Without a change, twenty seeded trends of six nights raise a false alarm on at most one.
func TestTrendNoFalseAlarms(t *testing.T) {
	alarms := 0
	for seed := range uint64(20) {
		ms, ns := nights(rand.New(rand.NewPCG(seed, 77)), 6, 4, nil)
		r := Trend(ms, ns, Options{})
		for _, e := range r.Variants[0].Effects {
			if e.Verdict == Worse || e.Verdict == Better {
				alarms++
				t.Logf("seed %d: %s", seed, e)
				break
			}
		}
	}
	if alarms > 1 {
		t.Errorf("%d false alarms in 20 trends", alarms)
	}
}

// Fewer than MinNights previous nights cannot measure the noise: every figure is undecided, never a pass.
func TestTrendTooFewNights(t *testing.T) {
	ms, ns := nights(rand.New(rand.NewPCG(3, 4)), 3, 1, map[string]float64{"put:p99": 3})
	r := Trend(ms, ns, Options{})
	for _, e := range r.Variants[0].Effects {
		if e.Verdict != Undecided || e.RoundsNeeded != MinNights {
			t.Errorf("%s: %s (%s)", e.Metric.ID, e.VerdictText(), e.Note)
		}
	}
}

// A figure missing from the latest night is undecided; missing from some earlier nights, it is judged on
// the others.
func TestTrendMissingFigures(t *testing.T) {
	ms, ns := nights(rand.New(rand.NewPCG(5, 6)), 6, 1, nil)
	ns[5].Values["put:p50"] = []float64{math.NaN()}
	ns[0].Values["range:p50"] = []float64{math.NaN()}
	r := Trend(ms, ns, Options{})
	if e := effect(t, r, "put:p50"); e.Verdict != Undecided {
		t.Errorf("put p50: %s", e)
	}
	if e := effect(t, r, "range:p50"); e.N != 4 || e.Verdict != NoDifference {
		t.Errorf("range p50: n %d %s", e.N, e)
	}
}

package compare

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// Sequential is the stopping rule of `compare --rounds auto`: rounds are added one at a time and, from
// MinRounds on, every round is a look at the figures the rule watches; the comparison stops at the first
// look where every watched figure is decided, or at MaxRounds.
//
// # Why not a t-test after every round
//
// Testing at 5% after every round and stopping at the first significant result raises false alarms far
// more often than 5%: every look is another chance for noise to cross the line (Armitage, McPherson and
// Rowe 1969; with 8 looks, about 15-20% for one figure). TestSequentialFalseAlarms shows it on recorded
// A/A rounds.
//
// # The rule: alpha spending over the looks, and a confidence sequence
//
// The error budget Alpha is spent over the looks by the Lan-DeMets spending function of Pocock type,
// α(t) = α·ln(1+(e−1)·t) with t = n/MaxRounds (Lan and DeMets 1983, "Discrete sequential boundaries for
// clinical trials", Biometrika 70(3):659-663; the Pocock type is Kim and DeMets 1987): the look at n rounds
// gets α(n/MaxRounds) − α((n−1)/MaxRounds), the first look everything spent up to it. Pocock's type spends
// much of the budget at the first look, where a clear change is decided (a slow disk: 3 rounds instead of
// 6), and the rest evenly. At each look, each watched figure's interval is Student's t interval of its
// paired differences at that look's level divided by the number of watched figures (Bonferroni over the
// figures). The looks are not combined by the exact recursive boundaries of a group-sequential design
// (which assume a known variance and normal increments): the union bound over looks and figures keeps the
// probability that any interval of any look misses its figure's true effect below Alpha whatever the
// dependence between looks, so the intervals form a confidence sequence over the looks (Howard, Ramdas,
// McAuliffe and Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic confidence sequences", Ann.
// Statist. 49(2)), valid under optional stopping. The price is a little power against the exact boundaries.
//
// # What decides a figure
//
// A figure is worse or better when its interval excludes zero and its estimated change is at least the
// practical threshold (--min-effect), as the fixed-rounds verdict calls it; it is no difference when the
// whole interval lies within ± the threshold (an equivalence decision, like the two one-sided tests of
// Schuirmann 1987). Both errors are bounded by the same coverage: a false "worse" needs an interval that
// excludes a true zero, a false "no difference" an interval within ± the threshold around a true change of
// at least the threshold; either misses the true effect. Without the equivalence decision an A/A
// comparison, which has nothing to find, could only stop at MaxRounds. A figure decided at a look keeps
// that verdict (the confidence sequence holds at every look at once), and the comparison goes on until the
// others are.
type Sequential struct {
	// MinRounds is the first look (default DefaultMinRounds): with two rounds the t interval has one
	// degree of freedom and decides nothing at a spent level. MaxRounds is the last (DefaultMaxRounds).
	MinRounds int `json:"min_rounds"`
	MaxRounds int `json:"max_rounds"`
}

// The default looks of `compare --rounds auto`.
const (
	DefaultMinRounds = 3
	DefaultMaxRounds = 10
)

// MethodSequential is the method of an effect decided by the sequential rule.
const MethodSequential = "sequential paired rounds (t, alpha spent over rounds)"

// withDefaults fills the zero fields.
func (s Sequential) withDefaults() Sequential {
	if s.MinRounds <= 0 {
		s.MinRounds = DefaultMinRounds
	}
	if s.MaxRounds <= 0 {
		s.MaxRounds = DefaultMaxRounds
	}
	s.MaxRounds = max(s.MaxRounds, s.MinRounds)
	return s
}

// Spent is the error budget spent by the look at n rounds (0 before the first look, Alpha at the last).
func (s Sequential) Spent(n int) float64 {
	s = s.withDefaults()
	switch {
	case n < s.MinRounds:
		return 0
	case n >= s.MaxRounds:
		return Alpha
	}
	return Alpha * math.Log1p((math.E-1)*float64(n)/float64(s.MaxRounds))
}

// LookAlpha is the error budget of the look at n rounds, for all the watched figures together.
func (s Sequential) LookAlpha(n int) float64 {
	return s.Spent(n) - s.Spent(n-1)
}

// SequentialResult says how a sequential comparison stopped and what it decided.
type SequentialResult struct {
	Rule Sequential `json:"rule"`
	// Rounds is the rounds the decision used; Stopped is true when more rounds would not be run, and Why
	// says why in one line.
	Rounds  int    `json:"rounds"`
	Stopped bool   `json:"stopped"`
	Why     string `json:"why"`
	// Watched says which figures the rule decides: "gated" (the gate's) or "headline" (without a gate: the
	// totals' throughput and error rate and every operation's p99).
	Watched string             `json:"watched"`
	Figures []SequentialFigure `json:"figures"`
}

// SequentialFigure is a watched figure of one variant as the rule decided it.
type SequentialFigure struct {
	Variant string  `json:"variant"`
	Metric  string  `json:"metric"`
	Verdict Verdict `json:"verdict"`
	// DecidedAt is the round of the look that decided it (0: undecided); Alpha the level of that look's
	// interval (or of the last look), after the correction for the watched figures.
	DecidedAt int     `json:"decided_at,omitempty"`
	Alpha     float64 `json:"alpha"`
	// Change, Low and High are the estimate and interval of that look, as Effect shows them.
	Change float64 `json:"change"`
	Low    float64 `json:"low"`
	High   float64 `json:"high"`
	// Note says why a figure cannot be decided by more rounds (a missing figure).
	Note string `json:"note,omitempty"`

	est, lo, hi float64
}

// headline says whether a figure is watched by a comparison without a gate: the totals' throughput and
// error rate, and every operation's p99.
func headline(id string) bool {
	return id == "total:throughput" || id == "total:errors" || strings.HasSuffix(id, ":p99") && !strings.HasPrefix(id, "etcd:")
}

// look decides one figure from its first n paired differences at level a (for this figure).
func lookFigure(m Metric, base, v Figures, n int, a, minEffect float64, quantile func(p, df float64) float64) SequentialFigure {
	f := SequentialFigure{Metric: m.ID, Verdict: Undecided, Alpha: a,
		Change: math.NaN(), Low: math.NaN(), High: math.NaN()}
	xs, ys := base.Values[m.ID], v.Values[m.ID]
	logScale := m.Scale == Ratio
	threshold := math.Log1p(minEffect)
	if !logScale {
		threshold = m.Floor
		if b := median(xs[:min(n, len(xs))]); !math.IsNaN(b) {
			threshold = max(minEffect*math.Abs(b), m.Floor)
		}
	}
	var d []float64
	for i := range min(n, len(xs), len(ys)) {
		x, y := xs[i], ys[i]
		switch {
		case math.IsNaN(x) || math.IsNaN(y):
			continue
		case logScale && (x <= 0 || y <= 0):
			f.Note = "a round has a non-positive value of a ratio figure"
			return f
		case logScale:
			d = append(d, math.Log(y)-math.Log(x))
		default:
			d = append(d, y-x)
		}
	}
	if len(d) < 2 {
		f.Note = "fewer than two rounds have this figure in both variants"
		return f
	}
	est, sd := meanSD(d)
	half := 0.0
	if se := sd / math.Sqrt(float64(len(d))); se > 1e-12*math.Abs(est) && se > 0 {
		half = quantile(1-a/2, float64(len(d)-1)) * se
	}
	f.est, f.lo, f.hi = est, est-half, est+half
	f.Change, f.Low, f.High = est, f.lo, f.hi
	if logScale {
		f.Change, f.Low, f.High = math.Expm1(est), math.Expm1(f.lo), math.Expm1(f.hi)
	}
	switch {
	case (f.lo > 0 || f.hi < 0) && math.Abs(est) >= threshold:
		worse := est > 0
		if m.Direction == HigherIsBetter {
			worse = !worse
		}
		f.Verdict = Better
		if worse {
			f.Verdict = Worse
		}
	case f.lo > -threshold && f.hi < threshold:
		f.Verdict = NoDifference
	}
	return f
}

func meanSD(d []float64) (mean, sd float64) {
	n := float64(len(d))
	for _, x := range d {
		mean += x / n
	}
	var ss float64
	for _, x := range d {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / (n - 1))
}

// Decide replays the rule's looks over the variants' rounds (every variant has as many rounds as the
// comparison has run) and says whether to stop, and what it decided: every look from MinRounds to the
// rounds there are, each figure keeping the verdict of the first look that decided it. gate is the
// comparison's gate (nil: the headline figures are watched).
func (s Sequential) Decide(metrics []Metric, variants []Figures, gate *Gate, minEffect float64) SequentialResult {
	s = s.withDefaults()
	if minEffect <= 0 {
		minEffect = DefaultMinEffect
	}
	res := SequentialResult{Rule: s, Watched: "headline"}
	if gate != nil {
		res.Watched = "gated"
	}
	var watched []Metric
	for _, m := range metrics {
		if (gate != nil && gate.Watches(m.ID)) || (gate == nil && headline(m.ID)) {
			watched = append(watched, m)
		}
	}
	if len(variants) < 2 {
		res.Why = "fewer than two variants"
		res.Stopped = true
		return res
	}
	n := len(variants[0].Values[firstID(metrics)])
	for _, v := range variants[1:] {
		if len(metrics) > 0 {
			n = min(n, len(v.Values[metrics[0].ID]))
		}
	}
	res.Rounds = n
	if len(watched) == 0 {
		res.Stopped, res.Why = n >= 1, "no figure to decide"
		return res
	}
	base := variants[0]
	// The looks' levels and degrees of freedom repeat over figures and variants: their quantiles are
	// computed once.
	quantiles := map[[2]float64]float64{}
	quantile := func(p, df float64) float64 {
		k := [2]float64{p, df}
		q, ok := quantiles[k]
		if !ok {
			q = tQuantile(p, df)
			quantiles[k] = q
		}
		return q
	}
	for _, v := range variants[1:] {
		for _, m := range watched {
			f := SequentialFigure{Variant: v.Label, Metric: m.ID, Verdict: Undecided,
				Change: math.NaN(), Low: math.NaN(), High: math.NaN()}
			for look := s.MinRounds; look <= min(n, s.MaxRounds); look++ {
				f = lookFigure(m, base, v, look, s.LookAlpha(look)/float64(len(watched)), minEffect, quantile)
				f.Variant = v.Label
				if f.Verdict != Undecided {
					f.DecidedAt = look
					break
				}
			}
			res.Figures = append(res.Figures, f)
		}
	}
	var undecided, stuck []string
	for _, f := range res.Figures {
		switch {
		case f.Verdict != Undecided:
		case f.Note != "" && n >= s.MinRounds:
			stuck = append(stuck, fmt.Sprintf("%s %s (%s)", f.Variant, f.Metric, f.Note))
		default:
			undecided = append(undecided, f.Variant+" "+f.Metric)
		}
	}
	switch {
	case len(stuck) > 0:
		res.Stopped = true
		res.Why = fmt.Sprintf("stopped after %d rounds: more rounds cannot decide %s", n, strings.Join(stuck, "; "))
	case n < s.MinRounds:
		res.Why = fmt.Sprintf("the first look is at %d rounds", s.MinRounds)
	case len(undecided) == 0:
		res.Stopped = true
		res.Why = fmt.Sprintf("stopped after %d rounds: every %s figure is decided (%s)", n, res.Watched, decidedText(res.Figures))
	case n >= s.MaxRounds:
		res.Stopped = true
		res.Why = fmt.Sprintf("stopped at the maximum of %d rounds: still undecided: %s", s.MaxRounds, strings.Join(undecided, ", "))
	default:
		res.Why = fmt.Sprintf("undecided after %d rounds: %s", n, strings.Join(undecided, ", "))
	}
	return res
}

func firstID(metrics []Metric) string {
	if len(metrics) == 0 {
		return ""
	}
	return metrics[0].ID
}

// decidedText lists the decided figures: "put:p50 worse at round 3, put:p99 no difference at round 5".
func decidedText(fs []SequentialFigure) string {
	var parts []string
	for _, f := range fs {
		if f.DecidedAt > 0 {
			parts = append(parts, fmt.Sprintf("%s %s at round %d", f.Metric, f.Verdict, f.DecidedAt))
		}
	}
	return strings.Join(parts, ", ")
}

// applySequential makes the rule's decisions the verdicts of the watched figures: their verdict, interval
// and method are the look's that decided them (or the last look's), so that the gate decides on the rule,
// not on a fixed-rounds test of data that were collected until something looked significant. The other
// figures keep the fixed-rounds analysis, informational.
func (r *Result) applySequential(sr SequentialResult) {
	r.Sequential = &sr
	for _, f := range sr.Figures {
		for i := range r.Variants {
			if r.Variants[i].Label != f.Variant {
				continue
			}
			for j := range r.Variants[i].Effects {
				e := &r.Variants[i].Effects[j]
				if e.Metric.ID != f.Metric {
					continue
				}
				e.Method, e.Verdict, e.RoundsNeeded = MethodSequential, f.Verdict, 0
				e.Change, e.Low, e.High = f.Change, f.Low, f.High
				e.N = sr.Rounds
				switch {
				case f.DecidedAt > 0:
					e.N = f.DecidedAt
					e.Note = fmt.Sprintf("decided at round %d (sequential, interval at level %.2g)", f.DecidedAt, f.Alpha)
				case f.Note != "":
					e.Note = f.Note
				case sr.Stopped:
					e.Note = fmt.Sprintf("undecided after %d rounds (sequential, at most %d)", sr.Rounds, sr.Rule.MaxRounds)
				default:
					e.Note = fmt.Sprintf("undecided so far (sequential, %d rounds)", sr.Rounds)
				}
			}
		}
	}
}

// MarshalJSON writes unknown figures (NaN: an undecided figure without an interval) as null.
func (f SequentialFigure) MarshalJSON() ([]byte, error) {
	type plain SequentialFigure
	return json.Marshal(struct {
		plain
		Change *float64 `json:"change"`
		Low    *float64 `json:"low"`
		High   *float64 `json:"high"`
	}{plain(f), finite(f.Change), finite(f.Low), finite(f.High)})
}

package compare

import (
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"
)

// MethodNights is how the latest night of a trend is judged against the nights before it.
const MethodNights = "previous nights (t prediction)"

// MinNights is the fewest previous nights whose spread the trend trusts: with fewer, the night-to-night
// noise is not measured and the latest night's figures are undecided.
const MinNights = 3

// Trend judges the latest night, the last of nights, against the nights before it: per metric, whether
// its figure lies beyond the spread of the previous nights.
//
// Nights are not rounds: the latest has no partner in each previous night, and what a regression means is
// "outside what the previous nights vary by". So where Compare takes the mean of paired differences, Trend
// takes the latest figure's distance from the mean of the previous nights (on the log scale for ratio
// figures, as Compare does) and Student's t prediction interval for one new observation,
// mean ± t(n-1)·s·√(1+1/n): the interval in which the latest night would fall with 95% probability if
// nothing had changed. Everything else is Compare's: the practical threshold (--min-effect), Holm's
// adjustment over the night's figures, and the verdicts; the practical threshold is raised to a quantized
// figure's Resolution, since previous nights of a bucketed figure often agree exactly and their zero spread
// would otherwise make any move to the next bucket "beyond their noise". A figure within the previous nights' noise is
// "no difference"; more nights would not narrow the prediction interval below their own spread, so the
// rounds-needed estimate has no meaning here.
//
// Each night's figures are its Values' first entry (one run per night); a night without a figure is left
// out of that figure's history.
func Trend(metrics []Metric, nights []Figures, opts Options) Result {
	if opts.MinEffect <= 0 {
		opts.MinEffect = DefaultMinEffect
	}
	res := Result{MinEffect: opts.MinEffect}
	if len(nights) == 0 {
		return res
	}
	latest, previous := nights[len(nights)-1], nights[:len(nights)-1]
	res.Baseline = fmt.Sprintf("previous %d nights", len(previous))
	if len(previous) == 1 {
		res.Baseline = "previous night"
	}
	ve := VariantEffects{Label: latest.Label}
	for _, m := range metrics {
		var hist []float64
		for _, n := range previous {
			if x := first(n.Values[m.ID]); !math.IsNaN(x) {
				hist = append(hist, x)
			}
		}
		ve.Effects = append(ve.Effects, predict(m, hist, first(latest.Values[m.ID]), opts.MinEffect))
	}
	adjust(ve.Effects)
	for i := range ve.Effects {
		e := &ve.Effects[i]
		decide(e, 0)
		if e.Verdict == Undecided && e.Method == MethodNights {
			// Not significant, but the prediction interval is wider than the threshold: the latest night
			// is within the previous nights' noise, which more nights would not shrink.
			e.Verdict, e.RoundsNeeded = NoDifference, 0
			e.Note = "within the previous nights' noise (prediction interval ±" + noiseWidth(*e) + ")"
		}
	}
	res.Variants = append(res.Variants, ve)
	opts.Gate.mark(&res)
	return res
}

// predict measures how far the latest figure y lies from the previous nights' figures hist.
func predict(m Metric, hist []float64, y, minEffect float64) Effect {
	e := Effect{Metric: m, Baseline: median(hist), Value: y,
		Change: math.NaN(), Low: math.NaN(), High: math.NaN(), P: math.NaN(), halfWidth: math.Inf(1)}
	switch {
	case math.IsNaN(y):
		e.Note = "no figure in the latest night"
		return e
	case len(hist) < MinNights:
		e.Note = fmt.Sprintf("%d previous nights with this figure: the trend needs %d to measure their noise", len(hist), MinNights)
		e.RoundsNeeded = MinNights
		return e
	}
	logScale := m.Scale == Ratio
	if logScale && !(allPositive(hist) && y > 0) {
		e.Note = "a night has a non-positive value of a ratio figure"
		return e
	}
	xs, yv := hist, y
	e.threshold = math.Log1p(minEffect)
	if m.Resolution > 1 {
		e.threshold = max(e.threshold, math.Log(m.Resolution))
	}
	if logScale {
		xs = make([]float64, len(hist))
		for i, x := range hist {
			xs[i] = math.Log(x)
		}
		yv = math.Log(y)
	} else {
		e.threshold = max(minEffect*math.Abs(e.Baseline), m.Floor)
	}
	n := float64(len(xs))
	var mean, ss float64
	for _, x := range xs {
		mean += x / n
	}
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	sd := math.Sqrt(ss / (n - 1))
	se := sd * math.Sqrt(1+1/n)
	d := yv - mean
	e.Method, e.N, e.est, e.sd = MethodNights, len(xs), d, sd
	if se == 0 || se < 1e-12*math.Abs(d) {
		// Identical previous nights (a count that never moved, a throughput always on plan): a change
		// is beyond their noise only when it exceeds the practical threshold itself, so that a figure
		// with a floor (one more leader change) does not alarm on its smallest possible step.
		e.P = 1
		if math.Abs(d) > e.threshold {
			e.P = 0
		}
		e.halfWidth, e.Change, e.Low, e.High = 0, d, d, d
	} else {
		t := tQuantile(1-Alpha/2, n-1)
		e.P = 2 * distuv.StudentsT{Mu: 0, Sigma: 1, Nu: n - 1}.CDF(-math.Abs(d/se))
		e.halfWidth = t * se
		e.Change, e.Low, e.High = d, d-t*se, d+t*se
	}
	if logScale {
		e.Change, e.Low, e.High = math.Expm1(e.Change), math.Expm1(e.Low), math.Expm1(e.High)
	}
	return e
}

// noiseWidth is the prediction interval's half-width: in percent for ratio figures, in the figure's unit
// otherwise.
func noiseWidth(e Effect) string {
	if e.Metric.Scale == Ratio {
		return fmt.Sprintf("%.0f%%", 100*math.Expm1(e.halfWidth))
	}
	return strings.TrimSpace(FormatValue(e.halfWidth, e.Metric.Unit) + " " + e.Metric.Unit)
}

// first is the first value of a night's figure (NaN: none).
func first(xs []float64) float64 {
	for _, x := range xs {
		if !math.IsNaN(x) {
			return x
		}
	}
	return math.NaN()
}

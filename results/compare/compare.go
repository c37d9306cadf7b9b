// Package compare is chaosbench's one comparison engine: given the figures of a baseline and of other
// variants (etcd versions, flag sets), measured over repeated rounds, it estimates each variant's effect on
// every figure with a 95% confidence interval, controls the false alarms of many figures at once, and
// calls a verdict per figure: better, worse, no difference, or undecided with the rounds it would take.
// `chaosbench compare`, `chaosbench report A B` and the nightly trend all call it, so the same runs give
// the same figures everywhere.
//
// # Method
//
// With two rounds or more per variant, the rounds are paired (round r of every variant ran back to back,
// in ABBA order, with the same seed) and the effect is estimated from the per-round differences: of the
// logarithms for figures that are ratios (latencies, throughput, fsync), so that the effect is a relative
// change and the long right tail of latencies is made roughly symmetric; of the values themselves for
// figures that can be zero (error rate, availability gaps, leader changes). The interval is Student's t
// interval of the mean paired difference with n-1 degrees of freedom. We chose it over the alternatives
// because a benchmark affords few rounds (3 to 10): a rank method (Wilcoxon signed-rank, Hodges-Lehmann)
// cannot produce any 95% interval with fewer than 6 pairs, nor survive a multiple-comparison correction
// with fewer than about 10; a bootstrap of 3 to 5 rounds has only a handful of distinct resamples and its
// percentile interval is far too narrow. The t interval with the right degrees of freedom is exact for
// normal differences, robust to moderate departures once on the log scale, and its width at small n is the
// honest price of few rounds. Pairing removes the machine's drift between rounds.
//
// With one run per variant there is no run-to-run noise to measure. Figures the runs record per interval
// (timeseries.jsonl: per-second throughput, p50, p99, error rate) are then compared from those samples:
// the Hodges-Lehmann estimate of the shift (the median of all pairwise differences) with the distribution-
// free interval of the Mann-Whitney test, whose variance is inflated by (1+ρ)/(1-ρ) for the lag-1
// autocorrelation ρ of neighbouring seconds, with t quantiles on the effective sample size (see
// hodgesLehmann; without that correction, A against A raised false alarms in 4 of 20 repetitions). Such an interval covers the noise within a run only: every
// effect says which method it used, and figures without per-interval samples are undecided.
//
// # Verdicts
//
// The p-values of all the figures of one variant are adjusted with Holm's step-down method, which bounds
// the probability of any false alarm among them by 5% without assuming independence. A figure is
// better or worse when its adjusted p-value is below 0.05 and its estimated change is at least the
// practical threshold (--min-effect, 5% by default; for figures that can be zero, also at least a floor in
// their own unit); a significant change smaller than that is no difference. A change that is not
// significant is no difference when the interval is narrow enough to have shown a change of the threshold
// (its half-width is at most the threshold), and undecided otherwise, with the number of rounds whose
// interval would be that narrow, estimated from the measured noise.
package compare

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"
)

// Alpha is the family-wise false-alarm rate of one variant's verdicts, and 1-Alpha the confidence of the
// intervals.
const Alpha = 0.05

// DefaultMinEffect is the practical threshold: a smaller change is no difference even when significant.
const DefaultMinEffect = 0.05

// minIntervals is the fewest per-interval samples per run the interval method accepts; maxBatches bounds
// the samples it compares (consecutive intervals are averaged into batches beyond it), so that the m·n
// pairwise differences stay small whatever the length of the runs.
const (
	minIntervals = 5
	maxBatches   = 200
)

// Direction says which way a figure improves.
type Direction int

// The directions.
const (
	LowerIsBetter Direction = iota
	HigherIsBetter
)

// MarshalText names the direction in JSON: "lower-is-better" or "higher-is-better".
func (d Direction) MarshalText() ([]byte, error) {
	if d == HigherIsBetter {
		return []byte("higher-is-better"), nil
	}
	return []byte("lower-is-better"), nil
}

// UnmarshalText reads what MarshalText writes.
func (d *Direction) UnmarshalText(b []byte) error {
	switch string(b) {
	case "higher-is-better":
		*d = HigherIsBetter
	case "lower-is-better":
		*d = LowerIsBetter
	default:
		return fmt.Errorf("direction %q: lower-is-better or higher-is-better", b)
	}
	return nil
}

// Scale says how a figure's effect is measured.
type Scale int

// The scales.
const (
	// Ratio figures are positive; their effect is a relative change, estimated on the log scale.
	Ratio Scale = iota
	// Difference figures can be zero; their effect is a difference in their own unit.
	Difference
)

// MarshalText names the scale in JSON: "ratio" or "difference".
func (s Scale) MarshalText() ([]byte, error) {
	if s == Difference {
		return []byte("difference"), nil
	}
	return []byte("ratio"), nil
}

// UnmarshalText reads what MarshalText writes.
func (s *Scale) UnmarshalText(b []byte) error {
	switch string(b) {
	case "difference":
		*s = Difference
	case "ratio":
		*s = Ratio
	default:
		return fmt.Errorf("scale %q: ratio or difference", b)
	}
	return nil
}

// Metric is a figure that is compared.
type Metric struct {
	// ID names the figure in flags and in the gate's messages: "put:p99", "create/pods:throughput",
	// "etcd:wal_fsync_p99", "fault1:write_gap".
	ID string `json:"id"`
	// Label describes it for people where the ID does not ("fault 1: kill m1").
	Label     string    `json:"label,omitempty"`
	Unit      string    `json:"unit"`
	Direction Direction `json:"direction"`
	Scale     Scale     `json:"scale"`
	// Floor is, for Difference figures, the smallest change in Unit that matters whatever the baseline
	// (an error rate going from 0 to 0.001% is not a regression of infinite percent).
	Floor float64 `json:"floor,omitempty"`
	// Resolution is, for Ratio figures read from a bucketed histogram (etcd's own metrics, whose buckets
	// double), the ratio between neighbouring buckets: a change within one bucket is below what the figure
	// can resolve. A trend, whose previous nights of such a figure are often identical, does not call a
	// change smaller than that a regression (0: the figure is not quantized).
	Resolution float64 `json:"resolution,omitempty"`
}

// Figures are one variant's measurements: per metric ID, one value per round (NaN where a round has none)
// and, per round, the per-interval samples of the run (nil where there are none).
type Figures struct {
	Label     string
	Values    map[string][]float64
	Intervals map[string][][]float64
}

// Verdict is the call on one figure of one variant.
type Verdict string

// The verdicts. Undecided is never a pass nor a failure: it says more rounds are needed.
const (
	Better       Verdict = "better"
	Worse        Verdict = "worse"
	NoDifference Verdict = "no difference"
	Undecided    Verdict = "undecided"
)

// oneRunNote is the note of every effect estimated from one run per variant.
const oneRunNote = "one run per variant: the interval covers the noise within the runs, not between runs"

// Methods an effect is estimated with.
const (
	MethodRounds    = "paired rounds (t)"
	MethodIntervals = "per-interval samples of one run (Hodges-Lehmann)"
)

// Effect is a variant's effect on one figure, against the baseline.
type Effect struct {
	Metric Metric `json:"metric"`
	// Baseline and Value are the figure as shown: the median over the rounds (NaN: none).
	Baseline float64 `json:"baseline"`
	Value    float64 `json:"value"`
	// Method is how the effect was estimated (MethodRounds, MethodIntervals; "" when it could not be).
	Method string `json:"method,omitempty"`
	// N is the number of round pairs, or the per-interval samples of the variant's run.
	N int `json:"n"`
	// Change, Low and High are the estimated change and its 95% interval: relative (0.12 = +12%) for
	// Ratio figures, in the figure's unit for Difference figures. NaN when unknown.
	Change float64 `json:"change"`
	Low    float64 `json:"low"`
	High   float64 `json:"high"`
	// P is the two-sided p-value of "no change", PAdjusted its Holm adjustment over the variant's figures.
	P         float64 `json:"p"`
	PAdjusted float64 `json:"p_adjusted"`
	Verdict   Verdict `json:"verdict"`
	// RoundsNeeded estimates, for an undecided figure, how many rounds per variant would decide it
	// (0: unknown).
	RoundsNeeded int `json:"rounds_needed,omitempty"`
	// Note says why a figure is undecided, or what its interval covers.
	Note string `json:"note,omitempty"`

	// est, halfWidth and threshold are the estimate, the interval's half-width and the practical
	// threshold, on the scale of the analysis (logarithms for ratios, the values otherwise).
	est, halfWidth, threshold float64
	// sd is the standard deviation of the paired differences (rounds only).
	sd float64
}

// VariantEffects are one variant's effects, in metric order.
type VariantEffects struct {
	Label   string   `json:"label"`
	Effects []Effect `json:"effects"`
}

// Result is a whole comparison: the baseline, the options, and each other variant's effects.
type Result struct {
	Baseline  string           `json:"baseline"`
	MinEffect float64          `json:"min_effect"`
	Variants  []VariantEffects `json:"variants"`
	// Machines warns when the runs were measured on different machines (CheckMachines).
	Machines []string `json:"machines,omitempty"`
}

// Options tune a comparison.
type Options struct {
	// MinEffect is the practical threshold as a fraction (0.05 = 5%); 0 means DefaultMinEffect.
	MinEffect float64
	// AcrossHosts says runs on different machines are compared on purpose (see CheckMachines).
	AcrossHosts bool
}

// Runs compares runs of variants, the first being the baseline: the figures of their summaries and time
// series (Collect), their effects (Compare), and whether they ran on the same machine (CheckMachines).
// Every command that compares runs calls it, so that the same runs give the same result.
func Runs(variants []Variant, opts Options) Result {
	metrics, figures := Collect(variants)
	r := Compare(metrics, figures, opts)
	r.Machines = CheckMachines(variants, opts.AcrossHosts)
	return r
}

// Compare compares every variant after the first (the baseline) with the baseline, on metrics in order.
func Compare(metrics []Metric, variants []Figures, opts Options) Result {
	if opts.MinEffect <= 0 {
		opts.MinEffect = DefaultMinEffect
	}
	res := Result{MinEffect: opts.MinEffect}
	if len(variants) == 0 {
		return res
	}
	base := variants[0]
	res.Baseline = base.Label
	for _, v := range variants[1:] {
		ve := VariantEffects{Label: v.Label}
		for _, m := range metrics {
			ve.Effects = append(ve.Effects, estimate(m, base, v, opts.MinEffect))
		}
		family := adjust(ve.Effects)
		for i := range ve.Effects {
			decide(&ve.Effects[i], family)
		}
		res.Variants = append(res.Variants, ve)
	}
	return res
}

// estimate measures the effect of one figure; the verdict is decided after Holm's adjustment.
func estimate(m Metric, base, v Figures, minEffect float64) Effect {
	a, b := base.Values[m.ID], v.Values[m.ID]
	e := Effect{Metric: m, Baseline: median(a), Value: median(b),
		Change: math.NaN(), Low: math.NaN(), High: math.NaN(), P: math.NaN(), halfWidth: math.Inf(1)}
	if math.IsNaN(e.Baseline) || math.IsNaN(e.Value) {
		e.Note = "no figure in one of the variants"
		return e
	}
	// The analysis scale: logarithms for ratios (when every value is positive), the values otherwise.
	logScale := m.Scale == Ratio
	e.threshold = math.Log1p(minEffect)
	if !logScale {
		e.threshold = max(minEffect*math.Abs(e.Baseline), m.Floor)
	}
	var xs, ys []float64
	for i := range min(len(a), len(b)) {
		if !math.IsNaN(a[i]) && !math.IsNaN(b[i]) {
			xs, ys = append(xs, a[i]), append(ys, b[i])
		}
	}
	if len(xs) >= 2 && (!logScale || (allPositive(xs) && allPositive(ys))) {
		d := make([]float64, len(xs))
		for i := range xs {
			if logScale {
				d[i] = math.Log(ys[i]) - math.Log(xs[i])
			} else {
				d[i] = ys[i] - xs[i]
			}
		}
		e.Method, e.N = MethodRounds, len(d)
		est, lo, hi, p, sd := pairedT(d)
		e.P, e.est, e.halfWidth = p, est, (hi-lo)/2
		e.Change, e.Low, e.High = est, lo, hi
		if logScale {
			e.Change, e.Low, e.High = math.Expm1(est), math.Expm1(lo), math.Expm1(hi)
		}
		e.sd = sd
		return e
	}
	ra, ia := firstIntervals(base.Intervals[m.ID])
	rb, ib := firstIntervals(v.Intervals[m.ID])
	if len(ia) >= minIntervals && len(ib) >= minIntervals {
		// The figures shown are those of the runs compared.
		e.Baseline, e.Value = a[ra], b[rb]
		useLog := logScale && allPositive(ia) && allPositive(ib)
		if !useLog && m.Scale == Ratio && median(ia) == 0 {
			e.Note = "the baseline's per-interval median is zero: no relative change"
			return e
		}
		if !useLog {
			// Per-interval samples of a ratio figure can be zero (a second without a completed
			// request): compare the values, with the threshold relative to the baseline's median.
			e.threshold = max(minEffect*math.Abs(median(ia)), m.Floor)
		}
		x, y := batches(ia, useLog), batches(ib, useLog)
		est, lo, hi, p := hodgesLehmann(x, y)
		e.Method, e.N = MethodIntervals, len(ib)
		e.P, e.est, e.halfWidth = p, est, (hi-lo)/2
		e.Change, e.Low, e.High = est, lo, hi
		switch {
		case useLog:
			e.Change, e.Low, e.High = math.Expm1(est), math.Expm1(lo), math.Expm1(hi)
		case m.Scale == Ratio:
			// Shown relative, as the rounds would show it.
			mid := median(ia)
			e.Change, e.Low, e.High = est/mid, lo/mid, hi/mid
		}
		e.Note = oneRunNote
		return e
	}
	if len(xs) < 2 {
		e.Note = "one run per variant and no per-interval samples of this figure: needs rounds"
		e.RoundsNeeded = 3
	} else {
		e.Note = "a round has a non-positive value of a ratio figure"
	}
	return e
}

// adjust sets each effect's PAdjusted, Holm's adjustment of the p-values of one variant's effects, and
// returns the size of that family (the effects with a p-value).
func adjust(effects []Effect) (family int) {
	p := make([]float64, len(effects))
	for i, e := range effects {
		p[i] = e.P
		if !math.IsNaN(e.P) {
			family++
		}
	}
	for i, pa := range Holm(p) {
		effects[i].PAdjusted = pa
	}
	return family
}

// decide calls the verdict of an estimated effect whose PAdjusted is set.
//
// family is the number of figures in Holm's family: the rounds an undecided figure needs are estimated for
// a test at the Bonferroni level Alpha/family, which Holm's first step uses and its later steps relax.
func decide(e *Effect, family int) {
	if e.Method == "" {
		e.Verdict = Undecided
		return
	}
	big := math.Abs(e.est) >= e.threshold
	switch {
	case e.PAdjusted < Alpha && big:
		worse := e.Change > 0
		if e.Metric.Direction == HigherIsBetter {
			worse = !worse
		}
		e.Verdict = Better
		if worse {
			e.Verdict = Worse
		}
		e.RoundsNeeded = 0
	case e.PAdjusted < Alpha:
		e.Verdict = NoDifference
		e.RoundsNeeded = 0
		e.Note = joinNote(e.Note, "significant, but smaller than the practical threshold")
	case e.halfWidth <= e.threshold:
		e.Verdict = NoDifference
		e.RoundsNeeded = 0
	default:
		e.Verdict = Undecided
		if e.Method == MethodIntervals {
			e.RoundsNeeded = 3
			e.Note = joinNote(e.Note, "too noisy: run --rounds 3 or more")
		} else {
			e.RoundsNeeded = roundsNeeded(e.sd, e.est, e.threshold, e.N, family)
			e.Note = joinNote(e.Note, fmt.Sprintf("too noisy: about %s rounds would decide it", roundsText(e.RoundsNeeded)))
		}
	}
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func roundsText(n int) string {
	if n <= 0 {
		return "many"
	}
	return fmt.Sprint(n)
}

// maxRounds bounds the rounds-needed estimate: beyond it, "more than maxRounds" is all that matters.
const maxRounds = 1000

// roundsNeeded estimates, from the measured standard deviation sd of the paired differences and the
// estimated change est, the fewest round pairs that would decide the figure (0 when more than maxRounds):
// for a change at least the threshold, enough for the change to be significant at the Bonferroni level
// Alpha/family (it would be called better or worse); for a smaller one, enough for the interval's
// half-width to shrink to the threshold (it would be called no difference).
func roundsNeeded(sd, est, threshold float64, have, family int) int {
	if sd == 0 {
		return have
	}
	family = max(family, 1)
	decides := func(n int) bool {
		se := sd / math.Sqrt(float64(n))
		if math.Abs(est) >= threshold {
			return math.Abs(est)/se >= tQuantile(1-Alpha/(2*float64(family)), float64(n-1))
		}
		return tQuantile(1-Alpha/2, float64(n-1))*se <= threshold
	}
	// Both criteria only get easier with more rounds: search for the first n that meets them.
	if !decides(maxRounds) {
		return 0
	}
	lo, hi := 2, maxRounds
	for lo < hi {
		mid := (lo + hi) / 2
		if decides(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return max(lo, have+1)
}

// pairedT returns the mean of the differences d, its 95% t interval, the two-sided p-value of a zero
// mean, and the standard deviation of d.
func pairedT(d []float64) (est, lo, hi, p, sd float64) {
	n := float64(len(d))
	for _, x := range d {
		est += x / n
	}
	var ss float64
	for _, x := range d {
		ss += (x - est) * (x - est)
	}
	sd = math.Sqrt(ss / (n - 1))
	se := sd / math.Sqrt(n)
	if se == 0 || se < 1e-12*math.Abs(est) {
		p = 1
		if est != 0 {
			p = 0
		}
		return est, est, est, p, 0
	}
	t := tQuantile(1-Alpha/2, n-1)
	st := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: n - 1}
	p = 2 * st.CDF(-math.Abs(est/se))
	return est, est - t*se, est + t*se, p, sd
}

func tQuantile(p, df float64) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(p)
}

// hodgesLehmann returns the Hodges-Lehmann estimate of the shift from x to y (the median of all pairwise
// differences y_j - x_i), its distribution-free 95% interval from the Mann-Whitney statistic's normal
// approximation, and the test's two-sided p-value. The variance of the statistic is inflated by
// (1+ρ)/(1-ρ), ρ being the mean lag-1 autocorrelation of the two series (bias-corrected, clamped to
// [0, 0.9]), and its quantiles are Student's with the effective sample size less one as degrees of
// freedom: neighbouring intervals of one run are not independent, and ignoring that made false alarms
// several times more frequent than 5% in A-against-A tests.
func hodgesLehmann(x, y []float64) (est, lo, hi, p float64) {
	m, n := float64(len(x)), float64(len(y))
	diffs := make([]float64, 0, len(x)*len(y))
	var u float64
	for _, b := range y {
		for _, a := range x {
			diffs = append(diffs, b-a)
			switch {
			case b > a:
				u++
			case b == a:
				u += 0.5
			}
		}
	}
	sort.Float64s(diffs)
	est = median(diffs)
	// The autocorrelation, corrected for the downward bias of its estimate in short series (Kendall's
	// (1+4ρ)/n), inflates the variance; the effective number of independent samples then sets the
	// degrees of freedom of a t quantile, whose heavier tails account for ρ itself being estimated.
	rho := min(max((lag1(x)+(1+4*lag1(x))/m+lag1(y)+(1+4*lag1(y))/n)/2, 0), 0.9)
	inflation := (1 + rho) / (1 - rho)
	v := m * n * (m + n + 1) / 12 * inflation
	df := max(min(m, n)/inflation-1, 1)
	q := tQuantile(1-Alpha/2, df)
	k := int(math.Floor(m*n/2 - q*math.Sqrt(v)))
	k = max(k, 1)
	lo, hi = diffs[k-1], diffs[len(diffs)-k]
	st := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}
	p = 2 * st.CDF(-math.Abs(u-m*n/2)/math.Sqrt(v))
	if est == 0 && lo == 0 && hi == 0 {
		p = 1
	}
	return est, lo, hi, p
}

// lag1 is the lag-1 autocorrelation of xs (0 for a constant series).
func lag1(xs []float64) float64 {
	n := float64(len(xs))
	var mean float64
	for _, x := range xs {
		mean += x / n
	}
	var num, den float64
	for i, x := range xs {
		den += (x - mean) * (x - mean)
		if i > 0 {
			num += (x - mean) * (xs[i-1] - mean)
		}
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// batches returns the samples (their logarithms when useLog), averaged over consecutive runs of
// intervals when there are more than maxBatches.
func batches(xs []float64, useLog bool) []float64 {
	vals := make([]float64, len(xs))
	for i, x := range xs {
		vals[i] = x
		if useLog {
			vals[i] = math.Log(x)
		}
	}
	if len(vals) <= maxBatches {
		return vals
	}
	out := make([]float64, maxBatches)
	for i := range out {
		from, to := i*len(vals)/maxBatches, (i+1)*len(vals)/maxBatches
		var s float64
		for _, v := range vals[from:to] {
			s += v
		}
		out[i] = s / float64(to-from)
	}
	return out
}

// firstIntervals returns the first round that has per-interval samples, and its samples.
func firstIntervals(rounds [][]float64) (int, []float64) {
	for i, r := range rounds {
		if len(r) > 0 {
			return i, r
		}
	}
	return 0, nil
}

// Holm returns Holm's step-down adjustment of the p-values p (NaN entries are left out and stay NaN):
// the k-th smallest of m p-values is multiplied by m-k+1, and the adjusted values are made monotone, so
// that rejecting every adjusted p-value below α bounds the probability of any false rejection by α.
func Holm(p []float64) []float64 {
	idx := make([]int, 0, len(p))
	for i, x := range p {
		if !math.IsNaN(x) {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case p[a] < p[b]:
			return -1
		case p[a] > p[b]:
			return 1
		}
		return 0
	})
	out := make([]float64, len(p))
	for i := range out {
		out[i] = math.NaN()
	}
	m, running := len(idx), 0.0
	for k, i := range idx {
		running = max(running, min(1, float64(m-k)*p[i]))
		out[i] = running
	}
	return out
}

func median(xs []float64) float64 {
	var v []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

func allPositive(xs []float64) bool {
	for _, x := range xs {
		if !(x > 0) {
			return false
		}
	}
	return true
}

// Find returns the effect of metric id on the variant labelled label.
func (r Result) Find(label, id string) (Effect, bool) {
	for _, v := range r.Variants {
		if v.Label != label {
			continue
		}
		for _, e := range v.Effects {
			if e.Metric.ID == id {
				return e, true
			}
		}
	}
	return Effect{}, false
}

// String is the effect in one line: "put:p99 +21.3% [+12.0%, +30.5%] worse".
func (e Effect) String() string {
	return strings.TrimSpace(fmt.Sprintf("%s %s %s", e.Metric.ID, e.ChangeText(), e.Verdict))
}

package compare

import (
	"math"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"
)

// minIntervals is the fewest per-interval samples per run the interval method accepts; maxBatches bounds
// the samples it compares (consecutive intervals are averaged into batches beyond it), so that the m·n
// pairwise differences stay small whatever the length of the runs.
const (
	minIntervals = 5
	maxBatches   = 200
)

// oneRunNote is the note of every effect estimated from one run per variant.
const oneRunNote = "one run per variant: the interval covers the noise within the runs, not between runs"

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

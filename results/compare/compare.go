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
	"strings"
)

// Alpha is the family-wise false-alarm rate of one variant's verdicts, and 1-Alpha the confidence of the
// intervals.
const Alpha = 0.05

// DefaultMinEffect is the practical threshold: a smaller change is no difference even when significant.
const DefaultMinEffect = 0.05

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
	// Gated says the comparison's gate watches the figure: its verdict is part of the outcome (see Gate).
	// A figure that is not gated is informational.
	Gated bool `json:"gated,omitempty"`

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
	// Gate is the figures that decide the comparison's outcome besides its runs' (nil: none; every effect
	// is informational).
	Gate *Gate `json:"gate,omitempty"`
	// Sequential is how a comparison with --rounds auto stopped, and what its rule decided (nil: a fixed
	// number of rounds). The watched figures' effects carry its verdicts.
	Sequential *SequentialResult `json:"sequential,omitempty"`
}

// Options tune a comparison.
type Options struct {
	// MinEffect is the practical threshold as a fraction (0.05 = 5%); 0 means DefaultMinEffect.
	MinEffect float64
	// AcrossHosts says runs on different machines are compared on purpose (see CheckMachines).
	AcrossHosts bool
	// Gate marks the effects that decide the outcome (nil: none).
	Gate *Gate
	// Sequential, when set, decides the watched figures by the sequential rule (--rounds auto) instead of
	// a fixed-rounds test.
	Sequential *Sequential
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
	res := Result{MinEffect: opts.MinEffect, Gate: opts.Gate}
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
	if opts.Sequential != nil {
		res.applySequential(opts.Sequential.Decide(metrics, variants, opts.Gate, opts.MinEffect))
	}
	opts.Gate.mark(&res)
	return res
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

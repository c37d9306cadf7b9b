package compare

import (
	"fmt"
	"math"
	"slices"
)

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

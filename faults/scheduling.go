package faults

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"time"
)

// sleepUntil waits until offset t, or returns false when the runner stops first.
func (r *Runner) sleepUntil(t time.Duration) bool {
	d := t - r.now()
	if d <= 0 {
		return r.ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-r.ctx.Done():
		return false
	}
}

// runEntry plays one schedule entry: its occurrences in turn, each starting at its time (plus seeded
// jitter) or, when the previous one ran late, as soon as that one is healed.
func (r *Runner) runEntry(i int, e Entry) {
	defer r.guard(e.Spec)
	select {
	case <-r.begun:
	case <-r.ctx.Done():
		select {
		case <-r.begun: // the load began, then ended: its occurrences were due
		default:
			return // the load never began: nothing was due
		}
	}
	rng := seeded(r.opts.Seed, "entry", i)
	for k := 0; ; k++ {
		at := e.At + time.Duration(k)*e.Every
		if e.Jitter > 0 {
			at += time.Duration(rng.Int64N(int64(e.Jitter)))
		}
		if r.opts.Duration > 0 && at >= r.opts.Duration {
			if k == 0 {
				// Validate keeps At within the load; its jitter may still push the first occurrence out.
				r.problem(ProblemNothingInjected, e.Spec, fmt.Sprintf("never ran: with its jitter it was due at %s, after the load's end at %s",
					at.Round(time.Millisecond), r.opts.Duration))
			}
			return
		}
		if r.ctx.Err() != nil {
			r.lost(e, k, at, "before its time")
			return
		}
		if why := r.occurrence(e, r.begin+at, rng); why != "" {
			r.lost(e, k, at, why)
			return
		}
		if e.Every == 0 {
			return
		}
	}
}

// lost reports an occurrence that did not start because the runner stopped first (why says at which step).
// Only the end of the load makes that a problem, and only for an occurrence the schedule counted on: one due
// before the load's planned end, or the first of an entry when the load's length was not known. An
// interrupted run is incomplete anyway, and says so.
func (r *Runner) lost(e Entry, k int, at time.Duration, why string) {
	r.mu.Lock()
	reason := r.stopReason
	r.mu.Unlock()
	if reason != LoadEnded || (r.opts.Duration == 0 && k > 0) {
		return
	}
	if ended := r.rel(r.now()); why == "before its time" && at.Seconds() < ended {
		// Due while the load still ran: the entry's earlier occurrences, each longer than its period,
		// had pushed it back until then.
		r.problem(ProblemNothingInjected, e.Spec, fmt.Sprintf("did not start: due at %.2fs, it waited for the occurrences before it, which each took longer than the %s between them, until the load ended at %.2fs",
			at.Seconds(), e.Every, ended))
		return
	}
	r.problem(ProblemNothingInjected, e.Spec, fmt.Sprintf("did not start: the load ended %s (due at %.2fs)", why, at.Seconds()))
}

// seeded returns a random source derived from seed and a name, as workloads.Runner.Rand does.
func seeded(seed int64, name string, i int) *rand.Rand {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", name, i)
	return rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
}

package linearizability

import (
	"context"
	"slices"
	"time"
)

// WithPhaseHook returns opts with fn called as each phase of a check ends, and ten times during the
// replay: the benchmarks measure the live heap there.
func WithPhaseHook(opts Options, fn func(phase string)) Options {
	opts.phaseDone = fn
	return opts
}

// StartDuringLoadEvery is StartDuringLoad looking at the history every poll, checking it each time it has
// grown by growth (and holds at least minBytes): the tests' histories grow in seconds.
func StartDuringLoadEvery(ctx context.Context, dir string, opts Options, poll time.Duration, growth float64, minBytes int64) *DuringLoad {
	return startDuringLoad(ctx, dir, opts, nil, poll, growth, minBytes)
}

// CloneProofs returns a copy of p: a benchmark checks one history twice with the same proofs.
func CloneProofs(p *Proofs) *Proofs {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := NewProofs()
	c.sorted, c.met = slices.Clone(p.sorted), slices.Clone(p.met)
	for f := range p.fresh {
		c.fresh[f] = struct{}{}
	}
	return c
}

// PruneProofs forgets what the check since the last prune did not meet, and FreezeProofs makes p
// read-only, as DuringLoad does after each check and at the load's end.
func PruneProofs(p *Proofs)  { p.prune() }
func FreezeProofs(p *Proofs) { p.freeze("") }

// FollowerRead says whether a finished follower holds the operations' store, the folded watch records and
// the folded operations (all of the store's) for the check to take.
func FollowerRead(f *Follower) (ops, watches, folded bool) {
	return f.store != nil, f.groups != nil, f.folded != nil && f.folded.ops != nil && f.store != nil && f.folded.ops.Len() == f.store.Len()
}

package workloads

import (
	"context"
	"fmt"
	"time"
)

// Share is one load generator's part of a load split over several (chaosbench run --workers N --worker I):
// worker Index of Of. The parts of the same scenario are disjoint and add up to exactly the plan of a single
// generator: every scheduled operation, key and client belongs to one worker. The zero Share is the whole
// load, as is any Share with Of <= 1.
type Share struct {
	Index int `json:"index"`
	Of    int `json:"of"`
}

// Whole reports whether the share is the whole load.
func (s Share) Whole() bool { return s.Of <= 1 }

// String names the share for messages: "worker 2 of 3".
func (s Share) String() string {
	if s.Whole() {
		return "the whole load"
	}
	return fmt.Sprintf("worker %d of %d", s.Index, s.Of)
}

// Part returns this share's part of n things dealt out one by one (clients, connections): n/Of, and one
// more for the first n%Of workers.
func (s Share) Part(n int) int {
	if s.Whole() {
		return n
	}
	p := n / s.Of
	if s.Index < n%s.Of {
		p++
	}
	return p
}

// Range returns the share's contiguous part [first, first+count) of n items (a key space).
func (s Share) Range(n int) (first, count int) {
	if s.Whole() {
		return 0, n
	}
	first = s.Index * n / s.Of
	return first, (s.Index+1)*n/s.Of - first
}

// Owns reports whether item i (an apiserver, a slot) dealt out round robin belongs to this share.
func (s Share) Owns(i int) bool { return s.Whole() || i%s.Of == s.Index }

// Rate returns the share's part of an arrival rate.
func (s Share) Rate(r float64) float64 {
	if s.Whole() {
		return r
	}
	return r / float64(s.Of)
}

// IDBase is the first client number (and watcher number) of the share's recording clients: far enough
// apart that the workers' clients never share a number, so neither do the write ids derived from them
// (Client.NewValue), and a merged history keeps every worker's clients apart.
func (s Share) IDBase() int {
	if s.Whole() {
		return 0
	}
	return s.Index << shareIDBits
}

// shareIDBits leaves each worker 16 million client numbers: write ids hold client+1 in 32 bits, so 64
// workers fit.
const shareIDBits = 24

// MaxShares is the largest number of workers a load can be split over (see IDBase).
const MaxShares = 64

// Idle is the load of a run that sends none: the coordinator of a split load whose workers all run
// elsewhere holds the cluster, the fault schedule and etcd's metrics for the load's duration, and marks
// its start, so that its fault windows line up with the workers' load.
type Idle struct{}

// Name returns "idle".
func (Idle) Name() string { return "idle" }

// Setup does nothing.
func (Idle) Setup(context.Context, *Runner) error { return nil }

// Run marks the start of the load and waits for its duration, or until ctx ends.
func (Idle) Run(ctx context.Context, r *Runner) error {
	r.Recorder().Begin()
	t := time.NewTimer(r.Options().Duration)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return nil
}

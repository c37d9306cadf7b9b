package linearizability

// When each revision was first known to exist, in the history's real time: what bounds when a failed
// write could have taken effect and when a lease's keys were known to be gone.

import (
	"sort"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// computeExisted finds, for every revision, the earliest moment the run knew it existed: an answer or
// watch response carrying that revision or a later one.
func (c *checker) computeExisted() {
	n := c.rev(c.maxRev) + 1
	c.existed = make([]int64, n)
	for i := range c.existed {
		c.existed[i] = infinity
	}
	note := func(r, t int64) {
		if r > c.base && r <= c.maxRev {
			i := c.rev(r)
			c.existed[i] = min(c.existed[i], t)
		}
	}
	for i := range c.h.Operations {
		op := &c.h.Operations[i]
		oi := &c.ops[i]
		switch {
		case op.Response != nil:
			note(op.Response.Revision, op.Return)
		case oi.state == opResolved:
			note(oi.rev, oi.seen)
		}
	}
	c.eachWatch(func(_ int32, r *history.WatchResponse) {
		note(r.Revision, r.Time)
		for j := range r.Events {
			note(r.Events[j].KV.ModRevision, r.Time)
		}
	})
	for i := n - 2; i >= 0; i-- {
		c.existed[i] = min(c.existed[i], c.existed[i+1])
	}
}

// existedAt returns when revision r was first known to exist.
func (c *checker) existedAt(r int64) int64 {
	if r <= c.base {
		return -infinity
	}
	if r > c.maxRev {
		return infinity
	}
	return c.existed[c.rev(r)]
}

// firstAfter returns the first revision known to exist only after time t: the first revision an operation
// called at t could have written.
func (c *checker) firstAfter(t int64) int64 {
	i := sort.Search(len(c.existed), func(i int) bool { return c.existed[i] > t })
	return c.base + int64(i)
}

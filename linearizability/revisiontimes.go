package linearizability

// When each revision was first known to exist, in the history's real time: what bounds when a failed
// write could have taken effect and when a lease's keys were known to be gone.

import (
	"sort"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// initExisted, noteExistedWatch and computeExisted find, for every revision, the earliest moment the run
// knew it existed: an answer or watch response carrying that revision or a later one.
func (c *checker) initExisted() {
	c.existed = newArray[int64](c, c.rev(c.maxRev)+1)
	for i := range c.existed.Len() {
		c.existed.Set(i, infinity)
	}
}

// noteExisted records that revision r existed at time t.
func (c *checker) noteExisted(r, t int64) {
	if r > c.base && r <= c.maxRev {
		i := c.rev(r)
		c.existed.Set(i, min(c.existed.Get(i), t))
	}
}

// noteExistedWatch records the revisions a watch record carries as existing when it arrived.
func (c *checker) noteExistedWatch(r *history.WatchResponse) {
	c.noteExisted(r.Revision, r.Time)
	for j := range r.Events {
		c.noteExisted(r.Events[j].KV.ModRevision, r.Time)
	}
}

// computeExisted adds the answers' revisions (failed writes seen count from their first sighting) to
// the watch records' and makes each revision's time the earliest of it and every later one.
func (c *checker) computeExisted() {
	for i := range c.ops.Len() {
		oi := c.ops.Get(i)
		switch {
		case oi.answered: // an answered operation's ret is its return time, hdr its header's revision
			c.noteExisted(oi.hdr, oi.ret)
		case oi.state == opResolved:
			c.noteExisted(oi.rev, oi.seen)
		}
	}
	for i := c.existed.Len() - 2; i >= 0; i-- {
		c.existed.Set(i, min(c.existed.Get(i), c.existed.Get(i+1)))
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
	return c.existed.Get(c.rev(r))
}

// firstAfter returns the first revision known to exist only after time t: the first revision an operation
// called at t could have written.
func (c *checker) firstAfter(t int64) int64 {
	i := sort.Search(c.existed.Len(), func(i int) bool { return c.existed.Get(i) > t })
	return c.base + int64(i)
}

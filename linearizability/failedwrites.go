package linearizability

// Failed writes that may have taken effect: the revisions nobody is known to have written, and which of
// them each failed write could have taken. What is left undecided makes keys uncertain in the replay.

import (
	"sort"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// findGaps lists the revisions nobody is known to have written, the only ones a failed write can have
// taken, and among them the gaps: those no watcher saw and no revoke claims.
func (c *checker) findGaps() {
	for r := c.base + 1; r <= c.maxRev; r++ {
		if c.writer.Get(c.rev(r)) >= 0 {
			continue
		}
		if len(c.observedAt(r)) == 0 && len(c.revokes[r]) == 0 {
			c.gaps = append(c.gaps, r)
		}
		c.uncertain = append(c.uncertain, r)
	}
	c.stats.Gaps = len(c.gaps)
}

// candidates decides, for every failed write not resolved from evidence, whether it may have taken effect:
// only at a revision nobody is known to have written, known to exist only after the write was sent. A
// failed write with no such revision never took effect. The others may have, and their effect happened
// before the last such revision was known to exist, which bounds their return time.
func (c *checker) candidates() {
	c.candFrom = make([]int64, len(c.ks.keys))
	c.candRevok = map[int64]int64{}
	var lastUncertain int64 = -1
	if n := len(c.uncertain); n > 0 {
		lastUncertain = c.uncertain[n-1]
	}
	for i := range c.ops.Len() {
		oi := c.ops.Get(i)
		if oi.state != opUnresolved {
			continue
		}
		first, last, ok := c.candidateRevisions(i, c.firstAfter(oi.call))
		if lastUncertain < 0 || !ok {
			oi.state = opDropped
			c.ops.Set(i, oi)
			c.stats.DroppedWrites++
			continue
		}
		c.stats.UnresolvedWrites++
		if t := c.existedAt(last); t < infinity {
			oi.ret = t
			c.ops.Set(i, oi)
		}
		op := c.op(i)
		if op.Request.Kind == history.KindLeaseRevoke {
			id := op.Request.Lease.ID
			if f, ok := c.candRevok[id]; !ok || first < f {
				c.candRevok[id] = first
			}
			continue
		}
		v, _ := viewOf(op)
		for b := range 2 {
			for _, sub := range v.branches[b] {
				lo, hi := int32(0), int32(0)
				switch sub.Kind {
				case history.KindPut:
					lo, hi = c.ks.interval(sub.Put.Key, "")
				case history.KindDelete:
					lo, hi = c.ks.interval(sub.Delete.Key, sub.Delete.End)
				}
				for k := lo; k < hi; k++ {
					if c.candFrom[k] == 0 || first < c.candFrom[k] {
						c.candFrom[k] = first
					}
				}
			}
		}
	}
}

// candidateRevisions returns the first and last revision a failed write may have taken effect at: a
// revision nobody is known to have written, known to exist only after the write was sent, at which no
// watcher covered a key the write certainly changes (each branch puts its keys). ok is false when there is
// none: the write never took effect.
func (c *checker) candidateRevisions(i int, from int64) (first, last int64, ok bool) {
	op := c.op(i)
	// Each branch that writes: the keys it puts and the single keys it deletes. A put of a covered key
	// would have been seen (and resolved the write); a delete of a covered key either shows as a delete
	// event at that revision or, when the key did not exist, takes no revision at all.
	type branch struct{ puts, dels []int32 }
	var branches []branch
	if op.Request.Kind == history.KindLeaseRevoke {
		branches = []branch{{}}
	} else {
		v, _ := viewOf(op)
		for b := range 2 {
			writes := false
			var br branch
			for _, sub := range v.branches[b] {
				switch sub.Kind {
				case history.KindPut:
					writes = true
					br.puts = append(br.puts, c.rank(sub.Put.Key))
				case history.KindDelete:
					writes = true
					if sub.Delete.End == "" {
						br.dels = append(br.dels, c.rank(sub.Delete.Key))
					}
				}
			}
			if writes {
				branches = append(branches, br)
			}
		}
	}
	deletedAt := func(k int32, g int64) bool {
		obs := c.observedAt(g)
		for j := range obs {
			if o := &obs[j]; o.rank == k && c.event(o).Type == history.EventDelete {
				return true
			}
		}
		return false
	}
	possible := func(g int64) bool {
		for _, br := range branches {
			free := true
			for _, k := range br.puts {
				if c.covered(k, g) {
					free = false
					break
				}
			}
			for _, k := range br.dels {
				if free && c.covered(k, g) && !deletedAt(k, g) {
					free = false
				}
			}
			if free {
				return true
			}
		}
		return false
	}
	j := sort.Search(len(c.uncertain), func(j int) bool { return c.uncertain[j] >= from })
	for ; j < len(c.uncertain); j++ {
		if possible(c.uncertain[j]) {
			first, ok = c.uncertain[j], true
			break
		}
	}
	if !ok {
		return 0, 0, false
	}
	for k := len(c.uncertain) - 1; k >= j; k-- {
		if possible(c.uncertain[k]) {
			return first, c.uncertain[k], true
		}
	}
	return first, first, true
}

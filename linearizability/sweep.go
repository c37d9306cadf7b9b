package linearizability

// The replay: every revision of the run in order, its writes applied to one state of the whole store and
// every answer checked against the state at the revision it carries. This file drives it; the key state,
// the writes, the writes nobody answered for and the checks of answers have files of their own.

import (
	"cmp"
	"fmt"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// canonEvent is one change the replay made at a revision: what every watcher of the key must see.
//
// The canonical log holds one per change of the run, in a paged array (in a file when the check pages),
// so it is kept to 64 bytes: the key's version before the change is not held in it but named, and is
// almost always the version the key's change before it made (sweep.prevOf).
type canonEvent struct {
	rev        int64
	r          rec
	rank       int32
	prevAt     int32 // when prevExists is 1: the change that made the key's previous version, or -1-i for prevs[i]
	del        bool
	maybe      bool // a range delete of a key that may not have existed
	unk        uint8
	prevExists int8 // 1, 0, or -1 when the replay does not know
	prevUnk    uint8
}

// observation is an answered operation to check against the replay at revision at.
type observation struct {
	at int64
	op int32
}

// sweep replays every write in revision order and checks every answer against the state at its
// revision: reads (linearizable, serializable, at a past revision), transactions' compares and the
// previous values writes return. It records the changes of each revision for the watch checks.
type sweep struct {
	c   *checker
	st  []keyState
	cur int64

	present rankSet // keys that exist
	fuzzy   rankSet // keys an unresolved write may have touched, or whose first state is unknown
	count   fenwick // over present
	dirtyKs rankSet // keys a lease expiry may have deleted since their anchor

	leaseKeys map[int64]map[int32]struct{}
	writing   bool // a writer is being applied: answers describe the state before it

	canon   *history.Paged[canonEvent]
	prevs   *history.Paged[rec]   // the previous versions of changes that no change before them made
	last    []int32               // by key rank: 1 + the index of the key's last change in canon, 0 for none
	canonAt *history.Paged[int32] // by revision-base
	gap     *history.Paged[bool]  // by revision-base: nobody knows what was written

	kvs []history.KV // the answer checkRange checks, read from the store at once
}

// replay runs the sweep from the run's first revision to its last: at each revision it applies the
// revision's writes, then checks the answers that show the state at it and the revokes that claim it.
// Answers that show the state at the last revision before the run are checked first.
func (c *checker) replay() *sweep {
	n := len(c.ks.keys)
	s := &sweep{
		c: c, st: make([]keyState, n), last: make([]int32, n), canon: newArray[canonEvent](c, 0), prevs: newArray[rec](c, 0),
		present: newRankSet(n), fuzzy: newRankSet(n), dirtyKs: newRankSet(n), count: make(fenwick, n),
		leaseKeys: map[int64]map[int32]struct{}{},
		canonAt:   newArray[int32](c, c.rev(c.maxRev)+2),
		gap:       newArray[bool](c, c.rev(c.maxRev)+1),
	}
	for k := range n {
		if c.candFrom[k] != 0 || c.preRun {
			s.fuzzy.add(int32(k))
		}
	}
	obs := c.observations()
	defer obs.Close()
	j := 0
	s.cur = c.base
	for ; j < obs.Len() && obs.Get(j).at <= c.base; j++ {
		if o := obs.Get(j); o.at == c.base {
			s.observe(o.op)
		}
	}
	for r := c.base + 1; r <= c.maxRev; r++ {
		s.cur = r
		s.canonAt.Set(c.rev(r), int32(s.canon.Len()))
		s.revision(r)
		for ; j < obs.Len() && obs.Get(j).at == r; j++ {
			s.observe(obs.Get(j).op)
		}
		s.checkRevokesAt(r)
		if c.phaseDone != nil && (r-c.base)%max((c.maxRev-c.base)/10, 1) == 0 {
			c.phase("replaying")
		}
	}
	s.canonAt.Set(c.rev(c.maxRev)+1, int32(s.canon.Len()))
	return s
}

// observations lists the answered operations that wrote nothing, by the revision whose state they show
// (and, at one revision, in file order).
func (c *checker) observations() *history.Paged[observation] {
	obs := newArray[observation](c, 0)
	for i := range c.hist.Len() {
		oi := c.ops.Get(i)
		if oi.state != opAcked || oi.wrote {
			continue
		}
		op := c.op(i)
		switch op.Request.Kind {
		case history.KindRange, history.KindTxn, history.KindDelete:
		default:
			continue
		}
		at := oi.hdr
		if op.Request.Kind == history.KindRange && op.Request.Range != nil && op.Request.Range.Revision != 0 {
			at = op.Request.Range.Revision
			if at > oi.hdr {
				c.vs.add(Violation{Check: checkOf(op), Kind: "read from the future", Key: opKey(op), Revision: at, Ops: []int{i}, Time: op.Call,
					Message: fmt.Sprintf("%s read revision %d, after the store's revision %d, and succeeded (etcd answers ErrFutureRev)", c.describe(i), at, oi.hdr)})
				continue
			}
		}
		if at < c.base || at > c.maxRev {
			continue
		}
		obs.Add(observation{at: at, op: int32(i)})
	}
	return sortPaged(c, obs, func(a, b observation) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.op, b.op)) })
}

// checkOf is the check an answer's findings belong to: a serializable read's (a range, or a read-only
// transaction of them) are the serializable check's, which allows it to be stale.
func checkOf(op *history.Operation) string {
	if serializableRead(&op.Request) {
		return CheckSerializable
	}
	return CheckLinearizability
}

// revision applies the writes of revision r.
func (s *sweep) revision(r int64) {
	c := s.c
	w := c.writer.Get(c.rev(r))
	if w < 0 {
		// A revoke whose lease had keys wrote the revision its answer carries.
		for _, i := range c.revokes[r] {
			if id := c.op(int(i)).Request.Lease.ID; len(s.leaseKeys[id]) > 0 {
				w = i
				oi := c.ops.Get(int(i))
				oi.wrote, oi.rev = true, r
				c.ops.Set(int(i), oi)
				c.writer.Set(c.rev(r), i)
				break
			}
		}
	}
	switch {
	case w >= 0:
		s.exec(int(w), true)
	case len(c.observedAt(r)) > 0:
		s.applyObserved(r)
		s.markExpirable(r)
	default:
		s.gap.Set(c.rev(r), true)
		s.markExpirable(r)
	}
}

// exec evaluates operation i on the current state: its compares, then its branch in order. A writer
// (commit) applies its writes at revision s.cur; an observation must find nothing to write.
func (s *sweep) exec(i int, commit bool) {
	c := s.c
	op := c.op(i)
	oi := c.ops.Get(i)
	if op.Request.Kind == history.KindLeaseRevoke {
		s.revoke(i)
		return
	}
	v, ok := viewOf(op)
	if !ok || oi.taken < 0 {
		return
	}
	acked := oi.state == opAcked
	s.writing = commit
	defer func() { s.writing = false }()
	if len(v.cmps) > 0 {
		if got := s.compares(v.cmps); got >= 0 && got != oi.taken {
			want := map[int8]string{0: "false", 1: "true"}
			c.vs.add(Violation{Check: checkOf(op), Kind: "wrong compare outcome", Key: v.cmps[0].Key, Revision: s.cur, Ops: []int{i}, Time: op.Call,
				Message: fmt.Sprintf("%s took the %s branch, but its compares are %s at revision %d", c.describe(i), branchName(oi.taken), want[got], s.curState())})
		}
	}
	branch := v.branches[oi.taken]
	for j := range branch {
		sub := &branch[j]
		var res *history.Response
		if acked && j < len(v.results) {
			res = &v.results[j]
		}
		switch sub.Kind {
		case history.KindRange:
			// A read at a past revision shows a state before the transaction's; what it must answer there
			// is checkTxnPastReads's (compacted or not), not the replay's at this revision.
			if res != nil && res.Range != nil && sub.Range != nil && sub.Range.Revision == 0 {
				s.checkRange(i, sub.Range, res.Range, checkOf(op))
			}
		case history.KindPut:
			if commit && sub.Put != nil {
				s.put(i, sub.Put, res)
			}
		case history.KindDelete:
			if sub.Delete != nil {
				s.del(i, sub.Delete, res, commit)
			}
		}
	}
}

// branchName names a transaction's branch for messages.
func branchName(b int8) string {
	if b == 1 {
		return "then"
	}
	return "else"
}

// observe checks an answered operation that wrote nothing against the state at its revision.
func (s *sweep) observe(i int32) {
	s.exec(int(i), false)
}

// emit records a change at the current revision, the key's version before it being prev: the watch checks
// compare what watchers received with these.
func (s *sweep) emit(e canonEvent, prev rec) {
	e.rev = s.cur
	if e.prevExists == 1 {
		if l := s.last[e.rank]; l > 0 && s.canon.Get(int(l-1)).r == prev {
			e.prevAt = l - 1
		} else {
			e.prevAt = int32(-1 - s.prevs.Len())
			s.prevs.Add(prev)
		}
	}
	s.canon.Add(e)
	s.last[e.rank] = int32(s.canon.Len())
}

// prevOfChange returns the key's version before change e (when e.prevExists is 1).
func (s *sweep) prevOfChange(e *canonEvent) rec {
	if e.prevAt >= 0 {
		return s.canon.Get(int(e.prevAt)).r
	}
	return s.prevs.Get(int(-1 - e.prevAt))
}

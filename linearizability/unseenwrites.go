package linearizability

// Writes nobody answered for, during the replay: failed writes that may have taken effect, lease expiries
// and failed revokes. A key they may have touched is uncertain until an answer shows it again; a revision
// only watchers saw is applied from their events, and each deletion in it needs one of them as its cause.

import (
	"fmt"
	"sort"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// uncertain reports whether key k's state at the current point may differ from the replay's because of
// a write nobody observed: an unresolved failed write or a lease expiry since the key's anchor, or a key
// whose state before the run is unknown.
func (s *sweep) uncertain(k int32) bool {
	c := s.c
	ks := &s.st[k]
	if c.preRun && ks.anchor == 0 {
		return true
	}
	if ks.dirty != 0 {
		return true
	}
	from := c.candFrom[k]
	if from == 0 {
		return false
	}
	from = max(from, ks.anchor+1, ks.clean+1)
	if from > s.cur {
		// Settled up to the current revision already (a list asks again for every key of its range).
		return false
	}
	for i := sort.Search(len(c.uncertain), func(i int) bool { return c.uncertain[i] >= from }); i < len(c.uncertain) && c.uncertain[i] <= s.cur; i++ {
		if g := c.uncertain[i]; s.unknownWriter(g) && !c.covered(k, g) {
			return true
		}
	}
	// Revisions up to the current one have their writers settled: remember the answer.
	ks.clean = s.cur
	return false
}

// unknownWriter reports whether nobody is known to have written revision r (a revoke may turn out to be
// its writer during the replay).
func (s *sweep) unknownWriter(r int64) bool { return s.c.writer.Get(s.c.rev(r)) < 0 }

// nextUncertainCandidate returns the next key in [k, hi) that may be uncertain.
func (s *sweep) nextUncertainCandidate(k, hi int32) int32 {
	a := s.fuzzy.next(k, hi)
	b := s.dirtyKs.next(k, hi)
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	}
	return min(a, b)
}

// markExpirable marks the keys a revision nobody answered for may have deleted through their lease: the
// revision may be the lease's expiry, or a failed revoke of it.
func (s *sweep) markExpirable(r int64) {
	c := s.c
	t := c.existedAt(r)
	for id, keys := range s.leaseKeys {
		if len(keys) == 0 {
			continue
		}
		l := c.leases[id]
		from, revocable := c.candRevok[id]
		if (l == nil || l.minExpiry-leaseSlack < t) || (revocable && from <= r) {
			for k := range keys {
				if s.st[k].dirty == 0 && !c.covered(k, r) {
					s.st[k].dirty = r
					s.dirtyKs.add(k)
				}
			}
		}
	}
}

// applyObserved applies a revision only watchers saw: its writer is unknown (a failed write that took
// effect, a lease expiry), its changes are what the watchers saw. Every change needs a cause.
func (s *sweep) applyObserved(r int64) {
	c := s.c
	s.noteExpiry(r)
	obs := c.observedAt(r)
	for j := range obs {
		o := &obs[j]
		e := c.event(o)
		k := o.rank
		ks := &s.st[k]
		pe, pr, pu := s.prevOf(k)
		if e.Type == history.EventDelete {
			if cause := s.deleteCause(k, r); cause != "" {
				c.vs.add(Violation{Check: CheckLinearizability, Kind: cause, Key: e.KV.Key, Revision: r, Watcher: o.watcher, Time: o.time,
					Message: s.deleteCauseMessage(cause, k, r, o.watcher)})
			}
			s.emit(canonEvent{rank: k, del: true, r: rec{mod: r}, prevExists: pe, prevUnk: pu}, pr)
			s.setLease(k, ks.r.lease*boolInt(ks.exists), 0)
			ks.r, ks.unk = rec{}, 0
			s.setExists(k, false)
		} else {
			n := rec{value: e.KV.Value.ID, create: e.KV.CreateRevision, mod: r, version: e.KV.Version, lease: e.KV.Lease}
			s.emit(canonEvent{rank: k, r: n, prevExists: pe, prevUnk: pu}, pr)
			s.setLease(k, ks.r.lease*boolInt(ks.exists), n.lease)
			ks.r, ks.unk = n, 0
			s.setExists(k, true)
		}
		s.anchor(k)
	}
}

// noteExpiry records that a lease is gone when a revision only watchers saw deleted keys attached to it
// that no failed delete could have deleted: its expiry, or a failed revoke of it.
func (s *sweep) noteExpiry(r int64) {
	c := s.c
	obs := c.observedAt(r)
	for j := range obs {
		o := &obs[j]
		if c.event(o).Type != history.EventDelete {
			continue
		}
		ks := &s.st[o.rank]
		if !ks.exists || ks.r.lease == 0 || s.uncertain(o.rank) {
			continue
		}
		if from := c.candFrom[o.rank]; from != 0 && from <= r {
			continue
		}
		if l := c.leases[ks.r.lease]; l != nil && l.expired == 0 {
			l.expired, l.expiredRev = c.existedAt(r), r
		}
	}
}

// deleteCause explains a deletion nobody answered for: an unresolved delete of the key, a lease expiry, or
// a revoke that failed. It returns "" when one of them can explain it, else the kind of violation.
func (s *sweep) deleteCause(k int32, r int64) string {
	c := s.c
	if from := c.candFrom[k]; from != 0 && from <= r {
		return ""
	}
	ks := &s.st[k]
	if !ks.exists && s.uncertain(k) {
		return ""
	}
	if !ks.exists {
		return "phantom delete"
	}
	if ks.r.lease == 0 {
		return "phantom delete"
	}
	if from, ok := c.candRevok[ks.r.lease]; ok && from <= r {
		return ""
	}
	l := c.leases[ks.r.lease]
	if l == nil || l.minExpiry-leaseSlack < c.existedAt(r) {
		return ""
	}
	return "early lease expiry"
}

// deleteCauseMessage explains a deletion deleteCause found no cause for.
func (s *sweep) deleteCauseMessage(cause string, k int32, r int64, watcher int) string {
	c := s.c
	if cause == "early lease expiry" {
		l := c.leases[s.st[k].r.lease]
		return fmt.Sprintf("watcher %d saw %q deleted at revision %d by the expiry of lease %x, known at %s, but the lease's last grant or keep-alive kept it alive until %s",
			watcher, c.key(k), r, s.st[k].r.lease, fmtTime(c.existedAt(r)), fmtTime(l.minExpiry))
	}
	return fmt.Sprintf("watcher %d saw %q deleted at revision %d, but no request deleted it and no lease it was attached to could have expired", watcher, c.key(k), r)
}

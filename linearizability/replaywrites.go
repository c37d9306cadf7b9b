package linearizability

// Applying a revision's writes to the replay's state: puts, deletes and revokes, each recorded as the
// change watchers must see, and what their answers say about the state before them (previous values,
// delete counts) checked on the way.

import (
	"fmt"
	"slices"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// put applies a put of a writer at the current revision.
func (s *sweep) put(i int, p *history.Put, res *history.Response) {
	c := s.c
	k := c.rank(p.Key)
	ks := &s.st[k]
	if res != nil && p.PrevKV && res.Put != nil {
		s.checkPrev(i, k, res.Put.PrevKV)
	}
	if p.Lease != 0 && c.ops.Get(i).state == opAcked {
		l := c.leases[p.Lease]
		switch {
		case l == nil:
		case l.revoked != 0 && l.revoked < c.ops.Get(i).call:
			c.vs.add(Violation{Check: CheckLinearizability, Kind: "put with revoked lease", Key: p.Key, Revision: s.cur,
				Ops: []int{int(l.revokeOp), i}, Time: l.revoked,
				Message: fmt.Sprintf("%s attached lease %x after %s revoked it, and succeeded (etcd answers ErrLeaseNotFound)", c.describe(i), p.Lease, c.describe(int(l.revokeOp)))})
		case l.expired != 0 && l.expired < c.ops.Get(i).call && l.expiredRev < s.cur:
			c.vs.add(Violation{Check: CheckLinearizability, Kind: "put with expired lease", Key: p.Key, Revision: s.cur,
				Ops: []int{i}, Time: l.expired,
				Message: fmt.Sprintf("%s attached lease %x, which had expired at revision %d (known at %s), and succeeded (etcd answers ErrLeaseNotFound)", c.describe(i), p.Lease, l.expiredRev, fmtTime(l.expired))})
		}
	}
	pe, pr, pu := s.prevOf(k)
	n := rec{value: p.Value.ID, mod: s.cur, lease: p.Lease}
	var unk uint8
	switch pe {
	case 1:
		n.create, n.version, unk = pr.create, pr.version+1, pu&^unkValue
	case 0:
		n.create, n.version = s.cur, 1
	default:
		unk = unkCreate | unkVersion
	}
	s.emit(canonEvent{rank: k, r: n, unk: unk, prevExists: pe, prevUnk: pu}, pr)
	s.setLease(k, ks.r.lease*boolInt(ks.exists), p.Lease)
	ks.r, ks.unk = n, unk
	s.setExists(k, true)
	s.anchor(k)
}

// del applies (commit) or checks a delete of [key, end).
func (s *sweep) del(i int, d *history.Delete, res *history.Response, commit bool) {
	c := s.c
	lo, hi := c.ks.interval(d.Key, d.End)
	var dr *history.DeleteResponse
	if res != nil {
		dr = res.Delete
	}
	// The keys the delete removes, with what the replay knows about each.
	type victim struct {
		k   int32
		unc bool
	}
	var victims []victim
	var certain int64
	for k := s.next(lo, hi); k >= 0; k = s.next(k+1, hi) {
		unc := s.uncertain(k)
		if !unc && !s.st[k].exists {
			continue
		}
		victims = append(victims, victim{k, unc})
		if !unc {
			certain++
		}
	}
	if dr != nil {
		// The answer's previous values say exactly which keys existed.
		if d.PrevKV {
			got := map[int32]*history.KV{}
			for j := range dr.PrevKVs {
				kv := &dr.PrevKVs[j]
				got[c.rank(kv.Key)] = kv
			}
			for _, v := range victims {
				s.checkPrev(i, v.k, got[v.k])
				delete(got, v.k)
			}
			for k, kv := range got {
				if k < lo || k >= hi {
					c.vs.add(s.violation(i, "delete outside range", kv.Key, fmt.Sprintf("%s returned previous value of %q, outside its range", c.describe(i), kv.Key)))
					continue
				}
				s.checkPrev(i, k, kv)
			}
		}
		n := int64(len(victims))
		if dr.Deleted < certain || dr.Deleted > n {
			c.vs.add(s.violation(i, "wrong delete count", d.Key, fmt.Sprintf("%s deleted %d keys, but %s existed at revision %d", c.describe(i), dr.Deleted, countRange(certain, n), s.curState())))
		} else if hi-lo == 1 && n == 1 && victims[0].unc {
			// A single-key delete's count says whether the key existed.
			s.checkPrev(i, lo, prevForCount(dr.Deleted, c.key(lo)))
		}
	}
	if !commit {
		for _, v := range victims {
			if s.st[v.k].exists && !s.uncertain(v.k) {
				c.vs.add(s.violation(i, "delete found nothing", c.key(v.k), fmt.Sprintf("%s reported no key deleted, but %q existed at revision %d", c.describe(i), c.key(v.k), s.cur)))
			}
		}
		return
	}
	for _, v := range victims {
		ks := &s.st[v.k]
		if !ks.exists && !s.uncertain(v.k) {
			continue
		}
		pe, pr, pu := s.prevOf(v.k)
		s.emit(canonEvent{rank: v.k, del: true, maybe: pe < 0, r: rec{mod: s.cur}, prevExists: pe, prevUnk: pu}, pr)
		s.setLease(v.k, ks.r.lease*boolInt(ks.exists), 0)
		ks.r, ks.unk = rec{}, 0
		s.setExists(v.k, false)
		s.anchor(v.k)
	}
}

// prevForCount turns a single-key delete's count into the previous value check: absent when nothing was
// deleted; when one key was, only its existence is known, which checkPrev accepts for an uncertain key.
func prevForCount(deleted int64, key string) *history.KV {
	if deleted == 0 {
		return nil
	}
	return &history.KV{Key: key, ModRevision: -1}
}

// revoke applies a lease revoke that wrote the current revision: every key attached to the lease goes.
func (s *sweep) revoke(i int) {
	id := s.c.op(i).Request.Lease.ID
	keys := make([]int32, 0, len(s.leaseKeys[id]))
	for k := range s.leaseKeys[id] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		ks := &s.st[k]
		pe, pr, pu := s.prevOf(k)
		s.emit(canonEvent{rank: k, del: true, r: rec{mod: s.cur}, prevExists: pe, prevUnk: pu}, pr)
		s.setLease(k, ks.r.lease, 0)
		ks.r, ks.unk = rec{}, 0
		s.setExists(k, false)
		s.anchor(k)
	}
}

// checkRevokesAt checks answered revokes whose answer carries revision r but did not write it: their
// lease had no keys left.
func (s *sweep) checkRevokesAt(r int64) {
	c := s.c
	for _, i := range c.revokes[r] {
		if c.ops.Get(int(i)).wrote {
			continue
		}
		id := c.op(int(i)).Request.Lease.ID
		for k := range s.leaseKeys[id] {
			if !s.uncertain(k) {
				c.vs.add(s.violation(int(i), "revoke left keys", c.key(k), fmt.Sprintf("%s succeeded at revision %d, but %q is still attached to the lease", c.describe(int(i)), r, c.key(k))))
				break
			}
		}
	}
}

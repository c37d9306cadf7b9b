package linearizability

import (
	"fmt"
	"slices"
	"sort"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// rec is one version of a key: its value's write id and its revisions.
type rec struct {
	value                       uint64
	create, mod, version, lease int64
}

// Unknown fields of a key's state: a write nobody observed may have come before, so the version and
// create revision the replay computes may be off until an answer shows them.
const (
	unkCreate uint8 = 1 << iota
	unkVersion
	unkValue // known only from a keys-only read
)

// keyState is one key during the replay.
type keyState struct {
	exists bool
	r      rec
	unk    uint8
	anchor int64 // last revision at which the key's state was known: written, or shown by an answer
	dirty  int64 // first revision after anchor at which a lease expiry may have deleted it (0: none)
	clean  int64 // no unobserved write can have touched the key from anchor up to this revision
}

// canonEvent is one change the replay made at a revision: what every watcher of the key must see.
type canonEvent struct {
	rev        int64
	rank       int32
	del        bool
	maybe      bool // a range delete of a key that may not have existed
	r          rec
	unk        uint8
	prevExists int8 // 1, 0, or -1 when the replay does not know
	prev       rec
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

	canon   []canonEvent
	canonAt []int32 // by revision-base
	gap     []bool  // by revision-base: nobody knows what was written
}

func (c *checker) replay() *sweep {
	n := len(c.ks.keys)
	s := &sweep{
		c: c, st: make([]keyState, n),
		present: newRankSet(n), fuzzy: newRankSet(n), dirtyKs: newRankSet(n), count: make(fenwick, n),
		leaseKeys: map[int64]map[int32]struct{}{},
		canonAt:   make([]int32, c.rev(c.maxRev)+2),
		canon:     make([]canonEvent, 0, c.rev(c.maxRev)+1), // about one change per revision
		gap:       make([]bool, c.rev(c.maxRev)+1),
	}
	for k := range n {
		if c.candFrom[k] != 0 || c.preRun {
			s.fuzzy.add(int32(k))
		}
	}
	obs := c.observations()
	j := 0
	s.cur = c.base
	for j < len(obs) && obs[j].at <= c.base {
		if obs[j].at == c.base {
			s.observe(obs[j].op)
		}
		j++
	}
	for r := c.base + 1; r <= c.maxRev; r++ {
		s.cur = r
		s.canonAt[c.rev(r)] = int32(len(s.canon))
		s.revision(r)
		for j < len(obs) && obs[j].at == r {
			s.observe(obs[j].op)
			j++
		}
		s.checkRevokesAt(r)
	}
	s.canonAt[c.rev(c.maxRev)+1] = int32(len(s.canon))
	return s
}

// observations lists the answered operations that wrote nothing, by the revision whose state they show.
func (c *checker) observations() []observation {
	var obs []observation
	for i := range c.h.Operations {
		op := &c.h.Operations[i]
		oi := &c.ops[i]
		if oi.state != opAcked || oi.wrote {
			continue
		}
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
		obs = append(obs, observation{at: at, op: int32(i)})
	}
	slices.SortStableFunc(obs, func(a, b observation) int { return cmpInt(a.at, b.at) })
	return obs
}

func checkOf(op *history.Operation) string {
	if op.Request.Kind == history.KindRange && op.Request.Range != nil && op.Request.Range.Serializable {
		return CheckSerializable
	}
	return CheckLinearizability
}

// revision applies the writes of revision r.
func (s *sweep) revision(r int64) {
	c := s.c
	w := c.writer[c.rev(r)]
	if w < 0 {
		// A revoke whose lease had keys wrote the revision its answer carries.
		for _, i := range c.revokes[r] {
			if id := c.h.Operations[i].Request.Lease.ID; len(s.leaseKeys[id]) > 0 {
				w = i
				c.ops[i].wrote, c.ops[i].rev = true, r
				c.writer[c.rev(r)] = i
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
		s.gap[c.rev(r)] = true
		s.markExpirable(r)
	}
}

// exec evaluates operation i on the current state: its compares, then its branch in order. A writer
// (commit) applies its writes at revision s.cur; an observation must find nothing to write.
func (s *sweep) exec(i int, commit bool) {
	c := s.c
	op := &c.h.Operations[i]
	oi := &c.ops[i]
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
			c.vs.add(Violation{Check: CheckLinearizability, Kind: "wrong compare outcome", Key: v.cmps[0].Key, Revision: s.cur, Ops: []int{i}, Time: op.Call,
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
			if res != nil && res.Range != nil && sub.Range != nil {
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
func (s *sweep) unknownWriter(r int64) bool { return s.c.writer[s.c.rev(r)] < 0 }

// anchor records that key k's state is known at the current revision.
func (s *sweep) anchor(k int32) {
	ks := &s.st[k]
	ks.anchor, ks.dirty = s.cur, 0
	s.dirtyKs.remove(k)
	if s.c.preRun {
		s.fuzzy.remove(k)
		if s.c.candFrom[k] != 0 {
			s.fuzzy.add(k)
		}
	}
}

func (s *sweep) setExists(k int32, exists bool) {
	ks := &s.st[k]
	if ks.exists == exists {
		return
	}
	ks.exists = exists
	if exists {
		s.present.add(k)
		s.count.add(k, 1)
	} else {
		s.present.remove(k)
		s.count.add(k, -1)
	}
}

func (s *sweep) setLease(k int32, old, lease int64) {
	if old == lease {
		return
	}
	if old != 0 {
		delete(s.leaseKeys[old], k)
	}
	if lease != 0 {
		m := s.leaseKeys[lease]
		if m == nil {
			m = map[int32]struct{}{}
			s.leaseKeys[lease] = m
		}
		m[k] = struct{}{}
	}
}

func (s *sweep) emit(e canonEvent) {
	e.rev = s.cur
	s.canon = append(s.canon, e)
}

func (s *sweep) prevOf(k int32) (int8, rec, uint8) {
	ks := &s.st[k]
	if s.uncertain(k) {
		return -1, ks.r, ks.unk
	}
	if ks.exists {
		return 1, ks.r, ks.unk
	}
	return 0, rec{}, 0
}

// put applies a put of a writer at the current revision.
func (s *sweep) put(i int, p *history.Put, res *history.Response) {
	c := s.c
	k := c.rank(p.Key)
	ks := &s.st[k]
	if res != nil && p.PrevKV && res.Put != nil {
		s.checkPrev(i, k, res.Put.PrevKV)
	}
	if p.Lease != 0 && c.ops[i].state == opAcked {
		l := c.leases[p.Lease]
		switch {
		case l == nil:
		case l.revoked != 0 && l.revoked < c.ops[i].call:
			c.vs.add(Violation{Check: CheckLinearizability, Kind: "put with revoked lease", Key: p.Key, Revision: s.cur,
				Ops: []int{int(l.revokeOp), i}, Time: l.revoked,
				Message: fmt.Sprintf("%s attached lease %x after %s revoked it, and succeeded (etcd answers ErrLeaseNotFound)", c.describe(i), p.Lease, c.describe(int(l.revokeOp)))})
		case l.expired != 0 && l.expired < c.ops[i].call && l.expiredRev < s.cur:
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
	s.emit(canonEvent{rank: k, r: n, unk: unk, prevExists: pe, prev: pr, prevUnk: pu})
	s.setLease(k, ks.r.lease*boolInt(ks.exists), p.Lease)
	ks.r, ks.unk = n, unk
	s.setExists(k, true)
	s.anchor(k)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
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
		s.emit(canonEvent{rank: v.k, del: true, maybe: pe < 0, r: rec{mod: s.cur}, prevExists: pe, prev: pr, prevUnk: pu})
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
	id := s.c.h.Operations[i].Request.Lease.ID
	keys := make([]int32, 0, len(s.leaseKeys[id]))
	for k := range s.leaseKeys[id] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		ks := &s.st[k]
		pe, pr, pu := s.prevOf(k)
		s.emit(canonEvent{rank: k, del: true, r: rec{mod: s.cur}, prevExists: pe, prev: pr, prevUnk: pu})
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
		if c.ops[i].wrote {
			continue
		}
		id := c.h.Operations[i].Request.Lease.ID
		for k := range s.leaseKeys[id] {
			if !s.uncertain(k) {
				c.vs.add(s.violation(int(i), "revoke left keys", c.key(k), fmt.Sprintf("%s succeeded at revision %d, but %q is still attached to the lease", c.describe(int(i)), r, c.key(k))))
				break
			}
		}
	}
}

// applyObserved applies a revision only watchers saw: its writer is unknown (a failed write that took
// effect, a lease expiry), its changes are what the watchers saw. Every change needs a cause.
func (s *sweep) applyObserved(r int64) {
	c := s.c
	s.noteExpiry(r)
	for _, o := range c.observedAt(r) {
		e := c.event(o)
		k := o.rank
		ks := &s.st[k]
		pe, pr, pu := s.prevOf(k)
		if e.Type == history.EventDelete {
			if cause := s.deleteCause(k, r); cause != "" {
				w := &c.h.Watches[o.rec]
				c.vs.add(Violation{Check: CheckLinearizability, Kind: cause, Key: e.KV.Key, Revision: r, Watcher: w.Watcher, Time: w.Time,
					Message: s.deleteCauseMessage(cause, k, r, w.Watcher)})
			}
			s.emit(canonEvent{rank: k, del: true, r: rec{mod: r}, prevExists: pe, prev: pr, prevUnk: pu})
			s.setLease(k, ks.r.lease*boolInt(ks.exists), 0)
			ks.r, ks.unk = rec{}, 0
			s.setExists(k, false)
		} else {
			n := rec{value: e.KV.Value.ID, create: e.KV.CreateRevision, mod: r, version: e.KV.Version, lease: e.KV.Lease}
			s.emit(canonEvent{rank: k, r: n, prevExists: pe, prev: pr, prevUnk: pu})
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
	for _, o := range c.observedAt(r) {
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

func (s *sweep) deleteCauseMessage(cause string, k int32, r int64, watcher int) string {
	c := s.c
	if cause == "early lease expiry" {
		l := c.leases[s.st[k].r.lease]
		return fmt.Sprintf("watcher %d saw %q deleted at revision %d by the expiry of lease %x, known at %s, but the lease's last grant or keep-alive kept it alive until %s",
			watcher, c.key(k), r, s.st[k].r.lease, fmtTime(c.existedAt(r)), fmtTime(l.minExpiry))
	}
	return fmt.Sprintf("watcher %d saw %q deleted at revision %d, but no request deleted it and no lease it was attached to could have expired", watcher, c.key(k), r)
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

// next returns the next key from k below hi that exists or may exist.
func (s *sweep) next(k, hi int32) int32 {
	a := s.present.next(k, hi)
	b := s.fuzzy.next(k, hi)
	d := s.dirtyKs.next(k, hi)
	out := int32(-1)
	for _, x := range []int32{a, b, d} {
		if x >= 0 && (out < 0 || x < out) {
			out = x
		}
	}
	return out
}

// compares evaluates a transaction's compares: 1 all true, 0 one false, -1 unknown.
func (s *sweep) compares(cmps []history.Compare) int8 {
	out := int8(1)
	for i := range cmps {
		cmp := &cmps[i]
		k := s.c.rank(cmp.Key)
		ks := &s.st[k]
		if s.uncertain(k) {
			out = -1
			continue
		}
		var ok bool
		switch cmp.Target {
		case history.CompareValue:
			if !ks.exists {
				ok = false // etcd: a value compare on a missing key is false
				break
			}
			if ks.unk&unkValue != 0 {
				out = -1
				continue
			}
			ok = compareInt(cmpUint(ks.r.value, cmp.Value.ID), cmp.Result)
		default:
			var have int64
			unknown := false
			if ks.exists {
				switch cmp.Target {
				case history.CompareModRevision:
					have = ks.r.mod
				case history.CompareVersion:
					have, unknown = ks.r.version, ks.unk&unkVersion != 0
				case history.CompareCreate:
					have, unknown = ks.r.create, ks.unk&unkCreate != 0
				}
			}
			if unknown {
				out = -1
				continue
			}
			ok = compareInt(cmpInt(have, cmp.Operand), cmp.Result)
		}
		if !ok {
			return 0
		}
	}
	return out
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func compareInt(c int, r history.CompareResult) bool {
	switch r {
	case history.Equal:
		return c == 0
	case history.NotEqual:
		return c != 0
	case history.Less:
		return c < 0
	case history.Greater:
		return c > 0
	}
	return false
}

func (s *sweep) violation(i int, kind, key, msg string) Violation {
	op := &s.c.h.Operations[i]
	return Violation{Check: checkOf(op), Kind: kind, Key: key, Revision: s.cur, Ops: []int{i}, Time: op.Call, Message: msg}
}

// checkPrev checks a previous value a write returned (nil: the key did not exist) against the state
// before the write.
func (s *sweep) checkPrev(i int, k int32, kv *history.KV) {
	s.checkKey(i, k, kv, false, "previous value")
}

// checkKey checks what an answer says about key k (kv, or nil for absent) against the current state. An
// uncertain key is checked for what no unobserved write can explain (an older version is stale whatever
// happened), and its state is then taken from the answer. keysOnly answers carry no value.
func (s *sweep) checkKey(i int, k int32, kv *history.KV, keysOnly bool, what string) {
	c := s.c
	ks := &s.st[k]
	key := c.key(k)
	if s.uncertain(k) {
		c.stats.Uncertain++
		if kv == nil {
			s.setLease(k, ks.r.lease*boolInt(ks.exists), 0)
			ks.r, ks.unk = rec{}, 0
			s.setExists(k, false)
			s.anchor(k)
			return
		}
		if kv.ModRevision == -1 { // existence only (a delete count): nothing to compare
			return
		}
		switch {
		case kv.ModRevision > s.curState():
			c.vs.add(s.violation(i, "future "+what, key, fmt.Sprintf("%s returned %s as %s at revision %d: a version from a later revision", c.describe(i), describeKV(kv), what, s.curState())))
		case ks.exists && kv.ModRevision == ks.r.mod:
			if !keysOnly && ks.unk&unkValue == 0 && kv.Value.ID != ks.r.value {
				c.vs.add(s.violation(i, "wrong "+what, key, fmt.Sprintf("%s returned %s as %s, but revision %d wrote value #%d", c.describe(i), describeKV(kv), what, ks.r.mod, ks.r.value)))
			}
		case kv.ModRevision < ks.anchor || (!ks.exists && ks.anchor > 0 && kv.ModRevision == ks.anchor):
			c.vs.add(s.violation(i, "stale "+what, key, fmt.Sprintf("%s returned %s as %s at revision %d, but %q had changed at revision %d already", c.describe(i), describeKV(kv), what, s.curState(), key, ks.anchor)))
		case kv.ModRevision > ks.anchor && kv.ModRevision > c.base && !s.unknownWriter(kv.ModRevision):
			w := c.writer[c.rev(kv.ModRevision)]
			c.vs.add(Violation{Check: CheckLinearizability, Kind: "phantom version", Key: key, Revision: kv.ModRevision, Ops: []int{i, int(w)}, Time: c.h.Operations[i].Call,
				Message: fmt.Sprintf("%s returned %s as %s, but revision %d was written by %s, which did not write %q", c.describe(i), describeKV(kv), what, kv.ModRevision, c.describe(int(w)), key)})
		}
		s.setLease(k, ks.r.lease*boolInt(ks.exists), kv.Lease)
		same := ks.exists && kv.ModRevision == ks.r.mod && ks.unk&unkValue == 0
		value := ks.r.value
		ks.r = rec{value: kv.Value.ID, create: kv.CreateRevision, mod: kv.ModRevision, version: kv.Version, lease: kv.Lease}
		ks.unk = 0
		if keysOnly {
			if same {
				ks.r.value = value
			} else {
				ks.unk = unkValue
			}
		}
		s.setExists(k, true)
		s.anchor(k)
		return
	}
	switch {
	case kv == nil && ks.exists:
		c.vs.add(s.violation(i, "missing key", key, fmt.Sprintf("%s found no %q as %s at revision %d, but the replay has %s", c.describe(i), key, what, s.curState(), c.recBy(key, ks.r))))
	case kv == nil:
	case !ks.exists:
		if kv.ModRevision == -1 {
			c.vs.add(s.violation(i, "deleted a missing key", key, fmt.Sprintf("%s deleted %q, which did not exist at revision %d", c.describe(i), key, s.curState())))
			return
		}
		kind := "phantom key"
		if kv.ModRevision < s.cur && kv.ModRevision <= ks.anchor {
			kind = "stale " + what
		}
		c.vs.add(s.violation(i, kind, key, fmt.Sprintf("%s returned %s as %s at revision %d, but %q did not exist then (last changed at revision %d%s)", c.describe(i), describeKV(kv), what, s.curState(), key, ks.anchor, c.by(ks.anchor))))
	case kv.ModRevision == -1:
	case kv.ModRevision != ks.r.mod:
		kind := "stale " + what
		if kv.ModRevision > ks.r.mod {
			kind = "future " + what
		}
		c.vs.add(s.violation(i, kind, key, fmt.Sprintf("%s returned %s as %s at revision %d, but the replay has %s", c.describe(i), describeKV(kv), what, s.curState(), c.recBy(key, ks.r))))
	default:
		bad := (!keysOnly && ks.unk&unkValue == 0 && kv.Value.ID != ks.r.value) || kv.Lease != ks.r.lease ||
			(ks.unk&unkCreate == 0 && kv.CreateRevision != ks.r.create) || (ks.unk&unkVersion == 0 && kv.Version != ks.r.version)
		if bad {
			c.vs.add(s.violation(i, "wrong "+what, key, fmt.Sprintf("%s returned %s as %s at revision %d, but the replay has %s", c.describe(i), describeKV(kv), what, s.curState(), c.recBy(key, ks.r))))
			return
		}
		if ks.unk != 0 {
			ks.r.create, ks.r.version = kv.CreateRevision, kv.Version
			ks.unk &^= unkCreate | unkVersion
			if !keysOnly {
				ks.r.value = kv.Value.ID
				ks.unk = 0
			}
		}
	}
}

// curState is the revision of the state being compared: during a write, the one before.
func (s *sweep) curState() int64 {
	if s.writing {
		return s.cur - 1
	}
	return s.cur
}

// checkRange checks a range answer against the state: the keys, in order, each as the replay has it; the
// count of the whole range; the more flag and the limit.
func (s *sweep) checkRange(i int, rg *history.Range, resp *history.RangeResponse, check string) {
	c := s.c
	lo, hi := c.ks.interval(rg.Key, rg.End)
	n := resp.Len()
	// The answer must be consistent with itself first.
	for j := range n {
		if key := resp.At(j).Key; !inRange(key, rg.Key, rg.End) || (j > 0 && key <= resp.At(j-1).Key) {
			c.vs.add(s.violationIn(check, i, "malformed range", key, fmt.Sprintf("%s returned %q out of order or outside its range", c.describe(i), key)))
			return
		}
	}
	limited := rg.Limit > 0 && int64(n) == rg.Limit && resp.More
	if !rg.CountOnly {
		if rg.Limit > 0 && resp.More != (resp.Count > rg.Limit) || rg.Limit > 0 && int64(n) != min(resp.Count, rg.Limit) || rg.Limit == 0 && int64(n) != resp.Count {
			c.vs.add(s.violationIn(check, i, "malformed range", rg.Key, fmt.Sprintf("%s returned %d keys, count %d, more %v with limit %d", c.describe(i), n, resp.Count, resp.More, rg.Limit)))
			return
		}
	}
	// Count: certain keys count, uncertain ones may or may not. The replay's own count is always within
	// those bounds, so only another count needs them: walking every uncertain key of a long range for
	// every list would cost the lists times the keys.
	lowCount := s.count.count(lo, hi)
	highCount := lowCount
	countChecked := rg.End != "" || rg.CountOnly // for a one-key read the key itself is compared below, which says more
	if countChecked && resp.Count != lowCount {
		for k := s.nextUncertainCandidate(lo, hi); k >= 0; k = s.nextUncertainCandidate(k+1, hi) {
			if s.uncertain(k) {
				if s.st[k].exists {
					lowCount--
				} else {
					highCount++
				}
			}
		}
	}
	if countChecked && (resp.Count < lowCount || resp.Count > highCount) {
		c.vs.add(s.violationIn(check, i, "wrong count", rg.Key, fmt.Sprintf("%s counted %d keys in [%q, %q) at revision %d, but the replay has %s", c.describe(i), resp.Count, rg.Key, rg.End, s.cur, countRange(lowCount, highCount))))
	}
	if rg.CountOnly {
		return
	}
	// Walk the keys that exist or may exist alongside the answer.
	j := 0
	last := ""
	if n > 0 {
		last = resp.At(n - 1).Key
	}
	for k := s.next(lo, hi); k >= 0; k = s.next(k+1, hi) {
		key := c.key(k)
		for j < n && resp.At(j).Key < key {
			kv := resp.At(j)
			s.checkKeyIn(check, i, c.rank(kv.Key), kv, rg.KeysOnly)
			j++
		}
		if limited && key > last {
			break
		}
		if j < n && resp.At(j).Key == key {
			s.checkKeyIn(check, i, k, resp.At(j), rg.KeysOnly)
			j++
			continue
		}
		s.checkKeyIn(check, i, k, nil, rg.KeysOnly)
	}
	for ; j < n; j++ {
		kv := resp.At(j)
		s.checkKeyIn(check, i, c.rank(kv.Key), kv, rg.KeysOnly)
	}
}

func countRange(lo, hi int64) string {
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("between %d and %d", lo, hi)
}

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

func (s *sweep) checkKeyIn(check string, i int, k int32, kv *history.KV, keysOnly bool) {
	n := len(s.c.vs.list)
	s.checkKey(i, k, kv, keysOnly, "read")
	for j := n; j < len(s.c.vs.list); j++ {
		s.c.vs.list[j].Check = check
	}
}

func (s *sweep) violationIn(check string, i int, kind, key, msg string) Violation {
	v := s.violation(i, kind, key, msg)
	v.Check = check
	return v
}

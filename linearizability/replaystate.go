package linearizability

// The replay's state of every key: its current version, which of its fields are known and since which
// revision, and the indexes kept in step with it (existing keys, their count, the keys of each lease) that
// ranges, counts and revokes read instead of walking every key.

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

// setExists records whether key k exists, in its state and in the indexes of existing keys.
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

// setLease moves key k from lease old's keys to lease's (0: none), so that a revoke or an expiry finds
// the keys it deletes.
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

// prevOf is what a change of key k records of the key before it: whether it existed (-1 when an unseen
// write may have changed it), its version and the fields of it that are unknown. The watch checks hold
// events' previous values and create flags to it.
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

// boolInt is 1 for true: a key's lease is attached (lease*boolInt(exists)) only while the key exists.
func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
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

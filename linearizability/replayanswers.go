package linearizability

// Checking answers against the replay's state at their revision: compares, ranges and their counts, and
// every key-value an answer returns. An uncertain key is checked only for what no unseen write explains,
// then taken from the answer.

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// curState is the revision of the state being compared: during a write, the one before.
func (s *sweep) curState() int64 {
	if s.writing {
		return s.cur - 1
	}
	return s.cur
}

// compares evaluates a transaction's compares: 1 all true, 0 one false, -1 unknown.
func (s *sweep) compares(cmps []history.Compare) int8 {
	out := int8(1)
	for i := range cmps {
		c := &cmps[i]
		k := s.c.rank(c.Key)
		ks := &s.st[k]
		if s.uncertain(k) {
			out = -1
			continue
		}
		var ok bool
		switch c.Target {
		case history.CompareValue:
			if !ks.exists {
				ok = false // etcd: a value compare on a missing key is false
				break
			}
			if ks.unk&unkValue != 0 {
				out = -1
				continue
			}
			ok = compareInt(cmp.Compare(ks.r.value, c.Value.ID), c.Result)
		default:
			var have int64
			unknown := false
			if ks.exists {
				switch c.Target {
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
			ok = compareInt(cmp.Compare(have, c.Operand), c.Result)
		}
		if !ok {
			return 0
		}
	}
	return out
}

// compareInt applies a compare's operator to an ordering (cmp.Compare's).
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
			w := c.writer.Get(c.rev(kv.ModRevision))
			c.vs.add(Violation{Check: CheckLinearizability, Kind: "phantom version", Key: key, Revision: kv.ModRevision, Ops: []int{i, int(w)}, Time: c.ops.Get(i).call,
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

// checkKeyIn checks a key a range returned, as checkKey does, and files what it finds under the range's
// check: a serializable read's findings are the serializable check's.
func (s *sweep) checkKeyIn(check string, i int, k int32, kv *history.KV, keysOnly bool) {
	n := len(s.c.vs.list)
	s.checkKey(i, k, kv, keysOnly, "read")
	for j := n; j < len(s.c.vs.list); j++ {
		s.c.vs.list[j].Check = check
	}
}

// checkRange checks a range answer against the state: the keys, in order, each as the replay has it; the
// count of the whole range; the more flag and the limit.
func (s *sweep) checkRange(i int, rg *history.Range, resp *history.RangeResponse, check string) {
	c := s.c
	lo, hi := c.ks.interval(rg.Key, rg.End)
	n := resp.Len()
	// The answer must be consistent with itself first.
	if key, ok := wellFormed(resp, rg); !ok {
		c.vs.add(s.violationIn(check, i, "malformed range", key, fmt.Sprintf("%s returned %q out of order or outside its range", c.describe(i), key)))
		return
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
	s.kvs = resp.AppendKeyValues(s.kvs[:0])
	kvs := s.kvs
	j := 0
	last := ""
	if n > 0 {
		last = kvs[n-1].Key
	}
	for k := s.next(lo, hi); k >= 0; k = s.next(k+1, hi) {
		key := c.key(k)
		// One comparison per step: keys of a list share long prefixes, and equal keys of an answer from
		// the store share their bytes with the keyspace's, which strings.Compare tells at once.
		order := 1
		for ; j < n; j++ {
			kv := &kvs[j]
			if order = strings.Compare(kv.Key, key); order >= 0 {
				break
			}
			s.checkKeyIn(check, i, c.rank(kv.Key), kv, rg.KeysOnly)
		}
		if limited && key > last {
			break
		}
		if j < n && order == 0 {
			s.checkKeyIn(check, i, k, &kvs[j], rg.KeysOnly)
			j++
			continue
		}
		s.checkKeyIn(check, i, k, nil, rg.KeysOnly)
	}
	for ; j < n; j++ {
		kv := &kvs[j]
		s.checkKeyIn(check, i, c.rank(kv.Key), kv, rg.KeysOnly)
	}
}

// wellFormed reports whether a range answer's keys are in strictly increasing order and inside the range,
// and if not, the first key that is not. Keys in order lie in the range when the first and last do.
func wellFormed(resp *history.RangeResponse, rg *history.Range) (string, bool) {
	n := resp.Len()
	prev := ""
	for j := range n {
		key := resp.Key(j)
		if j > 0 && key <= prev {
			return firstMalformed(resp, rg)
		}
		prev = key
	}
	if n > 0 && (!inRange(resp.Key(0), rg.Key, rg.End) || !inRange(prev, rg.Key, rg.End)) {
		return firstMalformed(resp, rg)
	}
	return "", true
}

// firstMalformed returns the first key of a malformed answer that is out of order or outside the range.
func firstMalformed(resp *history.RangeResponse, rg *history.Range) (string, bool) {
	for j := range resp.Len() {
		if key := resp.Key(j); !inRange(key, rg.Key, rg.End) || (j > 0 && key <= resp.Key(j-1)) {
			return key, false
		}
	}
	return "", true
}

// countRange says how many keys the replay has: a number, or bounds when uncertain keys may count.
func countRange(lo, hi int64) string {
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("between %d and %d", lo, hi)
}

// violation is a finding about operation i at the current revision, filed under its check.
func (s *sweep) violation(i int, kind, key, msg string) Violation {
	op := s.c.op(i)
	return Violation{Check: checkOf(op), Kind: kind, Key: key, Revision: s.cur, Ops: []int{i}, Time: op.Call, Message: msg}
}

// violationIn is violation filed under the given check.
func (s *sweep) violationIn(check string, i int, kind, key, msg string) Violation {
	v := s.violation(i, kind, key, msg)
	v.Check = check
	return v
}

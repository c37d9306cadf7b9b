package linearizability

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// segmentTarget is the size at which a key's history is cut into segments checked one by one. Porcupine
// keeps a bitset of the whole partition per visited state, so its memory grows with the square of a
// partition's length; a few thousand operations check in milliseconds.
const segmentTarget = 2000

// segment is a run of one key's operations that porcupine checks on its own, from init.
type segment struct {
	rank int32
	ops  []*keyOp
	init []kstate
}

// keyFailure is a segment porcupine found not linearizable.
type keyFailure struct {
	seg segment
}

// perKeyResult is the outcome of the per-key checks.
type perKeyResult struct {
	failures []keyFailure
	unknown  int // segments that timed out
}

// keyIndex lists, per key, the operations that project onto it (see project), in file order, and the keys
// ever attached to each lease. It is the per-key checks' index: their operations are built a batch of
// keys at a time from it, so that the check never holds the whole history projected.
func (c *checker) keyIndex() (keyLists, map[int64][]int32) {
	leaseKeys := map[int64][]int32{}
	c.hist.Scan(func(_ int, op *history.Operation) {
		v, ok := viewOf(op)
		if !ok {
			return
		}
		for b := range 2 {
			for _, sub := range v.branches[b] {
				if sub.Kind == history.KindPut && sub.Put != nil && sub.Put.Lease != 0 {
					leaseKeys[sub.Put.Lease] = append(leaseKeys[sub.Put.Lease], c.rank(sub.Put.Key))
				}
			}
		}
	})
	for l, ks := range leaseKeys {
		// A shared lease (kube's events) holds a thousand keys: sorting once beats searching each time.
		slices.Sort(ks)
		leaseKeys[l] = slices.Compact(ks)
	}
	entries := newArray[keyEntry](c, 0)
	p := projection{keysOnly: true}
	for i := range c.hist.Len() {
		c.project(i, leaseKeys, 0, int32(len(c.ks.keys)), &p)
		for _, e := range p.keys {
			entries.Add(keyEntry{k: e.k, v: int32(i)})
		}
	}
	return c.keyLists(entries, len(c.ks.keys)), leaseKeys
}

// buildKeyOps projects the operations of keys [lo, hi) onto them, one slice per key (byKey[k-lo]) in
// call order, from the index keyIndex built.
func (c *checker) buildKeyOps(index keyLists, leaseKeys map[int64][]int32, lo, hi int32) [][]*keyOp {
	var ops []int32
	for k := lo; k < hi; k++ {
		ops = append(ops, index.list(k)...)
	}
	slices.Sort(ops)
	ops = slices.Compact(ops)
	byKey := make([][]*keyOp, hi-lo)
	var p projection
	for _, i := range ops {
		c.project(int(i), leaseKeys, lo, hi, &p)
		for _, e := range p.keys {
			byKey[e.k-lo] = append(byKey[e.k-lo], e.ko)
		}
	}
	for k := range byKey {
		slices.SortStableFunc(byKey[k], func(a, b *keyOp) int { return cmp.Compare(a.call, b.call) })
	}
	return byKey
}

// projection is one operation projected onto keys; it is reused from operation to operation.
type projection struct {
	keys     []projected
	lo       int32
	hi       int32
	keysOnly bool  // only list the keys: every key's operation is skip
	skip     keyOp // receives what concerns keys outside [lo, hi), and every key's when keysOnly
	base     keyOp
	c        *checker
}

type projected struct {
	k  int32
	ko *keyOp
}

// get returns the key operation of key k, made on first use.
func (p *projection) get(k int32) *keyOp {
	if k < p.lo || k >= p.hi || p.keysOnly {
		// Keep the slices' memory: what goes in is thrown away.
		p.skip.cmps, p.skip.branches = p.skip.cmps[:0], [2][]keyStep{p.skip.branches[0][:0], p.skip.branches[1][:0]}
		if p.keysOnly && k >= p.lo && k < p.hi && !slices.ContainsFunc(p.keys, func(e projected) bool { return e.k == k }) {
			p.keys = append(p.keys, projected{k, &p.skip})
		}
		return &p.skip
	}
	for _, e := range p.keys {
		if e.k == k {
			return e.ko
		}
	}
	ko := new(keyOp)
	*ko = p.base
	ko.key = p.c.key(k)
	p.keys = append(p.keys, projected{k, ko})
	return ko
}

// project projects operation i onto the keys of [lo, hi) it reads or writes one by one, into p: single-key
// ranges, compares, puts, deletes (a range delete onto every key of its range), and revokes onto the keys
// ever attached to the lease. Multi-key ranges are not projected: the replay checks them as snapshots.
func (c *checker) project(i int, leaseKeys map[int64][]int32, lo, hi int32, p *projection) {
	p.keys, p.lo, p.hi, p.c = p.keys[:0], lo, hi, c
	oi := c.ops.Get(i)
	switch oi.state {
	case opAcked, opResolved, opUnresolved:
	default:
		return
	}
	op := c.op(i)
	base := keyOp{op: int32(i), client: int32(op.Client), call: oi.call, answered: oi.answered, taken: oi.taken, maybe: oi.state == opUnresolved, ret: oi.ret}
	switch oi.state {
	case opAcked:
		if oi.wrote {
			base.rev = oi.rev
		} else {
			base.hdr = oi.hdr
		}
	case opResolved:
		base.rev, base.ret = oi.rev, oi.seen
	}
	if op.Request.Kind == history.KindLeaseRevoke {
		p.base = base
		for _, k := range leaseKeys[op.Request.Lease.ID] {
			ko := p.get(k)
			ko.revoke, ko.observes = op.Request.Lease.ID, oi.state == opAcked
		}
		return
	}
	if serializableRead(&op.Request) || (op.Request.Kind == history.KindRange && op.Request.Range != nil && op.Request.Range.Revision != 0) {
		return // not linearizable at the current revision: the replay checks them
	}
	v, ok := viewOf(op)
	if !ok {
		return
	}
	if base.taken < 0 && len(v.cmps) == 0 {
		base.taken = 1
	}
	p.base = base
	for _, cmp := range v.cmps {
		ko := p.get(c.rank(cmp.Key))
		ko.cmps = append(ko.cmps, cmp)
		ko.observes = ko.observes || oi.state == opAcked
	}
	for _, e := range p.keys {
		e.ko.allCmps = true
		for _, cmp := range v.cmps {
			if c.rank(cmp.Key) != e.k {
				e.ko.allCmps = false
			}
		}
	}
	for b := range 2 {
		if base.taken >= 0 && int8(b) != base.taken {
			continue
		}
		var results []history.Response
		if oi.state == opAcked {
			results = v.results
		}
		for j := range v.branches[b] {
			sub := &v.branches[b][j]
			var res *history.Response
			if j < len(results) {
				res = &results[j]
			}
			c.projectStep(sub, res, b, p.get)
		}
	}
}

// projectStep adds one branch operation to the per-key operations of the keys it concerns.
func (c *checker) projectStep(sub *history.Request, res *history.Response, b int, get func(int32) *keyOp) {
	switch sub.Kind {
	case history.KindRange:
		rg := sub.Range
		if rg == nil || rg.End != "" || rg.Revision != 0 {
			// A read at a past revision says nothing of the key's state when the transaction applied;
			// checkTxnPastReads checks it against the compactions.
			return
		}
		k := c.rank(rg.Key)
		ko := get(k)
		st := keyStep{kind: history.KindRange, keysOnly: rg.KeysOnly, countOnly: rg.CountOnly}
		if res != nil && res.Range != nil {
			st.known, st.count = true, res.Range.Count
			if res.Range.Len() > 0 {
				kv := res.Range.At(0) // the key operation's own copy: the store's key-values are read, not held
				st.result = &kv
			}
			ko.observes = true
		}
		ko.branches[b] = append(ko.branches[b], st)
	case history.KindPut:
		if sub.Put == nil {
			return
		}
		ko := get(c.rank(sub.Put.Key))
		st := keyStep{kind: history.KindPut, value: sub.Put.Value.ID, lease: sub.Put.Lease}
		if res != nil && res.Put != nil && sub.Put.PrevKV {
			st.checkPrev, st.prev = true, res.Put.PrevKV
			ko.observes = true
		}
		ko.branches[b] = append(ko.branches[b], st)
	case history.KindDelete:
		d := sub.Delete
		if d == nil {
			return
		}
		lo, hi := c.ks.interval(d.Key, d.End)
		var prevs map[string]*history.KV
		if res != nil && res.Delete != nil && d.PrevKV {
			prevs = map[string]*history.KV{}
			for i := range res.Delete.PrevKVs {
				// A copy: a decoded operation's own key-values (unlike those it shares with the history)
				// would keep its decoder's memory alive as long as the key operation lives.
				kv := res.Delete.PrevKVs[i]
				prevs[kv.Key] = &kv
			}
		}
		for k := lo; k < hi; k++ {
			ko := get(k)
			st := keyStep{kind: history.KindDelete, deleted: -1}
			switch {
			case prevs != nil:
				st.deleted = 0
				if p := prevs[c.key(k)]; p != nil {
					st.deleted, st.checkPrev, st.prev = 1, true, p
				}
				ko.observes = true
			case res != nil && res.Delete != nil && d.End == "":
				st.deleted = int8(min(res.Delete.Deleted, 1))
				ko.observes = true
			}
			ko.branches[b] = append(ko.branches[b], st)
		}
	}
}

// segments cuts each key's operations into segments. A cut goes where the key is quiescent (every earlier
// operation returned before the next began, so any linearization orders all of them first) and the
// segment is long enough. The next segment starts from the replay's state of the key after the last write
// before the cut: exact when nothing unobserved may have touched the key, otherwise widened to every state
// an unobserved write or a lease expiry could have left.
func (c *checker) segments(byKey [][]*keyOp, lo int32, keyHist keyLists, s *sweep) []segment {
	initial := []kstate{{}}
	if c.preRun {
		initial = []kstate{{any: true}}
	}
	var out []segment
	for i, ops := range byKey {
		if len(ops) == 0 {
			continue
		}
		k := int(lo) + i
		start := 0
		init := initial
		var maxRet, maxWrite, maxSeen int64
		uncertain := false
		observes := false
		var hist []int32 // the key's changes, read when the first cut needs them
		flush := func(end int) {
			if observes {
				out = append(out, segment{rank: int32(k), ops: ops[start:end], init: init})
			}
		}
		for j, ko := range ops {
			call := ko.call
			if j > start && j-start >= segmentTarget && maxRet < call {
				flush(j)
				if hist == nil {
					hist = keyHist.list(int32(k))
				}
				init = c.stateAfter(s, hist, int32(k), maxWrite, maxSeen, uncertain)
				start, uncertain, observes = j, false, false
			}
			observes = observes || ko.observes
			maxRet = max(maxRet, ko.ret)
			if ko.rev != 0 {
				maxWrite = max(maxWrite, ko.rev)
				maxSeen = max(maxSeen, ko.rev)
			}
			maxSeen = max(maxSeen, ko.hdr)
			if ko.maybe || (ko.rev == 0 && ko.hdr == 0) {
				uncertain = true
			}
		}
		flush(len(ops))
	}
	return out
}

// stateAfter returns the states a key can be in after every write up to revision upTo, from the replay.
func (c *checker) stateAfter(s *sweep, hist []int32, k int32, upTo, seen int64, widen bool) []kstate {
	st := kstate{floor: seen}
	found := false
	i := sort.Search(len(hist), func(i int) bool { return s.canon.Get(int(hist[i])).rev > upTo })
	if i > 0 {
		e := s.canon.Get(int(hist[i-1]))
		found = true
		st.last = e.rev
		if !e.del {
			st.exists, st.r, st.unk = true, e.r, e.unk
		}
	}
	if !found && c.preRun {
		return []kstate{{any: true, floor: seen}}
	}
	if !widen && c.candFrom[k] == 0 && (!st.exists || st.r.lease == 0) {
		return []kstate{st}
	}
	// Something unobserved may have happened to the key: its version and creation are unknown, it may be
	// gone, or hold a value nobody saw.
	wide := st
	wide.unk |= unkCreate | unkVersion
	return []kstate{st, wide, {floor: seen}, {any: true, floor: seen}}
}

// perKeyBatch is about how many operations the per-key checks project at a time: the projection of a
// whole long history would hold hundreds of bytes per operation at once. At 25,000 the batches made the
// per-key checks the peak of a kube history's check (about 360 MB live for the 35-minute history, 290 at
// 8,000); smaller batches cost nothing measurable, each a few milliseconds of porcupine on every CPU.
const perKeyBatch = 8_000

// checkPerKey runs porcupine on every segment, on all CPUs, until ctx is done. Keys are taken in batches
// of about perKeyBatch operations; only a batch's operations are projected at a time.
func (c *checker) checkPerKey(ctx context.Context, s *sweep) perKeyResult {
	index, leaseKeys := c.keyIndex()
	changes := newArray[keyEntry](c, 0)
	for i := range s.canon.Len() {
		changes.Add(keyEntry{k: s.canon.Get(i).rank, v: int32(i)})
	}
	keyHist := c.keyLists(changes, len(c.ks.keys))
	defer keyHist.all.Close()
	defer index.all.Close()
	m := &keyModel{mayExpire: c.mayExpire}
	var res perKeyResult
	keys := int32(len(c.ks.keys))
	for lo := int32(0); lo < keys; {
		hi, n := lo, 0
		for hi < keys && (hi == lo || n+index.count(hi) <= perKeyBatch) {
			n += index.count(hi)
			hi++
		}
		segs := c.segments(c.buildKeyOps(index, leaseKeys, lo, hi), lo, keyHist, s)
		c.checkSegments(ctx, m, segs, &res)
		lo = hi
	}
	return res
}

// checkSegments checks segs on all CPUs into res.
func (c *checker) checkSegments(ctx context.Context, m *keyModel, segs []segment, res *perKeyResult) {
	c.stats.Partitions += len(segs)
	for _, sg := range segs {
		c.stats.LongestPartition = max(c.stats.LongestPartition, len(sg.ops))
	}
	// Longest first, so that one long segment does not finish last alone.
	slices.SortStableFunc(segs, func(a, b segment) int { return len(b.ops) - len(a.ops) })
	var mu sync.Mutex
	work := make(chan int)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	if c.workers > 0 {
		workers = min(workers, c.workers)
	}
	for range workers {
		wg.Go(func() {
			for i := range work {
				var fp proof
				if c.proofs != nil {
					if fp = c.fingerprint(segs[i]); c.proofs.has(fp) {
						mu.Lock()
						c.stats.ProvedBefore++
						mu.Unlock()
						continue
					}
				}
				r := checkSegment(ctx, m, segs[i])
				if r == porcupine.Ok && c.proofs != nil {
					c.proofs.add(fp)
				}
				mu.Lock()
				switch r {
				case porcupine.Illegal:
					res.failures = append(res.failures, keyFailure{seg: segs[i]})
				case porcupine.Unknown:
					res.unknown++
				}
				mu.Unlock()
			}
		})
	}
	for i := range segs {
		if ctx.Err() != nil {
			mu.Lock()
			res.unknown += len(segs) - i
			mu.Unlock()
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
}

func checkSegment(ctx context.Context, m *keyModel, sg segment) porcupine.CheckResult {
	timeout := time.Duration(0)
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	return porcupine.CheckOperationsTimeout(m.porcupine(sg.init), porcupineOps(sg.ops, nil), timeout)
}

// porcupineOps turns key operations into porcupine's; given the history's operations, it adds each
// response as metadata, for visualizations.
func porcupineOps(ops []*keyOp, described operations) []porcupine.Operation {
	out := make([]porcupine.Operation, len(ops))
	for i, ko := range ops {
		ret := ko.ret
		if ko.maybe || !ko.answered {
			ret = min(ret, infinity-1)
		}
		out[i] = porcupine.Operation{ClientId: int(ko.client), Input: ko, Call: ko.call, Return: ret}
		if described != nil {
			out[i].Metadata = describeResponse(described.At(int(ko.op)))
		}
	}
	return out
}

// mayExpire reports whether lease id may have expired (or been revoked by a failed revoke) before t.
func (c *checker) mayExpire(id, t int64) bool {
	if _, ok := c.candRevok[id]; ok {
		return true
	}
	l := c.leases[id]
	return l == nil || l.minExpiry-leaseSlack < t
}

// shrink makes a failing segment as small as it can while it still fails: it drops the latest operations
// while the rest still fails, then cuts quiescent prefixes off.
func (c *checker) shrink(ctx context.Context, f keyFailure, s *sweep) segment {
	m := &keyModel{mayExpire: c.mayExpire}
	sg := f.seg
	fails := func(x segment) bool { return checkSegment(ctx, m, x) == porcupine.Illegal }
	// Drop from the end: binary search the shortest failing prefix (by call order).
	lo, hi := 1, len(sg.ops)
	for lo < hi {
		mid := (lo + hi) / 2
		if fails(segment{rank: sg.rank, ops: sg.ops[:mid], init: sg.init}) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if fails(segment{rank: sg.rank, ops: sg.ops[:lo], init: sg.init}) {
		sg.ops = sg.ops[:lo]
	}
	// Cut from the front at quiescent points, starting from the replay's state there.
	keyHist := []int32{}
	for i := range s.canon.Len() {
		if s.canon.Get(i).rank == sg.rank {
			keyHist = append(keyHist, int32(i))
		}
	}
	var maxRet, maxWrite, maxSeen int64
	for _, st := range sg.init {
		maxWrite, maxSeen = max(maxWrite, st.last), max(maxSeen, st.floor)
	}
	uncertain := len(sg.init) > 1
	best := sg
	for j := 0; j+1 < len(sg.ops); j++ {
		ko := sg.ops[j]
		maxRet = max(maxRet, ko.ret)
		if ko.rev != 0 {
			maxWrite, maxSeen = max(maxWrite, ko.rev), max(maxSeen, ko.rev)
		}
		maxSeen = max(maxSeen, ko.hdr)
		uncertain = uncertain || ko.maybe
		if maxRet >= sg.ops[j+1].call {
			continue
		}
		cand := segment{rank: sg.rank, ops: sg.ops[j+1:], init: c.stateAfter(s, keyHist, sg.rank, maxWrite, maxSeen, uncertain)}
		if fails(cand) {
			best = cand
		}
	}
	return best
}

// describeSegment lists a segment's operations for a violation message.
func (c *checker) describeSegment(sg segment, max int) string {
	s := ""
	for i, ko := range sg.ops {
		if i == max {
			s += fmt.Sprintf("\n  ... and %d more", len(sg.ops)-max)
			break
		}
		op := c.op(int(ko.op))
		s += fmt.Sprintf("\n  %s -> %s [%s, %s]", c.describe(int(ko.op)), describeResponse(op), fmtTime(op.Call), fmtTime(c.ops.Get(int(ko.op)).ret))
	}
	return s
}

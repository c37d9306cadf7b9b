package linearizability

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// placed is an operation or a watch record at its place in etcd's revision order: a write at 2×its
// revision, anything that read the store (reads, writes that wrote nothing, grants, revokes) at 2×the
// revision it saw + 1. Evidence that a revision existed (a watch response) is placed like a read, with no
// call time: whatever began after it must come after that revision.
type placed struct {
	at        int64
	call, ret int64
	op        int32 // -1 for evidence from a watch record
	watcher   int32 // the watcher whose record is the evidence
}

// opAt is an operation at its place, as the real-time check sorts them (16 bytes per operation).
type opAt struct {
	at int64
	op int32
}

// callSteps is the latest call of the operations placed before a place, as a step function of the place:
// at step i's place and after, the latest call is its call, by its operation. It is paged.
type callSteps struct{ *history.Paged[callStep] }

type callStep struct {
	at, call int64
	op       int32
}

// before returns the step in force for places strictly before at, or false when nothing is placed before
// it.
func (cs callSteps) before(at int64) (callStep, bool) {
	i := sort.Search(cs.Len(), func(i int) bool { return cs.Get(i).at >= at })
	if i == 0 {
		return callStep{}, false
	}
	return cs.Get(i - 1), true
}

// checkRealTime checks that etcd's revision order is consistent with real time: no operation placed later
// in that order finished before an operation placed earlier began. This one check covers "a write that
// finished before another began has the smaller revision", "a linearizable read never returns a revision
// older than one acknowledged before it began" and "nothing reads a revision before its write was sent".
// With the replay's answers checked at their revisions, it makes the revision order a linearization.
//
// The operations are sorted by place; the watch records, which are most of what is placed, are not held:
// each is compared, as watch.bin is read once more, with the latest call placed before it.
func (c *checker) checkRealTime() {
	ops := newArray[opAt](c, 0)
	for i := range c.hist.Len() {
		if at, ok := c.revPlace(int32(i)); ok {
			ops.Add(opAt{at: at, op: int32(i)})
		}
	}
	ops = sortPaged(c, ops, func(a, b opAt) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.op, b.op))
	})
	// One violation per operation placed too early (a stale read contradicts every later write it
	// missed, but it is one anomaly): the first, in the revision order, of what contradicts it, and of
	// those at one place (a write's readers and watchers), the one that returned first.
	first := map[int32]placed{}
	contradict := func(early int32, late placed) {
		if prev, ok := first[early]; !ok || late.at < prev.at || late.at == prev.at && late.ret < prev.ret {
			first[early] = late
		}
	}
	steps := callSteps{newArray[callStep](c, 0)}
	defer steps.Close()
	maxCall, arg := int64(-infinity), int32(-1)
	for i := 0; i < ops.Len(); {
		at := ops.Get(i).at
		j := i
		for j < ops.Len() && ops.Get(j).at == at {
			j++
		}
		for k := i; k < j; k++ {
			if p := c.placedOp(ops.Get(k).op); p.ret < maxCall {
				contradict(arg, p)
			}
		}
		for k := i; k < j; k++ {
			o := ops.Get(k)
			if call := c.ops.Get(int(o.op)).call; call > maxCall {
				maxCall, arg = call, o.op
			}
		}
		if steps.Len() == 0 || steps.Get(steps.Len()-1).call != maxCall {
			steps.Add(callStep{at: at, call: maxCall, op: arg})
		}
		i = j
	}
	ops.Close()
	c.eachWatch(func(_ int32, r *history.WatchResponse) {
		if r.Revision <= 0 || r.Error != "" {
			return
		}
		at := 2*r.Revision + 1
		if st, ok := steps.before(at); ok && r.Time < st.call {
			contradict(st.op, placed{at: at, call: -infinity, ret: r.Time, op: -1, watcher: int32(r.Watcher)})
		}
	})
	found := make([]int32, 0, len(first))
	for early := range first {
		found = append(found, early)
	}
	slices.SortFunc(found, func(a, b int32) int {
		return cmp.Or(cmp.Compare(first[a].at, first[b].at), cmp.Compare(a, b))
	})
	for _, early := range found[:min(len(found), 1000)] {
		c.realTimeViolation(c.placedOp(early), first[early])
	}
	c.checkSerializableFuture()
	c.checkCompactedReads()
	c.checkTxnPastReads()
	c.checkKeepAlives()
}

// revPlace returns where operation i is placed in the revision order, or false when it has no place:
// failed operations never seen to take effect, keep-alives (answered by the leader's lessor without
// consensus), compactions (by the applier without a linearizable read) and serializable reads (stale by
// design, and checked on their own: one from the future is that check's violation, not a write's).
func (c *checker) revPlace(i int32) (int64, bool) {
	oi := c.ops.Get(int(i))
	switch oi.state {
	case opAcked:
	case opResolved:
		return 2 * oi.rev, true
	default:
		return 0, false
	}
	if oi.kind == kindKeepAlive || oi.kind == kindCompact || oi.kind == kindSerializable {
		return 0, false
	}
	if oi.wrote {
		return 2 * oi.rev, true
	}
	return 2*oi.hdr + 1, true
}

// placedOp is operation i, which has a place, with its real-time interval: a write resolved from a
// sighting may have taken effect any time after it was sent.
func (c *checker) placedOp(i int32) placed {
	oi := c.ops.Get(int(i))
	at, _ := c.revPlace(i)
	ret := oi.ret
	if oi.state == opResolved {
		ret = infinity
	}
	return placed{at: at, call: oi.call, ret: ret, op: i}
}

// checkKeepAlives checks that a lease cannot be kept alive once a revoke of it was acknowledged or its
// expiry was seen: etcd answers ErrLeaseNotFound.
func (c *checker) checkKeepAlives() {
	for i := range c.hist.Len() {
		if !c.ops.Get(i).answered || c.ops.Get(i).kind != kindKeepAlive {
			continue
		}
		op := c.op(i)
		if op.Request.Lease == nil || op.Response.Lease == nil || op.Response.Lease.TTL <= 0 {
			continue
		}
		l := c.leases[op.Request.Lease.ID]
		switch {
		case l == nil:
		case l.revoked != 0 && l.revoked < op.Call:
			c.vs.add(Violation{Check: CheckLinearizability, Kind: "keep-alive of revoked lease", Ops: []int{int(l.revokeOp), i}, Time: l.revoked,
				Message: fmt.Sprintf("%s succeeded, but %s had revoked the lease before it was sent", c.describe(i), c.describe(int(l.revokeOp)))})
		case l.expired != 0 && l.expired < op.Call:
			c.vs.add(Violation{Check: CheckLinearizability, Kind: "keep-alive of expired lease", Revision: l.expiredRev, Ops: []int{i}, Time: l.expired,
				Message: fmt.Sprintf("%s succeeded, but the lease had expired at revision %d, known at %s, before it was sent", c.describe(i), l.expiredRev, fmtTime(l.expired))})
		}
	}
}

// realTimeViolation describes why early (placed earlier, called late) and late (placed later, returned
// before early was called) contradict each other.
func (c *checker) realTimeViolation(early, late placed) {
	eop := c.op(int(early.op))
	eRev := early.at / 2
	lRev := late.at / 2
	v := Violation{Check: CheckLinearizability, Key: opKey(eop), Time: late.ret, Revision: lRev}
	if late.op < 0 {
		v.Watcher = int(late.watcher)
		v.Ops = []int{int(early.op)}
		if early.at%2 == 0 {
			v.Kind = "revision order contradicts real time"
			v.Message = fmt.Sprintf("%s was sent at %s, after watcher %d had received revision %d at %s, yet it wrote revision %d",
				c.describe(int(early.op)), fmtTime(early.call), late.watcher, lRev, fmtTime(late.ret), eRev)
		} else {
			v.Kind = "stale read"
			v.Message = fmt.Sprintf("%s was sent at %s, after watcher %d had received revision %d at %s, yet it read revision %d",
				c.describe(int(early.op)), fmtTime(early.call), late.watcher, lRev, fmtTime(late.ret), eRev)
		}
		c.vs.add(v)
		return
	}
	lop := c.op(int(late.op))
	v.Ops = []int{int(late.op), int(early.op)}
	v.Key = opKey(lop)
	lateWrite, earlyWrite := late.at%2 == 0, early.at%2 == 0
	switch {
	case lateWrite && !earlyWrite:
		v.Kind = "stale read"
		v.Message = fmt.Sprintf("%s was sent at %s, after %s had been acknowledged with revision %d at %s, yet it read revision %d",
			c.describe(int(early.op)), fmtTime(early.call), c.describe(int(late.op)), lRev, fmtTime(late.ret), eRev)
	case lateWrite && earlyWrite:
		v.Kind = "revision order contradicts real time"
		v.Message = fmt.Sprintf("%s was acknowledged with revision %d at %s, before %s was sent at %s, yet that one got the smaller revision %d",
			c.describe(int(late.op)), lRev, fmtTime(late.ret), c.describe(int(early.op)), fmtTime(early.call), eRev)
	case !lateWrite && earlyWrite:
		v.Kind = "read from the future"
		v.Message = fmt.Sprintf("%s returned revision %d at %s, before %s, which wrote revision %d, was sent at %s",
			c.describe(int(late.op)), lRev, fmtTime(late.ret), c.describe(int(early.op)), eRev, fmtTime(early.call))
	default:
		v.Kind = "stale read"
		v.Message = fmt.Sprintf("%s was sent at %s, after %s had returned revision %d at %s, yet it read revision %d",
			c.describe(int(early.op)), fmtTime(early.call), c.describe(int(late.op)), lRev, fmtTime(late.ret), eRev)
	}
	c.vs.add(v)
}

// checkSerializableFuture checks that a serializable read never shows a revision whose write was sent
// after the read returned: stale is allowed, the future is not.
func (c *checker) checkSerializableFuture() {
	for i := range c.hist.Len() {
		if !c.ops.Get(i).answered || c.ops.Get(i).kind != kindSerializable {
			continue
		}
		op := c.op(i)
		h := op.Response.Revision
		if h <= c.base || h > c.maxRev {
			continue
		}
		if w := c.writer.Get(c.rev(h)); w >= 0 && c.ops.Get(int(w)).call > op.Return {
			c.vs.add(Violation{Check: CheckSerializable, Kind: "read from the future", Key: opKey(op), Revision: h, Ops: []int{i, int(w)}, Time: op.Call,
				Message: fmt.Sprintf("%s returned revision %d at %s, before %s, which wrote it, was sent at %s",
					c.describe(i), h, fmtTime(op.Return), c.describe(int(w)), fmtTime(c.ops.Get(int(w)).call))})
		}
	}
}

// compactedBefore returns the highest revision compacted by a compaction acknowledged before t.
func (c *checker) compactedBefore(t int64) (int64, int) {
	best, who := int64(0), -1
	for i, cp := range c.compactions {
		if cp.acked && cp.ret < t && cp.rev > best {
			best, who = cp.rev, i
		}
	}
	return best, who
}

// addFaultCompactions adds the compactions that compact faults may have made (faults.jsonl windows of
// kind "compact") to those the history records. A fault compacts through a client of its own, so its
// compactions are not in the history, yet they change what etcd may answer: a watch event whose previous
// value was compacted before etcd read it goes without one (etcd-io/etcd#10681). Each window may have
// compacted, any time from its start on, to any revision that existed before it ended: below the first
// revision written by an acknowledged write sent after the end. Such a compaction is never acknowledged,
// so it only excuses, never convicts.
func (c *checker) addFaultCompactions(windows []results.FaultWindow) {
	for _, w := range windows {
		if w.Fault != "compact" {
			continue
		}
		end := max(w.EndNs, w.StartNs)
		rev := int64(infinity)
		for i := range c.ops.Len() {
			if oi := c.ops.Get(i); oi.state == opAcked && oi.wrote && oi.rev > 0 && oi.call > end {
				rev = min(rev, oi.rev-1)
			}
		}
		c.compactions = append(c.compactions, compaction{rev: rev, call: w.StartNs, ret: infinity})
	}
}

// checkCompactedReads checks that a linearizable read at a revision below an acknowledged compaction fails.
func (c *checker) checkCompactedReads() {
	if len(c.compactions) == 0 {
		return
	}
	for i := range c.hist.Len() {
		if !c.ops.Get(i).answered || c.ops.Get(i).kind != kindPastRead {
			continue
		}
		op := c.op(i)
		rg := op.Request.Range
		if cr, _ := c.compactedBefore(op.Call); rg.Revision < cr {
			c.vs.add(Violation{Check: CheckLinearizability, Kind: "read of compacted revision", Key: rg.Key, Revision: rg.Revision, Ops: []int{i}, Time: op.Call,
				Message: fmt.Sprintf("%s read revision %d and succeeded, but compaction to %d had been acknowledged before it was sent (etcd answers ErrCompacted)", c.describe(i), rg.Revision, cr)})
		}
	}
}

package linearizability

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// placed is an operation at its place in etcd's revision order: a write at 2×its revision, anything that
// read the store (reads, writes that wrote nothing, grants, revokes) at 2×the revision it saw + 1. Evidence
// that a revision existed (a watch response) is placed like a read, with no call time: whatever began after
// it must come after that revision.
type placed struct {
	at        int64
	call, ret int64
	op        int32 // -1 for evidence from a watch record
	watcher   int32 // the watcher whose record is the evidence (32 bytes in all: one per operation and record)
}

// checkRealTime checks that etcd's revision order is consistent with real time: no operation placed later
// in that order finished before an operation placed earlier began. This one check covers "a write that
// finished before another began has the smaller revision", "a linearizable read never returns a revision
// older than one acknowledged before it began" and "nothing reads a revision before its write was sent".
// With the replay's answers checked at their revisions, it makes the revision order a linearization.
func (c *checker) checkRealTime() {
	ps := make([]placed, 0, c.hist.Len()+c.evidence)
	for i := range c.hist.Len() {
		oi := &c.ops[i]
		switch oi.state {
		case opAcked:
		case opResolved:
			ps = append(ps, placed{at: 2 * oi.rev, call: oi.call, ret: infinity, op: int32(i)})
			continue
		default:
			continue
		}
		switch {
		case oi.keepAlive, oi.compact:
			// Keep-alives are answered by the leader's lessor without consensus; compactions by the
			// applier without a linearizable read. Neither promises a place in the order.
			continue
		case oi.serializable:
			// Stale by design, and checked on their own (a serializable read from the future is that
			// check's violation, not a write's).
			continue
		}
		at := 2*oi.hdr + 1
		if oi.wrote {
			at = 2 * oi.rev
		}
		ps = append(ps, placed{at: at, call: oi.call, ret: oi.ret, op: int32(i)})
	}
	c.eachWatch(func(_ int32, r *history.WatchResponse) {
		if r.Revision > 0 && r.Error == "" {
			ps = append(ps, placed{at: 2*r.Revision + 1, call: -infinity, ret: r.Time, op: -1, watcher: int32(r.Watcher)})
		}
	})
	slices.SortFunc(ps, func(a, b placed) int { return cmp.Compare(a.at, b.at) })

	maxCall, arg := int64(-infinity), -1
	// One violation per operation placed too early: a stale read contradicts every later write it missed,
	// but it is one anomaly.
	reported := map[int]bool{}
	for i := 0; i < len(ps); {
		j := i
		for j < len(ps) && ps[j].at == ps[i].at {
			j++
		}
		for _, p := range ps[i:j] {
			if p.ret < maxCall && !reported[arg] && len(reported) < 1000 {
				c.realTimeViolation(ps[arg], p)
				reported[arg] = true
			}
		}
		for k := i; k < j; k++ {
			if ps[k].call > maxCall {
				maxCall, arg = ps[k].call, k
			}
		}
		i = j
	}
	c.checkSerializableFuture()
	c.checkCompactedReads()
	c.checkKeepAlives()
}

// checkKeepAlives checks that a lease cannot be kept alive once a revoke of it was acknowledged or its
// expiry was seen: etcd answers ErrLeaseNotFound.
func (c *checker) checkKeepAlives() {
	for i := range c.hist.Len() {
		if !c.ops[i].answered || !c.ops[i].keepAlive {
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
		if !c.ops[i].answered || !c.ops[i].serializable {
			continue
		}
		op := c.op(i)
		h := op.Response.Revision
		if h <= c.base || h > c.maxRev {
			continue
		}
		if w := c.writer[c.rev(h)]; w >= 0 && c.ops[w].call > op.Return {
			c.vs.add(Violation{Check: CheckSerializable, Kind: "read from the future", Key: opKey(op), Revision: h, Ops: []int{i, int(w)}, Time: op.Call,
				Message: fmt.Sprintf("%s returned revision %d at %s, before %s, which wrote it, was sent at %s",
					c.describe(i), h, fmtTime(op.Return), c.describe(int(w)), fmtTime(c.ops[w].call))})
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
		for i := range c.ops {
			if oi := &c.ops[i]; oi.state == opAcked && oi.wrote && oi.rev > 0 && oi.call > end {
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
		if !c.ops[i].answered || !c.ops[i].pastRead {
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

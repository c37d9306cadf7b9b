package linearizability

// What each operation is: whether it was answered, may have written, or can be ignored, and what the
// history says about leases (how long each must live, when it was revoked) and compactions.

import (
	"time"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// operations is what a check reads a history's operations through: the slice of a history in memory, or
// a store that holds them encoded and decodes one each time it is asked for it (CheckDir).
type operations interface {
	Len() int
	At(i int) *history.Operation
	// Scan calls fn with every operation in order; the operation is valid only during the call.
	Scan(fn func(i int, op *history.Operation))
}

// inMemory is the operations of a history in memory.
type inMemory []history.Operation

func (m inMemory) Len() int                    { return len(m) }
func (m inMemory) At(i int) *history.Operation { return &m[i] }
func (m inMemory) Scan(fn func(i int, op *history.Operation)) {
	for i := range m {
		fn(i, &m[i])
	}
}

// op returns operation i. From a store it is decoded afresh at each call: a pass that needs several of an
// operation's parts takes it once.
func (c *checker) op(i int) *history.Operation { return c.hist.At(i) }

// compaction is an answered or failed compaction request.
type compaction struct {
	rev       int64
	call, ret int64 // ret is infinity when it failed
	acked     bool
}

// leaseSlack is how much earlier than the history's clock allows a lease may expire without a violation:
// etcd times leases with its own clock, and clocks tick at slightly different rates.
const leaseSlack = int64(100 * time.Millisecond)

// leaseInfo is what the history says about one lease.
type leaseInfo struct {
	// minExpiry is the earliest moment etcd may expire the lease: every answered grant or keep-alive sent
	// at call with TTL ttl proves the lease lives until at least call+ttl (leader changes only extend it).
	minExpiry int64
	revoked   int64 // return time of the first answered revoke; 0 when never revoked
	revokeOp  int32
	// expired is when the lease's expiry (or a failed revoke) was known to have deleted its keys: the
	// first revision only watchers saw that deleted every key attached to it, with nothing else to
	// explain the deletions. 0 when never.
	expired    int64
	expiredRev int64
}

// startClassify prepares classifyOp: no operation classified yet.
func (c *checker) startClassify() {
	c.ops = newArray[opInfo](c, 0)
	c.leases = map[int64]*leaseInfo{}
	c.revokes = map[int64][]int32{}
}

// classifyOp fills opInfo for operation i, the next one, and collects leases and compactions: each depends
// on the operation alone, so a run folds them in as the operations are written (Follower).
func (c *checker) classifyOp(i int, op *history.Operation) {
	lease := func(id int64) *leaseInfo {
		l := c.leases[id]
		if l == nil {
			l = &leaseInfo{}
			c.leases[id] = l
		}
		return l
	}
	oi := opInfo{call: op.Call, ret: op.Return, taken: -1}
	defer func() { c.ops.Add(oi) }()
	oi.writes = canWrite(&op.Request)
	failed := op.Response == nil
	oi.answered = !failed
	switch rg := op.Request.Range; {
	case serializableRead(&op.Request):
		oi.kind = kindSerializable
	case op.Request.Kind == history.KindRange && rg != nil && rg.Revision != 0:
		oi.kind = kindPastRead
	case op.Request.Kind == history.KindLeaseKeepAlive:
		oi.kind = kindKeepAlive
	case op.Request.Kind == history.KindCompact:
		oi.kind = kindCompact
	}
	if failed {
		oi.ret = infinity
		oi.state = opIgnored
		if r, ok := refusedTxn(op); ok {
			// Refused for its past read: applied nowhere, not a write that may have taken effect.
			if c.refused == nil {
				c.refused = map[int32]refusal{}
			}
			c.refused[int32(i)] = r
		} else if oi.writes {
			oi.state = opUnresolved
			c.stats.FailedWrites++
		}
	} else {
		oi.state = opAcked
		oi.hdr = op.Response.Revision
		oi.taken = takenBranch(op)
	}
	switch op.Request.Kind {
	case history.KindLeaseGrant:
		if !failed && op.Response.Lease != nil {
			l := lease(op.Response.Lease.ID)
			l.minExpiry = max(l.minExpiry, op.Call+op.Response.Lease.TTL*1e9)
		}
	case history.KindLeaseKeepAlive:
		if !failed && op.Response.Lease != nil && op.Request.Lease != nil && op.Response.Lease.TTL > 0 {
			l := lease(op.Request.Lease.ID)
			l.minExpiry = max(l.minExpiry, op.Call+op.Response.Lease.TTL*1e9)
		}
	case history.KindLeaseRevoke:
		if op.Request.Lease == nil {
			oi.state = opIgnored
			return
		}
		l := lease(op.Request.Lease.ID)
		if !failed {
			if l.revoked == 0 || op.Return < l.revoked {
				l.revoked, l.revokeOp = op.Return, int32(i)
			}
			c.revokes[oi.hdr] = append(c.revokes[oi.hdr], int32(i))
		}
	case history.KindCompact:
		if op.Request.Compact != nil {
			c.compactions = append(c.compactions, compaction{rev: op.Request.Compact.Revision, call: op.Call, ret: oi.ret, acked: !failed})
		}
		if failed {
			oi.state = opIgnored
		}
	}
}

// serializableRead reports whether etcd serves r from the answering member's own state, without a
// linearizable read: a serializable range, or a transaction every operation of whose branches is one
// (etcd's isTxnSerializable: its compares, too, are then evaluated on that member's state). Its answer may
// be stale by design; the serializable-reads check judges it, never linearizability.
func serializableRead(r *history.Request) bool {
	switch r.Kind {
	case history.KindRange:
		return r.Range != nil && r.Range.Serializable
	case history.KindTxn:
		if r.Txn == nil {
			return false
		}
		for _, branch := range [][]history.Request{r.Txn.Then, r.Txn.Else} {
			for i := range branch {
				if branch[i].Kind != history.KindRange || branch[i].Range == nil || !branch[i].Range.Serializable {
					return false
				}
			}
		}
		return true
	}
	return false
}

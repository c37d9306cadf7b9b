package linearizability

// Reads at a past revision inside a transaction (etcd-io/etcd#18667). etcd checks every range of the
// branch a transaction takes before it applies any of it: a range at a compacted revision (or a future
// one) fails the whole transaction, its writes included, and it must fail on every member alike. The
// bug: the members the client was not connected to dropped the transaction's ranges before applying it
// and applied its writes, while the member that answered the client refused it. What the history shows
// then is a write the client was told was refused, seen afterwards.

import (
	"fmt"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// refusal is etcd's answer to a transaction whose past read it could not serve.
type refusal struct {
	compacted bool  // required revision has been compacted (else: is a future revision)
	rev       int64 // the lowest revision the transaction's ranges asked for
}

// Errors etcd answers a range it cannot serve with (mvcc.ErrCompacted, mvcc.ErrFutureRev).
const (
	errTextCompacted = "required revision has been compacted"
	errTextFutureRev = "required revision is a future revision"
)

// pastReadRevision returns the lowest revision a range of txn asks for (0: none reads at a revision).
func pastReadRevision(txn *history.Txn) int64 {
	var lowest int64
	for _, branch := range [][]history.Request{txn.Then, txn.Else} {
		for _, sub := range branch {
			if sub.Kind == history.KindRange && sub.Range != nil && sub.Range.Revision > 0 && (lowest == 0 || sub.Range.Revision < lowest) {
				lowest = sub.Range.Revision
			}
		}
	}
	return lowest
}

// refusedTxn reports whether op is a transaction with a read at a past revision that etcd refused for
// that read: then none of it was applied, on any member.
func refusedTxn(op *history.Operation) (refusal, bool) {
	if op.Response != nil || op.Request.Kind != history.KindTxn || op.Request.Txn == nil {
		return refusal{}, false
	}
	rev := pastReadRevision(op.Request.Txn)
	if rev == 0 {
		return refusal{}, false
	}
	switch {
	case strings.Contains(op.Error, errTextCompacted):
		return refusal{compacted: true, rev: rev}, true
	case strings.Contains(op.Error, errTextFutureRev):
		return refusal{rev: rev}, true
	}
	return refusal{}, false
}

// seeRefused reports a value written by a refused transaction (ref) that was seen all the same.
func (c *checker) seeRefused(kv *history.KV, at int64, who sighting, op int32, r refusal) {
	why := "revision %d is a future revision"
	if r.compacted {
		why = "revision %d is compacted"
	}
	c.vs.add(Violation{Check: CheckLinearizability, Kind: "refused write took effect", Key: kv.Key, Revision: kv.ModRevision,
		Ops: append([]int{int(op)}, who.ops()...), Time: at,
		Message: fmt.Sprintf("%s was refused (%s, so none of the transaction applies), but %s its value #%d at revision %d: a member applied what the one answering refused (etcd-io/etcd#18667)",
			c.describe(int(op)), fmt.Sprintf(why, r.rev), who, kv.Value.ID, kv.ModRevision)})
}

// checkTxnPastReads checks the transactions that read at a past revision against the compactions: one
// that etcd answered must not have read below a compaction acknowledged before it was sent, and one it
// refused as compacted must have asked for a revision some compaction sent before its answer could have
// removed.
func (c *checker) checkTxnPastReads() {
	for i := range c.hist.Len() {
		op := c.op(i)
		if op.Request.Kind != history.KindTxn || op.Request.Txn == nil {
			continue
		}
		if r, ok := c.refused[int32(i)]; ok {
			if r.compacted && !c.mayHaveCompacted(r.rev, op.Return) {
				c.vs.add(Violation{Check: CheckLinearizability, Kind: "compacted without a compaction", Key: opKey(op), Revision: r.rev, Ops: []int{i}, Time: op.Call,
					Message: fmt.Sprintf("%s was refused as reading compacted revision %d, but no compaction sent before its answer went beyond that revision", c.describe(i), r.rev)})
			}
			continue
		}
		if !c.ops.Get(i).answered {
			continue
		}
		b := c.ops.Get(i).taken
		branch := op.Request.Txn.Else
		if b == 1 {
			branch = op.Request.Txn.Then
		}
		cr, _ := c.compactedBefore(op.Call)
		for _, sub := range branch {
			if sub.Kind == history.KindRange && sub.Range != nil && sub.Range.Revision > 0 && sub.Range.Revision < cr {
				c.vs.add(Violation{Check: CheckLinearizability, Kind: "read of compacted revision", Key: sub.Range.Key, Revision: sub.Range.Revision, Ops: []int{i}, Time: op.Call,
					Message: fmt.Sprintf("%s read revision %d inside a transaction and succeeded, but compaction to %d had been acknowledged before it was sent (etcd refuses the whole transaction with ErrCompacted)", c.describe(i), sub.Range.Revision, cr)})
				break
			}
		}
	}
}

// mayHaveCompacted reports whether a compaction beyond rev (etcd keeps the compaction revision itself
// readable) may have been applied before t: one of the history's sent before t, or one a compact fault
// may have made.
func (c *checker) mayHaveCompacted(rev, t int64) bool {
	for _, cp := range c.compactions {
		if cp.call < t && cp.rev > rev {
			return true
		}
	}
	return false
}

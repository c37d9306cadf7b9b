package kube

import (
	"context"
	"errors"

	"github.com/etcd-chaosbench/chaosbench/results/history"
	"github.com/etcd-chaosbench/chaosbench/workloads"
)

// The verbs of kube-apiserver's etcd3 storage, as requests. Each takes the recording client and the
// schedule slot of its first attempt; retries after a conflict are sent at once and carry no slot.

// errNotFound is an update or delete of an object that no longer exists.
var errNotFound = errors.New("object not found")

// maxConflicts bounds GuaranteedUpdate's retries, as a storm of writers to one object would.
const maxConflicts = 10

// get is a single-object read: a linearizable Range(key, limit=1).
func get(ctx context.Context, c *workloads.Client, slot *workloads.Slot, op, k string) (history.Response, error) {
	return c.Do(ctx, slot, op, history.Request{Kind: history.KindRange, Range: &history.Range{Key: k, Limit: 1}})
}

// create is Txn(If ModRevision(key) == 0 Then Put(key, value [, lease])) with no Else branch. It reports
// whether the object was created (false: it already existed).
func create(ctx context.Context, c *workloads.Client, slot *workloads.Slot, op, k string, v history.Value, lease int64) (created bool, rev int64, err error) {
	resp, err := c.Do(ctx, slot, op, history.Request{Kind: history.KindTxn, Txn: &history.Txn{
		Compares: []history.Compare{{Key: k, Target: history.CompareModRevision, Result: history.Equal}},
		Then:     []history.Request{{Kind: history.KindPut, Put: &history.Put{Key: k, Value: v, Lease: lease}}},
	}})
	if err != nil {
		return false, 0, err
	}
	return resp.Txn.Succeeded, resp.Revision, nil
}

// update is GuaranteedUpdate: Txn(If ModRevision(key) == known Then Put Else Get). On a conflict it takes
// the current object from the Else branch and tries again with a new value, as the apiserver does after
// re-running the update function; conflicts counts those retries. size draws each value's size; v is the
// value of the last attempt.
func update(ctx context.Context, c *workloads.Client, slot *workloads.Slot, op, k string, known int64, size func() int, lease int64) (rev int64, v history.Value, conflicts int, err error) {
	for {
		v = c.NewValue(size())
		resp, err := c.Do(ctx, slot, op, history.Request{Kind: history.KindTxn, Txn: &history.Txn{
			Compares: []history.Compare{{Key: k, Target: history.CompareModRevision, Result: history.Equal, Operand: known}},
			Then:     []history.Request{{Kind: history.KindPut, Put: &history.Put{Key: k, Value: v, Lease: lease}}},
			Else:     []history.Request{{Kind: history.KindRange, Range: &history.Range{Key: k}}},
		}})
		if err != nil {
			return 0, v, conflicts, err
		}
		if resp.Txn.Succeeded {
			return resp.Revision, v, conflicts, nil
		}
		if known, err = current(resp); err != nil || conflicts >= maxConflicts {
			return 0, v, conflicts, err
		}
		conflicts++
		slot = nil
	}
}

// remove is the storage's Delete: Txn(If ModRevision(key) == known Then Delete Else Get), retried with the
// Else branch's revision on a conflict.
func remove(ctx context.Context, c *workloads.Client, slot *workloads.Slot, op, k string, known int64) (conflicts int, err error) {
	for {
		resp, err := c.Do(ctx, slot, op, history.Request{Kind: history.KindTxn, Txn: &history.Txn{
			Compares: []history.Compare{{Key: k, Target: history.CompareModRevision, Result: history.Equal, Operand: known}},
			Then:     []history.Request{{Kind: history.KindDelete, Delete: &history.Delete{Key: k}}},
			Else:     []history.Request{{Kind: history.KindRange, Range: &history.Range{Key: k}}},
		}})
		if err != nil {
			return conflicts, err
		}
		if resp.Txn.Succeeded {
			return conflicts, nil
		}
		if known, err = current(resp); err != nil || conflicts >= maxConflicts {
			return conflicts, err
		}
		conflicts++
		slot = nil
	}
}

// current returns the revision of the object a failed transaction's Else branch read.
func current(resp history.Response) (int64, error) {
	if len(resp.Txn.Results) == 0 || resp.Txn.Results[0].Range == nil || len(resp.Txn.Results[0].Range.KVs) == 0 {
		return 0, errNotFound
	}
	return resp.Txn.Results[0].Range.KVs[0].ModRevision, nil
}

// list is a paged consistent list of [from, end): pages of limit keys, the first at the current revision
// and the others pinned to it, each starting after the last key of the one before. It calls page for every
// key-value and returns the revision of the snapshot and the number of pages.
func list(ctx context.Context, c *workloads.Client, slot *workloads.Slot, op, from, end string, limit int64, page func(history.KV)) (rev int64, pages int, err error) {
	for {
		resp, err := c.Do(ctx, slot, op, history.Request{Kind: history.KindRange, Range: &history.Range{Key: from, End: end, Limit: limit, Revision: rev}})
		if err != nil {
			return rev, pages, err
		}
		pages++
		if rev == 0 {
			rev = resp.Revision
		}
		kvs := resp.Range.KVs
		if page != nil {
			for _, kv := range kvs {
				page(kv)
			}
		}
		if !resp.Range.More || len(kvs) == 0 {
			return rev, pages, nil
		}
		from = kvs[len(kvs)-1].Key + "\x00"
		slot = nil
	}
}

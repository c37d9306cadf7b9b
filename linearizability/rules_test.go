package linearizability

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// A tiny language for hand-written histories: one key "k" unless said otherwise, values by id, times in
// milliseconds.

const msec = int64(time.Millisecond)

type hb struct{ h history.History }

func (b *hb) op(client int, call, ret int64, req history.Request, resp *history.Response) *hb {
	op := history.Operation{Client: client, Call: call * msec, Return: ret * msec, Request: req, Response: resp}
	if resp == nil {
		op.Error = "deadline: context deadline exceeded"
	}
	b.h.Operations = append(b.h.Operations, op)
	return b
}

func (b *hb) watch(r history.WatchResponse) *hb {
	r.Time *= msec
	b.h.Watches = append(b.h.Watches, r)
	return b
}

func putReq(key string, id uint64) history.Request {
	return history.Request{Kind: history.KindPut, Put: &history.Put{Key: key, Value: history.Value{ID: id, Size: 8}}}
}

func leasePut(key string, id uint64, lease int64) history.Request {
	r := putReq(key, id)
	r.Put.Lease = lease
	return r
}

func getReq(key string) history.Request {
	return history.Request{Kind: history.KindRange, Range: &history.Range{Key: key}}
}

func kv(key string, id uint64, create, mod, ver int64) history.KV {
	return history.KV{Key: key, Value: history.Value{ID: id, Size: 8}, CreateRevision: create, ModRevision: mod, Version: ver}
}

func putResp(rev int64) *history.Response {
	return &history.Response{Revision: rev, Put: &history.PutResponse{}}
}

// readTxn is a read-only transaction of one range of key, as txn-mixed's reads are (serializable or not).
func readTxn(key string, serializable bool) history.Request {
	return history.Request{Kind: history.KindTxn, Txn: &history.Txn{Then: []history.Request{
		{Kind: history.KindRange, Range: &history.Range{Key: key, Serializable: serializable}}}}}
}

// readTxnResp answers readTxn at revision rev with kvs.
func readTxnResp(rev int64, kvs ...history.KV) *history.Response {
	return &history.Response{Revision: rev, Txn: &history.TxnResponse{Succeeded: true, Results: []history.Response{*getResp(rev, kvs...)}}}
}

func getResp(rev int64, kvs ...history.KV) *history.Response {
	return &history.Response{Revision: rev, Range: &history.RangeResponse{KVs: kvs, Count: int64(len(kvs))}}
}

func TestRules(t *testing.T) {
	k1 := kv("k", 1, 2, 2, 1)
	k2 := kv("k", 2, 2, 3, 2)
	ok := map[string]string{CheckLinearizability: results.VerdictOK, CheckWatch: results.VerdictOK, CheckSerializable: results.VerdictOK}
	bad := func(check string) map[string]string {
		m := map[string]string{}
		for k, v := range ok {
			m[k] = v
		}
		m[check] = results.VerdictViolation
		return m
	}
	for _, tc := range []struct {
		name string
		h    *hb
		want map[string]string
	}{
		{"read after write", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(1, 20, 30, getReq("k"), getResp(2, k1)), ok},
		{"stale read", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 30, putReq("k", 2), putResp(3)).
			op(1, 40, 50, getReq("k"), getResp(2, k1)), bad(CheckLinearizability)},
		{"old value with a fresh revision", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 30, putReq("k", 2), putResp(3)).
			op(1, 40, 50, getReq("k"), getResp(3, k1)), bad(CheckLinearizability)},
		{"read concurrent with a write may see the old value", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 60, putReq("k", 2), putResp(3)).
			op(1, 30, 40, getReq("k"), getResp(2, k1)), ok},
		{"failed write that took effect", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 5000, putReq("k", 2), nil).
			op(1, 6000, 6010, getReq("k"), getResp(3, k2)), ok},
		{"failed write that did not", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 5000, putReq("k", 2), nil).
			op(1, 6000, 6010, getReq("k"), getResp(2, k1)), ok},
		{"failed write seen, then gone", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 5000, putReq("k", 2), nil).
			op(1, 6000, 6010, getReq("k"), getResp(3, k2)).
			op(1, 6020, 6030, getReq("k"), getResp(3, k1)), bad(CheckLinearizability)},
		{"acknowledged write lost", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 30, putReq("k", 2), putResp(3)).
			op(1, 40, 50, getReq("k"), getResp(3, k1)), bad(CheckLinearizability)},
		{"two writes, one revision", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(1, 0, 10, putReq("j", 9), putResp(2)), bad(CheckLinearizability)},
		{"revisions against real time", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(3)).
			op(1, 20, 30, putReq("j", 9), putResp(2)), bad(CheckLinearizability)},
		{"compare outcome contradicts the state", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(1, 20, 30, history.Request{Kind: history.KindTxn, Txn: &history.Txn{Compares: []history.Compare{{Key: "k", Target: history.CompareModRevision, Result: history.Equal, Operand: 2}},
				Then: []history.Request{putReq("k", 2)}, Else: []history.Request{getReq("k")}}},
				&history.Response{Revision: 2, Txn: &history.TxnResponse{Succeeded: false, Results: []history.Response{*getResp(2, k1)}}}), bad(CheckLinearizability)},
		{"lease expiry after its TTL", new(hb).
			op(0, 0, 1, history.Request{Kind: history.KindLeaseGrant, Lease: &history.Lease{TTL: 1}}, &history.Response{Revision: 1, Lease: &history.LeaseResponse{ID: 7, TTL: 1}}).
			op(0, 2, 3, leasePut("k", 1, 7), putResp(2)).
			op(1, 2000, 2001, getReq("k"), getResp(3)), ok},
		{"lease expiry before its TTL", new(hb).
			op(0, 0, 1, history.Request{Kind: history.KindLeaseGrant, Lease: &history.Lease{TTL: 1}}, &history.Response{Revision: 1, Lease: &history.LeaseResponse{ID: 7, TTL: 1}}).
			op(0, 2, 3, leasePut("k", 1, 7), putResp(2)).
			op(1, 500, 501, getReq("k"), getResp(3)), bad(CheckLinearizability)},
		{"put with a revoked lease", new(hb).
			op(0, 0, 1, history.Request{Kind: history.KindLeaseGrant, Lease: &history.Lease{TTL: 60}}, &history.Response{Revision: 1, Lease: &history.LeaseResponse{ID: 7, TTL: 60}}).
			op(0, 2, 3, history.Request{Kind: history.KindLeaseRevoke, Lease: &history.Lease{ID: 7}}, &history.Response{Revision: 1, Lease: &history.LeaseResponse{ID: 7}}).
			op(0, 4, 5, leasePut("k", 1, 7), putResp(2)), bad(CheckLinearizability)},
		{"keep-alive of a revoked lease", new(hb).
			op(0, 0, 1, history.Request{Kind: history.KindLeaseGrant, Lease: &history.Lease{TTL: 60}}, &history.Response{Revision: 1, Lease: &history.LeaseResponse{ID: 7, TTL: 60}}).
			op(0, 2, 3, history.Request{Kind: history.KindLeaseRevoke, Lease: &history.Lease{ID: 7}}, &history.Response{Revision: 1, Lease: &history.LeaseResponse{ID: 7}}).
			op(0, 4, 5, history.Request{Kind: history.KindLeaseKeepAlive, Lease: &history.Lease{ID: 7}}, &history.Response{Revision: 1, Lease: &history.LeaseResponse{ID: 7, TTL: 60}}), bad(CheckLinearizability)},
		{"put with an expired lease", new(hb).
			op(0, 0, 1, history.Request{Kind: history.KindLeaseGrant, Lease: &history.Lease{TTL: 1}}, &history.Response{Revision: 1, Lease: &history.LeaseResponse{ID: 7, TTL: 1}}).
			op(0, 2, 3, leasePut("k", 1, 7), putResp(2)).
			watch(history.WatchResponse{Watcher: 1, Time: 1, Request: &history.WatchRequest{Key: "k"}}).
			watch(history.WatchResponse{Watcher: 1, Time: 1, Revision: 1, Created: true}).
			watch(history.WatchResponse{Watcher: 1, Time: 4, Revision: 2, Events: []history.Event{{Type: history.EventPut, KV: history.KV{Key: "k", Value: history.Value{ID: 1, Size: 8}, CreateRevision: 2, ModRevision: 2, Version: 1, Lease: 7}, IsCreate: true}}}).
			watch(history.WatchResponse{Watcher: 1, Time: 1500, Revision: 3, Events: []history.Event{{Type: history.EventDelete, KV: history.KV{Key: "k", ModRevision: 3}}}}).
			op(0, 1600, 1610, leasePut("k", 2, 7), putResp(4)), bad(CheckLinearizability)},
		{"read below an acknowledged compaction", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 30, putReq("k", 2), putResp(3)).
			op(0, 40, 50, history.Request{Kind: history.KindCompact, Compact: &history.Compact{Revision: 3}}, &history.Response{Revision: 3}).
			op(1, 60, 70, history.Request{Kind: history.KindRange, Range: &history.Range{Key: "k", Revision: 2}}, getResp(3, k1)), bad(CheckLinearizability)},
		{"read below a concurrent compaction", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 30, putReq("k", 2), putResp(3)).
			op(0, 40, 80, history.Request{Kind: history.KindCompact, Compact: &history.Compact{Revision: 3}}, &history.Response{Revision: 3}).
			op(1, 60, 70, history.Request{Kind: history.KindRange, Range: &history.Range{Key: "k", Revision: 2}}, getResp(3, k1)), ok},
		{"serializable read may be stale", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 30, putReq("k", 2), putResp(3)).
			op(1, 40, 50, history.Request{Kind: history.KindRange, Range: &history.Range{Key: "k", Serializable: true}}, getResp(2, k1)), ok},
		{"serializable read from the future", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(1, 12, 15, history.Request{Kind: history.KindRange, Range: &history.Range{Key: "k", Serializable: true}}, getResp(3, k2)).
			op(0, 20, 30, putReq("k", 2), putResp(3)), bad(CheckSerializable)},
		{"serializable read-only txn may be stale", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 30, putReq("k", 2), putResp(3)).
			op(1, 40, 50, readTxn("k", true), readTxnResp(2, k1)), ok},
		{"linearizable read-only txn may not be stale", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 30, putReq("k", 2), putResp(3)).
			op(1, 40, 50, readTxn("k", false), readTxnResp(2, k1)), bad(CheckLinearizability)},
		{"serializable read-only txn from the future", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(1, 12, 15, readTxn("k", true), readTxnResp(3, k2)).
			op(0, 20, 30, putReq("k", 2), putResp(3)), bad(CheckSerializable)},
		{"serializable read-only txn of a state that never was", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 30, putReq("k", 2), putResp(3)).
			op(1, 40, 50, readTxn("k", true), readTxnResp(3, k1)), bad(CheckSerializable)},
		{"serializable read of a state that never was", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 30, putReq("k", 2), putResp(3)).
			op(1, 40, 50, history.Request{Kind: history.KindRange, Range: &history.Range{Key: "k", Serializable: true}}, getResp(3, k1)), bad(CheckSerializable)},
		{"watch from now sees what follows", new(hb).
			watch(history.WatchResponse{Watcher: 1, Time: 0, Request: &history.WatchRequest{Key: "k"}}).
			watch(history.WatchResponse{Watcher: 1, Time: 5, Revision: 1, Created: true}).
			op(0, 10, 20, putReq("k", 1), putResp(2)).
			watch(history.WatchResponse{Watcher: 1, Time: 21, Revision: 2, Events: []history.Event{{Type: history.EventPut, KV: k1, IsCreate: true}}}), ok},
		{"watch registered before its created revision", new(hb).
			watch(history.WatchResponse{Watcher: 1, Time: 0, Request: &history.WatchRequest{Key: "k"}}).
			op(0, 1, 3, putReq("k", 1), putResp(2)).
			watch(history.WatchResponse{Watcher: 1, Time: 5, Revision: 2, Created: true}).
			watch(history.WatchResponse{Watcher: 1, Time: 6, Revision: 2, Events: []history.Event{{Type: history.EventPut, KV: k1, IsCreate: true}}}), ok},
		{"watch from now on a member behind the cluster", new(hb).
			op(0, 1, 3, putReq("k", 1), putResp(2)).
			watch(history.WatchResponse{Watcher: 1, Time: 10, Request: &history.WatchRequest{Key: "k"}}).
			watch(history.WatchResponse{Watcher: 1, Time: 15, Revision: 2, Created: true}).
			watch(history.WatchResponse{Watcher: 1, Time: 16, Revision: 2, Events: []history.Event{{Type: history.EventPut, KV: k1, IsCreate: true}}}), ok},
		{"watch misses an event", new(hb).
			watch(history.WatchResponse{Watcher: 1, Time: 0, Request: &history.WatchRequest{Key: "k"}}).
			watch(history.WatchResponse{Watcher: 1, Time: 5, Revision: 1, Created: true}).
			op(0, 10, 20, putReq("k", 1), putResp(2)).
			op(0, 30, 40, putReq("k", 2), putResp(3)).
			watch(history.WatchResponse{Watcher: 1, Time: 45, Revision: 3, Events: []history.Event{{Type: history.EventPut, KV: k2}}}), bad(CheckWatch)},
		{"watch from a revision starts exactly there", new(hb).
			op(0, 10, 20, putReq("k", 1), putResp(2)).
			op(0, 30, 40, putReq("k", 2), putResp(3)).
			watch(history.WatchResponse{Watcher: 1, Time: 50, Request: &history.WatchRequest{Key: "k", Revision: 2}}).
			watch(history.WatchResponse{Watcher: 1, Time: 55, Revision: 3, Created: true}).
			watch(history.WatchResponse{Watcher: 1, Time: 56, Revision: 3, Events: []history.Event{{Type: history.EventPut, KV: k2}}}), bad(CheckWatch)},
		{"progress notification ahead of an event", new(hb).
			watch(history.WatchResponse{Watcher: 1, Time: 0, Request: &history.WatchRequest{Key: "k", ProgressNotify: true}}).
			watch(history.WatchResponse{Watcher: 1, Time: 5, Revision: 1, Created: true}).
			op(0, 10, 20, putReq("k", 1), putResp(2)).
			watch(history.WatchResponse{Watcher: 1, Time: 25, Revision: 2, Progress: true}).
			watch(history.WatchResponse{Watcher: 1, Time: 26, Revision: 2, Events: []history.Event{{Type: history.EventPut, KV: k1, IsCreate: true}}}), bad(CheckWatch)},
		// etcd-io/etcd#15220: a watch from a past revision is unsynced while etcd catches it up; a progress
		// notification requested meanwhile (v3.5.7 answered at once, with the store's revision) promised
		// events the watcher had not been sent yet.
		{"requested progress ahead of a catching-up watch (#15220)", new(hb).
			op(0, 10, 20, putReq("k", 1), putResp(2)).
			op(0, 30, 40, putReq("k", 2), putResp(3)).
			watch(history.WatchResponse{Watcher: 1, Time: 50, Request: &history.WatchRequest{Key: "k", Revision: 2}}).
			watch(history.WatchResponse{Watcher: 1, Time: 55, Revision: 3, Created: true}).
			watch(history.WatchResponse{Watcher: 1, Time: 56, Revision: 3, Progress: true}).
			watch(history.WatchResponse{Watcher: 1, Time: 57, Revision: 3, Events: []history.Event{
				{Type: history.EventPut, KV: k1, IsCreate: true}, {Type: history.EventPut, KV: k2}}}), bad(CheckWatch)},
		{"requested progress after a watch caught up", new(hb).
			op(0, 10, 20, putReq("k", 1), putResp(2)).
			op(0, 30, 40, putReq("k", 2), putResp(3)).
			watch(history.WatchResponse{Watcher: 1, Time: 50, Request: &history.WatchRequest{Key: "k", Revision: 2}}).
			watch(history.WatchResponse{Watcher: 1, Time: 55, Revision: 3, Created: true}).
			watch(history.WatchResponse{Watcher: 1, Time: 57, Revision: 3, Events: []history.Event{
				{Type: history.EventPut, KV: k1, IsCreate: true}, {Type: history.EventPut, KV: k2}}}).
			watch(history.WatchResponse{Watcher: 1, Time: 58, Revision: 3, Progress: true}).
			op(0, 60, 70, putReq("k", 3), putResp(4)).
			watch(history.WatchResponse{Watcher: 1, Time: 71, Revision: 4, Events: []history.Event{{Type: history.EventPut, KV: kv("k", 3, 2, 4, 3)}}}), ok},
		{"requested progress of a watch that never catches up", new(hb).
			op(0, 10, 20, putReq("k", 1), putResp(2)).
			op(0, 30, 40, putReq("k", 2), putResp(3)).
			watch(history.WatchResponse{Watcher: 1, Time: 50, Request: &history.WatchRequest{Key: "k", Revision: 2}}).
			watch(history.WatchResponse{Watcher: 1, Time: 55, Revision: 3, Created: true}).
			watch(history.WatchResponse{Watcher: 1, Time: 56, Revision: 3, Progress: true}), bad(CheckWatch)},
		// etcd-io/etcd#20221: a watch on a future revision is synced at once, and a progress notification
		// (v3.6.1 and v3.5.21 sent the store's revision) told it of a revision before the one it asked for.
		{"progress notification before a future watch's start (#20221)", new(hb).
			op(0, 10, 20, putReq("k", 1), putResp(2)).
			watch(history.WatchResponse{Watcher: 1, Time: 30, Request: &history.WatchRequest{Key: "k", Revision: 5}}).
			watch(history.WatchResponse{Watcher: 1, Time: 35, Revision: 2, Created: true}).
			watch(history.WatchResponse{Watcher: 1, Time: 36, Revision: 2, Progress: true}), bad(CheckWatch)},
		{"progress notification of a future watch once its start is reached", new(hb).
			op(0, 10, 20, putReq("k", 1), putResp(2)).
			watch(history.WatchResponse{Watcher: 1, Time: 30, Request: &history.WatchRequest{Key: "k", Revision: 4}}).
			watch(history.WatchResponse{Watcher: 1, Time: 35, Revision: 2, Created: true}).
			op(0, 40, 50, putReq("j", 1), putResp(3)).
			watch(history.WatchResponse{Watcher: 1, Time: 51, Revision: 3, Progress: true}), ok},
		{"progress notifications going back", new(hb).
			watch(history.WatchResponse{Watcher: 1, Time: 0, Request: &history.WatchRequest{Key: "k"}}).
			watch(history.WatchResponse{Watcher: 1, Time: 5, Revision: 1, Created: true}).
			op(0, 10, 20, putReq("k", 1), putResp(2)).
			watch(history.WatchResponse{Watcher: 1, Time: 21, Revision: 2, Events: []history.Event{{Type: history.EventPut, KV: k1, IsCreate: true}}}).
			watch(history.WatchResponse{Watcher: 1, Time: 25, Revision: 2, Progress: true}).
			watch(history.WatchResponse{Watcher: 1, Time: 26, Revision: 1, Progress: true}), bad(CheckWatch)},
		{"wrong IsCreate", new(hb).
			watch(history.WatchResponse{Watcher: 1, Time: 0, Request: &history.WatchRequest{Key: "k"}}).
			watch(history.WatchResponse{Watcher: 1, Time: 5, Revision: 1, Created: true}).
			op(0, 10, 20, putReq("k", 1), putResp(2)).
			watch(history.WatchResponse{Watcher: 1, Time: 21, Revision: 2, Events: []history.Event{{Type: history.EventPut, KV: k1}}}), bad(CheckWatch)},
		{"read older than a watched revision", new(hb).
			watch(history.WatchResponse{Watcher: 1, Time: 0, Request: &history.WatchRequest{Key: "k"}}).
			watch(history.WatchResponse{Watcher: 1, Time: 5, Revision: 1, Created: true}).
			op(0, 10, 20, putReq("k", 1), nil).
			watch(history.WatchResponse{Watcher: 1, Time: 21, Revision: 2, Events: []history.Event{{Type: history.EventPut, KV: k1, IsCreate: true}}}).
			op(1, 30, 40, getReq("k"), getResp(1)), bad(CheckLinearizability)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Check(context.Background(), &tc.h.h, Options{Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			absent := nothingFor(&tc.h.h)
			for _, c := range rep.Checks {
				want := tc.want[c.Name]
				if want == results.VerdictOK && absent[c.Name] {
					want = results.VerdictNothing // a rule about another check: this one had no input
				}
				if c.Verdict != want {
					t.Errorf("%s: %s, want %s: %s", c.Name, c.Verdict, want, c.Detail)
				}
				if c.Verdict == results.VerdictViolation {
					t.Logf("%s: %s", c.Name, c.Detail)
				}
			}
		})
	}
}

// TestFaultCompactionExplainsMissingPrevKV: a compact fault compacts through a client of its own, so the
// history does not show it; its window in faults.jsonl does. A watch event that lacks the previous value it
// asked for is etcd's answer when that value was compacted before etcd read it (etcd-io/etcd#10681): a
// compact window open before the event excuses it, nothing else does.
func TestFaultCompactionExplainsMissingPrevKV(t *testing.T) {
	k1 := kv("k", 1, 2, 2, 1)
	k2 := kv("k", 2, 2, 3, 2)
	history := func() *history.History {
		b := new(hb).
			watch(history.WatchResponse{Watcher: 1, Time: 0, Request: &history.WatchRequest{Key: "k", PrevKV: true}}).
			watch(history.WatchResponse{Watcher: 1, Time: 5, Revision: 1, Created: true}).
			op(0, 10, 20, putReq("k", 1), putResp(2)).
			op(0, 30, 40, putReq("k", 2), putResp(3)).
			watch(history.WatchResponse{Watcher: 1, Time: 21, Revision: 2, Events: []history.Event{{Type: history.EventPut, KV: k1, IsCreate: true}}}).
			// The previous value (revision 2) was compacted before etcd read it for this event.
			watch(history.WatchResponse{Watcher: 1, Time: 60, Revision: 3, Events: []history.Event{{Type: history.EventPut, KV: k2}}}).
			op(0, 70, 80, putReq("k", 3), putResp(4))
		return &b.h
	}
	compact := func(start, end int64) results.FaultWindow {
		return results.FaultWindow{Fault: "compact", Spec: "compact@1s", StartNs: start * msec, EndNs: end * msec, Outcome: "recovered"}
	}
	for _, tc := range []struct {
		name   string
		faults []results.FaultWindow
		want   string
	}{
		{"no compaction", nil, results.VerdictViolation},
		{"compact window before the event", []results.FaultWindow{compact(45, 50)}, results.VerdictOK},
		{"compact window open at the event", []results.FaultWindow{compact(50, 90)}, results.VerdictOK},
		{"compact window after the event", []results.FaultWindow{compact(65, 90)}, results.VerdictViolation},
		{"another fault before the event", []results.FaultWindow{{Fault: "defrag", StartNs: 45 * msec, EndNs: 50 * msec}}, results.VerdictViolation},
		// Ended before revision 3 was written: it compacted to revision 2 at most, which keeps the value
		// etcd reads at revision 2 for the event at 3.
		{"compact window before the value's successor", []results.FaultWindow{compact(22, 25)}, results.VerdictViolation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Check(context.Background(), history(), Options{Timeout: 10 * time.Second, Faults: tc.faults})
			if err != nil {
				t.Fatal(err)
			}
			requireWatchVerdict(t, rep, tc.want)
		})
	}
}

// nothingFor says which checks a history gives nothing to check: no operations, no watch event or progress
// notification, no answered serializable read.
func nothingFor(h *history.History) map[string]bool {
	watched, serializable := false, false
	for _, w := range h.Watches {
		watched = watched || len(w.Events) > 0 || w.Progress
	}
	for _, op := range h.Operations {
		serializable = serializable || (op.Response != nil && serializableRead(&op.Request))
	}
	return map[string]bool{CheckLinearizability: len(h.Operations) == 0, CheckWatch: !watched, CheckSerializable: !serializable}
}

// TestNothingToCheck: a check whose input the history lacks says "nothing to check" and what was absent,
// never ok, in the report, in check.json and in the printed verdicts; with input it says ok.
func TestNothingToCheck(t *testing.T) {
	k1 := kv("k", 1, 2, 2, 1)
	j1 := kv("j", 1, 2, 2, 1)
	const nothing = results.VerdictNothing
	for _, tc := range []struct {
		name         string
		h            *hb
		lin, watch   string
		serializable string
		detail       string // in the detail of the first check that has nothing to check
	}{
		{"an empty history", new(hb), nothing, nothing, nothing, "no operations recorded"},
		{"only puts", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 30, putReq("k", 2), putResp(3)), results.VerdictOK, nothing, nothing, "no watches recorded"},
		{"a watcher that received nothing", new(hb).
			watch(history.WatchResponse{Watcher: 1, Time: 0, Request: &history.WatchRequest{Key: "k"}}).
			watch(history.WatchResponse{Watcher: 1, Time: 5, Revision: 1, Created: true}).
			op(0, 10, 20, putReq("k", 1), putResp(2)), results.VerdictOK, nothing, nothing,
			"no watch event or progress notification recorded (1 watchers)"},
		{"a watcher that received an event", new(hb).
			watch(history.WatchResponse{Watcher: 1, Time: 0, Request: &history.WatchRequest{Key: "k"}}).
			watch(history.WatchResponse{Watcher: 1, Time: 5, Revision: 1, Created: true}).
			op(0, 10, 20, putReq("k", 1), putResp(2)).
			watch(history.WatchResponse{Watcher: 1, Time: 21, Revision: 2, Events: []history.Event{{Type: history.EventPut, KV: k1, IsCreate: true}}}),
			results.VerdictOK, results.VerdictOK, nothing, "no serializable reads recorded"},
		// The notification promises every event of "k" up to revision 2: that none was due is checked.
		{"a watcher that received only a progress notification", new(hb).
			watch(history.WatchResponse{Watcher: 1, Time: 0, Request: &history.WatchRequest{Key: "k", ProgressNotify: true}}).
			watch(history.WatchResponse{Watcher: 1, Time: 5, Revision: 1, Created: true}).
			op(0, 10, 20, putReq("j", 1), putResp(2)).
			watch(history.WatchResponse{Watcher: 1, Time: 25, Revision: 2, Progress: true}),
			results.VerdictOK, results.VerdictOK, nothing, "no serializable reads recorded"},
		{"a serializable read", new(hb).
			op(0, 0, 10, putReq("j", 1), putResp(2)).
			op(1, 20, 30, history.Request{Kind: history.KindRange, Range: &history.Range{Key: "j", Serializable: true}}, getResp(2, j1)),
			results.VerdictOK, nothing, results.VerdictOK, "no watches recorded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, err := history.NewWriter(dir)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.h.h.Operations {
				w.Operation(&tc.h.h.Operations[i])
			}
			for i := range tc.h.h.Watches {
				w.Watch(&tc.h.h.Watches[i])
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			rep, err := CheckDir(context.Background(), dir, Options{Timeout: 10 * time.Second})
			if err != nil {
				t.Fatalf("nothing to check is neither a violation nor undecided: %v", err)
			}
			want := map[string]string{CheckLinearizability: tc.lin, CheckWatch: tc.watch, CheckSerializable: tc.serializable}
			detail := ""
			for _, c := range rep.Checks {
				if c.Verdict != want[c.Name] {
					t.Errorf("%s: %s, want %s: %s", c.Name, c.Verdict, want[c.Name], c.Detail)
				}
				if c.Verdict == nothing && detail == "" {
					detail = c.Detail
				}
			}
			if detail != tc.detail {
				t.Errorf("detail %q, want %q", detail, tc.detail)
			}
			if rep.Violated() {
				t.Error("reported as violated")
			}

			// check.json carries the verdict as is.
			data, err := os.ReadFile(filepath.Join(dir, ReportFile))
			if err != nil {
				t.Fatal(err)
			}
			var fromFile Report
			if err := json.Unmarshal(data, &fromFile); err != nil {
				t.Fatal(err)
			}
			for i, c := range fromFile.Checks {
				if c.Verdict != rep.Checks[i].Verdict || c.Detail != rep.Checks[i].Detail {
					t.Errorf("check.json has %s %q, the report %s %q", c.Name, c.Verdict, rep.Checks[i].Name, rep.Checks[i].Verdict)
				}
			}

			// The printed verdicts say it in capitals, aligned, and never say OK for it.
			var out strings.Builder
			WriteVerdicts(&out, rep)
			for _, c := range rep.Checks {
				line := fmt.Sprintf("  %-20s %-16s %s\n", c.Name, strings.ToUpper(c.Verdict), c.Detail)
				if !strings.Contains(out.String(), line) {
					t.Errorf("verdicts lack %q:\n%s", line, out.String())
				}
			}
		})
	}
}

// TestWatchManyEventsInOneRevision: the revoke of a lease with many keys (kube's shared event leases) is
// one revision of many delete events; each key's event is due once, and a second one is a duplicate.
func TestWatchManyEventsInOneRevision(t *testing.T) {
	const keys, lease = 40, 7
	build := func(dup bool) *history.History {
		b := new(hb).
			watch(history.WatchResponse{Watcher: 1, Time: 0, Request: &history.WatchRequest{Key: "p/", End: "p0"}}).
			watch(history.WatchResponse{Watcher: 1, Time: 1, Revision: 1, Created: true}).
			op(0, 2, 3, history.Request{Kind: history.KindLeaseGrant, Lease: &history.Lease{TTL: 600}}, &history.Response{Revision: 1, Lease: &history.LeaseResponse{ID: lease, TTL: 600}})
		var dels []history.Event
		for i := range int64(keys) {
			key := fmt.Sprintf("p/%03d", i)
			kv := history.KV{Key: key, Value: history.Value{ID: uint64(i + 1), Size: 8}, CreateRevision: i + 2, ModRevision: i + 2, Version: 1, Lease: lease}
			b.op(0, 10+10*i, 15+10*i, leasePut(key, uint64(i+1), lease), putResp(i+2)).
				watch(history.WatchResponse{Watcher: 1, Time: 16 + 10*i, Revision: i + 2, Events: []history.Event{{Type: history.EventPut, KV: kv, IsCreate: true}}})
			dels = append(dels, history.Event{Type: history.EventDelete, KV: history.KV{Key: key, ModRevision: keys + 2}})
		}
		if dup {
			dels = append(dels, dels[keys/2])
		}
		b.op(0, 1000, 1010, history.Request{Kind: history.KindLeaseRevoke, Lease: &history.Lease{ID: lease}}, &history.Response{Revision: keys + 2}).
			watch(history.WatchResponse{Watcher: 1, Time: 1011, Revision: keys + 2, Events: dels})
		return &b.h
	}
	for _, tc := range []struct {
		dup  bool
		want string
	}{{false, results.VerdictOK}, {true, results.VerdictViolation}} {
		rep, err := Check(context.Background(), build(tc.dup), Options{Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rep.Checks {
			if c.Name == CheckWatch && c.Verdict != tc.want {
				t.Errorf("duplicate %v: %s %s, want %s: %s", tc.dup, c.Name, c.Verdict, tc.want, c.Detail)
			}
			if c.Name == CheckWatch && tc.dup && !strings.Contains(c.Detail, "duplicated") {
				t.Errorf("duplicate not named: %s", c.Detail)
			}
		}
	}
}

// TestAppliedTwice: a transaction that took its else branch, while its own else-branch read shows the value
// its then branch writes, was applied twice (etcd-io/etcd#18424) and is named so, once; a value of an
// untaken branch seen only by others is a write from an untaken branch.
func TestAppliedTwice(t *testing.T) {
	update := history.Request{Kind: history.KindTxn, Txn: &history.Txn{
		Compares: []history.Compare{{Key: "k", Target: history.CompareModRevision, Result: history.Equal, Operand: 2}},
		Then:     []history.Request{putReq("k", 2)}, Else: []history.Request{getReq("k")}}}
	elseAnswer := func(rev int64, seen history.KV) *history.Response {
		return &history.Response{Revision: rev, Txn: &history.TxnResponse{Results: []history.Response{*getResp(rev, seen)}}}
	}
	k1, k2 := kv("k", 1, 2, 2, 1), kv("k", 2, 2, 3, 2)
	for _, tc := range []struct {
		name, want, not string
		op              int // the transaction's number
		h               *hb
	}{
		{"own answer shows the untaken branch's write", "request applied twice", "write from untaken branch", 1, new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(1, 20, 30, update, elseAnswer(3, k2)).
			watch(history.WatchResponse{Watcher: 1, Time: 0, Request: &history.WatchRequest{Key: "k"}}).
			watch(history.WatchResponse{Watcher: 1, Time: 1, Revision: 1, Created: true}).
			watch(history.WatchResponse{Watcher: 1, Time: 25, Revision: 3, Events: []history.Event{{Type: history.EventPut, KV: k2}}}).
			op(0, 40, 50, getReq("k"), getResp(3, k2))},
		{"others see the untaken branch's write", "write from untaken branch", "request applied twice", 2, new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 12, 15, putReq("j", 9), putResp(3)).
			op(1, 20, 30, update, elseAnswer(3, k1)).
			op(0, 40, 50, getReq("k"), getResp(4, kv("k", 2, 2, 4, 2)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Check(context.Background(), &tc.h.h, Options{Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			found := 0
			for _, v := range rep.Violations {
				if v.Kind == tc.not {
					t.Errorf("reported as %q: %v", tc.not, v)
				}
				if v.Kind == tc.want {
					found++
					if !slices.Contains(v.Ops, tc.op) {
						t.Errorf("%q does not name the transaction: %v", tc.want, v)
					}
				}
			}
			if found != 1 {
				t.Fatalf("%d %q violations, want 1; violations: %v", found, tc.want, rep.Violations)
			}
		})
	}
}

// TestWatchPrevKVOfPinnedVersion: a watcher's previous value is held to the key's version before the
// change, also when that version is not the one the key's last change made: a key from before the run
// whose first put came with its version unknown, then a read that showed it. The replay keeps such a
// version apart from the canonical log (sweep.prevs); a wrong one there, or the last change's taken for
// it, is a false violation here, and a watcher that received another previous value must still be caught.
func TestWatchPrevKVOfPinnedVersion(t *testing.T) {
	pinned := kv("k", 1, 5, 11, 3) // the read at 11 shows the pre-run key's creation and version
	hist := func(prev history.KV) *history.History {
		b := new(hb).
			op(0, 0, 10, getReq("j"), getResp(10)). // the store was at revision 10 when the run began
			watch(history.WatchResponse{Watcher: 1, Time: 1, Request: &history.WatchRequest{Key: "k", PrevKV: true}}).
			watch(history.WatchResponse{Watcher: 1, Time: 2, Revision: 10, Created: true}).
			op(0, 20, 30, putReq("k", 1), putResp(11)).
			op(1, 40, 50, getReq("k"), getResp(11, pinned)).
			op(0, 60, 70, putReq("k", 2), putResp(12)).
			watch(history.WatchResponse{Watcher: 1, Time: 31, Revision: 11, Events: []history.Event{{Type: history.EventPut, KV: pinned}}}).
			watch(history.WatchResponse{Watcher: 1, Time: 71, Revision: 12, Events: []history.Event{{Type: history.EventPut, KV: kv("k", 2, 5, 12, 4), PrevKV: &prev}}})
		return &b.h
	}
	for _, tc := range []struct {
		name string
		prev history.KV
		want string
	}{
		{"the version the read showed", pinned, results.VerdictOK},
		{"another version", kv("k", 1, 5, 11, 2), results.VerdictViolation},
		{"another creation", kv("k", 1, 4, 11, 3), results.VerdictViolation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Check(context.Background(), hist(tc.prev), Options{Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			requireWatchVerdict(t, rep, tc.want)
		})
	}
}

// requireWatchVerdict fails unless the watch check's verdict is want, linearizability passed, and the
// serializable check had nothing to check (these histories have no serializable read).
func requireWatchVerdict(t *testing.T, rep *Report, want string) {
	t.Helper()
	for _, c := range rep.Checks {
		w := results.VerdictOK
		switch c.Name {
		case CheckWatch:
			w = want
		case CheckSerializable:
			w = results.VerdictNothing
		}
		if c.Verdict != w {
			t.Errorf("%s: %s, want %s: %s", c.Name, c.Verdict, w, c.Detail)
		}
	}
}

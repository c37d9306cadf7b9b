package linearizability_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-chaosbench/chaosbench/results/history"
	"github.com/etcd-chaosbench/chaosbench/workloads"
)

// traffic is test load that sends every request shape the checker models, over a small key space so that
// requests contend: creates, optimistic updates and deletes through transactions (mod, version, create and
// value compares), plain puts and deletes with previous values, multi-key transactions, range deletes,
// linearizable, serializable, keys-only, count-only and paged reads (pages pinned to the first page's
// revision), leases that are kept alive, revoked or left to expire, compaction, and watches with previous
// values, progress notifications and restarts from a past revision.
type traffic struct {
	prefix  string
	keys    int
	clients int
	seed    uint64
	pause   time.Duration // between requests of a client (0: flat out)
}

func (tr traffic) key(i int) string { return fmt.Sprintf("%sk%02d", tr.prefix, i) }

func (tr traffic) end() string { return clientv3.GetPrefixRangeEnd(tr.prefix) }

// run sends the load for d through runner's clients, recording everything, and returns when all actors
// have stopped.
func (tr traffic) run(ctx context.Context, tb testing.TB, runner *workloads.Runner, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	for i := range tr.clients {
		c := runner.NewClient(i)
		rng := rand.New(rand.NewPCG(tr.seed, uint64(i)))
		wg.Go(func() { tr.kvActor(ctx, c, rng) })
	}
	lc := runner.NewClient(100)
	wg.Go(func() { tr.leaseActor(ctx, lc, rand.New(rand.NewPCG(tr.seed, 100))) })
	cc := runner.NewClient(101)
	wg.Go(func() { tr.compactor(ctx, cc) })
	for i := range 2 {
		wc := runner.NewClient(200 + i)
		wg.Go(func() { tr.watcher(ctx, wc, i) })
	}
	wg.Wait()
}

func (tr traffic) get(key string) history.Request {
	return history.Request{Kind: history.KindRange, Range: &history.Range{Key: key}}
}

// known reads a key and returns its mod revision, version and value (zero when absent or on error).
func (tr traffic) known(ctx context.Context, c *workloads.Client, key string) (mod, ver int64, val history.Value) {
	resp, err := c.Do(ctx, nil, "get", tr.get(key))
	if err != nil || resp.Range == nil || len(resp.Range.KVs) == 0 {
		return 0, 0, history.Value{}
	}
	kv := resp.Range.KVs[0]
	return kv.ModRevision, kv.Version, kv.Value
}

func (tr traffic) kvActor(ctx context.Context, c *workloads.Client, rng *rand.Rand) {
	put := func(key string) history.Request {
		return history.Request{Kind: history.KindPut, Put: &history.Put{Key: key, Value: c.NewValue(16 + rng.IntN(64)), PrevKV: rng.IntN(2) == 0}}
	}
	for ctx.Err() == nil {
		if tr.pause > 0 {
			time.Sleep(tr.pause)
		}
		key := tr.key(rng.IntN(tr.keys))
		switch x := rng.IntN(100); {
		case x < 12: // create
			c.Do(ctx, nil, "create", history.Request{Kind: history.KindTxn, Txn: &history.Txn{
				Compares: []history.Compare{{Key: key, Target: history.CompareModRevision, Result: history.Equal}},
				Then:     []history.Request{put(key)}}})
		case x < 30: // optimistic update
			mod, _, _ := tr.known(ctx, c, key)
			c.Do(ctx, nil, "update", history.Request{Kind: history.KindTxn, Txn: &history.Txn{
				Compares: []history.Compare{{Key: key, Target: history.CompareModRevision, Result: history.Equal, Operand: mod}},
				Then:     []history.Request{put(key)}, Else: []history.Request{tr.get(key)}}})
		case x < 36: // optimistic delete
			mod, _, _ := tr.known(ctx, c, key)
			c.Do(ctx, nil, "delete", history.Request{Kind: history.KindTxn, Txn: &history.Txn{
				Compares: []history.Compare{{Key: key, Target: history.CompareModRevision, Result: history.Equal, Operand: mod}},
				Then:     []history.Request{{Kind: history.KindDelete, Delete: &history.Delete{Key: key, PrevKV: true}}}, Else: []history.Request{tr.get(key)}}})
		case x < 40: // version, create and value compares
			mod, ver, val := tr.known(ctx, c, key)
			cmps := []history.Compare{{Key: key, Target: history.CompareVersion, Result: history.Equal, Operand: ver}}
			switch rng.IntN(3) {
			case 0:
				cmps = append(cmps, history.Compare{Key: key, Target: history.CompareCreate, Result: history.Less, Operand: mod + 1})
			case 1:
				if val.ID != 0 {
					cmps = append(cmps, history.Compare{Key: key, Target: history.CompareValue, Result: history.Equal, Value: val})
				}
			}
			c.Do(ctx, nil, "cas", history.Request{Kind: history.KindTxn, Txn: &history.Txn{Compares: cmps, Then: []history.Request{put(key)}, Else: []history.Request{tr.get(key)}}})
		case x < 50:
			c.Do(ctx, nil, "put", put(key))
		case x < 53:
			c.Do(ctx, nil, "delete", history.Request{Kind: history.KindDelete, Delete: &history.Delete{Key: key, PrevKV: rng.IntN(2) == 0}})
		case x < 58: // a multi-key transaction: watchers must see both puts in one response
			k2 := tr.key(rng.IntN(tr.keys))
			if k2 == key {
				continue
			}
			c.Do(ctx, nil, "txn-multi", history.Request{Kind: history.KindTxn, Txn: &history.Txn{Then: []history.Request{put(key), put(k2)}}})
		case x < 59: // range delete
			c.Do(ctx, nil, "delete-range", history.Request{Kind: history.KindDelete, Delete: &history.Delete{Key: tr.prefix + "k0", End: tr.prefix + "k02", PrevKV: true}})
		case x < 75:
			c.Do(ctx, nil, "get", tr.get(key))
		case x < 80:
			c.Do(ctx, nil, "get-serializable", history.Request{Kind: history.KindRange, Range: &history.Range{Key: key, Serializable: true}})
		case x < 83:
			c.Do(ctx, nil, "list-keys", history.Request{Kind: history.KindRange, Range: &history.Range{Key: tr.prefix, End: tr.end(), KeysOnly: true}})
		case x < 86:
			c.Do(ctx, nil, "count", history.Request{Kind: history.KindRange, Range: &history.Range{Key: tr.prefix, End: tr.end(), CountOnly: true}})
		case x < 95: // paged list pinned to the first page's revision
			var rev int64
			from := tr.prefix
			for page := 0; page < 20; page++ {
				resp, err := c.Do(ctx, nil, "list", history.Request{Kind: history.KindRange, Range: &history.Range{Key: from, End: tr.end(), Limit: 4, Revision: rev}})
				if err != nil || !resp.Range.More || len(resp.Range.KVs) == 0 {
					break
				}
				if rev == 0 {
					rev = resp.Revision
				}
				from = resp.Range.KVs[len(resp.Range.KVs)-1].Key + "\x00"
			}
		default: // a read in a transaction
			c.Do(ctx, nil, "txn-read", history.Request{Kind: history.KindTxn, Txn: &history.Txn{Then: []history.Request{
				{Kind: history.KindRange, Range: &history.Range{Key: tr.prefix, End: tr.end(), Limit: 5}}, tr.get(key)}}})
		}
	}
}

// leaseActor grants short leases, attaches keys to them, keeps some alive, revokes some and lets the
// others expire.
func (tr traffic) leaseActor(ctx context.Context, c *workloads.Client, rng *rand.Rand) {
	n := 0
	for ctx.Err() == nil {
		resp, err := c.Do(ctx, nil, "lease-grant", history.Request{Kind: history.KindLeaseGrant, Lease: &history.Lease{TTL: 2}})
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		id := resp.Lease.ID
		for range 1 + rng.IntN(3) {
			n++
			key := fmt.Sprintf("%sl%03d", tr.prefix, n%40)
			c.Do(ctx, nil, "put-lease", history.Request{Kind: history.KindPut, Put: &history.Put{Key: key, Value: c.NewValue(16), Lease: id}})
		}
		switch rng.IntN(3) {
		case 0:
			c.Do(ctx, nil, "lease-keepalive", history.Request{Kind: history.KindLeaseKeepAlive, Lease: &history.Lease{ID: id}})
		case 1:
			c.Do(ctx, nil, "lease-revoke", history.Request{Kind: history.KindLeaseRevoke, Lease: &history.Lease{ID: id}})
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(100+rng.IntN(300)) * time.Millisecond):
		}
	}
}

// compactor compacts to the revision seen a second earlier, every second, as kube-apiserver does every
// five minutes.
func (tr traffic) compactor(ctx context.Context, c *workloads.Client) {
	var prev int64
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		resp, err := c.Do(ctx, nil, "get", tr.get(tr.prefix+"compact"))
		if err != nil {
			continue
		}
		if prev > 0 {
			c.Do(ctx, nil, "compact", history.Request{Kind: history.KindCompact, Compact: &history.Compact{Revision: prev}})
		}
		prev = resp.Revision
	}
}

// watcher watches the prefix with previous values and progress notifications, asks for progress now
// and then, and restarts its watch from a recent revision every few seconds.
func (tr traffic) watcher(ctx context.Context, c *workloads.Client, n int) {
	var last int64
	for ctx.Err() == nil {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(2+n)*time.Second)
		req := history.WatchRequest{Key: tr.prefix, End: tr.end(), PrevKV: true, ProgressNotify: true}
		if last > 0 {
			req.Revision = max(last-5, 1) // from a little in the past: the start must be exact
		}
		w := c.Watch(wctx, req)
		progress := time.NewTicker(300 * time.Millisecond)
	loop:
		for {
			select {
			case resp, ok := <-w.C:
				if !ok {
					break loop
				}
				for _, e := range resp.Events {
					last = max(last, e.KV.ModRevision)
				}
				if resp.CompactRevision > 0 {
					last = 0
				}
			case <-progress.C:
				c.Etcd().RequestProgress(wctx)
			}
		}
		progress.Stop()
		cancel()
		for range w.C {
		}
	}
}

package workloads

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results/history"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// Workload generates one kind of load. Setup prepares what the load needs (preloaded keys, leases,
// watchers) and is not measured; Run sends the load until the runner's schedule ends or ctx is done.
type Workload interface {
	Name() string
	Setup(ctx context.Context, r *Runner) error
	Run(ctx context.Context, r *Runner) error
}

// MicroNames lists the micro workloads, named after the etcd benchmark subcommands they mirror.
var MicroNames = []string{"put", "range", "txn-put", "txn-mixed", "watch-latency", "lease-keepalive"}

// MicroOptions are the settings of the micro workloads; flag names and meanings follow etcd's benchmark.
type MicroOptions struct {
	// KeySize is the minimum key length; keys are KeyPrefix plus a zero-padded hex index.
	KeySize int `json:"key-size"`
	// ValSize is the value length (at least 8: every value starts with its write id).
	ValSize int `json:"val-size"`
	// KeySpaceSize is the number of distinct keys.
	KeySpaceSize int `json:"key-space-size"`
	// SequentialKeys picks keys in order instead of at random.
	SequentialKeys bool `json:"sequential-keys"`
	// KeyPrefix is prepended to every key.
	KeyPrefix string `json:"key-prefix"`
	// Consistency of reads: "l" (linearizable) or "s" (serializable).
	Consistency string `json:"consistency"`
	// Limit caps the keys a range returns (0: no limit); txn-mixed reads default to 1000 like etcd's.
	Limit int64 `json:"limit"`
	// KeysOnly and CountOnly shape range responses.
	KeysOnly  bool `json:"keys-only"`
	CountOnly bool `json:"count-only"`
	// RangeKeys is how many consecutive keys a range covers: 1 reads one key, 0 the whole key space.
	RangeKeys int `json:"range-keys"`
	// TxnOps is the number of puts per txn-put transaction.
	TxnOps int `json:"txn-ops"`
	// RWRatio is txn-mixed's ratio of reads to writes.
	RWRatio float64 `json:"rw-ratio"`
	// WatchStreams and WatchersPerStream shape watch-latency's watchers; PrevKV asks for previous values.
	WatchStreams      int  `json:"watch-streams"`
	WatchersPerStream int  `json:"watchers-per-stream"`
	PrevKV            bool `json:"prev-kv"`
	// DeleteRatio is the share of writes that delete their key instead (put, txn-put, txn-mixed and
	// watch-latency): watchers then see delete events, and compactions land on tombstones.
	DeleteRatio float64 `json:"delete-ratio"`
	// WatchReopen makes every watch-latency watcher close its watch and open a new one at this interval,
	// at the revision WatchFrom chooses (0: never; a compacted watcher re-watches regardless).
	WatchReopen time.Duration `json:"watch-reopen"`
	// WatchFrom is where a re-opened watch starts: WatchFromNext, WatchFromPast or WatchFromFuture.
	WatchFrom string `json:"watch-from"`
	// WatchProgress makes every watch-latency watcher ask etcd for a progress notification on its stream at
	// this interval (0: never), as a kube-apiserver's watch cache does: etcd then promises that every event
	// up to the notification's revision was delivered (etcd-io/etcd#15220). It needs one watcher per
	// stream: etcd answers a request for the watches its stream has when it reads it, and the client hands
	// the answer to every watch of the stream, so one created in between gets a promise made without it.
	WatchProgress time.Duration `json:"watch-progress,omitempty"`
	// WatchPin keeps watch-latency's stream i on the i-th member (round robin over the endpoints) instead
	// of letting the client pick one and move away when it goes down: a member that crashed or was cut off
	// keeps its watchers when it comes back, as etcd's robustness tests keep theirs.
	WatchPin bool `json:"watch-pin,omitempty"`
	// TxnPastRead is the share of txn-mixed's writes that also read their key at a past revision in the
	// same transaction: up to 64 revisions before the last one the worker saw, compacted or not. A
	// compacted one must fail the whole transaction on every member (etcd-io/etcd#18667: the members the
	// client is not connected to dropped the read and applied the write).
	TxnPastRead float64 `json:"txn-past-read,omitempty"`

	// Share is this generator's part of a load split over several (not a flag: chaosbench sets it from
	// --workers and --worker). It owns a contiguous part of the key space, which it preloads and writes;
	// reads of the whole space cover every worker's keys.
	Share Share `json:"-"`
}

// NewMicro returns the named micro workload.
func NewMicro(name string, o MicroOptions) (Workload, error) {
	if err := o.validate(name); err != nil {
		return nil, err
	}
	ks := newKeySpace(o.KeyPrefix, o.KeySize, o.KeySpaceSize)
	ks.first, ks.count = o.Share.Range(o.KeySpaceSize)
	if ks.count == 0 || (name == "txn-put" && o.TxnOps > ks.count) {
		return nil, outcome.Usagef("--key-space-size %d: too few keys to give each of %d workers its own (%d per worker, --txn-ops %d)", o.KeySpaceSize, o.Share.Of, ks.count, o.TxnOps)
	}
	switch name {
	case "put":
		return &putLoad{o: o, keys: ks}, nil
	case "range":
		return &rangeLoad{o: o, keys: ks}, nil
	case "txn-put":
		return &txnPutLoad{o: o, keys: ks}, nil
	case "txn-mixed":
		return &txnMixedLoad{o: o, keys: ks}, nil
	case "watch-latency":
		return &watchLatencyLoad{o: o, key: o.KeyPrefix + "watch-latency"}, nil
	case "lease-keepalive":
		return &leaseKeepaliveLoad{}, nil
	}
	if s := outcome.Suggest(name, MicroNames); s != "" {
		return nil, outcome.Usagef("--workload %s: no such workload (did you mean %s?)", name, s)
	}
	return nil, outcome.Usagef("--workload %s: no such workload (have %s)", name, strings.Join(MicroNames, ", "))
}

// Where a re-opened watch starts (MicroOptions.WatchFrom).
const (
	// WatchFromNext watches from the revision after the last event the watcher saw: nothing missed,
	// nothing again.
	WatchFromNext = "next"
	// WatchFromPast watches from up to 64 revisions before it: events again, or a compacted revision,
	// which etcd answers with the compaction revision the watcher then watches from.
	WatchFromPast = "past"
	// WatchFromFuture watches from a revision not written yet: etcd must send nothing before it.
	WatchFromFuture = "future"
)

// WatchFromNames lists the values of MicroOptions.WatchFrom.
var WatchFromNames = []string{WatchFromNext, WatchFromPast, WatchFromFuture}

func (o MicroOptions) validate(name string) error {
	switch {
	case o.DeleteRatio < 0 || o.DeleteRatio > 1:
		return outcome.Usagef("--delete-ratio %v: a share of the writes, between 0 and 1", o.DeleteRatio)
	case o.WatchReopen < 0:
		return outcome.Usagef("--watch-reopen %v: must not be negative", o.WatchReopen)
	case o.WatchProgress < 0:
		return outcome.Usagef("--watch-progress %v: must not be negative", o.WatchProgress)
	case o.WatchProgress > 0 && name != "watch-latency":
		return outcome.Usagef("--watch-progress is watch-latency's (its watchers), not %s's", name)
	case o.WatchProgress > 0 && o.WatchersPerStream != 1:
		return outcome.Usagef("--watch-progress needs --watchers-per-stream 1, not %d: etcd answers a progress request for the watches the stream has when it reads it, and the client hands the answer to every watch of the stream, a watch created in between included", o.WatchersPerStream)
	case o.WatchFrom != "" && !slices.Contains(WatchFromNames, o.WatchFrom):
		return outcome.Usagef("--watch-from %q: %s", o.WatchFrom, strings.Join(WatchFromNames, ", "))
	case o.KeySpaceSize < 1:
		return outcome.Usagef("--key-space-size %d: need at least one key", o.KeySpaceSize)
	case o.ValSize < 8:
		return outcome.Usagef("--val-size %d: values carry an 8-byte write id, so at least 8", o.ValSize)
	case o.ValSize > 1536*1024:
		return outcome.Usagef("--val-size %d: over etcd's 1.5 MiB request limit", o.ValSize)
	case o.Consistency != "l" && o.Consistency != "s":
		return outcome.Usagef("--consistency %q: l (linearizable) or s (serializable)", o.Consistency)
	case o.KeysOnly && o.CountOnly:
		return outcome.Usagef("--keys-only and --count-only cannot be set together")
	case o.RangeKeys < 0 || o.Limit < 0:
		return outcome.Usagef("--range-keys and --limit must not be negative")
	case name == "txn-put" && (o.TxnOps < 1 || o.TxnOps > o.KeySpaceSize):
		return outcome.Usagef("--txn-ops %d: between 1 and --key-space-size %d", o.TxnOps, o.KeySpaceSize)
	case o.TxnPastRead < 0 || o.TxnPastRead > 1:
		return outcome.Usagef("--txn-past-read %v: a share of the writes, between 0 and 1", o.TxnPastRead)
	case o.TxnPastRead > 0 && name != "txn-mixed":
		return outcome.Usagef("--txn-past-read is txn-mixed's (its writes are transactions), not %s's", name)
	case name == "txn-mixed" && o.RWRatio < 0:
		return outcome.Usagef("--rw-ratio %v: must not be negative", o.RWRatio)
	case name == "watch-latency" && (o.WatchStreams < 1 || o.WatchersPerStream < 1):
		return outcome.Usagef("--watch-streams and --watchers-per-stream: at least 1")
	}
	return nil
}

// keySpace names keys: prefix + zero-padded hex index, padded so that keys are at least size bytes long.
// A generator writes the part [first, first+count) of the space (all of it unless the load is split).
type keySpace struct {
	prefix string
	width  int
	size   int
	first  int
	count  int
}

func newKeySpace(prefix string, keySize, size int) keySpace {
	width := max(keySize-len(prefix), len(strconv.FormatUint(uint64(max(size-1, 0)), 16)))
	return keySpace{prefix: prefix, width: width, size: size, count: size}
}

// key builds the i-th key with a single allocation: it runs once per request.
func (k keySpace) key(i int) string {
	var digits [16]byte
	h := strconv.AppendUint(digits[:0], uint64(i), 16)
	b := make([]byte, len(k.prefix)+max(k.width, len(h)))
	n := copy(b, k.prefix)
	for pad := max(k.width-len(h), 0); pad > 0; pad-- {
		b[n] = '0'
		n++
	}
	copy(b[n:], h)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// end is the end of the range holding every key of the space.
func (k keySpace) end() string { return clientv3.GetPrefixRangeEnd(k.prefix) }

// pick returns the key index for slot n: in order, or at random, in the generator's part of the space.
func (k keySpace) pick(w *Worker, n uint64, sequential bool) int {
	if sequential {
		return k.nth(n)
	}
	return k.first + w.Rand.IntN(k.count)
}

// nth returns the n-th key index of the generator's part of the space, cycling.
func (k keySpace) nth(n uint64) int { return k.first + int(n%uint64(k.count)) }

// preload writes every key of the generator's part of the space once, in transactions of up to 128 puts.
func (k keySpace) preload(ctx context.Context, r *Runner, valSize int) error {
	const batch = 128
	c := r.Workers()[0].Client
	end := k.first + k.count
	for i := k.first; i < end; i += batch {
		var puts []history.Request
		for j := i; j < min(i+batch, end); j++ {
			puts = append(puts, putRequest(k.key(j), c.NewValue(valSize)))
		}
		if _, err := c.Do(ctx, nil, "preload", history.Request{Kind: history.KindTxn, Txn: &history.Txn{Then: puts}}); err != nil {
			return fmt.Errorf("preload keys: %w", err)
		}
	}
	return nil
}

func deleteRequest(key string) history.Request {
	return history.Request{Kind: history.KindDelete, Delete: &history.Delete{Key: key}}
}

// deletes says whether a write of w is a delete, DeleteRatio of the time.
func (o MicroOptions) deletes(w *Worker) bool {
	return o.DeleteRatio > 0 && w.Rand.Float64() < o.DeleteRatio
}

func putRequest(key string, v history.Value) history.Request {
	return history.Request{Kind: history.KindPut, Put: &history.Put{Key: key, Value: v}}
}

// putLoad mirrors `benchmark put`: one put per operation.
type putLoad struct {
	o    MicroOptions
	keys keySpace
}

func (l *putLoad) Name() string                         { return "put" }
func (l *putLoad) Setup(context.Context, *Runner) error { return nil }
func (l *putLoad) Run(ctx context.Context, r *Runner) error {
	r.Pace(ctx, func(ctx context.Context, w *Worker, s *Slot) {
		key := l.keys.key(l.keys.pick(w, s.N, l.o.SequentialKeys))
		if l.o.deletes(w) {
			w.Do(ctx, s, "delete", deleteRequest(key))
			return
		}
		w.Do(ctx, s, "put", putRequest(key, w.NewValue(l.o.ValSize)))
	})
	return nil
}

// rangeLoad mirrors `benchmark range`: reads of one key, RangeKeys consecutive keys, or the whole space.
type rangeLoad struct {
	o    MicroOptions
	keys keySpace
}

func (l *rangeLoad) Name() string { return "range" }
func (l *rangeLoad) Setup(ctx context.Context, r *Runner) error {
	return l.keys.preload(ctx, r, l.o.ValSize)
}
func (l *rangeLoad) Run(ctx context.Context, r *Runner) error {
	r.Pace(ctx, func(ctx context.Context, w *Worker, s *Slot) {
		rg := &history.Range{Limit: l.o.Limit, Serializable: l.o.Consistency == "s", KeysOnly: l.o.KeysOnly, CountOnly: l.o.CountOnly}
		switch i := l.keys.pick(w, s.N, l.o.SequentialKeys); {
		case l.o.RangeKeys == 0:
			rg.Key, rg.End = l.keys.prefix, l.keys.end()
		case l.o.RangeKeys == 1:
			rg.Key = l.keys.key(i)
		default:
			i = min(i, max(l.keys.size-l.o.RangeKeys, 0))
			rg.Key, rg.End = l.keys.key(i), l.keys.key(i+l.o.RangeKeys)
		}
		w.Do(ctx, s, "range", history.Request{Kind: history.KindRange, Range: rg})
	})
	return nil
}

// txnPutLoad mirrors `benchmark txn-put`: TxnOps puts on consecutive keys in one transaction.
type txnPutLoad struct {
	o    MicroOptions
	keys keySpace
}

func (l *txnPutLoad) Name() string                         { return "txn-put" }
func (l *txnPutLoad) Setup(context.Context, *Runner) error { return nil }
func (l *txnPutLoad) Run(ctx context.Context, r *Runner) error {
	r.Pace(ctx, func(ctx context.Context, w *Worker, s *Slot) {
		puts := make([]history.Request, l.o.TxnOps)
		for j := range puts {
			key := l.keys.key(l.keys.nth(s.N*uint64(l.o.TxnOps) + uint64(j)))
			if l.o.deletes(w) {
				puts[j] = deleteRequest(key)
			} else {
				puts[j] = putRequest(key, w.NewValue(l.o.ValSize))
			}
		}
		w.Do(ctx, s, "txn-put", history.Request{Kind: history.KindTxn, Txn: &history.Txn{Then: puts}})
	})
	return nil
}

// txnMixedLoad mirrors `benchmark txn-mixed`: transactions that either read the key space (up to Limit
// keys) or put one key, RWRatio reads per write.
type txnMixedLoad struct {
	o    MicroOptions
	keys keySpace
	// lastRev is the highest revision a write was answered at, from which past reads go back.
	lastRev atomic.Int64
}

func (l *txnMixedLoad) Name() string { return "txn-mixed" }
func (l *txnMixedLoad) Setup(ctx context.Context, r *Runner) error {
	return l.keys.preload(ctx, r, l.o.ValSize)
}
func (l *txnMixedLoad) Run(ctx context.Context, r *Runner) error {
	limit := l.o.Limit
	if limit == 0 {
		limit = 1000
	}
	readShare := l.o.RWRatio / (1 + l.o.RWRatio)
	r.Pace(ctx, func(ctx context.Context, w *Worker, s *Slot) {
		if w.Rand.Float64() < readShare {
			read := history.Request{Kind: history.KindRange, Range: &history.Range{
				Key: l.keys.prefix, End: l.keys.end(), Limit: limit, Serializable: l.o.Consistency == "s",
			}}
			w.Do(ctx, s, "txn-read", history.Request{Kind: history.KindTxn, Txn: &history.Txn{Then: []history.Request{read}}})
			return
		}
		key := l.keys.key(l.keys.nth(s.N))
		var put history.Request
		if l.o.deletes(w) {
			put = deleteRequest(key)
		} else {
			put = putRequest(key, w.NewValue(l.o.ValSize))
		}
		then := []history.Request{put}
		if l.o.TxnPastRead > 0 && w.Rand.Float64() < l.o.TxnPastRead {
			if last := l.lastRev.Load(); last > 1 {
				past := max(1, last-w.Rand.Int64N(64))
				then = append(then, history.Request{Kind: history.KindRange, Range: &history.Range{Key: key, Revision: past}})
			}
		}
		resp, err := w.Do(ctx, s, "txn-write", history.Request{Kind: history.KindTxn, Txn: &history.Txn{Then: then}})
		if err == nil && l.o.TxnPastRead > 0 { // the shared revision only serves past reads
			for last := l.lastRev.Load(); resp.Revision > last && !l.lastRev.CompareAndSwap(last, resp.Revision); last = l.lastRev.Load() {
			}
		}
	})
	return nil
}

// leaseKeepaliveLoad mirrors `benchmark lease-keepalive`: every worker grants one lease, then each operation
// is a KeepAliveOnce of the worker's lease.
type leaseKeepaliveLoad struct {
	leases []int64 // by worker ID
}

func (l *leaseKeepaliveLoad) Name() string { return "lease-keepalive" }
func (l *leaseKeepaliveLoad) Setup(ctx context.Context, r *Runner) error {
	l.leases = make([]int64, len(r.Workers()))
	for i, w := range r.Workers() {
		resp, err := w.Do(ctx, nil, "lease-grant", history.Request{Kind: history.KindLeaseGrant, Lease: &history.Lease{TTL: 100}})
		if err != nil {
			return fmt.Errorf("grant lease: %w", err)
		}
		l.leases[i] = resp.Lease.ID
	}
	return nil
}
func (l *leaseKeepaliveLoad) Run(ctx context.Context, r *Runner) error {
	r.Pace(ctx, func(ctx context.Context, w *Worker, s *Slot) {
		w.Do(ctx, s, "lease-keepalive", history.Request{Kind: history.KindLeaseKeepAlive, Lease: &history.Lease{ID: l.leases[w.ID]}})
	})
	return nil
}

// watchLatencyLoad mirrors `benchmark watch-latency`: WatchStreams gRPC watch streams with
// WatchersPerStream watchers each, all on one key; puts to that key are paced like any load, and every
// event is recorded as a "watch" operation whose latency runs from the put's acknowledgement to the event's
// arrival (zero when the event arrives first), as etcd's tool measures it.
//
// A watcher behaves as a real client's: told that its revision was compacted, it watches again from the
// compaction revision (etcd's lowest still available), and a watch that ends otherwise while the load runs
// is opened again after the last revision it saw, so that the whole run's watch traffic is checked, not
// only what came before the first compaction. With WatchReopen, every watcher also closes its watch at
// that interval and opens a new one at a revision WatchFrom chooses: after the last event it saw, in the
// past (possibly compacted: etcd then answers with the compaction revision, and the watcher watches from
// there), or in the future. Events a re-opened watch delivers again are checked in the history as that
// watch's own, and not counted twice for latency. With WatchProgress, each watcher asks for a progress
// notification on its stream at that interval (recorded as "progress"): a watch re-opened in the past is
// still catching up when one is asked for, which is when etcd-io/etcd#15220 sent one ahead of the events
// it had not sent yet.
type watchLatencyLoad struct {
	o        MicroOptions
	key      string
	delivery *Delivery
	streams  []*WatchStream
	watches  []*Watch
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

func (l *watchLatencyLoad) Name() string { return "watch-latency" }

func (l *watchLatencyLoad) Setup(ctx context.Context, r *Runner) error {
	n := l.o.WatchStreams * l.o.WatchersPerStream
	l.delivery = NewDelivery(n)
	wctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	type first struct {
		stream *WatchStream
		watch  *Watch
		stop   context.CancelFunc
	}
	var firsts []first
	for i := range l.o.WatchStreams {
		c := r.NewClient(i)
		if l.o.WatchPin {
			var err error
			if c, err = r.MemberClient(i); err != nil {
				cancel()
				return err
			}
		}
		stream := c.NewWatchStream()
		l.streams = append(l.streams, stream)
		for range l.o.WatchersPerStream {
			octx, stop := context.WithCancel(wctx)
			w := stream.Watch(octx, history.WatchRequest{Key: l.key, PrevKV: l.o.PrevKV})
			l.watches = append(l.watches, w)
			firsts = append(firsts, first{stream, w, stop})
		}
	}
	rec := r.Recorder()
	for i, f := range firsts {
		rnd := r.Rand("watcher", i)
		l.wg.Go(func() { l.follow(wctx, rec, f.stream, f.watch, f.stop, rnd) })
	}
	// Make sure every watcher is established before the first put, or early events would be missed.
	return waitWatchesReady(ctx, l.watches)
}

func (l *watchLatencyLoad) Run(ctx context.Context, r *Runner) error {
	rec := r.Recorder()
	r.Pace(ctx, func(ctx context.Context, w *Worker, s *Slot) {
		if l.o.deletes(w) {
			w.Do(ctx, s, "delete", deleteRequest(l.key))
			return
		}
		v := w.NewValue(l.o.ValSize)
		resp, err := w.Do(ctx, s, "put", putRequest(l.key, v))
		if err != nil {
			l.delivery.Forget(v.ID)
			return
		}
		ack := rec.Now()
		for range l.delivery.Acked(v.ID, ack) {
			rec.record(w.ID, &results.Record{Op: "watch", Key: l.key, Intended: ack, Start: ack, End: ack, Revision: resp.Revision, WriteID: v.ID})
		}
	})
	// Give the last events a moment to arrive, then stop watching.
	deadline := time.Now().Add(2 * time.Second)
	for l.delivery.Pending() > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	l.cancel()
	for _, s := range l.streams {
		s.Close()
	}
	l.wg.Wait()
	return nil
}

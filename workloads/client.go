package workloads

import (
	"context"
	"sync/atomic"
	"time"
	"unsafe"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// Recorder is the one place where operations are timed and recorded. Every request a workload sends goes
// through a Client, which hands the Recorder one results.Record (for histograms and counters) and, when a
// history is kept, one history.Operation (for the consistency checker).
type Recorder struct {
	start   time.Time
	sinks   []results.Sink
	history *history.Writer
	fill    []byte

	deadlines deadlines

	watchIDs atomic.Int64
	begun    atomic.Int64 // offset of the load start plus one; 0 until Begin
}

// NewRecorder returns a recorder whose time base is start. history may be nil to keep no history. fill
// supplies the filler bytes of written values (see history.EncodeValue).
func NewRecorder(start time.Time, history *history.Writer, fill []byte, sinks ...results.Sink) *Recorder {
	return &Recorder{start: start, sinks: sinks, history: history, fill: fill}
}

// Start returns the time base: every offset in records and histories is relative to it.
func (r *Recorder) Start() time.Time { return r.start }

// Now returns the current offset from the time base (monotonic).
func (r *Recorder) Now() time.Duration { return time.Since(r.start) }

// Begin marks the start of the measured load (after set-up) and returns its offset. Sinks that want to
// know (the collector aligns its intervals and warm-up on it) implement interface{ Begin(time.Duration) }.
// Only the first call has an effect.
func (r *Recorder) Begin() time.Duration {
	at := r.Now()
	if !r.begun.CompareAndSwap(0, int64(at)+1) {
		return time.Duration(r.begun.Load() - 1)
	}
	for _, s := range r.sinks {
		if b, ok := s.(interface{ Begin(time.Duration) }); ok {
			b.Begin(at)
		}
	}
	return at
}

// Began returns the offset of the load start, and false before Begin.
func (r *Recorder) Began() (time.Duration, bool) {
	v := r.begun.Load()
	return time.Duration(v - 1), v != 0
}

// Record hands one record to the sinks, for what is measured outside a request: watch events, waits.
func (r *Recorder) Record(worker int, rec *results.Record) { r.record(worker, rec) }

func (r *Recorder) record(worker int, rec *results.Record) {
	for _, s := range r.sinks {
		s.Record(worker, rec)
	}
}

// Slot is one place in a load schedule: when the operation should have started and whether it started
// late. Requests sent outside a schedule pass a nil *Slot: their intended start is their actual start.
type Slot struct {
	N        uint64
	Intended time.Duration
	Miss     results.Miss
}

// Client is one logical client of etcd (a worker, an actor): it sends requests over a shared connection and
// records each of them. A Client is used by one goroutine at a time.
type Client struct {
	id   int
	etcd *clientv3.Client
	kv   clientv3.KV // etcd's KV API over conn, or over the runner's unary connection beside it
	rec  *Recorder
	opts ClientOptions

	// Reused for every request: a Client serves one goroutine at a time, and sinks and the history writer
	// do not keep what they are given.
	record   results.Record
	op       history.Operation
	writes   uint32     // values written so far, see NewValue
	attempts attemptLog // the attempts of the operation in flight, when a history is kept (attempts.go)
}

// ClientOptions shapes how a Client sends requests.
type ClientOptions struct {
	// Timeout bounds each request (0: none).
	Timeout time.Duration
	// ServerDeadline sends the timeout to etcd as the request's gRPC deadline, as kube-apiserver does.
	// Without it the timeout is enforced by the client alone and the requests on the wire are those of
	// etcd's benchmark tool, which sends no deadline (see deadlines).
	ServerDeadline bool
}

// NewClient returns a recording client with id (the client number in histories) over conn.
func NewClient(id int, conn *clientv3.Client, rec *Recorder, opts ClientOptions) *Client {
	return &Client{id: id, etcd: conn, kv: conn.KV, rec: rec, opts: opts, attempts: attemptLog{base: rec.start}}
}

// ID returns the client's number in histories.
func (c *Client) ID() int { return c.id }

// NewValue returns a value of the given size with a run-wide unique write id: the client's number in the
// high bits and its own sequence number in the low 32. Ids stay below 2^53, exact in any JSON reader, for
// up to two million clients; no counter is shared between clients, so writing costs no cross-core traffic.
func (c *Client) NewValue(size int) history.Value {
	c.writes++
	return history.Value{ID: uint64(c.id+1)<<32 | uint64(c.writes), Size: max(size, 8)}
}

// Etcd returns the underlying etcd client, for requests the wrapper does not model (use Call to time them).
func (c *Client) Etcd() *clientv3.Client { return c.etcd }

// Recorder returns the recorder this client records to.
func (c *Client) Recorder() *Recorder { return c.rec }

// Do sends req and records it as operation op (for example "put" or "create/pods"). The returned error is
// the one etcd's client returned; a transaction whose comparison failed is not an error but a response with
// Txn.Succeeded false.
func (c *Client) Do(ctx context.Context, slot *Slot, op string, req history.Request) (history.Response, error) {
	parent := ctx
	start := c.rec.Now()
	if c.opts.Timeout > 0 {
		ctx = c.rec.deadlines.context(ctx, c.opts.Timeout, c.opts.ServerDeadline, c.rec.start.Add(start))
	}
	if c.rec.history != nil {
		ctx = c.attempts.start(ctx)
	}
	resp, err := c.send(ctx, req)
	end := c.rec.Now()
	c.finish(slot, op, req, start, end, &resp, errorClass(ctx, err), err, canceledByCaller(parent, err))
	return resp, err
}

// Call times an arbitrary request fn (Status, RequestProgress, Defragment, ...) and records it as op with the
// revision fn returns. It is not part of the history.
func (c *Client) Call(ctx context.Context, slot *Slot, op string, fn func(ctx context.Context) (revision int64, err error)) error {
	parent := ctx
	start := c.rec.Now()
	if c.opts.Timeout > 0 {
		ctx = c.rec.deadlines.context(ctx, c.opts.Timeout, c.opts.ServerDeadline, c.rec.start.Add(start))
	}
	rev, err := fn(ctx)
	end := c.rec.Now()
	rec := &c.record
	*rec = results.Record{Op: op, Start: start, End: end, Intended: start, Revision: rev}
	if slot != nil {
		rec.Intended, rec.Miss = slot.Intended, slot.Miss
	}
	if err != nil {
		rec.Outcome, rec.ErrClass = results.Error, errorClass(ctx, err)
	}
	if !canceledByCaller(parent, err) {
		c.rec.record(c.id, rec)
	}
	return err
}

func (c *Client) finish(slot *Slot, op string, req history.Request, start, end time.Duration, resp *history.Response, class string, err error, canceled bool) {
	rec := &c.record
	*rec = results.Record{Op: op, Key: requestKey(req), Start: start, End: end, Intended: start, Revision: resp.Revision}
	if slot != nil {
		rec.Intended, rec.Miss = slot.Intended, slot.Miss
	}
	switch {
	case err != nil:
		rec.Outcome, rec.ErrClass = results.Error, class
	case resp.Txn != nil && !resp.Txn.Succeeded:
		rec.Outcome = results.Failed
	}
	if req.Kind == history.KindPut {
		rec.WriteID = req.Put.Value.ID
	}
	rec.Access = access(req)
	if c.rec.history != nil {
		h := &c.op
		*h = history.Operation{Client: c.id, Op: op, Call: int64(start), Return: int64(end), Request: req}
		h.AttemptsRecorded, h.Attempts = c.attempts.stop(c.rec.start.Add(end), err)
		if err != nil {
			h.Error = rec.ErrClass + ": " + err.Error()
		} else {
			h.Response = resp
		}
		c.rec.history.Operation(h)
	}
	// An operation cut short because the run is ending says nothing about etcd: keep it in the history
	// (it may have taken effect) but out of the latency and error figures.
	if !canceled {
		c.rec.record(c.id, rec)
	}
}

// errorClass classifies err, counting a cancellation by the client-side timeout as a deadline error.
func errorClass(ctx context.Context, err error) string {
	if err != nil && timedOut(ctx) {
		return ErrDeadline
	}
	return ErrorClass(err)
}

// canceledByCaller reports whether err only says that the caller's context ended (not our timeout).
func canceledByCaller(parent context.Context, err error) bool {
	return err != nil && parent.Err() != nil
}

// access classifies req for the availability gaps, by the one definition of results.AccessOf.
func access(req history.Request) results.Access {
	a := results.AccessOf(string(req.Kind))
	if req.Txn != nil {
		for _, branch := range [2][]history.Request{req.Txn.Then, req.Txn.Else} {
			for _, r := range branch {
				a = a.Branch(string(r.Kind))
			}
		}
	}
	return a
}

func requestKey(req history.Request) string {
	switch req.Kind {
	case history.KindRange:
		return req.Range.Key
	case history.KindPut:
		return req.Put.Key
	case history.KindDelete:
		return req.Delete.Key
	case history.KindTxn:
		if len(req.Txn.Compares) > 0 {
			return req.Txn.Compares[0].Key
		}
		if len(req.Txn.Then) > 0 {
			return requestKey(req.Txn.Then[0])
		}
	}
	return ""
}

func (c *Client) send(ctx context.Context, req history.Request) (history.Response, error) {
	switch req.Kind {
	case history.KindLeaseGrant:
		r, err := c.etcd.Grant(ctx, req.Lease.TTL)
		if err != nil {
			return history.Response{}, err
		}
		return history.Response{Revision: r.Revision, Lease: &history.LeaseResponse{ID: int64(r.ID), TTL: r.TTL}}, nil
	case history.KindLeaseRevoke:
		r, err := c.etcd.Revoke(ctx, clientv3.LeaseID(req.Lease.ID))
		if err != nil {
			return history.Response{}, err
		}
		return history.Response{Revision: r.Header.Revision, Lease: &history.LeaseResponse{ID: req.Lease.ID}}, nil
	case history.KindLeaseKeepAlive:
		r, err := c.etcd.KeepAliveOnce(ctx, clientv3.LeaseID(req.Lease.ID))
		if err != nil {
			return history.Response{}, err
		}
		return history.Response{Revision: r.Revision, Lease: &history.LeaseResponse{ID: int64(r.ID), TTL: r.TTL}}, nil
	case history.KindCompact:
		var opts []clientv3.CompactOption
		if req.Compact.Physical {
			opts = append(opts, clientv3.WithCompactPhysical())
		}
		r, err := c.etcd.Compact(ctx, req.Compact.Revision, opts...)
		if err != nil {
			return history.Response{}, err
		}
		return history.Response{Revision: r.Header.Revision}, nil
	}
	r, err := c.kv.Do(ctx, c.toOp(req))
	if err != nil {
		return history.Response{}, err
	}
	return fromOpResponse(r), nil
}

// toOp translates a KV request into the etcd client's Op.
func (c *Client) toOp(req history.Request) clientv3.Op {
	switch req.Kind {
	case history.KindRange:
		r := req.Range
		var opts []clientv3.OpOption
		if r.End != "" {
			opts = append(opts, clientv3.WithRange(r.End))
		}
		if r.Limit != 0 {
			opts = append(opts, clientv3.WithLimit(r.Limit))
		}
		if r.Revision != 0 {
			opts = append(opts, clientv3.WithRev(r.Revision))
		}
		if r.Serializable {
			opts = append(opts, clientv3.WithSerializable())
		}
		if r.KeysOnly {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		if r.CountOnly {
			opts = append(opts, clientv3.WithCountOnly())
		}
		return clientv3.OpGet(r.Key, opts...)
	case history.KindPut:
		p := req.Put
		var opts []clientv3.OpOption
		if p.Lease != 0 {
			opts = append(opts, clientv3.WithLease(clientv3.LeaseID(p.Lease)))
		}
		if p.PrevKV {
			opts = append(opts, clientv3.WithPrevKV())
		}
		return clientv3.OpPut(p.Key, c.valueString(p.Value), opts...)
	case history.KindDelete:
		d := req.Delete
		var opts []clientv3.OpOption
		if d.End != "" {
			opts = append(opts, clientv3.WithRange(d.End))
		}
		if d.PrevKV {
			opts = append(opts, clientv3.WithPrevKV())
		}
		return clientv3.OpDelete(d.Key, opts...)
	case history.KindTxn:
		t := req.Txn
		cmps := make([]clientv3.Cmp, len(t.Compares))
		for i, cmp := range t.Compares {
			cmps[i] = c.toCmp(cmp)
		}
		return clientv3.OpTxn(cmps, c.toOps(t.Then), c.toOps(t.Else))
	}
	panic("workloads: request kind " + string(req.Kind) + " is not a KV operation")
}

// valueString returns the bytes of v as a string without copying them: the buffer is fresh and never
// written again, and the etcd client takes values as strings.
func (c *Client) valueString(v history.Value) string {
	b := history.EncodeValue(v, c.rec.fill)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func (c *Client) toOps(reqs []history.Request) []clientv3.Op {
	if len(reqs) == 0 {
		return nil
	}
	ops := make([]clientv3.Op, len(reqs))
	for i, r := range reqs {
		ops[i] = c.toOp(r)
	}
	return ops
}

func (c *Client) toCmp(cmp history.Compare) clientv3.Cmp {
	op := string(cmp.Result)
	switch cmp.Target {
	case history.CompareModRevision:
		return clientv3.Compare(clientv3.ModRevision(cmp.Key), op, cmp.Operand)
	case history.CompareVersion:
		return clientv3.Compare(clientv3.Version(cmp.Key), op, cmp.Operand)
	case history.CompareCreate:
		return clientv3.Compare(clientv3.CreateRevision(cmp.Key), op, cmp.Operand)
	case history.CompareValue:
		return clientv3.Compare(clientv3.Value(cmp.Key), op, c.valueString(cmp.Value))
	}
	panic("workloads: compare target " + string(cmp.Target))
}

func fromOpResponse(r clientv3.OpResponse) history.Response {
	switch {
	case r.Get() != nil:
		g := r.Get()
		return history.Response{Revision: g.Header.Revision, Range: &history.RangeResponse{KVs: fromKVs(g.Kvs), Count: g.Count, More: g.More}}
	case r.Put() != nil:
		p := r.Put()
		return history.Response{Revision: p.Header.Revision, Put: &history.PutResponse{PrevKV: fromKV(p.PrevKv)}}
	case r.Del() != nil:
		d := r.Del()
		return history.Response{Revision: d.Header.Revision, Delete: &history.DeleteResponse{Deleted: d.Deleted, PrevKVs: fromKVs(d.PrevKvs)}}
	case r.Txn() != nil:
		t := r.Txn()
		out := history.Response{Revision: t.Header.Revision, Txn: &history.TxnResponse{Succeeded: t.Succeeded}}
		for _, op := range t.Responses {
			out.Txn.Results = append(out.Txn.Results, fromResponseOp(op, t.Header.Revision))
		}
		return out
	}
	return history.Response{}
}

// fromResponseOp converts one result of a transaction branch; nested results carry the transaction's
// revision.
func fromResponseOp(op *pb.ResponseOp, rev int64) history.Response {
	switch {
	case op.GetResponseRange() != nil:
		g := op.GetResponseRange()
		return history.Response{Revision: rev, Range: &history.RangeResponse{KVs: fromKVs(g.Kvs), Count: g.Count, More: g.More}}
	case op.GetResponsePut() != nil:
		return history.Response{Revision: rev, Put: &history.PutResponse{PrevKV: fromKV(op.GetResponsePut().PrevKv)}}
	case op.GetResponseDeleteRange() != nil:
		d := op.GetResponseDeleteRange()
		return history.Response{Revision: rev, Delete: &history.DeleteResponse{Deleted: d.Deleted, PrevKVs: fromKVs(d.PrevKvs)}}
	case op.GetResponseTxn() != nil:
		t := op.GetResponseTxn()
		out := history.Response{Revision: rev, Txn: &history.TxnResponse{Succeeded: t.Succeeded}}
		for _, inner := range t.Responses {
			out.Txn.Results = append(out.Txn.Results, fromResponseOp(inner, rev))
		}
		return out
	}
	return history.Response{Revision: rev}
}

func fromKVs(kvs []*mvccpb.KeyValue) []history.KV {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]history.KV, len(kvs))
	for i, kv := range kvs {
		out[i] = *fromKV(kv)
	}
	return out
}

func fromKV(kv *mvccpb.KeyValue) *history.KV {
	if kv == nil {
		return nil
	}
	out := &history.KV{
		Key: string(kv.Key), CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision,
		Version: kv.Version, Lease: kv.Lease,
	}
	if len(kv.Value) > 0 {
		out.Value = history.DecodeValue(kv.Value)
	}
	return out
}

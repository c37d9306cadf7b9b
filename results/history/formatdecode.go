package history

import (
	"encoding/binary"
	"fmt"
)

// decoder reads the records of one file, keeping the state the encoder kept (see format.go). Records it
// returns stay valid: their parts are carved from slabs that are never reused, which costs a checker that
// keeps a whole history one allocation per slab instead of several per operation. The one exception is
// OperationStore.Scan, whose decoder reuses its slabs from record to record (reuse).
type decoder struct {
	b   []byte // the record being decoded
	i   int
	err error

	strs     []string
	kvs      []kvState
	prevRev  int64
	prevTime int64
	prevRef  storeRef // an OperationStore's records: the key-value before, in this record
	clients  map[int]int

	// table, when set, receives the key-values of large range answers, which then hold references to
	// them (see RangeResponse); keyRefs is each key's reference to its current key-value in it.
	table   *kvTable
	keyRefs []uint32
	packs   slab[packedKVs]
	refs    slab[uint32]

	ranges      slab[Range]
	puts        slab[Put]
	deletes     slab[Delete]
	txns        slab[Txn]
	leases      slab[Lease]
	compacts    slab[Compact]
	resps       slab[Response]
	rangeRs     slab[RangeResponse]
	putRs       slab[PutResponse]
	deleteRs    slab[DeleteResponse]
	txnRs       slab[TxnResponse]
	leaseRs     slab[LeaseResponse]
	kvSlab      slab[KV]
	compares    slab[Compare]
	reqs        slab[Request]
	events      slab[Event]
	watchReq    slab[WatchRequest]
	ops         slab[Operation]
	attemptSlab slab[Attempt]

	res *resident // an OperationStore's records: strings and key-values are the store's (store.go)
	// window is the part of a spilled OperationStore's file last read: b holds it from offset at.
	window struct {
		at int64
		b  []byte
	}
}

func newDecoder() *decoder { return &decoder{clients: map[int]int{}} }

// slab hands out values and short slices from chunks, so that a history's many small parts cost few
// allocations. Slices are capped at their length: appending to one never writes into a neighbour.
type slab[T any] struct{ buf []T }

const slabChunk = 512

func (s *slab[T]) one() *T {
	if len(s.buf) == cap(s.buf) {
		s.buf = make([]T, 0, slabChunk)
	}
	s.buf = s.buf[:len(s.buf)+1]
	return &s.buf[len(s.buf)-1]
}

// reuse hands out the current chunk's values again, zeroed: whatever was carved from it is no longer used.
func (s *slab[T]) reuse() {
	clear(s.buf)
	s.buf = s.buf[:0]
}

// reuse makes the decoder carve the next record's parts from the memory of the last one's (see
// OperationStore.Scan).
func (d *decoder) reuse() {
	d.packs.reuse()
	d.refs.reuse()
	d.ranges.reuse()
	d.puts.reuse()
	d.deletes.reuse()
	d.txns.reuse()
	d.leases.reuse()
	d.compacts.reuse()
	d.resps.reuse()
	d.rangeRs.reuse()
	d.putRs.reuse()
	d.deleteRs.reuse()
	d.txnRs.reuse()
	d.leaseRs.reuse()
	d.kvSlab.reuse()
	d.compares.reuse()
	d.reqs.reuse()
	d.events.reuse()
	d.watchReq.reuse()
	d.ops.reuse()
	d.attemptSlab.reuse()
}

func (s *slab[T]) slice(n int) []T {
	if n == 0 {
		return nil
	}
	if n > slabChunk/4 {
		return make([]T, n)
	}
	if cap(s.buf)-len(s.buf) < n {
		s.buf = make([]T, 0, slabChunk)
	}
	start := len(s.buf)
	s.buf = s.buf[:start+n]
	return s.buf[start : start+n : start+n]
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d of a record", errFormat, what, d.i)
	}
}

func (d *decoder) byte() byte {
	if d.i >= len(d.b) {
		d.fail("truncated")
		return 0
	}
	c := d.b[d.i]
	d.i++
	return c
}

func (d *decoder) uvarint() uint64 {
	// One-byte values are by far the most common.
	if d.i < len(d.b) && d.b[d.i] < 0x80 {
		v := d.b[d.i]
		d.i++
		return uint64(v)
	}
	v, n := binary.Uvarint(d.b[d.i:])
	if n <= 0 {
		d.fail("bad varint")
		d.i = len(d.b)
		return 0
	}
	d.i += n
	return v
}

func (d *decoder) varint() int64 {
	u := d.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

// count reads a number of elements, each of which takes at least one byte.
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)-d.i) {
		d.fail("count beyond the record")
		return 0
	}
	return int(n)
}

func (d *decoder) str() (string, uint64) {
	ref := d.uvarint()
	if d.res != nil {
		if ref == 0 || ref > uint64(len(d.res.strs)) {
			d.fail("unknown string")
			return "", 0
		}
		return d.res.strs[ref-1], ref - 1
	}
	if ref > 0 {
		if ref > uint64(len(d.strs)) {
			d.fail("unknown string")
			return "", 0
		}
		return d.strs[ref-1], ref - 1
	}
	n := d.uvarint()
	if n > uint64(len(d.b)-d.i) {
		d.fail("string beyond the record")
		return "", 0
	}
	s := string(d.b[d.i : d.i+int(n)])
	d.i += int(n)
	d.strs = append(d.strs, s)
	return s, uint64(len(d.strs) - 1)
}

func (d *decoder) s() string {
	s, _ := d.str()
	return s
}

func (d *decoder) value() Value {
	id := d.uvarint()
	return Value{ID: id, Size: int(d.varint())}
}

// reset forgets what an empty record tells it to (see format.go). Records decoded so far keep their
// strings and key-values; the table of packed key-values only grows.
func (d *decoder) reset() {
	d.strs, d.kvs, d.keyRefs, d.clients = nil, nil, nil, map[int]int{}
}

func (d *decoder) start(rec []byte) {
	d.b, d.i, d.err = rec, 0, nil
}

func (d *decoder) finish() error {
	if d.err == nil && d.i != len(d.b) {
		d.fail("trailing bytes")
	}
	return d.err
}

func (d *decoder) operation(rec []byte, op *Operation) error {
	d.start(rec)
	op.Client = int(d.varint())
	op.Op = d.s()
	op.Return = d.prevTime + d.varint()
	d.prevTime = op.Return
	op.Call = op.Return - d.varint()
	d.request(&op.Request)
	flags := d.byte()
	op.Error, op.Response = "", nil
	op.AttemptsRecorded, op.Attempts = flags&opAttemptsRecorded != 0, nil
	if flags&opError != 0 {
		op.Error = d.s()
	}
	if flags&opResponse != 0 {
		r := d.resps.one()
		r.Revision = d.prevRev + d.varint()
		d.prevRev = r.Revision
		d.responseParts(r)
		op.Response = r
	}
	if flags&opAttempts != 0 {
		op.Attempts = d.attempts(op.Call)
	}
	return d.finish()
}

func (d *decoder) request(r *Request) {
	c := d.byte()
	parts := kindParts(kindCodes[min(int(c&^explicitParts), len(kindCodes)-1)])
	if c&explicitParts != 0 {
		parts = d.byte()
		c &^= explicitParts
	}
	if int(c) >= len(kindCodes) {
		d.fail("unknown request kind")
		return
	}
	*r = Request{Kind: kindCodes[c]}
	if c == 0 {
		r.Kind = Kind(d.s())
	}
	if parts&partRange != 0 {
		g := d.ranges.one()
		g.Key = d.s()
		flags := d.byte()
		if flags&1 != 0 {
			g.End = d.s()
		}
		if flags&2 != 0 {
			g.Limit = d.varint()
		}
		if flags&4 != 0 {
			g.Revision = d.prevRev - d.varint()
		}
		g.Serializable, g.KeysOnly, g.CountOnly = flags&8 != 0, flags&16 != 0, flags&32 != 0
		r.Range = g
	}
	if parts&partPut != 0 {
		p := d.puts.one()
		p.Key = d.s()
		p.Value = d.value()
		flags := d.byte()
		if flags&1 != 0 {
			p.Lease = d.varint()
		}
		p.PrevKV = flags&2 != 0
		r.Put = p
	}
	if parts&partDelete != 0 {
		del := d.deletes.one()
		del.Key = d.s()
		flags := d.byte()
		if flags&1 != 0 {
			del.End = d.s()
		}
		del.PrevKV = flags&2 != 0
		r.Delete = del
	}
	if parts&partTxn != 0 {
		t := d.txns.one()
		t.Compares = d.compares.slice(d.count())
		for i := range t.Compares {
			d.compare(&t.Compares[i])
		}
		for _, ops := range []*[]Request{&t.Then, &t.Else} {
			*ops = d.reqs.slice(d.count())
			for i := range *ops {
				d.request(&(*ops)[i])
			}
		}
		r.Txn = t
	}
	if parts&partLease != 0 {
		l := d.leases.one()
		l.ID = d.varint()
		l.TTL = d.varint()
		r.Lease = l
	}
	if parts&partCompact != 0 {
		c := d.compacts.one()
		c.Revision = d.prevRev - d.varint()
		c.Physical = d.byte() != 0
		r.Compact = c
	}
}

func (d *decoder) compare(c *Compare) {
	c.Key = d.s()
	flags := d.byte()
	t, r := flags&7, flags>>3&7
	if int(t) >= len(targetCodes) || int(r) >= len(resultCodes) {
		d.fail("unknown comparison")
		return
	}
	c.Target, c.Result = targetCodes[t], resultCodes[r]
	if t == 0 {
		c.Target = CompareTarget(d.s())
	}
	if r == 0 {
		c.Result = CompareResult(d.s())
	}
	if flags&cmpOperand != 0 {
		v := d.varint()
		if c.Target == CompareModRevision || c.Target == CompareCreate {
			v = d.prevRev - v
		}
		c.Operand = v
	}
	if flags&cmpValue != 0 {
		c.Value = d.value()
	}
}

func (d *decoder) responseParts(r *Response) {
	parts := d.byte()
	rev := r.Revision
	if parts&respRange != 0 {
		g := d.rangeRs.one()
		switch n := d.count(); {
		case d.res != nil && n > 0: // every answer: a reference costs less than a copy
			g.packed = d.residentPacked(n)
		case d.table != nil && n >= packMin:
			g.packed = d.packed(n, rev)
		default:
			g.KVs = d.kvs_(n, rev)
		}
		g.Count = d.varint()
		g.More = d.byte() != 0
		r.Range = g
	}
	if parts&respPut != 0 {
		p := d.putRs.one()
		if d.byte() != 0 {
			p.PrevKV = d.sharedKV(rev)
		}
		r.Put = p
	}
	if parts&respDelete != 0 {
		del := d.deleteRs.one()
		del.Deleted = d.varint()
		del.PrevKVs = d.kvs_(d.count(), rev)
		r.Delete = del
	}
	if parts&respTxn != 0 {
		t := d.txnRs.one()
		t.Succeeded = d.byte() != 0
		t.Results = d.resps.slice(d.count())
		for i := range t.Results {
			t.Results[i].Revision = rev + d.varint()
			d.responseParts(&t.Results[i])
		}
		r.Txn = t
	}
	if parts&respLease != 0 {
		l := d.leaseRs.one()
		l.ID = d.varint()
		l.TTL = d.varint()
		r.Lease = l
	}
}

func (d *decoder) kvs_(n int, rev int64) []KV {
	kvs := d.kvSlab.slice(n)
	for i := range kvs {
		d.kv(&kvs[i], rev)
	}
	return kvs
}

// packMin is the smallest range answer a loaded history holds packed: below it a reference per key-value
// saves less than the packing costs.
const packMin = 8

// noRef marks a key whose current key-value is not in the table yet.
const noRef = ^uint32(0)

func (d *decoder) packed(n int, rev int64) *packedKVs {
	p := d.packs.one()
	p.table, p.refs = d.table, d.refs.slice(n)
	var kv KV
	for i := range p.refs {
		id := d.kv(&kv, rev)
		if d.err != nil {
			return p
		}
		if d.keyRefs[id] == noRef {
			d.keyRefs[id] = d.table.add(kv)
		}
		p.refs[i] = d.keyRefs[id]
	}
	return p
}

// sharedKV decodes a key-value that is not changed by whoever holds it: with a table, the previous
// key-values of watch events and puts, which the three watchers of a resource receive alike, share one
// copy per version of a key.
func (d *decoder) sharedKV(rev int64) *KV {
	if d.res != nil {
		kv := d.kvSlab.one()
		d.residentKV(kv)
		return kv
	}
	if d.table == nil {
		kv := d.kvSlab.one()
		d.kv(kv, rev)
		return kv
	}
	var kv KV
	id := d.kv(&kv, rev)
	if d.err != nil {
		return &kv
	}
	if d.keyRefs[id] == noRef {
		d.keyRefs[id] = d.table.add(kv)
	}
	return d.table.at(d.keyRefs[id])
}

// kv decodes one key-value and returns its key's number.
func (d *decoder) kv(kv *KV, rev int64) uint64 {
	if d.res != nil {
		d.residentKV(kv)
		return 0
	}
	key, id := d.str()
	if d.err != nil {
		return 0
	}
	for uint64(len(d.kvs)) <= id {
		d.kvs = append(d.kvs, kvState{})
		if d.table != nil {
			d.keyRefs = append(d.keyRefs, noRef)
		}
	}
	s := &d.kvs[id]
	flags := d.byte()
	if flags != 0 && d.table != nil {
		d.keyRefs[id] = noRef
	}
	if flags&kvValue != 0 {
		s.value = d.value()
	}
	if flags&kvMod != 0 {
		s.mod = rev - d.varint()
	}
	if flags&kvCreate != 0 {
		s.create = s.mod - d.varint()
	}
	switch {
	case flags&kvVersion != 0:
		s.ver = d.varint()
	case flags&kvVersionNext != 0:
		s.ver++
	}
	if flags&kvLease != 0 {
		s.lease = d.varint()
	}
	*kv = KV{Key: key, Value: s.value, CreateRevision: s.create, ModRevision: s.mod, Version: s.ver, Lease: s.lease}
	return id
}

func (d *decoder) watch(rec []byte, r *WatchResponse) error {
	d.start(rec)
	*r = WatchResponse{Watcher: int(d.varint())}
	flags := d.uvarint()
	if flags&wSameClient != 0 {
		c, ok := d.clients[r.Watcher]
		if !ok {
			d.fail("unknown watcher")
		}
		r.Client = c
	} else {
		r.Client = int(d.varint())
		d.clients[r.Watcher] = r.Client
	}
	r.Time = d.prevTime + d.varint()
	d.prevTime = r.Time
	if flags&wRequest != 0 {
		q := d.watchReq.one()
		q.Key = d.s()
		qf := d.byte()
		if qf&1 != 0 {
			q.End = d.s()
		}
		if qf&2 != 0 {
			q.Revision = d.prevRev - d.varint()
		}
		q.PrevKV, q.ProgressNotify, q.RequireLeader = qf&4 != 0, qf&8 != 0, qf&16 != 0
		r.Request = q
	}
	r.Revision = d.prevRev + d.varint()
	if r.Revision != 0 {
		d.prevRev = r.Revision
	}
	r.Created, r.Progress, r.Canceled = flags&wCreated != 0, flags&wProgress != 0, flags&wCanceled != 0
	if flags&wCompact != 0 {
		r.CompactRevision = r.Revision - d.varint()
	}
	if flags&wError != 0 {
		r.Error = d.s()
	}
	if flags&wEvents != 0 {
		r.Events = d.events.slice(d.count())
		for i := range r.Events {
			ev := &r.Events[i]
			f := d.byte()
			c := f & 3
			if int(c) >= len(eventCodes) {
				d.fail("unknown event type")
				break
			}
			ev.Type = eventCodes[c]
			if c == 0 {
				ev.Type = EventType(d.s())
			}
			ev.IsCreate = f&evIsCreate != 0
			d.kv(&ev.KV, r.Revision)
			if f&evPrevKV != 0 {
				ev.PrevKV = d.sharedKV(r.Revision)
			}
		}
	}
	return d.finish()
}

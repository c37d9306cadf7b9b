package history

import (
	"encoding/binary"
	"fmt"
	"sync"
)

// OperationStore holds a run's operations for a reader that looks them up by number at any time (the
// consistency checker), encoded, and decodes one each time it is asked for it. Decoded, a kube-shaped
// history's operations take about 550 bytes each; held here, about a sixth of that.
//
// Each record is the file format's (format.go) with a different state behind it, so that any record can be
// decoded alone: the strings and the distinct key-values of the whole history are held once, in the store
// (the table a loaded history packs its list pages into), and a record names them by number; times and
// revisions are written whole instead of as deltas from the record before. A store only grows while it is
// loaded, and is read-only, and safe for concurrent readers, afterwards.
type OperationStore struct {
	res      *resident
	chunks   [][]byte
	at       []uint64 // chunk<<32 | offset of each record: a record never spans two chunks
	decoders sync.Pool
}

// resident is the state the records of an OperationStore share instead of carrying it.
type resident struct {
	strs    []string
	ids     map[string]uint64 // while loading: each string's number
	table   kvTable
	keyRefs []uint32 // while loading, by string number: the key's last key-value in table, or noRef
}

// intern returns the number of string s, adding it the first time.
func (r *resident) intern(s string) uint64 {
	if id, ok := r.ids[s]; ok {
		return id
	}
	id := uint64(len(r.strs))
	r.ids[s] = id
	r.strs = append(r.strs, s)
	r.keyRefs = append(r.keyRefs, noRef)
	return id
}

// ref returns the reference of kv in the table: the key's last key-value when kv is the same, else a
// new one. Pages of a list and the previous key-values of writes share one copy of each version of a key.
func (r *resident) ref(kv *KV) uint32 {
	id := r.intern(kv.Key)
	if ref := r.keyRefs[id]; ref != noRef && *r.table.at(ref) == *kv {
		return ref
	}
	v := *kv
	v.Key = r.strs[id] // the interned copy: the caller's may be one of many
	ref := r.table.add(v)
	r.keyRefs[id] = ref
	return ref
}

// storeChunk is the size of the chunks records are appended to: large enough that the last, partly
// filled one does not matter, small enough that growing the store never copies much.
const storeChunk = 1 << 20

// LoadOperationStore reads the operations of run directory dir (binary, or a legacy run's JSON lines)
// into a store.
func LoadOperationStore(dir string) (*OperationStore, error) {
	path, err := HistoryPath(dir)
	if err != nil {
		return nil, err
	}
	b := newStoreBuilder()
	var op Operation
	err = readOperations(path, nil, func() *Operation {
		op = Operation{}
		return &op
	}, func(op *Operation) error {
		b.add(op)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b.done(), nil
}

// NewOperationStore returns a store of ops.
func NewOperationStore(ops []Operation) *OperationStore {
	b := newStoreBuilder()
	for i := range ops {
		b.add(&ops[i])
	}
	return b.done()
}

// storeBuilder encodes operations into a store, in order.
type storeBuilder struct {
	s     *OperationStore
	enc   *encoder
	rec   []byte
	chunk int // storeChunk; less in tests
}

func newStoreBuilder() *storeBuilder {
	res := &resident{ids: map[string]uint64{}}
	return &storeBuilder{s: &OperationStore{res: res}, enc: &encoder{res: res}, chunk: storeChunk}
}

func (b *storeBuilder) add(op *Operation) {
	b.enc.prevTime, b.enc.prevRev = 0, 0
	b.rec = b.enc.operation(b.rec[:0], op)
	s := b.s
	n := len(s.chunks)
	if n == 0 || len(s.chunks[n-1])+len(b.rec) > cap(s.chunks[n-1]) {
		s.chunks = append(s.chunks, make([]byte, 0, max(b.chunk, len(b.rec))))
		n++
	}
	s.at = append(s.at, uint64(n-1)<<32|uint64(len(s.chunks[n-1])))
	s.chunks[n-1] = append(s.chunks[n-1], b.rec...)
}

func (b *storeBuilder) done() *OperationStore {
	s := b.s
	s.res.ids, s.res.keyRefs = nil, nil
	s.decoders.New = func() any {
		d := newDecoder()
		d.res = s.res
		return d
	}
	return s
}

// Len returns the number of operations.
func (s *OperationStore) Len() int { return len(s.at) }

// record returns where record i is: its chunk, and its start and end in it.
func (s *OperationStore) record(i int) (chunk uint64, off, end uint32) {
	chunk, off = s.at[i]>>32, uint32(s.at[i])
	end = uint32(len(s.chunks[chunk]))
	if i+1 < len(s.at) && s.at[i+1]>>32 == chunk {
		end = uint32(s.at[i+1])
	}
	return chunk, off, end
}

// Scan decodes the operations in order, each into the memory of the one before, and calls fn with each:
// the operation and its parts are valid only during the call, but for the key-values it refers to, which
// the store shares. A pass over every operation allocates nothing per operation this way, but for answers
// of more than a hundred key-values, whose references get a slice of their own.
func (s *OperationStore) Scan(fn func(i int, op *Operation)) {
	d := newDecoder()
	d.res = s.res
	var op Operation
	for i := range s.at {
		d.reuse()
		d.prevTime, d.prevRev = 0, 0
		op = Operation{}
		chunk, off, end := s.record(i)
		if err := d.operation(s.chunks[chunk][off:end], &op); err != nil {
			panic(fmt.Sprintf("history: operation %d of a store: %v", i, err))
		}
		fn(i, &op)
	}
}

// At decodes operation i. The operation is the caller's, but for the key-values it refers to, which the
// store shares among all of its operations: they must not be changed. Its range answers hold their
// key-values packed (see RangeResponse: KVs is nil).
func (s *OperationStore) At(i int) *Operation {
	chunk, off, end := s.record(i)
	d := s.decoders.Get().(*decoder)
	defer s.decoders.Put(d)
	d.prevTime, d.prevRev = 0, 0
	op := d.ops.one()
	if err := d.operation(s.chunks[chunk][off:end], op); err != nil {
		// The store wrote the record itself: failing to read it back is a bug, not bad input.
		panic(fmt.Sprintf("history: operation %d of a store: %v", i, err))
	}
	return op
}

// residentKV decodes a key-value of a store's record: a reference into its table.
func (d *decoder) residentKV() *KV {
	ref := d.uvarint()
	if ref >= uint64(d.res.table.len()) {
		d.fail("unknown key-value")
		return &KV{}
	}
	return d.res.table.at(uint32(ref))
}

// residentPacked decodes the n key-values of a store's range answer as references into its table.
func (d *decoder) residentPacked(n int) *packedKVs {
	p := d.packs.one()
	p.table, p.refs = &d.res.table, d.refs.slice(n)
	for i := range p.refs {
		ref := d.uvarint()
		if ref >= uint64(d.res.table.len()) {
			d.fail("unknown key-value")
			return p
		}
		p.refs[i] = uint32(ref)
	}
	return p
}

// appendResidentKV appends kv to a store's record as its reference.
func (e *encoder) appendResidentKV(b []byte, kv *KV) []byte {
	return binary.AppendUvarint(b, uint64(e.res.ref(kv)))
}

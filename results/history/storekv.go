package history

// The state an OperationStore's records share instead of carrying it: the strings, and the distinct
// key-values its answers hold, paged.

import (
	"encoding/binary"
	"fmt"
	"sync"
)

// resident is the state the records of an OperationStore share instead of carrying it.
//
// Its key-values are paged (kvs): a long run writes new versions of its keys for as long as it runs, and
// what a store holds in memory must grow with the keys, not with the run. What the readers need most is
// in memory all the same: each key's key-value read (or added) last (last), which is what a list reads
// again page after page, and what the next list reads again until the key changes. A record names a
// key-value by its key and its number in kvs, so that the key's entry is found without reading the
// key-value itself. Reading a key-value that is not a key's last one replaces it; readers take a lock for
// that, and get copies.
type resident struct {
	strs   []string
	ids    map[string]uint64 // while loading: each string's number
	recent *RecentStrings    // while loading: ids of the strings met last, by their bytes

	mu   sync.Mutex
	kvs  *Paged[storedKV]
	last []lastKV // by string number: the key's key-value read or added last
}

// storedKV is a key-value as a store's table holds it: without pointers (the key is its string's number),
// so that the table can be paged.
type storedKV struct {
	key                         uint32
	value                       Value
	create, mod, version, lease int64
}

// lastKV is a key's key-value read or added last, and its number in the table plus one (0: none yet).
type lastKV struct {
	ref uint32
	kv  storedKV
}

func newResident(kvs *Paged[storedKV]) *resident {
	return &resident{ids: map[string]uint64{}, recent: NewRecentStrings(16), kvs: kvs}
}

// intern returns the number of string s, adding it the first time.
func (r *resident) intern(s string) uint64 {
	if r.recent != nil {
		if id, ok := r.recent.Get(s); ok {
			return id
		}
	}
	if id, ok := r.ids[s]; ok {
		r.remember(s, id)
		return id
	}
	id := uint64(len(r.strs))
	r.ids[s] = id
	r.remember(s, id)
	r.strs = append(r.strs, s)
	r.last = append(r.last, lastKV{})
	return id
}

func (r *resident) remember(s string, id uint64) {
	if r.recent != nil {
		r.recent.Put(s, id)
	}
}

// ref returns the number of kv's key and the number of kv in the table: the key's last key-value when kv
// is the same, else a new one. Pages of a list and the previous key-values of writes share one copy of
// each version of a key. Only the store's builder calls it, before there are readers.
func (r *resident) ref(kv *KV) (key, ref uint32) {
	key = uint32(r.intern(kv.Key))
	s := storedKV{key: key, value: kv.Value, create: kv.CreateRevision, mod: kv.ModRevision, version: kv.Version, lease: kv.Lease}
	l := &r.last[key]
	if l.ref != 0 && l.kv == s {
		return key, l.ref - 1
	}
	ref = uint32(r.kvs.Len())
	r.kvs.Add(s)
	*l = lastKV{ref: ref + 1, kv: s}
	return key, ref
}

// kv returns key-value ref of the table, of key key: from the key's last one when it is that, else read
// from the table (and then the key's last one).
func (r *resident) kv(key, ref uint32) KV { return r.toKV(key, ref, r.stored(key, ref)) }

// toKV returns s, key-value ref of key key, as a KV.
func (r *resident) toKV(key, ref uint32, s storedKV) KV {
	if s.key != key {
		// The store wrote the record itself: a key-value of another key is a bug, not bad input.
		panic(fmt.Sprintf("history: key-value %d of a store is of key %d, not %d", ref, s.key, key))
	}
	return KV{Key: r.strs[key], Value: s.value, CreateRevision: s.create, ModRevision: s.mod, Version: s.version, Lease: s.lease}
}

// appendKVs appends the key-values of keys and refs (as kv) to dst.
func (r *resident) appendKVs(dst []KV, keys, refs []uint32) []KV {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, ref := range refs {
		dst = append(dst, r.toKV(keys[i], ref, r.lastOf(keys[i], ref)))
	}
	return dst
}

// lastOf makes key-value ref its key's last one and returns it; r.mu is held.
func (r *resident) lastOf(key, ref uint32) storedKV {
	l := &r.last[key]
	if l.ref != ref+1 {
		l.kv, l.ref = r.kvs.Get(int(ref)), ref+1
	}
	return l.kv
}

func (r *resident) stored(key, ref uint32) storedKV {
	r.mu.Lock()
	defer r.mu.Unlock() // a page that cannot be read back panics: the next reader must not wait forever
	return r.lastOf(key, ref)
}

// storeRef names a key-value of a store's table: its key's number and its own.
type storeRef struct{ key, ref uint32 }

// residentRef decodes a key-value of a store's record: its key's number and its number in the table,
// each written as the difference from the key-value before in the record. The key-values of a list
// page are mostly of keys named one after the other, and written one after the other: a byte each.
func (d *decoder) residentRef() (key, ref uint32) {
	k, v := int64(d.prevRef.key)+d.varint(), int64(d.prevRef.ref)+d.varint()
	if k < 0 || k >= int64(len(d.res.strs)) || v < 0 || v >= int64(d.res.kvs.Len()) {
		d.fail("unknown key-value")
		return 0, 0
	}
	d.prevRef = storeRef{uint32(k), uint32(v)}
	return uint32(k), uint32(v)
}

// residentKV decodes a key-value of a store's record into kv.
func (d *decoder) residentKV(kv *KV) {
	key, ref := d.residentRef()
	if d.err != nil {
		return
	}
	*kv = d.res.kv(key, ref)
}

// residentPacked decodes the n key-values of a store's range answer as references into its table.
func (d *decoder) residentPacked(n int) *packedKVs {
	p := d.packs.one()
	p.res, p.keys, p.refs = d.res, d.refs.slice(n), d.refs.slice(n)
	for i := range p.refs {
		if p.keys[i], p.refs[i] = d.residentRef(); d.err != nil {
			return p
		}
	}
	return p
}

// appendResidentKV appends kv to a store's record as its key's number and its number in the table (see
// residentRef).
func (e *encoder) appendResidentKV(b []byte, kv *KV) []byte {
	key, ref := e.res.ref(kv)
	b = binary.AppendVarint(b, int64(key)-int64(e.prevRef.key))
	b = binary.AppendVarint(b, int64(ref)-int64(e.prevRef.ref))
	e.prevRef = storeRef{key, ref}
	return b
}

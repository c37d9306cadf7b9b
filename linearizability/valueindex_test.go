package linearizability

import (
	"testing"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// valueIndexOf returns the index of ids, sized by a first pass over them, as indexValues builds it.
func valueIndexOf(ids ...uint64) *valueIndex {
	e := newValueExtents(10)
	for _, id := range ids {
		e.note(id)
	}
	return (&checker{}).newValueIndex(e, 4)
}

func TestValueIndexFindsEveryWriteOnce(t *testing.T) {
	id := func(client, seq uint64) uint64 { return (client+1)<<32 | seq }
	writes := []struct {
		id  uint64
		op  int32
		key int32
	}{
		{id(0, 1), 0, 1},
		{id(3, 2), 1, 2},
		{id(0, 2), 2, 1},
		{12345, 3, 3},                    // not of the run's scheme: a client 0 id
		{id(maxIndexedClients, 1), 4, 4}, // too many clients to index densely
		{id(1, 1<<31), 5, 5},             // a stray sequence number far past the history's length
	}
	var ids []uint64
	for _, w := range writes {
		ids = append(ids, w.id)
	}
	x := valueIndexOf(ids...)
	for _, w := range writes {
		x.add(w.id, w.op, 0, w.key)
	}
	for _, w := range writes {
		ref, ok := x.get(w.id)
		if !ok || ref.op != w.op || ref.key != w.key || ref.dup {
			t.Errorf("get(%#x) = %+v, %v; want op %d key %d, not a duplicate", w.id, ref, ok, w.op, w.key)
		}
	}
	for _, missing := range []uint64{id(0, 3), id(3, 1), id(7, 1), 54321, id(1, 1<<31+1)} {
		if ref, ok := x.get(missing); ok {
			t.Errorf("get(%#x) = %+v for an id no request wrote", missing, ref)
		}
	}
	// Ids of clients 0 and 3 have high words 1 and 4, and sequence numbers up to 2: 5 parts, the
	// stray ids in the map.
	if n := len(x.from) - 1; n != 5 {
		t.Errorf("the dense index has %d clients, want 5: the stray ids must not grow it", n)
	}
	if n := x.dense.Len(); n != 6 {
		t.Errorf("the dense index holds %d ids, want 6 (clients 0 and 3, three sequence numbers each)", n)
	}
	if len(x.other) != 3 {
		t.Errorf("%d ids in the map, want the 3 outside the scheme", len(x.other))
	}
}

func TestValueIndexMarksDuplicates(t *testing.T) {
	dense, foreign := uint64(1)<<32|5, uint64(77)
	x := valueIndexOf(dense, foreign, dense+1)
	for _, id := range []uint64{dense, foreign} {
		x.add(id, 1, 0, 1)
		x.add(id, 1, 1, 1) // the other branch of the same transaction: the same write
		if ref, _ := x.get(id); ref.dup {
			t.Fatalf("id %#x is a duplicate after one request's two branches wrote it", id)
		}
		x.add(id, 2, 0, 1)
		if ref, _ := x.get(id); !ref.dup || ref.op != 1 {
			t.Fatalf("get(%#x) = %+v after a second request wrote it; want op 1 marked duplicate", id, ref)
		}
	}
	x.add(dense+1, 3, 0, 1)
	x.add(dense+1, 3, 0, 2)
	if ref, _ := x.get(dense + 1); !ref.dup {
		t.Fatalf("an id written under two keys is not a duplicate: %+v", ref)
	}
}

// TestValueIndexRemembersCleanSightings: a value found right is remembered under its key and revision
// alone, two per set, the one met longest ago given up first.
func TestValueIndexRemembersCleanSightings(t *testing.T) {
	x := valueIndexOf()
	kv := history.KV{Key: "/a", Value: history.Value{ID: 1<<32 | 1}, ModRevision: 5}
	if x.isClean(&kv) {
		t.Fatal("a value never marked is clean")
	}
	x.markClean(&kv)
	for _, other := range []history.KV{
		{Key: "/b", Value: kv.Value, ModRevision: 5}, // under another key: a violation, never clean
		{Key: "/a", Value: kv.Value, ModRevision: 6}, // at another revision
		{Key: "/a", Value: history.Value{ID: 1<<32 | 2}, ModRevision: 5},
	} {
		if x.isClean(&other) {
			t.Errorf("%+v is clean after only %+v was marked", other, kv)
		}
	}
	if !x.isClean(&kv) {
		t.Fatal("a value marked is not clean")
	}
	// Values of one set: the third one marked gives up the one met longest ago.
	var same []history.KV
	for id := uint64(1); len(same) < 3; id++ {
		v := history.KV{Key: "/a", Value: history.Value{ID: id}, ModRevision: 5}
		if x.cleanSet(id) == x.cleanSet(kv.Value.ID) && id != kv.Value.ID {
			same = append(same, v)
		}
	}
	x.markClean(&same[0])
	if !x.isClean(&kv) { // met now: same[0] is the one met longest ago
		t.Fatal("two values of a set do not both stay clean")
	}
	x.markClean(&same[1])
	if x.isClean(&same[0]) || !x.isClean(&kv) || !x.isClean(&same[1]) {
		t.Error("the third value of a set did not take the place of the one met longest ago")
	}
}

func TestWellFormedNamesTheFirstBadKey(t *testing.T) {
	kvs := func(keys ...string) *history.RangeResponse {
		r := &history.RangeResponse{}
		for _, k := range keys {
			r.KVs = append(r.KVs, history.KV{Key: k})
		}
		return r
	}
	prefix := &history.Range{Key: "/b", End: "/c"}
	for _, tc := range []struct {
		name string
		rg   *history.Range
		resp *history.RangeResponse
		bad  string // "" when well formed
	}{
		{"empty", prefix, kvs(), ""},
		{"in order", prefix, kvs("/b", "/b1", "/b2"), ""},
		{"to the end", &history.Range{Key: "/b", End: "\x00"}, kvs("/b", "/z"), ""},
		{"one key", &history.Range{Key: "/b"}, kvs("/b"), ""},
		{"another key", &history.Range{Key: "/b"}, kvs("/c"), "/c"},
		{"before the range", prefix, kvs("/a", "/b1"), "/a"},
		{"after the range", prefix, kvs("/b1", "/c"), "/c"},
		{"at the end bound", prefix, kvs("/b1", "/b2", "/c", "/c1"), "/c"},
		{"out of order", prefix, kvs("/b1", "/b3", "/b2"), "/b2"},
		{"repeated", prefix, kvs("/b1", "/b1"), "/b1"},
		{"disorder before an outsider", prefix, kvs("/b2", "/b1", "/d"), "/b1"},
		{"outsider before disorder", prefix, kvs("/a", "/b2", "/b1"), "/a"},
	} {
		key, ok := wellFormed(tc.resp, tc.rg)
		if ok != (tc.bad == "") || key != tc.bad {
			t.Errorf("%s: wellFormed = %q, %v; want %q, %v", tc.name, key, ok, tc.bad, tc.bad == "")
		}
	}
}

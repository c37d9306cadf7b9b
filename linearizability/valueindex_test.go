package linearizability

import (
	"testing"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

func TestValueIndexFindsEveryWriteOnce(t *testing.T) {
	x := newValueIndex(10)
	id := func(client, seq uint64) uint64 { return (client+1)<<32 | seq }
	writes := []struct {
		id  uint64
		op  int32
		key string
	}{
		{id(0, 1), 0, "/a"},
		{id(3, 2), 1, "/b"},
		{id(0, 2), 2, "/a"},
		{12345, 3, "/c"},                    // not of the run's scheme: a client 0 id
		{id(maxIndexedClients, 1), 4, "/d"}, // too many clients to index densely
		{id(1, 1<<31), 5, "/e"},             // a stray sequence number far past the history's length
	}
	for _, w := range writes {
		x.add(w.id, w.op, 0, w.key)
	}
	for _, w := range writes {
		ref, ok := x.get(w.id)
		if !ok || ref.op != w.op || ref.key != w.key || ref.dup {
			t.Errorf("get(%#x) = %+v, %v; want op %d key %q, not a duplicate", w.id, ref, ok, w.op, w.key)
		}
	}
	for _, missing := range []uint64{id(0, 3), id(3, 1), id(7, 1), 54321, id(1, 1<<31+1)} {
		if ref, ok := x.get(missing); ok {
			t.Errorf("get(%#x) = %+v for an id no request wrote", missing, ref)
		}
	}
	if n := len(x.clients); n != 5 { // ids of clients 0 and 3 have high words 1 and 4
		t.Errorf("the dense index has %d clients, want 5: the stray ids must not grow it", n)
	}
	for c, refs := range x.clients {
		if uint64(len(refs)) > x.limit {
			t.Errorf("client %d's slice has %d entries, over the limit %d", c, len(refs), x.limit)
		}
	}
}

func TestValueIndexMarksDuplicates(t *testing.T) {
	x := newValueIndex(10)
	dense, foreign := uint64(1)<<32|5, uint64(77)
	for _, id := range []uint64{dense, foreign} {
		x.add(id, 1, 0, "/k")
		x.add(id, 1, 1, "/k") // the other branch of the same transaction: the same write
		if ref, _ := x.get(id); ref.dup {
			t.Fatalf("id %#x is a duplicate after one request's two branches wrote it", id)
		}
		x.add(id, 2, 0, "/k")
		if ref, _ := x.get(id); !ref.dup || ref.op != 1 {
			t.Fatalf("get(%#x) = %+v after a second request wrote it; want op 1 marked duplicate", id, ref)
		}
	}
	x.add(dense+1, 3, 0, "/k")
	x.add(dense+1, 3, 0, "/other")
	if ref, _ := x.get(dense + 1); !ref.dup {
		t.Fatalf("an id written under two keys is not a duplicate: %+v", ref)
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

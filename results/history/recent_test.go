package history

import (
	"strings"
	"testing"
)

func TestRecentStringsKnowsBytesNotContents(t *testing.T) {
	r := NewRecentStrings(4)
	s := strings.Repeat("/registry/pods/default/p", 2)
	if _, ok := r.Get(s); ok {
		t.Fatalf("an empty cache found %q", s)
	}
	r.Put(s, 7)
	if v, ok := r.Get(s); !ok || v != 7 {
		t.Fatalf("Get(s) = %d, %v after Put(s, 7); want 7, true", v, ok)
	}
	if v, ok := r.Get(s[:len(s)-1]); ok {
		t.Fatalf("a prefix of s (same address, shorter) was found as %d", v)
	}
	copied := strings.Clone(s)
	if v, ok := r.Get(copied); ok {
		t.Fatalf("a copy of s with its bytes elsewhere was found as %d; the caller must look copies up", v)
	}
	r.Put("", 9)
	if v, ok := r.Get(""); ok {
		t.Fatalf("the empty string was found as %d; it has no bytes to tell it by", v)
	}
}

func TestRecentStringsForgetsOnCollision(t *testing.T) {
	r := NewRecentStrings(0) // one slot: every string collides
	a, b := strings.Clone("a-key"), strings.Clone("b-key")
	r.Put(a, 1)
	r.Put(b, 2)
	if v, ok := r.Get(a); ok {
		t.Fatalf("a was found as %d after b took its slot", v)
	}
	if v, ok := r.Get(b); !ok || v != 2 {
		t.Fatalf("Get(b) = %d, %v; want 2, true", v, ok)
	}
}

func TestResidentInternIsStableWithTheCache(t *testing.T) {
	res := &resident{ids: map[string]uint64{}, recent: NewRecentStrings(1)}
	keys := []string{"/a", "/b", "/c", "/a", strings.Clone("/b"), "/c", "/d"}
	want := map[string]uint64{}
	for _, k := range keys {
		id := res.intern(k)
		if w, ok := want[k]; ok && w != id {
			t.Fatalf("intern(%q) = %d, earlier %d", k, id, w)
		}
		want[k] = id
		if res.strs[id] != k {
			t.Fatalf("intern(%q) = %d, which names %q", k, id, res.strs[id])
		}
	}
	if len(res.strs) != 4 {
		t.Fatalf("interned %d strings, want 4: %q", len(res.strs), res.strs)
	}
}

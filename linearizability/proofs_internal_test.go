package linearizability

import (
	"reflect"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// TestFingerprintCoversInputs: changing any field of anything porcupine's per-key model reads (a key
// operation, its compares and steps with the key-values they carry, a starting state, what the check knows
// of a lease's expiry) changes a segment's fingerprint, so that a proof is never taken for a segment it
// was not made for. Fields are found by reflection: a field added to the model's types and not to the
// fingerprint fails this test.
func TestFingerprintCoversInputs(t *testing.T) {
	newSeg := func() (*checker, segment) {
		c := &checker{ks: keyspace{keys: []string{"k"}}, leases: map[int64]*leaseInfo{5: {minExpiry: 100}}, candRevok: map[int64]int64{}}
		kv := &history.KV{Key: "k", Value: history.Value{ID: 1, Size: 2}, CreateRevision: 3, ModRevision: 4, Version: 5, Lease: 5}
		prev := *kv
		ko := &keyOp{op: 1, client: 2, call: 3, key: "k", taken: 1, rev: 4, hdr: 5, ret: 6, answered: true, observes: true,
			cmps: []history.Compare{{Key: "k", Target: "value", Result: "=", Operand: 1, Value: history.Value{ID: 1, Size: 1}}},
			branches: [2][]keyStep{
				{{kind: history.KindRange, known: true, result: kv, count: 1}},
				{{kind: history.KindPut, value: 7, lease: 5, checkPrev: true, prev: &prev, deleted: 1}},
			}}
		return c, segment{rank: 0, ops: []*keyOp{ko}, init: []kstate{{exists: true, unk: 1, r: rec{value: 1, create: 2, mod: 3, version: 4, lease: 5}, last: 3, floor: 4}}}
	}
	c, sg := newSeg()
	base := c.fingerprint(sg)
	if c2, sg2 := newSeg(); c2.fingerprint(sg2) != base {
		t.Fatal("the same segment twice: two fingerprints")
	}
	// Every field of every struct reachable from the segment, by path.
	var mutate func(path string, v reflect.Value, change func(name string, set func()))
	mutate = func(path string, v reflect.Value, change func(string, func())) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				mutate(path, v.Elem(), change)
			}
		case reflect.Slice:
			for i := range v.Len() {
				mutate(path+"[]", v.Index(i), change)
			}
		case reflect.Array:
			for i := range v.Len() {
				mutate(path+"[]", v.Index(i), change)
			}
		case reflect.Struct:
			for i := range v.NumField() {
				mutate(path+"."+v.Type().Field(i).Name, v.Field(i), change)
			}
		case reflect.Bool:
			change(path, func() { setUnexported(v, reflect.ValueOf(!v.Bool())) })
		case reflect.Int8, reflect.Int32, reflect.Int64, reflect.Int:
			change(path, func() { setUnexported(v, reflect.ValueOf(v.Int()+1000).Convert(v.Type())) })
		case reflect.Uint8, reflect.Uint64:
			change(path, func() { setUnexported(v, reflect.ValueOf(v.Uint()+100).Convert(v.Type())) })
		case reflect.String:
			change(path, func() { setUnexported(v, reflect.ValueOf(v.String()+"x").Convert(v.Type())) })
		default:
			t.Errorf("%s: a field of kind %s the test does not change", path, v.Kind())
		}
	}
	// Enumerate the fields of a fresh segment, then change the i-th on another.
	var names []string
	_, probe := newSeg()
	mutate("segment", reflect.ValueOf(&probe).Elem(), func(name string, _ func()) { names = append(names, name) })
	for i, name := range names {
		if name == "segment.rank" {
			continue // the key is fingerprinted by name: the rank is where the check keeps it
		}
		c2, sg2 := newSeg()
		j := 0
		mutate("segment", reflect.ValueOf(&sg2).Elem(), func(_ string, set func()) {
			if j == i {
				set()
			}
			j++
		})
		if c2.fingerprint(sg2) == base {
			t.Errorf("%s changed: the fingerprint did not", name)
		}
	}
	if len(names) < 40 {
		t.Errorf("only %d fields found: %v", len(names), names)
	}
	// What the check knows of the lease the segment names.
	for name, change := range map[string]func(c *checker){
		"lease expiry":   func(c *checker) { c.leases[5].minExpiry++ },
		"lease unknown":  func(c *checker) { delete(c.leases, 5) },
		"failed revoke":  func(c *checker) { c.candRevok[5] = 9 },
		"the key's name": func(c *checker) { c.ks.keys[0] = "other" },
	} {
		c2, sg2 := newSeg()
		change(c2)
		if c2.fingerprint(sg2) == base {
			t.Errorf("%s changed: the fingerprint did not", name)
		}
	}
	// A lease nobody in the segment names does not matter.
	c2, sg2 := newSeg()
	c2.leases[6] = &leaseInfo{minExpiry: 1}
	if c2.fingerprint(sg2) != base {
		t.Error("a lease the segment does not name changed its fingerprint")
	}
}

// setUnexported sets a field reflect reached through unexported names.
func setUnexported(v, to reflect.Value) {
	reflect.NewAt(v.Type(), v.Addr().UnsafePointer()).Elem().Set(to)
}

package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

// TestOperationStore is the store's property test: random operations of every kind, written to a file,
// loaded into a store and decoded one at a time in any order, from several goroutines at once, come back
// exactly as they were, from a store that keeps its records on disk and from one that holds them in
// memory; so do the operations of a legacy JSON-lines history.
func TestOperationStore(t *testing.T) {
	for seed := range uint64(20) {
		dir, ops, _ := writeGenerated(t, seed) // for odd seeds the file starts afresh: the store must not
		s := loadStore(t, dir)
		if s.spill == nil || s.chunks != nil {
			t.Fatalf("a store loaded from a run directory holds its records in memory")
		}
		requireStore(t, s, ops)

		// Chunks of 1 KB: dozens of them, records packed up to their ends; in memory, and on disk, read
		// through windows of 300 bytes, a few records each (a larger record is read alone), the
		// key-values and the places of records paged.
		for _, spill := range []bool{false, true} {
			// Pages of one key-value or eight record places, eight of each in memory: on disk, every
			// key-value read that is not its key's last one reads a page back, from four readers at once.
			b, err := newStoreBuilder(t.TempDir(), spill, storeSizes{kvBudget: 1, indexBudget: 1, pageBytes: 64})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.s.Close() })
			b.chunk, b.s.window = 1<<10, 300
			for _, op := range ops {
				b.add(op)
			}
			if err := b.flush(); err != nil {
				t.Fatal(err)
			}
			s = b.done()
			if chunks := max(len(s.chunks), len(s.starts)-1); chunks < 30 {
				t.Fatalf("%d chunks of 1 KB for %d operations", chunks, len(ops))
			}
			requireStore(t, s, ops)
		}

		if seed%4 == 0 {
			var lines []byte
			for _, op := range ops {
				line, _ := json.Marshal(op)
				lines = append(append(lines, line...), '\n')
			}
			legacy := t.TempDir()
			if err := os.WriteFile(filepath.Join(legacy, "history.jsonl"), lines, 0o644); err != nil {
				t.Fatal(err)
			}
			requireStore(t, loadStore(t, legacy), ops)
		}
	}
}

// loadStore loads the operation store of run directory dir, closed when the test ends, and fails unless
// the directory holds exactly what it held before: the file the store keeps its records in has no name.
func loadStore(t *testing.T, dir string) *OperationStore {
	t.Helper()
	before, _ := os.ReadDir(dir)
	s, err := LoadOperationStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Fatalf("loading the store left %d entries in the run directory, want %d", len(after), len(before))
	}
	return s
}

// TestOperationStoreSpillElsewhere: a run directory the store cannot write to (here: one that does not
// exist) spills to the temporary directory, and leaves no name there either.
func TestOperationStoreSpillElsewhere(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	f, err := SpillFile(filepath.Join(tmp, "missing"), "operations")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("record")); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("the spill file left %d entries in the temporary directory", len(left))
	}
}

// TestOperationStoreReadError: a record that cannot be read back (the spill file closed under the store)
// is never taken for an operation: At and Scan panic with a ReadBackError, which the checker recovers.
func TestOperationStoreReadError(t *testing.T) {
	dir, ops, _ := writeGenerated(t, 3)
	s, err := LoadOperationStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	requireReadBack := func(what string, read func()) {
		t.Helper()
		defer func() {
			r := recover()
			if e, ok := r.(*ReadBackError); !ok || !errors.Is(e, os.ErrClosed) {
				t.Errorf("%s of a record that cannot be read: recovered %v, want a ReadBackError of the closed file", what, r)
			}
		}()
		read()
	}
	requireReadBack("At", func() { s.At(len(ops) - 1) })
	requireReadBack("Scan", func() { s.Scan(func(int, *Operation) {}) })
}

// requireStore fails unless store s holds ops: each decoded last to first, all of them scanned, then all
// of them by four goroutines at once, each in its own order.
func requireStore(t *testing.T, s *OperationStore, ops []*Operation) {
	t.Helper()
	if s.Len() != len(ops) {
		t.Fatalf("the store holds %d operations, want %d", s.Len(), len(ops))
	}
	same := func(i int) bool {
		got := s.At(i)
		if got.Response != nil {
			unpack(got.Response)
		}
		return reflect.DeepEqual(got, ops[i])
	}
	for i := len(ops) - 1; i >= 0; i-- {
		if !same(i) {
			got := s.At(i)
			t.Fatalf("operation %d differs\n got %s\nwant %s", i, dump(got), dump(ops[i]))
		}
	}
	n := 0
	s.Scan(func(i int, got *Operation) {
		if got.Response != nil {
			unpack(got.Response)
		}
		if i != n || !reflect.DeepEqual(got, ops[i]) {
			t.Fatalf("scanned operation %d (the %dth) differs\n got %s\nwant %s", i, n, dump(got), dump(ops[i]))
		}
		n++
	})
	if n != len(ops) {
		t.Fatalf("scanned %d operations, want %d", n, len(ops))
	}
	var wg sync.WaitGroup
	bad := make([]int, 4)
	for w := range 4 {
		wg.Go(func() {
			bad[w] = -1
			for j := range ops {
				if i := (j*(2*w+1) + w) % len(ops); !same(i) {
					bad[w] = i
					return
				}
			}
		})
	}
	wg.Wait()
	for w, i := range bad {
		if i >= 0 {
			t.Errorf("reader %d: operation %d differs", w, i)
		}
	}
}

// TestOperationStoreShares: list pages that repeat the same key-values and writes that return the same
// previous key-value share one copy of each in the store, and the record of a page is a few bytes per
// key-value.
func TestOperationStoreShares(t *testing.T) {
	kvs := make([]KV, 500)
	for i := range kvs {
		kvs[i] = KV{Key: "/registry/pods/ns/pod-" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Value: Value{ID: uint64(i) << 20, Size: 4096},
			CreateRevision: int64(i + 1), ModRevision: int64(i + 1), Version: 1}
	}
	var ops []Operation
	for p := range 100 {
		ops = append(ops, Operation{Op: "list/pods", Call: int64(p), Return: int64(p) + 1, Request: Request{Kind: KindRange, Range: &Range{Key: "/registry/pods/", End: "/registry/pods0"}},
			Response: &Response{Revision: 1000, Range: &RangeResponse{KVs: kvs, Count: int64(len(kvs))}}})
	}
	s := NewOperationStore(ops)
	if n := s.res.kvs.Len(); n != len(kvs) {
		t.Errorf("the store holds %d key-values for 100 pages of the same %d", n, len(kvs))
	}
	bytes := 0
	for _, c := range s.chunks {
		bytes += len(c)
	}
	if per := float64(bytes) / float64(len(ops)*len(kvs)); per > 3 {
		t.Errorf("%.1f bytes per key-value of a page, want at most 3", per)
	}
	for i := range ops {
		got := s.At(i)
		if got.Response.Range.Len() != len(kvs) || !reflect.DeepEqual(got.Response.Range.KeyValues(), kvs) {
			t.Fatalf("page %d differs", i)
		}
	}
}

// TestOperationStoreLargeRecord: an operation whose record is larger than a chunk of the store (a list of
// 600,000 keys, two bytes each at least) gets a chunk of its own, and the operations around it are unaffected.
func TestOperationStoreLargeRecord(t *testing.T) {
	kvs := make([]KV, 600_000)
	for i := range kvs {
		kvs[i] = KV{Key: fmt.Sprintf("/registry/pods/ns/pod-%06d", i), Value: Value{ID: uint64(i) << 20, Size: 4096}, CreateRevision: int64(i + 1), ModRevision: int64(i + 1), Version: 1}
	}
	small := Operation{Op: "get/pods", Call: 1, Return: 2, Request: Request{Kind: KindRange, Range: &Range{Key: kvs[7].Key}},
		Response: &Response{Revision: 600_001, Range: &RangeResponse{KVs: kvs[7:8], Count: 1}}}
	large := Operation{Op: "list/pods", Call: 3, Return: 4, Request: Request{Kind: KindRange, Range: &Range{Key: "/registry/pods/", End: "/registry/pods0"}},
		Response: &Response{Revision: 600_001, Range: &RangeResponse{KVs: kvs, Count: int64(len(kvs))}}}
	ops := []Operation{small, large, small}
	s := NewOperationStore(ops)
	if len(s.chunks) != 3 || len(s.chunks[1]) <= storeChunk {
		t.Fatalf("chunks of %d records: want the large one (more than %d bytes) alone in the second", len(s.chunks), storeChunk)
	}
	requireStore(t, s, []*Operation{&ops[0], &ops[1], &ops[2]})

	// On disk: the large record's chunk is written out whole between the small ones'.
	dir := t.TempDir()
	w, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ops {
		w.Operation(&ops[i])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s = loadStore(t, dir)
	if len(s.starts) != 4 || s.starts[2]-s.starts[1] <= storeChunk {
		t.Fatalf("chunk starts %v: want the large one (more than %d bytes) alone in the second", s.starts, storeChunk)
	}
	requireStore(t, s, []*Operation{&ops[0], &ops[1], &ops[2]})
}

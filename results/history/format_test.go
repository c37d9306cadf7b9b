package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

// gen builds random records covering every field and every record kind, for round-trip tests. Keys
// come from a small set and key-values are often repeated, so that the format's interning and its
// per-key state are exercised both ways.
type gen struct {
	r   *rand.Rand
	kvs map[string]KV
}

func newGen(seed uint64) *gen {
	return &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), kvs: map[string]KV{}}
}

func (g *gen) str() string {
	alphabet := []string{"/registry/pods/default/a", "k", "", "ключ", "a\"b\\c", "<&>", "\x00\x01tab\t", "/bench/00ff"}
	return alphabet[g.r.IntN(len(alphabet))]
}

func (g *gen) i64() int64 {
	switch g.r.IntN(6) {
	case 0, 1:
		return 0
	case 2:
		return -g.r.Int64N(1 << 40)
	case 3:
		return g.r.Int64()
	}
	return g.r.Int64N(1 << 40)
}

func (g *gen) flag() bool { return g.r.IntN(2) == 0 }

func (g *gen) value() Value {
	if g.r.IntN(4) == 0 {
		return Value{}
	}
	return Value{ID: g.r.Uint64(), Size: g.r.IntN(10000)}
}

func (g *gen) kv() KV {
	key := g.str()
	if last, ok := g.kvs[key]; ok && g.r.IntN(3) > 0 {
		switch g.r.IntN(3) {
		case 0: // the same key-value again, as in consecutive list pages
		case 1: // the next version of it
			last.Value, last.ModRevision, last.Version = g.value(), last.ModRevision+g.r.Int64N(100), last.Version+1
		case 2:
			last.Lease = g.i64()
		}
		g.kvs[key] = last
		return last
	}
	kv := KV{Key: key, Value: g.value(), CreateRevision: g.i64(), ModRevision: g.i64(), Version: g.i64(), Lease: g.i64()}
	g.kvs[key] = kv
	return kv
}

func (g *gen) kvList() []KV {
	n := g.r.IntN(4)
	if g.r.IntN(8) == 0 {
		n = packMin + g.r.IntN(20) // a list page: loaded histories hold these packed
	}
	if n == 0 {
		return nil
	}
	out := make([]KV, n)
	for i := range out {
		out[i] = g.kv()
	}
	return out
}

func (g *gen) request(depth int) Request {
	kinds := []Kind{KindRange, KindPut, KindDelete, KindTxn, KindLeaseGrant, KindLeaseRevoke, KindLeaseKeepAlive, KindCompact, "status"}
	if depth > 0 {
		kinds = kinds[:3]
	}
	var r Request
	switch k := kinds[g.r.IntN(len(kinds))]; k {
	case KindRange:
		r = Request{Kind: k, Range: &Range{Key: g.str(), End: g.str(), Limit: g.i64(), Revision: g.i64(),
			Serializable: g.flag(), KeysOnly: g.flag(), CountOnly: g.flag()}}
	case KindPut:
		r = Request{Kind: k, Put: &Put{Key: g.str(), Value: g.value(), Lease: g.i64(), PrevKV: g.flag()}}
	case KindDelete:
		r = Request{Kind: k, Delete: &Delete{Key: g.str(), End: g.str(), PrevKV: g.flag()}}
	case KindTxn:
		t := &Txn{}
		targets := []CompareTarget{CompareModRevision, CompareVersion, CompareCreate, CompareValue, "lease"}
		results := []CompareResult{Equal, NotEqual, Less, Greater, "~"}
		for range g.r.IntN(3) {
			t.Compares = append(t.Compares, Compare{Key: g.str(), Target: targets[g.r.IntN(len(targets))],
				Result: results[g.r.IntN(len(results))], Operand: g.i64(), Value: g.value()})
		}
		for range g.r.IntN(3) {
			t.Then = append(t.Then, g.request(depth+1))
		}
		for range g.r.IntN(3) {
			t.Else = append(t.Else, g.request(depth+1))
		}
		r = Request{Kind: k, Txn: t}
	case KindCompact:
		r = Request{Kind: k, Compact: &Compact{Revision: g.i64(), Physical: g.flag()}}
	case "status":
		r = Request{Kind: k}
	default:
		r = Request{Kind: k, Lease: &Lease{ID: g.i64(), TTL: g.i64()}}
	}
	if g.r.IntN(20) == 0 {
		// A part its kind does not have: only a hand-made history does this, and it must survive too.
		r.Compact = &Compact{Revision: g.i64()}
	}
	return r
}

func (g *gen) response(depth int) *Response {
	r := &Response{Revision: g.i64()}
	switch g.r.IntN(6) {
	case 0:
		r.Range = &RangeResponse{KVs: g.kvList(), Count: g.i64(), More: g.flag()}
	case 1:
		r.Put = &PutResponse{}
		if g.flag() {
			kv := g.kv()
			r.Put.PrevKV = &kv
		}
	case 2:
		r.Delete = &DeleteResponse{Deleted: g.i64(), PrevKVs: g.kvList()}
	case 3:
		r.Txn = &TxnResponse{Succeeded: g.flag()}
		if depth == 0 {
			for range g.r.IntN(3) {
				r.Txn.Results = append(r.Txn.Results, *g.response(depth + 1))
			}
		}
	case 4:
		r.Lease = &LeaseResponse{ID: g.i64(), TTL: g.i64()}
	case 5: // status, progress: a revision only
	}
	return r
}

func (g *gen) operation() *Operation {
	op := &Operation{Client: g.r.IntN(100) - 1, Op: g.str(), Call: g.i64(), Return: g.i64(), Request: g.request(0)}
	switch g.r.IntN(3) {
	case 0:
		op.Error = g.str()
	case 1:
		op.Response = g.response(0)
	case 2: // both: an answer and an error are not exclusive in the format
		op.Error, op.Response = g.str(), g.response(0)
	}
	op.AttemptsRecorded = g.flag()
	for range g.r.IntN(4) {
		codes := []string{"", "DeadlineExceeded", "Unavailable", g.str()}
		op.Attempts = append(op.Attempts, Attempt{Start: op.Call + g.i64(), End: op.Call + g.i64(), Code: codes[g.r.IntN(len(codes))],
			Error: g.str(), Peer: g.str(), NotSent: g.flag(), Transparent: g.flag()})
	}
	return op
}

func (g *gen) watchResponse() *WatchResponse {
	r := &WatchResponse{Watcher: g.r.IntN(10), Client: g.r.IntN(3), Time: g.i64(), Revision: g.i64(),
		Created: g.flag(), Progress: g.flag(), CompactRevision: g.i64(), Canceled: g.flag(), Error: g.str()}
	if g.flag() {
		r.Request = &WatchRequest{Key: g.str(), End: g.str(), Revision: g.i64(), PrevKV: g.flag(), ProgressNotify: g.flag(), RequireLeader: g.flag()}
	}
	for range g.r.IntN(4) {
		types := []EventType{EventPut, EventDelete, "expire"}
		e := Event{Type: types[g.r.IntN(len(types))], KV: g.kv(), IsCreate: g.flag()}
		if g.flag() {
			kv := g.kv()
			e.PrevKV = &kv
		}
		r.Events = append(r.Events, e)
	}
	return r
}

// writeGenerated writes 2000 random operations and watch records from the generator of seed to a run
// directory, and returns it with the records. For odd seeds the writer starts afresh every seed strings:
// what the writer of a long run does every maxStrings.
func writeGenerated(t *testing.T, seed uint64) (string, []*Operation, []*WatchResponse) {
	t.Helper()
	g := newGen(seed)
	dir := t.TempDir()
	w, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	if seed%2 == 1 {
		w.ops.enc.limit, w.watches.enc.limit = int(seed), int(seed)
	}
	var ops []*Operation
	var watches []*WatchResponse
	for range 2000 {
		op, wr := g.operation(), g.watchResponse()
		ops, watches = append(ops, op), append(watches, wr)
		w.Operation(op)
		w.Watch(wr)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, ops, watches
}

// TestFormatRoundTrip is the format's property test: random records of every kind, from seeded
// generators, written by a Writer and read back, must come back exactly as they were.
func TestFormatRoundTrip(t *testing.T) {
	for seed := range uint64(20) {
		dir, ops, watches := writeGenerated(t, seed)
		i := 0
		err := ReadOperations(filepath.Join(dir, HistoryFile), func(got *Operation) error {
			if !reflect.DeepEqual(got, ops[i]) {
				t.Fatalf("seed %d: operation %d differs\n got %+v\nwant %+v", seed, i, dump(got), dump(ops[i]))
			}
			i++
			return nil
		})
		if err != nil || i != len(ops) {
			t.Fatalf("seed %d: read %d of %d operations: %v", seed, i, len(ops), err)
		}
		i = 0
		err = ReadWatches(filepath.Join(dir, WatchFile), func(got *WatchResponse) error {
			if !reflect.DeepEqual(got, watches[i]) {
				t.Fatalf("seed %d: watch record %d differs\n got %s\nwant %s", seed, i, dump(got), dump(watches[i]))
			}
			i++
			return nil
		})
		if err != nil || i != len(watches) {
			t.Fatalf("seed %d: read %d of %d watch records: %v", seed, i, len(watches), err)
		}
		// Loaded whole, as the checker does: the same records, list pages packed.
		h, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		packed := 0
		for i := range h.Operations {
			got := &h.Operations[i]
			if got.Response != nil {
				packed += unpack(got.Response)
			}
			if !reflect.DeepEqual(got, ops[i]) {
				t.Fatalf("seed %d: loaded operation %d differs\n got %s\nwant %s", seed, i, dump(got), dump(ops[i]))
			}
		}
		for i := range h.Watches {
			if !reflect.DeepEqual(&h.Watches[i], watches[i]) {
				t.Fatalf("seed %d: loaded watch record %d differs\n got %s\nwant %s", seed, i, dump(&h.Watches[i]), dump(watches[i]))
			}
		}
		if packed == 0 {
			t.Fatalf("seed %d: no range answer was packed", seed)
		}
	}
}

// unpack turns the packed key-values of r (and of its transaction's results) back into KVs, and returns
// how many answers were packed.
func unpack(r *Response) int {
	n := 0
	if g := r.Range; g != nil && g.packed != nil {
		g.KVs, g.packed = g.KeyValues(), nil
		n++
	}
	if t := r.Txn; t != nil {
		for i := range t.Results {
			n += unpack(&t.Results[i])
		}
	}
	return n
}

func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestWriterAfterClose: a record that races the end of a run (a watch's last response) is dropped, not a
// panic; Flush and Close after Close do nothing.
func TestWriterAfterClose(t *testing.T) {
	w, err := NewWriter(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := newGen(3)
	w.Operation(g.operation())
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w.Operation(g.operation())
	w.Watch(g.watchResponse())
	if err := errors.Join(w.Flush(), w.Close()); err != nil {
		t.Fatal(err)
	}
}

// TestWriterConcurrent: clients write at once, with flushes in between; every record is read back, and
// each client's records in its order (the file's order is the order of the writer's lock).
func TestWriterConcurrent(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	const clients, each = 8, 5000
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range each {
				w.Operation(&Operation{Client: c, Op: "put", Call: int64(i), Return: int64(i + 1),
					Request: Request{Kind: KindPut, Put: &Put{Key: fmt.Sprintf("/k/%d", i%100), Value: Value{ID: uint64(c)<<32 | uint64(i), Size: 100}}}})
				w.Watch(&WatchResponse{Watcher: c, Client: c, Time: int64(i), Revision: int64(i)})
				if i%1000 == 0 {
					if err := w.Flush(); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	next := make([]int64, clients)
	err = ReadOperations(filepath.Join(dir, HistoryFile), func(op *Operation) error {
		if op.Call != next[op.Client] {
			return fmt.Errorf("client %d: call %d, want %d", op.Client, op.Call, next[op.Client])
		}
		next[op.Client]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := ReadWatches(filepath.Join(dir, WatchFile), func(*WatchResponse) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	for c, got := range next {
		if got != each {
			t.Errorf("client %d: %d operations read, want %d", c, got, each)
		}
	}
	if n != clients*each {
		t.Errorf("%d watch records read, want %d", n, clients*each)
	}
}

// TestFormatLargeRecord: a record larger than the reader's buffer (a list of 100,000 new keys) reads back,
// in full or, cut short at the end of the file, not at all.
func TestFormatLargeRecord(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	kvs := make([]KV, 100_000)
	for i := range kvs {
		kvs[i] = KV{Key: fmt.Sprintf("/registry/pods/ns/pod-%06d", i), Value: Value{ID: uint64(i) << 20, Size: 4096}, CreateRevision: int64(i + 1), ModRevision: int64(i + 1), Version: 1}
	}
	op := &Operation{Op: "list/pods", Call: 1, Return: 2, Request: Request{Kind: KindRange, Range: &Range{Key: "/registry/pods/", End: "/registry/pods0"}},
		Response: &Response{Revision: 100_001, Range: &RangeResponse{KVs: kvs, Count: int64(len(kvs))}}}
	w.Operation(op)
	w.Operation(op)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, HistoryFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 2<<20 {
		t.Fatalf("the record is only %d bytes: not larger than the reader's buffer", len(data))
	}
	for _, tc := range []struct {
		cut  int
		want int
	}{{0, 2}, {1, 1}} {
		if err := os.WriteFile(path, data[:len(data)-tc.cut], 0o644); err != nil {
			t.Fatal(err)
		}
		n := 0
		err := ReadOperations(path, func(got *Operation) error {
			if !reflect.DeepEqual(got, op) {
				t.Fatalf("large operation %d differs", n)
			}
			n++
			return nil
		})
		if err != nil || n != tc.want {
			t.Fatalf("cut %d: read %d operations (%v), want %d", tc.cut, n, err, tc.want)
		}
	}
}

// TestFormatTornTail: a run killed while writing leaves a record cut short; everything before it reads.
func TestFormatTornTail(t *testing.T) {
	g := newGen(1)
	dir := t.TempDir()
	w, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		w.Operation(g.operation())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, HistoryFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n := 0
		if err := ReadOperations(path, func(*Operation) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 100 {
		t.Fatalf("read %d operations, want 100", n)
	}
	for _, cut := range []int{1, 2, 7} {
		if err := os.WriteFile(path, data[:len(data)-cut], 0o644); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 99 {
			t.Errorf("cut %d bytes: read %d operations, want 99", cut, n)
		}
	}
}

// TestFormatRejects: a file of a version this package does not read or of the other content is refused with a clear error.
func TestFormatRejects(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string][]byte{
		"newer":   append([]byte(formatMagic), FormatVersion+1, contentOperations),
		"older":   append([]byte(formatMagic), minFormatVersion-1, contentOperations),
		"watches": append([]byte(formatMagic), FormatVersion, contentWatches),
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		err := ReadOperations(path, func(*Operation) error { return nil })
		if !errors.Is(err, errFormat) {
			t.Errorf("%s: %v, want a format error", name, err)
		}
	}
}

// TestFormatVersion1: a file of format version 1 (every run before attempts were recorded) reads as it
// always did: version 2 only added what follows an operation's flags 4 and 8, which version 1 never set.
func TestFormatVersion1(t *testing.T) {
	g := newGen(5)
	e := newEncoder()
	data := append([]byte(formatMagic), 1, contentOperations)
	var ops []*Operation
	for range 300 {
		op := g.operation()
		op.AttemptsRecorded, op.Attempts = false, nil
		ops = append(ops, op)
		data = appendRecord(data, e.operation(nil, op))
	}
	path := filepath.Join(t.TempDir(), HistoryFile)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	i := 0
	err := ReadOperations(path, func(got *Operation) error {
		if !reflect.DeepEqual(got, ops[i]) {
			t.Fatalf("operation %d differs\n got %s\nwant %s", i, dump(got), dump(ops[i]))
		}
		i++
		return nil
	})
	if err != nil || i != len(ops) {
		t.Fatalf("read %d of %d operations of a version 1 file: %v", i, len(ops), err)
	}
}

// TestLegacyJSONLines: histories of runs before the binary format, JSON lines as encoding/json writes
// them, read the same as the binary files.
func TestLegacyJSONLines(t *testing.T) {
	g := newGen(7)
	dir := t.TempDir()
	var ops []*Operation
	var lines []byte
	for range 300 {
		op := g.operation()
		ops = append(ops, op)
		b, err := json.Marshal(op)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(append(lines, b...), '\n')
	}
	path := filepath.Join(dir, LegacyHistoryFile)
	if err := os.WriteFile(path, append(lines, `{"client":1,"ca`...), 0o644); err != nil {
		t.Fatal(err)
	}
	i := 0
	err := ReadOperations(path, func(got *Operation) error {
		want, _ := json.Marshal(ops[i])
		if dump(got) != string(want) {
			t.Fatalf("operation %d: got %s, want %s", i, dump(got), want)
		}
		i++
		return nil
	})
	if err != nil || i != len(ops) {
		t.Fatalf("read %d of %d operations: %v", i, len(ops), err)
	}
}

func TestValueEncoding(t *testing.T) {
	fill := []byte("abc")
	for _, v := range []Value{{ID: 1, Size: 8}, {ID: 1<<64 - 1, Size: 300}, {ID: 42, Size: 3}} {
		b := EncodeValue(v, fill)
		if len(b) != max(v.Size, 8) {
			t.Errorf("EncodeValue(%v): %d bytes", v, len(b))
		}
		if got := DecodeValue(b); got.ID != v.ID || got.Size != len(b) {
			t.Errorf("DecodeValue(EncodeValue(%v)) = %v", v, got)
		}
	}
	if got := DecodeValue([]byte("short")); got.ID != 0 || got.Size != 5 {
		t.Errorf("short foreign value decoded as %v, want id 0", got)
	}
}

// FuzzReadOperations: whatever the bytes after a valid header, reading them returns records or an error,
// never a panic or a hang.
func FuzzReadOperations(f *testing.F) {
	g := newGen(11)
	e := newEncoder()
	for range 20 {
		f.Add(appendRecord(nil, e.operation(nil, g.operation())), false)
		f.Add(appendRecord(nil, e.watch(nil, g.watchResponse())), true)
	}
	f.Add([]byte{0x05, 0xff, 0xff, 0xff, 0xff, 0x0f}, false)
	f.Fuzz(func(t *testing.T, data []byte, watches bool) {
		path := filepath.Join(t.TempDir(), "h")
		content := contentOperations
		if watches {
			content = contentWatches
		}
		if err := os.WriteFile(path, append(fileHeader(content), data...), 0o644); err != nil {
			t.Fatal(err)
		}
		if watches {
			_ = ReadWatches(path, func(*WatchResponse) error { return nil })
			return
		}
		_ = ReadOperations(path, func(*Operation) error { return nil })
	})
}

// BenchmarkWriterPut is the history's cost for the put workload (etcd's `benchmark put`): one operation
// per request, a new value each time, as the load generator's clients write it.
func BenchmarkWriterPut(b *testing.B) {
	dir := b.TempDir()
	w, err := NewWriter(dir)
	if err != nil {
		b.Fatal(err)
	}
	op := &Operation{Client: 7, Op: "put", Call: 123456789, Return: 123999999,
		Request:  Request{Kind: KindPut, Put: &Put{Key: "/bench/0000270f", Value: Value{ID: 99999, Size: 256}}},
		Response: &Response{Revision: 1234567, Put: &PutResponse{}}}
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		i++
		op.Call, op.Return, op.Response.Revision = op.Call+1000, op.Return+1000, op.Response.Revision+1
		op.Request.Put.Key = benchKeys[i%int64(len(benchKeys))]
		op.Request.Put.Value.ID++
		w.Operation(op)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, HistoryFile)); err == nil {
		b.ReportMetric(float64(st.Size())/float64(i), "file-B/op")
	}
}

var benchKeys = func() []string {
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = fmt.Sprintf("/bench/%08x", i)
	}
	return keys
}()

package linearizability

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
)

// gen builds random histories covering every field, for round-trip tests.
type gen struct{ r *rand.Rand }

func (g gen) str() string {
	alphabet := []string{"/registry/pods/default/a", "k", "", "ключ", "a\"b\\c", "<&>", "\x00\x01tab\t", "/bench/00ff"}
	return alphabet[g.r.IntN(len(alphabet))]
}

func (g gen) i64() int64 {
	if g.r.IntN(3) == 0 {
		return 0
	}
	return g.r.Int64N(1 << 40)
}

func (g gen) value() Value {
	if g.r.IntN(4) == 0 {
		return Value{}
	}
	return Value{ID: g.r.Uint64N(1 << 50), Size: g.r.IntN(10000)}
}

func (g gen) kv() KV {
	return KV{Key: g.str(), Value: g.value(), CreateRevision: g.i64(), ModRevision: g.i64(), Version: g.i64(), Lease: g.i64()}
}

func (g gen) kvs() []KV {
	n := g.r.IntN(4)
	if n == 0 {
		return nil
	}
	out := make([]KV, n)
	for i := range out {
		out[i] = g.kv()
	}
	return out
}

func (g gen) request(depth int) Request {
	kinds := []Kind{KindRange, KindPut, KindDelete, KindTxn, KindLeaseGrant, KindLeaseRevoke, KindLeaseKeepAlive, KindCompact}
	if depth > 0 {
		kinds = kinds[:3]
	}
	switch k := kinds[g.r.IntN(len(kinds))]; k {
	case KindRange:
		return Request{Kind: k, Range: &Range{Key: g.str(), End: g.str(), Limit: g.i64(), Revision: g.i64(),
			Serializable: g.r.IntN(2) == 0, KeysOnly: g.r.IntN(2) == 0, CountOnly: g.r.IntN(2) == 0}}
	case KindPut:
		return Request{Kind: k, Put: &Put{Key: g.str(), Value: g.value(), Lease: g.i64(), PrevKV: g.r.IntN(2) == 0}}
	case KindDelete:
		return Request{Kind: k, Delete: &Delete{Key: g.str(), End: g.str(), PrevKV: g.r.IntN(2) == 0}}
	case KindTxn:
		t := &Txn{}
		for range g.r.IntN(3) {
			t.Compares = append(t.Compares, Compare{Key: g.str(), Target: CompareModRevision, Result: Equal, Operand: g.i64(), Value: g.value()})
		}
		for range g.r.IntN(3) {
			t.Then = append(t.Then, g.request(depth+1))
		}
		for range g.r.IntN(3) {
			t.Else = append(t.Else, g.request(depth+1))
		}
		return Request{Kind: k, Txn: t}
	case KindCompact:
		return Request{Kind: k, Compact: &Compact{Revision: g.i64(), Physical: g.r.IntN(2) == 0}}
	default:
		return Request{Kind: k, Lease: &Lease{ID: g.i64(), TTL: g.i64()}}
	}
}

func (g gen) response(depth int) *Response {
	r := &Response{Revision: g.i64()}
	switch g.r.IntN(5) {
	case 0:
		r.Range = &RangeResponse{KVs: g.kvs(), Count: g.i64(), More: g.r.IntN(2) == 0}
	case 1:
		r.Put = &PutResponse{}
		if g.r.IntN(2) == 0 {
			kv := g.kv()
			r.Put.PrevKV = &kv
		}
	case 2:
		r.Delete = &DeleteResponse{Deleted: g.i64(), PrevKVs: g.kvs()}
	case 3:
		r.Txn = &TxnResponse{Succeeded: g.r.IntN(2) == 0}
		if depth == 0 {
			for range g.r.IntN(3) {
				r.Txn.Results = append(r.Txn.Results, *g.response(depth + 1))
			}
		}
	case 4:
		r.Lease = &LeaseResponse{ID: g.i64(), TTL: g.i64()}
	}
	return r
}

func (g gen) operation() *Operation {
	op := &Operation{Client: g.r.IntN(100), Op: g.str(), Call: g.i64(), Return: g.i64(), Request: g.request(0)}
	if g.r.IntN(3) == 0 {
		op.Error = g.str()
	} else {
		op.Response = g.response(0)
	}
	return op
}

func (g gen) watchResponse() *WatchResponse {
	r := &WatchResponse{Watcher: g.r.IntN(10), Client: g.r.IntN(10), Time: g.i64(), Revision: g.i64(),
		Created: g.r.IntN(2) == 0, Progress: g.r.IntN(2) == 0, CompactRevision: g.i64(), Canceled: g.r.IntN(2) == 0, Error: g.str()}
	if g.r.IntN(2) == 0 {
		r.Request = &WatchRequest{Key: g.str(), End: g.str(), Revision: g.i64(), PrevKV: true, ProgressNotify: g.r.IntN(2) == 0, RequireLeader: true}
	}
	for range g.r.IntN(4) {
		e := Event{Type: EventPut, KV: g.kv(), IsCreate: g.r.IntN(2) == 0}
		if g.r.IntN(2) == 0 {
			e.Type = EventDelete
			kv := g.kv()
			e.PrevKV = &kv
		}
		r.Events = append(r.Events, e)
	}
	return r
}

// TestEncodersMatchEncodingJSON checks the hand-written encoders against encoding/json: what they write
// must decode to exactly the value encoded, and to what encoding/json's own output decodes to.
func TestEncodersMatchEncodingJSON(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(1, 2))}
	for i := range 5000 {
		op := g.operation()
		var got, want Operation
		if err := json.Unmarshal(AppendOperation(nil, op), &got); err != nil {
			t.Fatalf("case %d: hand-encoded operation does not parse: %v\n%s", i, err, AppendOperation(nil, op))
		}
		std, _ := json.Marshal(op)
		if err := json.Unmarshal(std, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(&got, op) {
			t.Fatalf("case %d: operation round trip differs\nhand: %s\njson: %s", i, AppendOperation(nil, op), std)
		}

		w := g.watchResponse()
		var gotW, wantW WatchResponse
		if err := json.Unmarshal(AppendWatchResponse(nil, w), &gotW); err != nil {
			t.Fatalf("case %d: hand-encoded watch response does not parse: %v\n%s", i, err, AppendWatchResponse(nil, w))
		}
		std, _ = json.Marshal(w)
		if err := json.Unmarshal(std, &wantW); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gotW, wantW) || !reflect.DeepEqual(&gotW, w) {
			t.Fatalf("case %d: watch round trip differs\nhand: %s\njson: %s", i, AppendWatchResponse(nil, w), std)
		}
	}
}

// TestDecodersMatchEncodingJSON checks the hand-written decoders: whatever the hand-written encoders or
// encoding/json write, they read back exactly the value encoded.
func TestDecodersMatchEncodingJSON(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(3, 4))}
	for i := range 5000 {
		op := g.operation()
		std, _ := json.Marshal(op)
		for _, enc := range [][]byte{AppendOperation(nil, op), std} {
			var got Operation
			if err := DecodeOperation(enc, &got); err != nil {
				t.Fatalf("case %d: %v\n%s", i, err, enc)
			}
			if !reflect.DeepEqual(&got, op) {
				t.Fatalf("case %d: decoded operation differs\nin:  %s\nout: %+v", i, enc, got)
			}
		}
		w := g.watchResponse()
		std, _ = json.Marshal(w)
		for _, enc := range [][]byte{AppendWatchResponse(nil, w), std} {
			var got WatchResponse
			if err := DecodeWatchResponse(enc, &got); err != nil {
				t.Fatalf("case %d: %v\n%s", i, err, enc)
			}
			if !reflect.DeepEqual(&got, w) {
				t.Fatalf("case %d: decoded watch response differs\nin:  %s\nout: %+v", i, enc, got)
			}
		}
	}
}

// TestDecoderRejectsBadInput: truncated or malformed records are errors, never silently half-read.
func TestDecoderRejectsBadInput(t *testing.T) {
	op := AppendOperation(nil, &Operation{Client: 1, Call: 2, Return: 3, Request: Request{Kind: KindPut, Put: &Put{Key: "k", Value: Value{ID: 7, Size: 8}}},
		Response: &Response{Revision: 4, Put: &PutResponse{}}})
	for _, tc := range []struct{ name, in string }{
		{"truncated", string(op[:len(op)-5])},
		{"trailing", string(op) + "x"},
		{"not an object", "[1,2]"},
		{"bad number", `{"client":1x}`},
		{"unterminated string", `{"op":"abc`},
		{"empty", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got Operation
			if err := DecodeOperation([]byte(tc.in), &got); err == nil {
				t.Fatalf("decoded %q without error: %+v", tc.in, got)
			}
		})
	}
}

func BenchmarkDecodeOperation(b *testing.B) {
	op := AppendOperation(nil, &Operation{Client: 7, Op: "list/pods", Call: 123456789, Return: 123999999,
		Request: Request{Kind: KindRange, Range: &Range{Key: "/registry/pods/", End: "/registry/pods0", Limit: 500}},
		Response: &Response{Revision: 1234567, Range: &RangeResponse{Count: 3, KVs: []KV{
			{Key: "/registry/pods/default/a", Value: Value{ID: 1 << 33, Size: 2048}, CreateRevision: 5, ModRevision: 99, Version: 3},
			{Key: "/registry/pods/default/b", Value: Value{ID: 1<<33 + 1, Size: 2048}, CreateRevision: 6, ModRevision: 100, Version: 2},
			{Key: "/registry/pods/default/c", Value: Value{ID: 1<<33 + 2, Size: 2048}, CreateRevision: 7, ModRevision: 101, Version: 1},
		}}}})
	b.Run("hand", func(b *testing.B) {
		b.SetBytes(int64(len(op)))
		d := &decoder{keys: map[string]string{}}
		for b.Loop() {
			var o Operation
			d.b, d.i = op, 0
			_ = d.operation(&o)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.SetBytes(int64(len(op)))
		for b.Loop() {
			var o Operation
			_ = json.Unmarshal(op, &o)
		}
	})
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

func BenchmarkAppendOperation(b *testing.B) {
	op := &Operation{Client: 7, Op: "put", Call: 123456789, Return: 123999999,
		Request:  Request{Kind: KindPut, Put: &Put{Key: "/bench/0000270f", Value: Value{ID: 99999, Size: 256}}},
		Response: &Response{Revision: 1234567, Put: &PutResponse{}}}
	b.Run("hand", func(b *testing.B) {
		buf := make([]byte, 0, 512)
		for b.Loop() {
			buf = AppendOperation(buf[:0], op)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(op)
		}
	})
}

// This file holds the history vocabulary: the requests our workloads send, the responses etcd returns, and
// the JSON-lines files they are stored in. Values are never stored: every value a workload writes starts
// with a unique 8-byte write id (see EncodeValue), so a history records the id and the size, and a read is
// matched to the write it observed.

package history

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Kind names a request type. It is stored as a string so that histories stay readable.
type Kind string

// Request kinds. Status and Progress are recorded for timing and completeness; the model treats them as
// reads of the global revision.
const (
	KindRange          Kind = "range"
	KindPut            Kind = "put"
	KindDelete         Kind = "delete"
	KindTxn            Kind = "txn"
	KindLeaseGrant     Kind = "lease-grant"
	KindLeaseRevoke    Kind = "lease-revoke"
	KindLeaseKeepAlive Kind = "lease-keepalive"
	KindCompact        Kind = "compact"
)

// Request is one request a client sends to etcd. Exactly one of the pointer fields is set, matching Kind.
type Request struct {
	Kind    Kind     `json:"kind"`
	Range   *Range   `json:"range,omitempty"`
	Put     *Put     `json:"put,omitempty"`
	Delete  *Delete  `json:"delete,omitempty"`
	Txn     *Txn     `json:"txn,omitempty"`
	Lease   *Lease   `json:"lease,omitempty"`
	Compact *Compact `json:"compact,omitempty"`
}

// Range reads [Key, End), or Key alone when End is empty. Revision 0 reads the latest revision.
type Range struct {
	Key          string `json:"key"`
	End          string `json:"end,omitempty"`
	Limit        int64  `json:"limit,omitempty"`
	Revision     int64  `json:"rev,omitempty"`
	Serializable bool   `json:"serializable,omitempty"`
	KeysOnly     bool   `json:"keys_only,omitempty"`
	CountOnly    bool   `json:"count_only,omitempty"`
}

// Value identifies a written value by its write id and size; the bytes themselves are derived from both
// (EncodeValue) and never stored. ID 0 means a value this run did not write.
type Value struct {
	ID   uint64 `json:"id"`
	Size int    `json:"size"`
}

// Put writes Value at Key, attached to Lease when it is not zero.
type Put struct {
	Key    string `json:"key"`
	Value  Value  `json:"value"`
	Lease  int64  `json:"lease,omitempty"`
	PrevKV bool   `json:"prev_kv,omitempty"`
}

// Delete removes [Key, End), or Key alone when End is empty.
type Delete struct {
	Key    string `json:"key"`
	End    string `json:"end,omitempty"`
	PrevKV bool   `json:"prev_kv,omitempty"`
}

// CompareTarget is the key attribute a transaction compares.
type CompareTarget string

// Compare targets used by kube-apiserver and the micro workloads.
const (
	CompareModRevision CompareTarget = "mod"
	CompareVersion     CompareTarget = "version"
	CompareCreate      CompareTarget = "create"
	CompareValue       CompareTarget = "value"
)

// CompareResult is the comparison operator of a Compare.
type CompareResult string

// Compare operators.
const (
	Equal    CompareResult = "="
	NotEqual CompareResult = "!="
	Less     CompareResult = "<"
	Greater  CompareResult = ">"
)

// Compare is one condition of a transaction: Target(Key) Result Operand. Value compares compare write ids.
type Compare struct {
	Key     string        `json:"key"`
	Target  CompareTarget `json:"target"`
	Result  CompareResult `json:"result"`
	Operand int64         `json:"operand,omitempty"`
	Value   Value         `json:"value,omitzero"`
}

// Txn is If(Compares) Then(Then) Else(Else). Branch operations are Range, Put or Delete requests.
type Txn struct {
	Compares []Compare `json:"if,omitempty"`
	Then     []Request `json:"then,omitempty"`
	Else     []Request `json:"else,omitempty"`
}

// Lease is a lease request: grant with TTL (and ID 0 to let etcd choose), revoke or keep alive ID.
type Lease struct {
	ID  int64 `json:"id,omitempty"`
	TTL int64 `json:"ttl,omitempty"`
}

// Compact compacts the key space up to Revision.
type Compact struct {
	Revision int64 `json:"rev"`
	Physical bool  `json:"physical,omitempty"`
}

// KV is one key-value pair as etcd returned it.
type KV struct {
	Key            string `json:"key"`
	Value          Value  `json:"value,omitzero"`
	CreateRevision int64  `json:"create,omitempty"`
	ModRevision    int64  `json:"mod"`
	Version        int64  `json:"ver,omitempty"`
	Lease          int64  `json:"lease,omitempty"`
}

// Response is etcd's answer to a Request. Revision is the response header's revision.
type Response struct {
	Revision int64           `json:"rev"`
	Range    *RangeResponse  `json:"range,omitempty"`
	Put      *PutResponse    `json:"put,omitempty"`
	Delete   *DeleteResponse `json:"delete,omitempty"`
	Txn      *TxnResponse    `json:"txn,omitempty"`
	Lease    *LeaseResponse  `json:"lease,omitempty"`
}

// RangeResponse holds the key-values read, the total count of the range, and whether more remain.
//
// A history loaded whole for checking (Load) holds the key-values of its large answers (list
// pages) packed instead of in KVs, and an OperationStore those of every answer: most of them are the
// same key-values again, page after page, so each answer refers to one shared copy of each. KVs is then
// nil: read them with Len and At, or KeyValues, which returns them either way.
type RangeResponse struct {
	KVs   []KV  `json:"kvs,omitempty"`
	Count int64 `json:"count"`
	More  bool  `json:"more,omitempty"`

	packed *packedKVs
}

// packedKVs are the key-values of a range answer as references into a table shared by a history: a
// loaded history's (table), or an OperationStore's (res), where each has its key's number too (keys).
type packedKVs struct {
	table      *kvTable
	res        *resident
	keys, refs []uint32
}

// kvTable holds the distinct key-values of a history's large range answers, in chunks that never move.
type kvTable struct{ chunks [][]KV }

const kvChunkBits = 12

func (t *kvTable) add(kv KV) uint32 {
	n := len(t.chunks)
	if n == 0 || len(t.chunks[n-1]) == 1<<kvChunkBits {
		t.chunks = append(t.chunks, make([]KV, 0, 1<<kvChunkBits))
		n++
	}
	t.chunks[n-1] = append(t.chunks[n-1], kv)
	return uint32((n-1)<<kvChunkBits + len(t.chunks[n-1]) - 1)
}

func (t *kvTable) len() int {
	if len(t.chunks) == 0 {
		return 0
	}
	return (len(t.chunks)-1)<<kvChunkBits + len(t.chunks[len(t.chunks)-1])
}

func (t *kvTable) at(ref uint32) *KV {
	return &t.chunks[ref>>kvChunkBits][ref&(1<<kvChunkBits-1)]
}

// Len returns the number of key-values of the answer.
func (r *RangeResponse) Len() int {
	if r.packed != nil {
		return len(r.packed.refs)
	}
	return len(r.KVs)
}

// At returns the answer's i-th key-value.
func (r *RangeResponse) At(i int) KV {
	switch p := r.packed; {
	case p == nil:
		return r.KVs[i]
	case p.res != nil:
		return p.res.kv(p.keys[i], p.refs[i])
	default:
		return *p.table.at(p.refs[i])
	}
}

// Key returns the key of the answer's i-th key-value: At(i).Key, without reading the rest of it.
func (r *RangeResponse) Key(i int) string {
	switch p := r.packed; {
	case p == nil:
		return r.KVs[i].Key
	case p.res != nil:
		return p.res.strs[p.keys[i]]
	default:
		return p.table.at(p.refs[i]).Key
	}
}

// AppendKeyValues appends the answer's key-values to dst and returns it: what At returns for each, read
// at once (for an answer from an OperationStore, under one hold of its lock).
func (r *RangeResponse) AppendKeyValues(dst []KV) []KV {
	switch p := r.packed; {
	case p == nil:
		return append(dst, r.KVs...)
	case p.res != nil:
		return p.res.appendKVs(dst, p.keys, p.refs)
	}
	for i := range r.Len() {
		dst = append(dst, r.At(i))
	}
	return dst
}

// KeyValues returns the key-values of the answer: KVs, or a copy of them when they are packed.
func (r *RangeResponse) KeyValues() []KV {
	if r.packed == nil {
		return r.KVs
	}
	return r.AppendKeyValues(make([]KV, 0, r.Len()))
}

// PutResponse holds the previous key-value when it was asked for and existed.
type PutResponse struct {
	PrevKV *KV `json:"prev_kv,omitempty"`
}

// DeleteResponse holds the number of keys deleted and, when asked for, their previous key-values.
type DeleteResponse struct {
	Deleted int64 `json:"deleted"`
	PrevKVs []KV  `json:"prev_kvs,omitempty"`
}

// TxnResponse holds the branch taken and one response per operation of that branch.
type TxnResponse struct {
	Succeeded bool       `json:"succeeded"`
	Results   []Response `json:"results,omitempty"`
}

// LeaseResponse holds a granted or kept-alive lease and its remaining TTL.
type LeaseResponse struct {
	ID  int64 `json:"id"`
	TTL int64 `json:"ttl"`
}

// Operation is one request and its outcome as one client saw it. Call and Return are nanoseconds since the
// run's base time on the monotonic clock. An operation that failed or timed out may still have taken effect;
// Error says what the client saw and the checker treats its return time as unknown.
//
// One call of a client may reach etcd more than once: etcd's client retries some requests by itself, and
// gRPC retries an attempt the server provably did not process. AttemptsRecorded says that the recording
// client watched every attempt the operation made (workloads.Client, with gRPC's stats handler); Attempts
// lists them, but only when there was more than one or one failed, which keeps the history small: an
// operation with AttemptsRecorded and no Attempts went out once and was answered. Without
// AttemptsRecorded (a history recorded before chaosbench watched attempts, or a connection it did not
// watch) nothing is known of its attempts.
type Operation struct {
	Client           int       `json:"client"`
	Op               string    `json:"op,omitempty"`
	Call             int64     `json:"call"`
	Return           int64     `json:"return"`
	Request          Request   `json:"req"`
	Response         *Response `json:"resp,omitempty"`
	Error            string    `json:"error,omitempty"`
	AttemptsRecorded bool      `json:"attempts_recorded,omitempty"`
	Attempts         []Attempt `json:"attempts,omitempty"`
}

// EncodeValue returns the bytes of value v: its write id in the first 8 bytes (big endian), then filler.
// Values are at least 8 bytes long; filler is taken from the start of fill, cycling when it is short.
func EncodeValue(v Value, fill []byte) []byte {
	size := max(v.Size, 8)
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b, v.ID)
	if len(fill) > 0 {
		for off := 8; off < size; off += copy(b[off:], fill) {
		}
	}
	return b
}

// DecodeValue returns the Value that b encodes. Bytes shorter than 8 decode to ID 0 (not ours).
func DecodeValue(b []byte) Value {
	if len(b) < 8 {
		return Value{Size: len(b)}
	}
	return Value{ID: binary.BigEndian.Uint64(b), Size: len(b)}
}

// String returns a compact description of the request, for messages and visualizations.
func (r Request) String() string {
	switch r.Kind {
	case KindRange:
		s := "get(" + strconv.Quote(r.Range.Key)
		if r.Range.End != "" {
			s += ".." + strconv.Quote(r.Range.End)
		}
		if r.Range.Revision != 0 {
			s += fmt.Sprintf(", rev=%d", r.Range.Revision)
		}
		if r.Range.Limit != 0 {
			s += fmt.Sprintf(", limit=%d", r.Range.Limit)
		}
		if r.Range.Serializable {
			s += ", serializable"
		}
		return s + ")"
	case KindPut:
		s := fmt.Sprintf("put(%q, #%d", r.Put.Key, r.Put.Value.ID)
		if r.Put.Lease != 0 {
			s += fmt.Sprintf(", lease=%x", r.Put.Lease)
		}
		return s + ")"
	case KindDelete:
		if r.Delete.End != "" {
			return fmt.Sprintf("delete(%q..%q)", r.Delete.Key, r.Delete.End)
		}
		return fmt.Sprintf("delete(%q)", r.Delete.Key)
	case KindTxn:
		s := "txn("
		if len(r.Txn.Compares) > 0 {
			s += "if"
			for _, c := range r.Txn.Compares {
				if c.Target == CompareValue {
					s += fmt.Sprintf(" value(%q)%s#%d", c.Key, c.Result, c.Value.ID)
					continue
				}
				s += fmt.Sprintf(" %s(%q)%s%d", c.Target, c.Key, c.Result, c.Operand)
			}
			s += " "
		}
		s += "then"
		for _, op := range r.Txn.Then {
			s += " " + op.String()
		}
		if len(r.Txn.Else) > 0 {
			s += " else"
			for _, op := range r.Txn.Else {
				s += " " + op.String()
			}
		}
		return s + ")"
	case KindLeaseGrant:
		return fmt.Sprintf("lease-grant(ttl=%d)", r.Lease.TTL)
	case KindLeaseRevoke:
		return fmt.Sprintf("lease-revoke(%x)", r.Lease.ID)
	case KindLeaseKeepAlive:
		return fmt.Sprintf("lease-keepalive(%x)", r.Lease.ID)
	case KindCompact:
		return fmt.Sprintf("compact(%d)", r.Compact.Revision)
	}
	return string(r.Kind)
}

// IsWrite reports whether the request can change the key space.
func (r Request) IsWrite() bool {
	switch r.Kind {
	case KindPut, KindDelete, KindLeaseRevoke:
		return true
	case KindTxn:
		for _, ops := range [][]Request{r.Txn.Then, r.Txn.Else} {
			for _, op := range ops {
				if op.IsWrite() {
					return true
				}
			}
		}
	}
	return false
}

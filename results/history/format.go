package history

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The history format (version 1). A run's history is hundreds of thousands to millions of records, most of
// them repeating the same few thousand keys and, in list pages and watch events, the same key-values
// again and again. Each file therefore starts with a header (magic, version, what it holds) followed by
// length-delimited records (uvarint length, then the record), and the encoder and the decoder keep the
// same state, which both update from the records in file order:
//
//   - strings (keys, range ends, operation names, errors) are interned: the first use of a string writes
//     it (0, length, bytes), later uses write its number plus one;
//   - the last key-value seen for each key: a key-value is written as the fields that differ from that
//     one (a flags byte, then only those fields), so a list page that returns unchanged objects costs
//     two or three bytes per object;
//   - times and revisions are deltas: an operation's return time from the previous operation's, its call
//     time from its own return, a response's revision from the previous response's, revisions inside a
//     record from the record's revision;
//   - integers are varints, signed ones zigzag-encoded.
//
// The state grows with the number of distinct keys and strings. So that it does not grow with the length
// of a run whose keys come and go (kube's events), the writer starts afresh every maxStrings strings: an
// empty record tells the reader to forget the strings, the key-values and the watchers' clients too. A
// reader must start at the beginning of a file; a record cut short at the end of a file (a run killed
// while writing) ends the history, everything before it is valid.

// FormatVersion is the version of the history format this package writes. It reads every version from
// minFormatVersion on: version 2 added the attempts of an operation (Operation.Attempts, flags 4 and 8 of
// an operation record), which a version 1 file never has.
const FormatVersion = 2

const minFormatVersion = 1

const (
	formatMagic = "CBHIST"
	headerSize  = len(formatMagic) + 2

	contentOperations byte = 'o'
	contentWatches    byte = 'w'
)

// errFormat marks a record this package cannot decode: a corrupt file or a newer version.
var errFormat = errors.New("invalid history record")

func fileHeader(content byte) []byte {
	return append([]byte(formatMagic), FormatVersion, content)
}

// kvState is what the format remembers of a key's last key-value.
type kvState struct {
	value                   Value
	create, mod, ver, lease int64
}

// Flags of an encoded key-value: which fields differ from the key's last one.
const (
	kvValue = 1 << iota
	kvMod
	kvCreate
	kvVersion
	kvVersionNext // the version is the last one plus one
	kvLease
)

var (
	kindCodes   = []Kind{"", KindRange, KindPut, KindDelete, KindTxn, KindLeaseGrant, KindLeaseRevoke, KindLeaseKeepAlive, KindCompact}
	targetCodes = []CompareTarget{"", CompareModRevision, CompareVersion, CompareCreate, CompareValue}
	resultCodes = []CompareResult{"", Equal, NotEqual, Less, Greater}
	eventCodes  = []EventType{"", EventPut, EventDelete}
)

// code returns s's index in codes, or 0 (written as a string) for a value outside them.
func code[T ~string](codes []T, s T) byte {
	for i := 1; i < len(codes); i++ {
		if codes[i] == s {
			return byte(i)
		}
	}
	return 0
}

// Presence bits of a request's or a response's parts. A request has exactly the part its kind needs;
// anything else (possible in a hand-made history) is written as an explicit presence byte.
const (
	partRange = 1 << iota
	partPut
	partDelete
	partTxn
	partLease
	partCompact
)

func requestParts(r *Request) byte {
	var p byte
	if r.Range != nil {
		p |= partRange
	}
	if r.Put != nil {
		p |= partPut
	}
	if r.Delete != nil {
		p |= partDelete
	}
	if r.Txn != nil {
		p |= partTxn
	}
	if r.Lease != nil {
		p |= partLease
	}
	if r.Compact != nil {
		p |= partCompact
	}
	return p
}

func kindParts(k Kind) byte {
	switch k {
	case KindRange:
		return partRange
	case KindPut:
		return partPut
	case KindDelete:
		return partDelete
	case KindTxn:
		return partTxn
	case KindLeaseGrant, KindLeaseRevoke, KindLeaseKeepAlive:
		return partLease
	case KindCompact:
		return partCompact
	}
	return 0
}

// explicitParts flags a request whose parts do not follow from its kind.
const explicitParts = 0x80

// maxStrings is how many strings an encoder interns before it starts afresh (see above): tens of
// megabytes of state at most, and a fresh start costs a few bytes per key again, once.
const maxStrings = 1 << 18

// encoder writes records of one file. It is not safe for concurrent use.
type encoder struct {
	strs     map[string]uint64
	kvs      []kvState
	prevRev  int64
	prevTime int64
	prevRef  storeRef    // an OperationStore's records: the key-value before, in this record
	clients  map[int]int // watcher -> client of its last record
	scratch  []byte
	limit    int // strings before a fresh start: maxStrings, less in tests

	res *resident // an OperationStore's records: strings and key-values are the store's (store.go)
}

func newEncoder() *encoder {
	return &encoder{strs: map[string]uint64{}, clients: map[int]int{}, limit: maxStrings}
}

// appendReset appends the empty record that starts the state afresh, when the encoder's state is full.
func (e *encoder) appendReset(b []byte) []byte {
	if len(e.strs) < e.limit {
		return b
	}
	e.strs, e.kvs, e.clients = map[string]uint64{}, nil, map[int]int{}
	return appendRecord(b, nil)
}

// appendRecord appends rec to b as one length-delimited record.
func appendRecord(b, rec []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(rec)))
	return append(b, rec...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// str appends s, interned, and returns its number.
func (e *encoder) str(b []byte, s string) ([]byte, uint64) {
	if e.res != nil {
		id := e.res.intern(s)
		return binary.AppendUvarint(b, id+1), id
	}
	if id, ok := e.strs[s]; ok {
		return binary.AppendUvarint(b, id+1), id
	}
	id := uint64(len(e.strs))
	e.strs[s] = id
	b = append(b, 0)
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...), id
}

func (e *encoder) s(b []byte, s string) []byte {
	b, _ = e.str(b, s)
	return b
}

func (e *encoder) operation(b []byte, op *Operation) []byte {
	b = binary.AppendVarint(b, int64(op.Client))
	b = e.s(b, op.Op)
	b = binary.AppendVarint(b, op.Return-e.prevTime)
	e.prevTime = op.Return
	b = binary.AppendVarint(b, op.Return-op.Call)
	b = e.request(b, &op.Request)
	var flags byte
	if op.Response != nil {
		flags |= opResponse
	}
	if op.Error != "" {
		flags |= opError
	}
	if op.AttemptsRecorded {
		flags |= opAttemptsRecorded
	}
	if len(op.Attempts) > 0 {
		flags |= opAttempts
	}
	b = append(b, flags)
	if op.Error != "" {
		b = e.s(b, op.Error)
	}
	if op.Response != nil {
		b = binary.AppendVarint(b, op.Response.Revision-e.prevRev)
		e.prevRev = op.Response.Revision
		b = e.responseParts(b, op.Response)
	}
	if len(op.Attempts) > 0 {
		b = e.attempts(b, op)
	}
	return b
}

func (e *encoder) request(b []byte, r *Request) []byte {
	c := code(kindCodes, r.Kind)
	parts := requestParts(r)
	if c == 0 || parts != kindParts(r.Kind) {
		b = append(b, c|explicitParts, parts)
	} else {
		b = append(b, c)
	}
	if c == 0 {
		b = e.s(b, string(r.Kind))
	}
	if g := r.Range; g != nil {
		var flags byte
		for i, set := range []bool{g.End != "", g.Limit != 0, g.Revision != 0, g.Serializable, g.KeysOnly, g.CountOnly} {
			if set {
				flags |= 1 << i
			}
		}
		b = e.s(b, g.Key)
		b = append(b, flags)
		if g.End != "" {
			b = e.s(b, g.End)
		}
		if g.Limit != 0 {
			b = binary.AppendVarint(b, g.Limit)
		}
		if g.Revision != 0 {
			b = binary.AppendVarint(b, e.prevRev-g.Revision)
		}
	}
	if p := r.Put; p != nil {
		b = e.s(b, p.Key)
		b = binary.AppendUvarint(b, p.Value.ID)
		b = binary.AppendVarint(b, int64(p.Value.Size))
		var flags byte
		if p.Lease != 0 {
			flags |= 1
		}
		if p.PrevKV {
			flags |= 2
		}
		b = append(b, flags)
		if p.Lease != 0 {
			b = binary.AppendVarint(b, p.Lease)
		}
	}
	if d := r.Delete; d != nil {
		b = e.s(b, d.Key)
		var flags byte
		if d.End != "" {
			flags |= 1
		}
		if d.PrevKV {
			flags |= 2
		}
		b = append(b, flags)
		if d.End != "" {
			b = e.s(b, d.End)
		}
	}
	if t := r.Txn; t != nil {
		b = binary.AppendUvarint(b, uint64(len(t.Compares)))
		for i := range t.Compares {
			b = e.compare(b, &t.Compares[i])
		}
		for _, ops := range [][]Request{t.Then, t.Else} {
			b = binary.AppendUvarint(b, uint64(len(ops)))
			for i := range ops {
				b = e.request(b, &ops[i])
			}
		}
	}
	if l := r.Lease; l != nil {
		b = binary.AppendVarint(b, l.ID)
		b = binary.AppendVarint(b, l.TTL)
	}
	if c := r.Compact; c != nil {
		b = binary.AppendVarint(b, e.prevRev-c.Revision)
		b = appendBool(b, c.Physical)
	}
	return b
}

// Flags of an encoded comparison, above its target (bits 0-2) and result (bits 3-5) codes.
const (
	cmpOperand = 0x40
	cmpValue   = 0x80
)

func (e *encoder) compare(b []byte, c *Compare) []byte {
	b = e.s(b, c.Key)
	t, r := code(targetCodes, c.Target), code(resultCodes, c.Result)
	flags := t | r<<3
	if c.Operand != 0 {
		flags |= cmpOperand
	}
	if c.Value != (Value{}) {
		flags |= cmpValue
	}
	b = append(b, flags)
	if t == 0 {
		b = e.s(b, string(c.Target))
	}
	if r == 0 {
		b = e.s(b, string(c.Result))
	}
	if c.Operand != 0 {
		b = binary.AppendVarint(b, e.operand(c.Target, c.Operand))
	}
	if c.Value != (Value{}) {
		b = binary.AppendUvarint(b, c.Value.ID)
		b = binary.AppendVarint(b, int64(c.Value.Size))
	}
	return b
}

// operand maps a comparison's operand to a small number: revisions become distances from the last
// response's revision; versions stay as they are.
func (e *encoder) operand(t CompareTarget, v int64) int64 {
	if t == CompareModRevision || t == CompareCreate {
		return e.prevRev - v
	}
	return v
}

// Presence bits of a response's parts.
const (
	respRange = 1 << iota
	respPut
	respDelete
	respTxn
	respLease
)

// responseParts appends everything of r but its revision, which the caller wrote relative to its base.
func (e *encoder) responseParts(b []byte, r *Response) []byte {
	var parts byte
	if r.Range != nil {
		parts |= respRange
	}
	if r.Put != nil {
		parts |= respPut
	}
	if r.Delete != nil {
		parts |= respDelete
	}
	if r.Txn != nil {
		parts |= respTxn
	}
	if r.Lease != nil {
		parts |= respLease
	}
	b = append(b, parts)
	rev := r.Revision
	if g := r.Range; g != nil {
		b = binary.AppendUvarint(b, uint64(g.Len()))
		for i := range g.Len() {
			kv := g.At(i)
			b = e.kv(b, &kv, rev)
		}
		b = binary.AppendVarint(b, g.Count)
		b = appendBool(b, g.More)
	}
	if p := r.Put; p != nil {
		b = appendBool(b, p.PrevKV != nil)
		if p.PrevKV != nil {
			b = e.kv(b, p.PrevKV, rev)
		}
	}
	if d := r.Delete; d != nil {
		b = binary.AppendVarint(b, d.Deleted)
		b = binary.AppendUvarint(b, uint64(len(d.PrevKVs)))
		for i := range d.PrevKVs {
			b = e.kv(b, &d.PrevKVs[i], rev)
		}
	}
	if t := r.Txn; t != nil {
		b = appendBool(b, t.Succeeded)
		b = binary.AppendUvarint(b, uint64(len(t.Results)))
		for i := range t.Results {
			b = binary.AppendVarint(b, t.Results[i].Revision-rev)
			b = e.responseParts(b, &t.Results[i])
		}
	}
	if l := r.Lease; l != nil {
		b = binary.AppendVarint(b, l.ID)
		b = binary.AppendVarint(b, l.TTL)
	}
	return b
}

// kv appends kv as the fields that differ from its key's last key-value; rev is the revision of the
// record it is part of.
func (e *encoder) kv(b []byte, kv *KV, rev int64) []byte {
	if e.res != nil {
		return e.appendResidentKV(b, kv)
	}
	b, id := e.str(b, kv.Key)
	for uint64(len(e.kvs)) <= id {
		e.kvs = append(e.kvs, kvState{})
	}
	s := &e.kvs[id]
	var flags byte
	if kv.Value != s.value {
		flags |= kvValue
	}
	if kv.ModRevision != s.mod {
		flags |= kvMod
	}
	if kv.CreateRevision != s.create {
		flags |= kvCreate
	}
	if kv.Version != s.ver {
		if kv.Version == s.ver+1 {
			flags |= kvVersionNext
		} else {
			flags |= kvVersion
		}
	}
	if kv.Lease != s.lease {
		flags |= kvLease
	}
	b = append(b, flags)
	if flags&kvValue != 0 {
		b = binary.AppendUvarint(b, kv.Value.ID)
		b = binary.AppendVarint(b, int64(kv.Value.Size))
	}
	if flags&kvMod != 0 {
		b = binary.AppendVarint(b, rev-kv.ModRevision)
	}
	if flags&kvCreate != 0 {
		b = binary.AppendVarint(b, kv.ModRevision-kv.CreateRevision)
	}
	if flags&kvVersion != 0 {
		b = binary.AppendVarint(b, kv.Version)
	}
	if flags&kvLease != 0 {
		b = binary.AppendVarint(b, kv.Lease)
	}
	*s = kvState{value: kv.Value, create: kv.CreateRevision, mod: kv.ModRevision, ver: kv.Version, lease: kv.Lease}
	return b
}

// Flags of an encoded watch record.
const (
	wRequest = 1 << iota
	wCreated
	wProgress
	wCanceled
	wCompact
	wError
	wEvents
	wSameClient
)

// Flags of an encoded watch event, above its type code (bits 0-1).
const (
	evPrevKV   = 4
	evIsCreate = 8
)

func (e *encoder) watch(b []byte, r *WatchResponse) []byte {
	var flags uint64
	if r.Request != nil {
		flags |= wRequest
	}
	if r.Created {
		flags |= wCreated
	}
	if r.Progress {
		flags |= wProgress
	}
	if r.Canceled {
		flags |= wCanceled
	}
	if r.CompactRevision != 0 {
		flags |= wCompact
	}
	if r.Error != "" {
		flags |= wError
	}
	if len(r.Events) > 0 {
		flags |= wEvents
	}
	if c, ok := e.clients[r.Watcher]; ok && c == r.Client {
		flags |= wSameClient
	}
	e.clients[r.Watcher] = r.Client
	b = binary.AppendVarint(b, int64(r.Watcher))
	b = binary.AppendUvarint(b, flags)
	if flags&wSameClient == 0 {
		b = binary.AppendVarint(b, int64(r.Client))
	}
	b = binary.AppendVarint(b, r.Time-e.prevTime)
	e.prevTime = r.Time
	if q := r.Request; q != nil {
		b = e.s(b, q.Key)
		var qf byte
		for i, set := range []bool{q.End != "", q.Revision != 0, q.PrevKV, q.ProgressNotify, q.RequireLeader} {
			if set {
				qf |= 1 << i
			}
		}
		b = append(b, qf)
		if q.End != "" {
			b = e.s(b, q.End)
		}
		if q.Revision != 0 {
			b = binary.AppendVarint(b, e.prevRev-q.Revision)
		}
	}
	// A request record's revision is 0: keep the running revision for the records that have one.
	b = binary.AppendVarint(b, r.Revision-e.prevRev)
	if r.Revision != 0 {
		e.prevRev = r.Revision
	}
	if r.CompactRevision != 0 {
		b = binary.AppendVarint(b, r.Revision-r.CompactRevision)
	}
	if r.Error != "" {
		b = e.s(b, r.Error)
	}
	if len(r.Events) > 0 {
		b = binary.AppendUvarint(b, uint64(len(r.Events)))
		for i := range r.Events {
			ev := &r.Events[i]
			c := code(eventCodes, ev.Type)
			f := c
			if ev.PrevKV != nil {
				f |= evPrevKV
			}
			if ev.IsCreate {
				f |= evIsCreate
			}
			b = append(b, f)
			if c == 0 {
				b = e.s(b, string(ev.Type))
			}
			b = e.kv(b, &ev.KV, r.Revision)
			if ev.PrevKV != nil {
				b = e.kv(b, ev.PrevKV, r.Revision)
			}
		}
	}
	return b
}

// checkHeader validates a file's header and returns what it holds.
func checkHeader(h []byte) (byte, error) {
	if len(h) < headerSize || string(h[:len(formatMagic)]) != formatMagic {
		return 0, fmt.Errorf("%w: not a chaosbench history file", errFormat)
	}
	if v := h[len(formatMagic)]; v < minFormatVersion || v > FormatVersion {
		return 0, fmt.Errorf("%w: format version %d, this chaosbench reads versions %d to %d", errFormat, v, minFormatVersion, FormatVersion)
	}
	return h[len(formatMagic)+1], nil
}

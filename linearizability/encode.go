package linearizability

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// The history is written on the load generator's hot path, once per request, while etcd competes for the
// same CPUs. encoding/json's reflection costs several times what these appenders do, so operations and
// watch responses are encoded by hand. The output is exactly what encoding/json produces for the same
// values with the struct tags above (a property test checks this), and the files are read back with
// encoding/json.

// AppendOperation appends op as one JSON object.
func AppendOperation(b []byte, op *Operation) []byte {
	b = append(b, `{"client":`...)
	b = strconv.AppendInt(b, int64(op.Client), 10)
	if op.Op != "" {
		b = append(b, `,"op":`...)
		b = appendString(b, op.Op)
	}
	b = append(b, `,"call":`...)
	b = strconv.AppendInt(b, op.Call, 10)
	b = append(b, `,"return":`...)
	b = strconv.AppendInt(b, op.Return, 10)
	b = append(b, `,"req":`...)
	b = appendRequest(b, &op.Request)
	if op.Response != nil {
		b = append(b, `,"resp":`...)
		b = appendResponse(b, op.Response)
	}
	if op.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, op.Error)
	}
	return append(b, '}')
}

// AppendWatchResponse appends r as one JSON object.
func AppendWatchResponse(b []byte, r *WatchResponse) []byte {
	b = append(b, `{"watcher":`...)
	b = strconv.AppendInt(b, int64(r.Watcher), 10)
	b = append(b, `,"client":`...)
	b = strconv.AppendInt(b, int64(r.Client), 10)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, r.Time, 10)
	if q := r.Request; q != nil {
		b = append(b, `,"req":{"key":`...)
		b = appendString(b, q.Key)
		b = optString(b, "end", q.End)
		b = optInt(b, "rev", q.Revision)
		b = optBool(b, "prev_kv", q.PrevKV)
		b = optBool(b, "progress_notify", q.ProgressNotify)
		b = optBool(b, "require_leader", q.RequireLeader)
		b = append(b, '}')
	}
	b = append(b, `,"rev":`...)
	b = strconv.AppendInt(b, r.Revision, 10)
	b = optBool(b, "created", r.Created)
	if len(r.Events) > 0 {
		b = append(b, `,"events":[`...)
		for i := range r.Events {
			if i > 0 {
				b = append(b, ',')
			}
			e := &r.Events[i]
			b = append(b, `{"type":`...)
			b = appendString(b, string(e.Type))
			b = append(b, `,"kv":`...)
			b = appendKV(b, &e.KV)
			if e.PrevKV != nil {
				b = append(b, `,"prev_kv":`...)
				b = appendKV(b, e.PrevKV)
			}
			b = optBool(b, "is_create", e.IsCreate)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = optBool(b, "progress", r.Progress)
	b = optInt(b, "compact_rev", r.CompactRevision)
	b = optBool(b, "canceled", r.Canceled)
	b = optString(b, "error", r.Error)
	return append(b, '}')
}

func appendRequest(b []byte, r *Request) []byte {
	b = append(b, `{"kind":`...)
	b = appendString(b, string(r.Kind))
	if g := r.Range; g != nil {
		b = append(b, `,"range":{"key":`...)
		b = appendString(b, g.Key)
		b = optString(b, "end", g.End)
		b = optInt(b, "limit", g.Limit)
		b = optInt(b, "rev", g.Revision)
		b = optBool(b, "serializable", g.Serializable)
		b = optBool(b, "keys_only", g.KeysOnly)
		b = optBool(b, "count_only", g.CountOnly)
		b = append(b, '}')
	}
	if p := r.Put; p != nil {
		b = append(b, `,"put":{"key":`...)
		b = appendString(b, p.Key)
		b = append(b, `,"value":`...)
		b = appendValue(b, p.Value)
		b = optInt(b, "lease", p.Lease)
		b = optBool(b, "prev_kv", p.PrevKV)
		b = append(b, '}')
	}
	if d := r.Delete; d != nil {
		b = append(b, `,"delete":{"key":`...)
		b = appendString(b, d.Key)
		b = optString(b, "end", d.End)
		b = optBool(b, "prev_kv", d.PrevKV)
		b = append(b, '}')
	}
	if t := r.Txn; t != nil {
		b = append(b, `,"txn":{`...)
		sep := false
		if len(t.Compares) > 0 {
			b = append(b, `"if":[`...)
			for i := range t.Compares {
				if i > 0 {
					b = append(b, ',')
				}
				c := &t.Compares[i]
				b = append(b, `{"key":`...)
				b = appendString(b, c.Key)
				b = append(b, `,"target":`...)
				b = appendString(b, string(c.Target))
				b = append(b, `,"result":`...)
				b = appendString(b, string(c.Result))
				b = optInt(b, "operand", c.Operand)
				if c.Value != (Value{}) {
					b = append(b, `,"value":`...)
					b = appendValue(b, c.Value)
				}
				b = append(b, '}')
			}
			b = append(b, ']')
			sep = true
		}
		for _, branch := range []struct {
			name string
			ops  []Request
		}{{"then", t.Then}, {"else", t.Else}} {
			if len(branch.ops) == 0 {
				continue
			}
			if sep {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, branch.name...)
			b = append(b, `":[`...)
			for i := range branch.ops {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendRequest(b, &branch.ops[i])
			}
			b = append(b, ']')
			sep = true
		}
		b = append(b, '}')
	}
	if l := r.Lease; l != nil {
		b = append(b, `,"lease":{`...)
		b = appendFields(b, optInt(nil, "id", l.ID), optInt(nil, "ttl", l.TTL))
		b = append(b, '}')
	}
	if c := r.Compact; c != nil {
		b = append(b, `,"compact":{"rev":`...)
		b = strconv.AppendInt(b, c.Revision, 10)
		b = optBool(b, "physical", c.Physical)
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendResponse(b []byte, r *Response) []byte {
	b = append(b, `{"rev":`...)
	b = strconv.AppendInt(b, r.Revision, 10)
	if g := r.Range; g != nil {
		b = append(b, `,"range":{`...)
		if len(g.KVs) > 0 {
			b = append(b, `"kvs":`...)
			b = appendKVs(b, g.KVs)
			b = append(b, ',')
		}
		b = append(b, `"count":`...)
		b = strconv.AppendInt(b, g.Count, 10)
		b = optBool(b, "more", g.More)
		b = append(b, '}')
	}
	if p := r.Put; p != nil {
		b = append(b, `,"put":{`...)
		if p.PrevKV != nil {
			b = append(b, `"prev_kv":`...)
			b = appendKV(b, p.PrevKV)
		}
		b = append(b, '}')
	}
	if d := r.Delete; d != nil {
		b = append(b, `,"delete":{"deleted":`...)
		b = strconv.AppendInt(b, d.Deleted, 10)
		if len(d.PrevKVs) > 0 {
			b = append(b, `,"prev_kvs":`...)
			b = appendKVs(b, d.PrevKVs)
		}
		b = append(b, '}')
	}
	if t := r.Txn; t != nil {
		b = append(b, `,"txn":{"succeeded":`...)
		b = strconv.AppendBool(b, t.Succeeded)
		if len(t.Results) > 0 {
			b = append(b, `,"results":[`...)
			for i := range t.Results {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendResponse(b, &t.Results[i])
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	if l := r.Lease; l != nil {
		b = append(b, `,"lease":{"id":`...)
		b = strconv.AppendInt(b, l.ID, 10)
		b = append(b, `,"ttl":`...)
		b = strconv.AppendInt(b, l.TTL, 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendKVs(b []byte, kvs []KV) []byte {
	b = append(b, '[')
	for i := range kvs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendKV(b, &kvs[i])
	}
	return append(b, ']')
}

func appendKV(b []byte, kv *KV) []byte {
	b = append(b, `{"key":`...)
	b = appendString(b, kv.Key)
	if kv.Value != (Value{}) {
		b = append(b, `,"value":`...)
		b = appendValue(b, kv.Value)
	}
	b = optInt(b, "create", kv.CreateRevision)
	b = append(b, `,"mod":`...)
	b = strconv.AppendInt(b, kv.ModRevision, 10)
	b = optInt(b, "ver", kv.Version)
	b = optInt(b, "lease", kv.Lease)
	return append(b, '}')
}

func appendValue(b []byte, v Value) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, v.ID, 10)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, int64(v.Size), 10)
	return append(b, '}')
}

// appendFields joins already-encoded ",name:value" fields inside an object that has no mandatory field.
func appendFields(b []byte, fields ...[]byte) []byte {
	first := true
	for _, f := range fields {
		if len(f) == 0 {
			continue
		}
		if first {
			f = f[1:] // drop the leading comma
			first = false
		}
		b = append(b, f...)
	}
	return b
}

func optInt(b []byte, name string, v int64) []byte {
	if v == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

func optBool(b []byte, name string, v bool) []byte {
	if !v {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	return append(b, `":true`...)
}

func optString(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, v)
}

// appendString appends s as a JSON string. Plain printable ASCII, the common case for etcd keys, is copied
// directly; anything else goes through encoding/json so that escaping stays identical to it.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			enc, _ := json.Marshal(s) // a string always marshals
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

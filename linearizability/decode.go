package linearizability

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// The checker reads histories of hundreds of megabytes; encoding/json decodes them at a few tens of
// megabytes per second per core, so histories are read back by hand too. The decoder accepts any JSON
// object with these fields in any order (unknown fields are skipped), which covers what the hand-written
// encoders and encoding/json write; a property test checks both. Keys are interned: a history repeats a
// few thousand keys millions of times (list pages, watch events).

// decoder reads one JSON value at a time from b.
type decoder struct {
	b    []byte
	i    int
	keys map[string]string
}

var errSyntax = errors.New("invalid JSON")

func (d *decoder) fail(what string) error {
	return fmt.Errorf("%w: %s at offset %d", errSyntax, what, d.i)
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *decoder) expect(c byte) error {
	if d.peek() != c {
		return d.fail(fmt.Sprintf("expected %q", c))
	}
	d.i++
	return nil
}

// null consumes a null literal if one is next.
func (d *decoder) null() bool {
	if d.peek() == 'n' && d.i+4 <= len(d.b) && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// rawString returns the bytes of the next string (without quotes) and whether it has escapes.
func (d *decoder) rawString() ([]byte, bool, error) {
	if d.peek() != '"' {
		return nil, false, d.fail("expected a string")
	}
	d.i++
	start := d.i
	escaped := false
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			return s, escaped, nil
		case c == '\\':
			escaped = true
			d.i += 2
		case c < 0x20:
			return nil, false, d.fail("control character in string")
		default:
			d.i++
		}
	}
	return nil, false, d.fail("unterminated string")
}

func (d *decoder) str() (string, error) {
	start := d.i
	raw, escaped, err := d.rawString()
	if err != nil {
		return "", err
	}
	if !escaped {
		return string(raw), nil
	}
	var s string
	if err := json.Unmarshal(d.b[start:d.i], &s); err != nil {
		return "", d.fail(err.Error())
	}
	return s, nil
}

// key reads a string that is a key of the store, interned.
func (d *decoder) key() (string, error) {
	start := d.i
	raw, escaped, err := d.rawString()
	if err != nil {
		return "", err
	}
	if !escaped {
		if s, ok := d.keys[string(raw)]; ok {
			return s, nil
		}
		s := string(raw)
		d.keys[s] = s
		return s, nil
	}
	var s string
	if err := json.Unmarshal(d.b[start:d.i], &s); err != nil {
		return "", d.fail(err.Error())
	}
	if in, ok := d.keys[s]; ok {
		return in, nil
	}
	d.keys[s] = s
	return s, nil
}

func (d *decoder) number() ([]byte, error) {
	d.ws()
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			d.i++
			continue
		}
		break
	}
	if start == d.i {
		return nil, d.fail("expected a number")
	}
	return d.b[start:d.i], nil
}

func (d *decoder) int() (int64, error) {
	n, err := d.number()
	if err != nil {
		return 0, err
	}
	// Fast path for plain integers.
	var v int64
	neg := false
	j := 0
	if n[0] == '-' {
		neg, j = true, 1
	}
	if len(n)-j > 0 && len(n)-j < 19 {
		ok := true
		for _, c := range n[j:] {
			if c < '0' || c > '9' {
				ok = false
				break
			}
			v = v*10 + int64(c-'0')
		}
		if ok {
			if neg {
				v = -v
			}
			return v, nil
		}
	}
	v, err = strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return 0, d.fail(err.Error())
	}
	return v, nil
}

func (d *decoder) uint() (uint64, error) {
	n, err := d.number()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil {
		return 0, d.fail(err.Error())
	}
	return v, nil
}

func (d *decoder) bool() (bool, error) {
	d.ws()
	switch {
	case d.i+4 <= len(d.b) && string(d.b[d.i:d.i+4]) == "true":
		d.i += 4
		return true, nil
	case d.i+5 <= len(d.b) && string(d.b[d.i:d.i+5]) == "false":
		d.i += 5
		return false, nil
	}
	return false, d.fail("expected a boolean")
}

// object calls field for each field of the next object; field must consume the value.
func (d *decoder) object(field func(name []byte) error) error {
	if err := d.expect('{'); err != nil {
		return err
	}
	if d.peek() == '}' {
		d.i++
		return nil
	}
	for {
		name, _, err := d.rawString()
		if err != nil {
			return err
		}
		if err := d.expect(':'); err != nil {
			return err
		}
		if err := field(name); err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return nil
		default:
			return d.fail("expected , or }")
		}
	}
}

// array calls elem for each element of the next array (or nothing for null).
func (d *decoder) array(elem func() error) error {
	if d.null() {
		return nil
	}
	if err := d.expect('['); err != nil {
		return err
	}
	if d.peek() == ']' {
		d.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return nil
		default:
			return d.fail("expected , or ]")
		}
	}
}

// skip skips any value (an unknown field).
func (d *decoder) skip() error {
	switch d.peek() {
	case '{':
		return d.object(func([]byte) error { return d.skip() })
	case '[':
		return d.array(d.skip)
	case '"':
		_, _, err := d.rawString()
		return err
	case 't', 'f':
		_, err := d.bool()
		return err
	case 'n':
		if d.null() {
			return nil
		}
	}
	_, err := d.number()
	return err
}

func (d *decoder) operation(op *Operation) error {
	return d.object(func(name []byte) (err error) {
		switch string(name) {
		case "client":
			var v int64
			v, err = d.int()
			op.Client = int(v)
		case "op":
			op.Op, err = d.str()
		case "call":
			op.Call, err = d.int()
		case "return":
			op.Return, err = d.int()
		case "req":
			err = d.request(&op.Request)
		case "resp":
			if d.null() {
				return nil
			}
			op.Response = &Response{}
			err = d.response(op.Response)
		case "error":
			op.Error, err = d.str()
		default:
			err = d.skip()
		}
		return err
	})
}

func (d *decoder) request(r *Request) error {
	return d.object(func(name []byte) (err error) {
		if d.null() {
			return nil
		}
		switch string(name) {
		case "kind":
			var s string
			s, err = d.str()
			r.Kind = Kind(s)
		case "range":
			r.Range = &Range{}
			err = d.rangeReq(r.Range)
		case "put":
			r.Put = &Put{}
			err = d.put(r.Put)
		case "delete":
			r.Delete = &Delete{}
			err = d.object(func(name []byte) (err error) {
				switch string(name) {
				case "key":
					r.Delete.Key, err = d.key()
				case "end":
					r.Delete.End, err = d.str()
				case "prev_kv":
					r.Delete.PrevKV, err = d.bool()
				default:
					err = d.skip()
				}
				return err
			})
		case "txn":
			r.Txn = &Txn{}
			err = d.txn(r.Txn)
		case "lease":
			r.Lease = &Lease{}
			err = d.object(func(name []byte) (err error) {
				switch string(name) {
				case "id":
					r.Lease.ID, err = d.int()
				case "ttl":
					r.Lease.TTL, err = d.int()
				default:
					err = d.skip()
				}
				return err
			})
		case "compact":
			r.Compact = &Compact{}
			err = d.object(func(name []byte) (err error) {
				switch string(name) {
				case "rev":
					r.Compact.Revision, err = d.int()
				case "physical":
					r.Compact.Physical, err = d.bool()
				default:
					err = d.skip()
				}
				return err
			})
		default:
			err = d.skip()
		}
		return err
	})
}

func (d *decoder) rangeReq(g *Range) error {
	return d.object(func(name []byte) (err error) {
		switch string(name) {
		case "key":
			g.Key, err = d.key()
		case "end":
			g.End, err = d.str()
		case "limit":
			g.Limit, err = d.int()
		case "rev":
			g.Revision, err = d.int()
		case "serializable":
			g.Serializable, err = d.bool()
		case "keys_only":
			g.KeysOnly, err = d.bool()
		case "count_only":
			g.CountOnly, err = d.bool()
		default:
			err = d.skip()
		}
		return err
	})
}

func (d *decoder) put(p *Put) error {
	return d.object(func(name []byte) (err error) {
		switch string(name) {
		case "key":
			p.Key, err = d.key()
		case "value":
			err = d.value(&p.Value)
		case "lease":
			p.Lease, err = d.int()
		case "prev_kv":
			p.PrevKV, err = d.bool()
		default:
			err = d.skip()
		}
		return err
	})
}

func (d *decoder) value(v *Value) error {
	return d.object(func(name []byte) (err error) {
		switch string(name) {
		case "id":
			v.ID, err = d.uint()
		case "size":
			var n int64
			n, err = d.int()
			v.Size = int(n)
		default:
			err = d.skip()
		}
		return err
	})
}

func (d *decoder) txn(t *Txn) error {
	return d.object(func(name []byte) (err error) {
		switch string(name) {
		case "if":
			err = d.array(func() error {
				t.Compares = append(t.Compares, Compare{})
				c := &t.Compares[len(t.Compares)-1]
				return d.object(func(name []byte) (err error) {
					switch string(name) {
					case "key":
						c.Key, err = d.key()
					case "target":
						var s string
						s, err = d.str()
						c.Target = CompareTarget(s)
					case "result":
						var s string
						s, err = d.str()
						c.Result = CompareResult(s)
					case "operand":
						c.Operand, err = d.int()
					case "value":
						err = d.value(&c.Value)
					default:
						err = d.skip()
					}
					return err
				})
			})
		case "then":
			err = d.array(func() error {
				t.Then = append(t.Then, Request{})
				return d.request(&t.Then[len(t.Then)-1])
			})
		case "else":
			err = d.array(func() error {
				t.Else = append(t.Else, Request{})
				return d.request(&t.Else[len(t.Else)-1])
			})
		default:
			err = d.skip()
		}
		return err
	})
}

func (d *decoder) response(r *Response) error {
	return d.object(func(name []byte) (err error) {
		if d.null() {
			return nil
		}
		switch string(name) {
		case "rev":
			r.Revision, err = d.int()
		case "range":
			r.Range = &RangeResponse{}
			err = d.object(func(name []byte) (err error) {
				switch string(name) {
				case "kvs":
					r.Range.KVs, err = d.kvs()
				case "count":
					r.Range.Count, err = d.int()
				case "more":
					r.Range.More, err = d.bool()
				default:
					err = d.skip()
				}
				return err
			})
		case "put":
			r.Put = &PutResponse{}
			err = d.object(func(name []byte) (err error) {
				if string(name) == "prev_kv" {
					if d.null() {
						return nil
					}
					r.Put.PrevKV = &KV{}
					return d.kv(r.Put.PrevKV)
				}
				return d.skip()
			})
		case "delete":
			r.Delete = &DeleteResponse{}
			err = d.object(func(name []byte) (err error) {
				switch string(name) {
				case "deleted":
					r.Delete.Deleted, err = d.int()
				case "prev_kvs":
					r.Delete.PrevKVs, err = d.kvs()
				default:
					err = d.skip()
				}
				return err
			})
		case "txn":
			r.Txn = &TxnResponse{}
			err = d.object(func(name []byte) (err error) {
				switch string(name) {
				case "succeeded":
					r.Txn.Succeeded, err = d.bool()
				case "results":
					err = d.array(func() error {
						r.Txn.Results = append(r.Txn.Results, Response{})
						return d.response(&r.Txn.Results[len(r.Txn.Results)-1])
					})
				default:
					err = d.skip()
				}
				return err
			})
		case "lease":
			r.Lease = &LeaseResponse{}
			err = d.object(func(name []byte) (err error) {
				switch string(name) {
				case "id":
					r.Lease.ID, err = d.int()
				case "ttl":
					r.Lease.TTL, err = d.int()
				default:
					err = d.skip()
				}
				return err
			})
		default:
			err = d.skip()
		}
		return err
	})
}

func (d *decoder) kvs() ([]KV, error) {
	var out []KV
	err := d.array(func() error {
		out = append(out, KV{})
		return d.kv(&out[len(out)-1])
	})
	return out, err
}

func (d *decoder) kv(kv *KV) error {
	return d.object(func(name []byte) (err error) {
		switch string(name) {
		case "key":
			kv.Key, err = d.key()
		case "value":
			err = d.value(&kv.Value)
		case "create":
			kv.CreateRevision, err = d.int()
		case "mod":
			kv.ModRevision, err = d.int()
		case "ver":
			kv.Version, err = d.int()
		case "lease":
			kv.Lease, err = d.int()
		default:
			err = d.skip()
		}
		return err
	})
}

func (d *decoder) watchResponse(r *WatchResponse) error {
	return d.object(func(name []byte) (err error) {
		switch string(name) {
		case "watcher":
			var v int64
			v, err = d.int()
			r.Watcher = int(v)
		case "client":
			var v int64
			v, err = d.int()
			r.Client = int(v)
		case "time":
			r.Time, err = d.int()
		case "req":
			if d.null() {
				return nil
			}
			q := &WatchRequest{}
			r.Request = q
			err = d.object(func(name []byte) (err error) {
				switch string(name) {
				case "key":
					q.Key, err = d.key()
				case "end":
					q.End, err = d.str()
				case "rev":
					q.Revision, err = d.int()
				case "prev_kv":
					q.PrevKV, err = d.bool()
				case "progress_notify":
					q.ProgressNotify, err = d.bool()
				case "require_leader":
					q.RequireLeader, err = d.bool()
				default:
					err = d.skip()
				}
				return err
			})
		case "rev":
			r.Revision, err = d.int()
		case "created":
			r.Created, err = d.bool()
		case "events":
			err = d.array(func() error {
				r.Events = append(r.Events, Event{})
				e := &r.Events[len(r.Events)-1]
				return d.object(func(name []byte) (err error) {
					switch string(name) {
					case "type":
						var s string
						s, err = d.str()
						e.Type = EventType(s)
					case "kv":
						err = d.kv(&e.KV)
					case "prev_kv":
						if d.null() {
							return nil
						}
						e.PrevKV = &KV{}
						err = d.kv(e.PrevKV)
					case "is_create":
						e.IsCreate, err = d.bool()
					default:
						err = d.skip()
					}
					return err
				})
			})
		case "progress":
			r.Progress, err = d.bool()
		case "compact_rev":
			r.CompactRevision, err = d.int()
		case "canceled":
			r.Canceled, err = d.bool()
		case "error":
			r.Error, err = d.str()
		default:
			err = d.skip()
		}
		return err
	})
}

// DecodeOperation decodes one JSON-encoded operation (a line of history.jsonl).
func DecodeOperation(b []byte, op *Operation) error {
	d := &decoder{b: b, keys: map[string]string{}}
	if err := d.operation(op); err != nil {
		return err
	}
	if d.peek() != 0 {
		return d.fail("trailing data")
	}
	return nil
}

// DecodeWatchResponse decodes one JSON-encoded watch record (a line of watch.jsonl).
func DecodeWatchResponse(b []byte, r *WatchResponse) error {
	d := &decoder{b: b, keys: map[string]string{}}
	if err := d.watchResponse(r); err != nil {
		return err
	}
	if d.peek() != 0 {
		return d.fail("trailing data")
	}
	return nil
}

package linearizability

import (
	"fmt"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// opKey is the key an operation is mostly about, for naming violations.
func opKey(op *history.Operation) string {
	r := &op.Request
	switch r.Kind {
	case history.KindRange:
		if r.Range != nil {
			return r.Range.Key
		}
	case history.KindPut:
		if r.Put != nil {
			return r.Put.Key
		}
	case history.KindDelete:
		if r.Delete != nil {
			return r.Delete.Key
		}
	case history.KindTxn:
		if r.Txn != nil {
			if len(r.Txn.Compares) > 0 {
				return r.Txn.Compares[0].Key
			}
			for _, b := range [][]history.Request{r.Txn.Then, r.Txn.Else} {
				for i := range b {
					if k := opKey(&history.Operation{Request: b[i]}); k != "" {
						return k
					}
				}
			}
		}
	}
	return ""
}

// describe names operation i for messages: its record number in history.bin counted from 0 (the line of
// `chaosbench history dump`, as check.json's ops number it), client, request and outcome.
func (c *checker) describe(i int) string {
	return describeOp(i, c.op(i))
}

func describeOp(i int, op *history.Operation) string {
	s := fmt.Sprintf("op %d (client %d, %s)", i, op.Client, op.Request.String())
	if op.Response == nil {
		return s + " [failed: " + shorten(op.Error, 60) + "]"
	}
	return s
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func describeKV(kv *history.KV) string {
	if kv == nil {
		return "nothing"
	}
	val := fmt.Sprintf("#%d", kv.Value.ID)
	if kv.Value.ID == 0 {
		val = "(no value)"
	}
	s := fmt.Sprintf("%q=%s (mod %d, create %d, ver %d", kv.Key, val, kv.ModRevision, kv.CreateRevision, kv.Version)
	if kv.Lease != 0 {
		s += fmt.Sprintf(", lease %x", kv.Lease)
	}
	return s + ")"
}

func describeRec(key string, r rec) string {
	return describeKV(&history.KV{Key: key, Value: history.Value{ID: r.value}, ModRevision: r.mod, CreateRevision: r.create, Version: r.version, Lease: r.lease})
}

func describeEvent(e *history.Event) string {
	if e.Type == history.EventDelete {
		return fmt.Sprintf("delete %q at %d", e.KV.Key, e.KV.ModRevision)
	}
	return "put " + describeKV(&e.KV)
}

// fmtTime formats a time offset from the run's base.
func fmtTime(ns int64) string {
	switch {
	case ns >= infinity:
		return "never"
	case ns <= -infinity:
		return "the start"
	}
	return "+" + time.Duration(ns).Round(time.Microsecond).String()
}

// describeResponse summarises a response for visualizations.
func describeResponse(op *history.Operation) string {
	if op.Response == nil {
		return "failed: " + shorten(op.Error, 80)
	}
	r := op.Response
	var parts []string
	var walk func(r *history.Response)
	walk = func(r *history.Response) {
		switch {
		case r.Range != nil:
			var kvs []string
			for i := range r.Range.Len() {
				if i == 4 {
					kvs = append(kvs, fmt.Sprintf("… %d more", r.Range.Len()-4))
					break
				}
				kv := r.Range.At(i)
				kvs = append(kvs, fmt.Sprintf("%s=#%d@%d v%d", kv.Key, kv.Value.ID, kv.ModRevision, kv.Version))
			}
			parts = append(parts, fmt.Sprintf("[%s] count %d", strings.Join(kvs, ", "), r.Range.Count))
		case r.Put != nil:
			if r.Put.PrevKV != nil {
				parts = append(parts, "prev "+describeKV(r.Put.PrevKV))
			} else {
				parts = append(parts, "ok")
			}
		case r.Delete != nil:
			parts = append(parts, fmt.Sprintf("deleted %d", r.Delete.Deleted))
		case r.Txn != nil:
			parts = append(parts, map[bool]string{true: "then", false: "else"}[r.Txn.Succeeded])
			for i := range r.Txn.Results {
				walk(&r.Txn.Results[i])
			}
		case r.Lease != nil:
			parts = append(parts, fmt.Sprintf("lease %x ttl %d", r.Lease.ID, r.Lease.TTL))
		}
	}
	walk(r)
	return fmt.Sprintf("rev %d %s", r.Revision, strings.Join(parts, " "))
}

// by names the operation that wrote revision r, when it is known.
func (c *checker) by(r int64) string {
	if r <= c.base || r > c.maxRev {
		return ""
	}
	if w := c.writer.Get(c.rev(r)); w >= 0 {
		return " by " + c.describe(int(w))
	}
	return ""
}

// recBy describes a key's version and the operation that wrote it.
func (c *checker) recBy(key string, r rec) string {
	return describeRec(key, r) + ", written" + c.by(r.mod)
}

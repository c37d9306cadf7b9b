package linearizability

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// Names of the checks, as they appear in summaries (results.Check.Name).
const (
	CheckLinearizability = "linearizability"
	CheckWatch           = "watch"
	CheckSerializable    = "serializable-reads"
)

// Violation is one broken guarantee, with what a human needs to find it in the history: the key, the
// revision, the operations (indexes into History.Operations: record numbers of history.bin, counted from 0
// like the lines of `chaosbench history dump`) and the watcher.
type Violation struct {
	Check    string `json:"check"`
	Kind     string `json:"kind"`
	Key      string `json:"key,omitempty"`
	Revision int64  `json:"rev,omitempty"`
	Ops      []int  `json:"ops,omitempty"`
	Watcher  int    `json:"watcher,omitempty"`
	// Time is the earliest time involved (ns since the run's base), to order violations.
	Time    int64  `json:"time"`
	Message string `json:"message"`
	// Known names the known upstream issue the violation was attributed to, by the evidence the history
	// recorded (Report.KnownIssues); such a violation does not make its check's verdict a violation.
	Known string `json:"known,omitempty"`
}

// String is the violation in one line: kind, key, revision and message.
func (v Violation) String() string {
	s := v.Kind
	if v.Key != "" {
		s += fmt.Sprintf(" on key %q", v.Key)
	}
	if v.Revision != 0 {
		s += fmt.Sprintf(" at revision %d", v.Revision)
	}
	return s + ": " + v.Message
}

// opState says what the checker knows about whether an operation took effect.
type opState uint8

const (
	opAcked      opState = iota // etcd answered: the response says what happened
	opUnresolved                // failed or timed out: may or may not have taken effect
	opResolved                  // failed, but its effect was observed: it took effect at rev
	opDropped                   // failed, and the revision log proves it never took effect
	opIgnored                   // failed reads, keep-alives and grants: nothing to check
)

// opInfo is what the checker derives about one operation.
//
// It also says what kind of request an operation is, as far as the passes that look for one kind need to
// know, so that they do not decode every operation of a history held in a store to find it.
type opInfo struct {
	call, ret int64 // ret is math.MaxInt64 for failed operations: they may take effect any time later
	hdr       int64 // header revision of an answered operation
	rev       int64 // revision the operation wrote at; 0 when it wrote nothing or that is unknown
	seen      int64 // resolved: earliest time its effect was observed
	state     opState
	taken     int8 // transaction branch taken: 1 then, 0 else, -1 unknown
	wrote     bool // an answered operation changed the store (so hdr is its own revision)
	writes    bool // the request can change the store (some branch puts or deletes, or a revoke)

	answered bool   // etcd answered it (whatever state the checker puts it in)
	kind     opKind // 48 bytes in all
}

// opKind is the kind of request an operation is, for the passes that look for one kind.
type opKind uint8

const (
	kindOther        opKind = iota
	kindSerializable        // a serializable range
	kindPastRead            // a linearizable range at a past revision
	kindKeepAlive
	kindCompact
)

// txnView sees every KV request as a transaction: a plain range, put or delete is the Then branch of a
// transaction without compares, which always takes Then.
type txnView struct {
	cmps     []history.Compare
	branches [2][]history.Request // [0] else, [1] then
	results  []history.Response   // results of the branch taken; nil for failed operations
}

// viewOf is called for every operation by several passes of a check: the view of a plain request points at
// the operation's own request and response rather than copying them, which would allocate each time.
func viewOf(op *history.Operation) (txnView, bool) {
	req := &op.Request
	switch req.Kind {
	case history.KindRange, history.KindPut, history.KindDelete:
		v := txnView{branches: [2][]history.Request{nil, unsafe.Slice(req, 1)}}
		if op.Response != nil {
			v.results = unsafe.Slice(op.Response, 1)
		}
		return v, true
	case history.KindTxn:
		if req.Txn == nil {
			return txnView{}, false
		}
		v := txnView{cmps: req.Txn.Compares, branches: [2][]history.Request{req.Txn.Else, req.Txn.Then}}
		if op.Response != nil && op.Response.Txn != nil {
			v.results = op.Response.Txn.Results
		}
		return v, true
	}
	return txnView{}, false
}

// takenBranch returns the branch an answered request took.
func takenBranch(op *history.Operation) int8 {
	if op.Request.Kind == history.KindTxn {
		if op.Response == nil || op.Response.Txn == nil {
			return -1
		}
		if op.Response.Txn.Succeeded {
			return 1
		}
		return 0
	}
	return 1
}

// canWrite reports whether a request can change the store.
func canWrite(req *history.Request) bool {
	switch req.Kind {
	case history.KindPut, history.KindDelete, history.KindLeaseRevoke:
		return true
	case history.KindTxn:
		if req.Txn == nil {
			return false
		}
		for _, b := range [][]history.Request{req.Txn.Then, req.Txn.Else} {
			for i := range b {
				if b[i].Kind == history.KindPut || b[i].Kind == history.KindDelete {
					return true
				}
			}
		}
	}
	return false
}

// answeredWrote reports whether an answered KV request changed the store: its branch put something or
// deleted at least one key.
func answeredWrote(op *history.Operation, v txnView, taken int8) (wrote, ok bool) {
	if taken < 0 {
		return false, false
	}
	branch := v.branches[taken]
	if len(v.results) != len(branch) {
		return false, false
	}
	for i := range branch {
		switch branch[i].Kind {
		case history.KindPut:
			wrote = true
		case history.KindDelete:
			d := v.results[i].Delete
			if d == nil {
				return false, false
			}
			if d.Deleted > 0 {
				wrote = true
			}
		case history.KindRange:
			if v.results[i].Range == nil {
				return false, false
			}
		default:
			return false, false
		}
	}
	return wrote, true
}

// violations collects what the checks find, per check.
type violations struct {
	list []Violation
}

func (vs *violations) add(v Violation) { vs.list = append(vs.list, v) }

func (vs *violations) of(check string) []Violation {
	var out []Violation
	for _, v := range vs.list {
		if v.Check == check {
			out = append(out, v)
		}
	}
	slices.SortStableFunc(out, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(a.Time, b.Time), cmp.Compare(a.Revision, b.Revision), strings.Compare(a.Key, b.Key))
	})
	return out
}

const infinity = math.MaxInt64

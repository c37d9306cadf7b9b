package linearizability

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// keyStep is one operation of a request's branch, as it concerns one key.
type keyStep struct {
	kind history.Kind // KindRange, KindPut or KindDelete

	known bool // the answer is known (the request was answered)

	// Range: what it returned for the key.
	result    *history.KV
	count     int64
	keysOnly  bool
	countOnly bool

	// Put.
	value     uint64
	lease     int64
	checkPrev bool
	prev      *history.KV

	// Delete: whether it removed the key (1, 0, or -1 when unknown) and, when asked, the previous value.
	deleted int8
}

// keyOp is one request as it concerns one key: the porcupine input of the key's partition. Requests carry
// the revisions etcd gave them, so the per-key model checks the key's versions and its order of revisions,
// not only its values.
type keyOp struct {
	op       int32
	client   int32 // the operation's client, call time, and whether it was answered, for porcupine
	call     int64
	key      string
	cmps     []history.Compare // compares on this key
	allCmps  bool              // every compare of the request is on this key: the key alone decides the branch
	branches [2][]keyStep
	taken    int8  // branch taken: 1 then, 0 else, -1 unknown
	rev      int64 // revision the request wrote (0: none or unknown)
	hdr      int64 // revision the request saw, for requests that wrote nothing (0: unknown)
	maybe    bool  // failed: may not have taken effect
	revoke   int64 // a lease revoke: the lease
	ret      int64 // the request's (bounded) return time: a lease may expire before it
	observes bool  // the request tells something about the key (a read, compare, count or previous value)
	answered bool
}

// kstate is the state of one key in the per-key model: the key's current version and what the order of
// revisions allows next.
type kstate struct {
	exists bool
	any    bool  // nothing is known: the next answer says what the key was
	unk    uint8 // unknown fields (unkCreate, unkVersion, unkMod)
	r      rec
	last   int64 // revision of the last write to the key (0: unknown)
	floor  int64 // highest revision a request on the key has seen: later writes must be above it
}

const unkMod uint8 = 1 << 7 // the value and mod revision are unknown (a write nobody observed)

// keyModel is the per-key porcupine model. mayExpire says whether a lease may have expired before time t.
type keyModel struct {
	mayExpire func(lease, t int64) bool
}

func (m *keyModel) porcupine(init []kstate) porcupine.Model {
	nd := porcupine.NondeterministicModel{
		Init: func() []any {
			out := make([]any, len(init))
			for i := range init {
				out[i] = init[i]
			}
			return out
		},
		Step: func(state, input, _ any) []any {
			next := m.step(state.(kstate), input.(*keyOp))
			out := make([]any, len(next))
			for i := range next {
				out[i] = next[i]
			}
			return out
		},
		Hash: func(state any) uint64 {
			s := state.(kstate)
			h := uint64(s.r.mod)*0x9e3779b97f4a7c15 ^ s.r.value ^ uint64(s.r.version)<<32 ^ uint64(s.floor)*31 ^ uint64(s.last)*17
			if s.exists {
				h ^= 1
			}
			return h
		},
		DescribeOperation: func(input, _ any) string { return input.(*keyOp).String() },
		DescribeState:     func(state any) string { return state.(kstate).String() },
	}
	return nd.ToModel()
}

// step returns every state the key can be in after op, from s; none when op cannot follow s.
func (m *keyModel) step(s kstate, op *keyOp) []kstate {
	var out []kstate
	if op.maybe {
		out = append(out, s)
	}
	variants := []kstate{s}
	if s.exists && !s.any && s.r.lease != 0 && m.mayExpire(s.r.lease, op.ret) {
		// The lease may have expired (deleting the key) before this request.
		e := kstate{floor: s.floor}
		variants = append(variants, e)
	}
	for _, v := range variants {
		if op.revoke != 0 {
			if n, ok := m.revoke(v, op); ok {
				out = append(out, n)
			}
			continue
		}
		cmp := compareKey(v, op.cmps)
		var try []int8
		switch {
		case op.taken >= 0:
			if (op.taken == 1 && cmp == 0) || (op.taken == 0 && op.allCmps && cmp == 1) {
				continue
			}
			try = []int8{op.taken}
		case op.allCmps && cmp >= 0:
			try = []int8{cmp}
		default:
			try = []int8{0, 1}
		}
		for _, b := range try {
			if n, ok := m.run(v, op, op.branches[b]); ok {
				out = append(out, n)
			}
		}
	}
	return out
}

// run applies a branch's steps on the key in order.
func (m *keyModel) run(s kstate, op *keyOp, steps []keyStep) (kstate, bool) {
	wroteKey := false
	for i := range steps {
		st := &steps[i]
		switch st.kind {
		case history.KindRange:
			if !st.known {
				continue
			}
			var ok bool
			if st.countOnly {
				ok = s.any || s.exists == (st.count > 0)
				if s.any {
					s = kstate{exists: st.count > 0, any: st.count > 0, floor: s.floor, last: s.last}
				}
			} else {
				s, ok = matchKey(s, st.result, st.keysOnly)
			}
			if !ok {
				return s, false
			}
		case history.KindPut:
			if st.checkPrev {
				var ok bool
				if s, ok = matchKey(s, st.prev, false); !ok {
					return s, false
				}
			}
			if op.rev != 0 && ((s.last != 0 && op.rev <= s.last) || op.rev <= s.floor) {
				return s, false
			}
			n := kstate{exists: true, r: rec{value: st.value, mod: op.rev, lease: st.lease}, last: op.rev, floor: s.floor}
			switch {
			case s.any:
				n.unk = unkCreate | unkVersion
			case s.exists:
				n.r.create, n.r.version, n.unk = s.r.create, s.r.version+1, s.unk&(unkCreate|unkVersion)
			default:
				n.r.create, n.r.version = op.rev, 1
				if op.rev == 0 {
					n.unk |= unkCreate
				}
			}
			if op.rev == 0 {
				n.unk |= unkMod
			}
			s = n
			wroteKey = true
		case history.KindDelete:
			if st.checkPrev {
				var ok bool
				if s, ok = matchKey(s, st.prev, false); !ok {
					return s, false
				}
			}
			exists := s.exists || s.any
			switch st.deleted {
			case 1:
				if !exists {
					return s, false
				}
			case 0:
				if s.exists && !s.any {
					return s, false
				}
				if s.any {
					s = kstate{floor: s.floor, last: s.last}
				}
				continue
			}
			if !exists {
				continue
			}
			if op.rev != 0 && ((s.last != 0 && op.rev <= s.last) || op.rev <= s.floor) {
				return s, false
			}
			s = kstate{last: op.rev, floor: s.floor}
			wroteKey = true
		}
	}
	// Where the request sits in the revision order, as the key sees it.
	switch {
	case op.rev != 0 && !wroteKey:
		if s.last != 0 && s.last >= op.rev {
			return s, false
		}
		s.floor = max(s.floor, op.rev)
	case op.rev == 0 && op.hdr != 0:
		if s.last != 0 && s.last > op.hdr {
			return s, false
		}
		s.floor = max(s.floor, op.hdr)
	}
	return s, true
}

// revoke applies a lease revoke to the key.
func (m *keyModel) revoke(s kstate, op *keyOp) (kstate, bool) {
	attached := s.exists && !s.any && s.r.lease == op.revoke
	switch {
	case attached && op.rev != 0:
		if (s.last != 0 && op.rev <= s.last) || op.rev <= s.floor {
			return s, false
		}
		return kstate{last: op.rev, floor: s.floor}, true
	case attached && op.hdr != 0:
		return s, false // the revoke wrote nothing, yet the key was attached
	case attached:
		return kstate{floor: s.floor}, true
	}
	if op.hdr != 0 {
		if s.last != 0 && s.last > op.hdr {
			return s, false
		}
		s.floor = max(s.floor, op.hdr)
	}
	return s, true
}

// matchKey checks what an answer says about the key (kv, or nil for absent) against s, and fills in what
// s did not know.
func matchKey(s kstate, kv *history.KV, keysOnly bool) (kstate, bool) {
	if s.any {
		if kv == nil {
			return kstate{floor: s.floor, last: s.last}, true
		}
		return kstate{exists: true, r: rec{value: kv.Value.ID, create: kv.CreateRevision, mod: kv.ModRevision, version: kv.Version, lease: kv.Lease},
			floor: s.floor, last: max(s.last, kv.ModRevision)}, true
	}
	if kv == nil {
		return s, !s.exists
	}
	if !s.exists || kv.Lease != s.r.lease {
		return s, false
	}
	if s.unk&unkMod != 0 {
		s.r.mod, s.last = kv.ModRevision, kv.ModRevision
		if !keysOnly {
			s.r.value = kv.Value.ID
			s.unk &^= unkMod
		}
	} else if kv.ModRevision != s.r.mod || (!keysOnly && kv.Value.ID != s.r.value) {
		return s, false
	}
	if s.unk&unkCreate != 0 {
		s.r.create = kv.CreateRevision
	} else if kv.CreateRevision != s.r.create {
		return s, false
	}
	if s.unk&unkVersion != 0 {
		s.r.version = kv.Version
	} else if kv.Version != s.r.version {
		return s, false
	}
	s.unk &= unkMod
	return s, true
}

// compareKey evaluates compares on the key: 1 true, 0 false, -1 unknown.
func compareKey(s kstate, cmps []history.Compare) int8 {
	out := int8(1)
	for i := range cmps {
		c := &cmps[i]
		if s.any {
			out = -1
			continue
		}
		var have int64
		unknown := false
		switch c.Target {
		case history.CompareValue:
			if !s.exists {
				return 0
			}
			if s.unk&unkMod != 0 {
				out = -1
				continue
			}
			if !compareInt(cmp.Compare(s.r.value, c.Value.ID), c.Result) {
				return 0
			}
			continue
		case history.CompareModRevision:
			have, unknown = s.r.mod, s.unk&unkMod != 0
		case history.CompareVersion:
			have, unknown = s.r.version, s.unk&unkVersion != 0
		case history.CompareCreate:
			have, unknown = s.r.create, s.unk&unkCreate != 0
		}
		if !s.exists {
			have, unknown = 0, false
		}
		if unknown {
			out = -1
			continue
		}
		if !compareInt(cmp.Compare(have, c.Operand), c.Result) {
			return 0
		}
	}
	return out
}

func (s kstate) String() string {
	var b strings.Builder
	switch {
	case s.any:
		b.WriteString("unknown")
	case !s.exists:
		b.WriteString("absent")
	default:
		val := fmt.Sprintf("#%d", s.r.value)
		mod := fmt.Sprint(s.r.mod)
		if s.unk&unkMod != 0 {
			val, mod = "?", "?"
		}
		ver, create := fmt.Sprint(s.r.version), fmt.Sprint(s.r.create)
		if s.unk&unkVersion != 0 {
			ver = "?"
		}
		if s.unk&unkCreate != 0 {
			create = "?"
		}
		fmt.Fprintf(&b, "%s mod %s create %s ver %s", val, mod, create, ver)
		if s.r.lease != 0 {
			fmt.Fprintf(&b, " lease %x", s.r.lease)
		}
	}
	fmt.Fprintf(&b, " (last write %d, seen %d)", s.last, s.floor)
	return b.String()
}

func (op *keyOp) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "op %d: ", op.op)
	if op.revoke != 0 {
		fmt.Fprintf(&b, "revoke %x", op.revoke)
	}
	for i, c := range op.cmps {
		if i == 0 {
			b.WriteString("if ")
		}
		if c.Target == history.CompareValue {
			fmt.Fprintf(&b, "value%s#%d ", c.Result, c.Value.ID)
		} else {
			fmt.Fprintf(&b, "%s%s%d ", c.Target, c.Result, c.Operand)
		}
	}
	desc := func(steps []keyStep) string {
		var parts []string
		for _, st := range steps {
			switch st.kind {
			case history.KindRange:
				if !st.known {
					parts = append(parts, "get")
				} else if st.countOnly {
					parts = append(parts, fmt.Sprintf("count -> %d", st.count))
				} else if st.result == nil {
					parts = append(parts, "get -> none")
				} else {
					parts = append(parts, fmt.Sprintf("get -> #%d@%d v%d", st.result.Value.ID, st.result.ModRevision, st.result.Version))
				}
			case history.KindPut:
				p := fmt.Sprintf("put #%d", st.value)
				if st.checkPrev {
					p += fmt.Sprintf(" prev %s", describeKV(st.prev))
				}
				parts = append(parts, p)
			case history.KindDelete:
				parts = append(parts, fmt.Sprintf("delete (%d)", st.deleted))
			}
		}
		return strings.Join(parts, ", ")
	}
	switch op.taken {
	case 1:
		b.WriteString(desc(op.branches[1]))
	case 0:
		b.WriteString("else " + desc(op.branches[0]))
	default:
		fmt.Fprintf(&b, "then %s else %s", desc(op.branches[1]), desc(op.branches[0]))
	}
	switch {
	case op.rev != 0:
		fmt.Fprintf(&b, " @%d", op.rev)
	case op.hdr != 0:
		fmt.Fprintf(&b, " (rev %d)", op.hdr)
	}
	if op.maybe {
		b.WriteString(" [maybe]")
	}
	return b.String()
}

package linearizability

// Who wrote each revision: an answered write took its header's revision; a failed write whose unique
// value any answer or watch event shows took effect at the revision it was seen with. Two writes cannot
// share a revision.

import (
	"fmt"
	"math/bits"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// valueRef locates the write of a value id: which operation and branch wrote it, to which key (its rank).
type valueRef struct {
	op     int32
	key    int32
	branch int8
	dup    bool // written by more than one request: useless as evidence
	set    bool // an entry of the dense index (its zero value is no write)
}

// valueIndex maps every written value id to the request that wrote it. The run's ids are a client's number
// plus one in the high 32 bits and its own sequence number in the low ones (workloads.Client.NewValue), so
// each client's ids are dense: they index that client's part of one paged array, with no hashing. An id
// outside that scheme (a history from elsewhere) goes to a map; ids that would make a client's part much
// longer than the history has operations do too, so a stray id cannot make the index large.
//
// It also remembers the values it found right lately (clean): a list shows every object's value again
// and again, and a value found right at a revision needs no second look, which would read its write's
// info back from a page.
type valueIndex struct {
	from  []int // by client: where its part of dense begins; from[len(from)-1] is dense's length
	dense *history.Paged[valueRef]
	other map[uint64]valueRef
	clean []cleanSighting // two ways per set, the one met last first
}

// cleanSighting is a value found right: seen under its key at its revision.
type cleanSighting struct {
	id  uint64
	rev int64
	key string
}

// maxIndexedClients bounds the clients whose ids are indexed densely.
const maxIndexedClients = 1 << 16

// valueExtents counts, in a first pass, the dense ids of each client: one more than the highest sequence
// number it wrote, up to limit.
type valueExtents struct {
	n     []int
	limit uint64
}

func newValueExtents(ops int) *valueExtents { return &valueExtents{limit: 4*uint64(ops) + 4096} }

// note counts id.
func (e *valueExtents) note(id uint64) {
	client, seq := id>>32, id&(1<<32-1)
	if client >= maxIndexedClients || seq >= e.limit {
		return
	}
	if client >= uint64(len(e.n)) {
		e.n = append(e.n, make([]int, int(client)+1-len(e.n))...)
	}
	e.n[client] = max(e.n[client], int(seq)+1)
}

// newValueIndex returns an empty index for the ids of extents, in a paged array of c, remembering about
// two values found right per key of the history.
func (c *checker) newValueIndex(e *valueExtents, keys int) *valueIndex {
	x := &valueIndex{from: make([]int, len(e.n)+1), other: map[uint64]valueRef{}}
	for client, n := range e.n {
		x.from[client+1] = x.from[client] + n
	}
	x.dense = newArray[valueRef](c, x.from[len(e.n)])
	x.clean = make([]cleanSighting, 1<<max(bits.Len(uint(2*keys)), 10))
	return x
}

// slot returns the place of id in dense, or -1 when id goes to the map.
func (x *valueIndex) slot(id uint64) int {
	client, seq := id>>32, id&(1<<32-1)
	if client >= uint64(len(x.from)-1) || seq >= uint64(x.from[client+1]-x.from[client]) {
		return -1
	}
	return x.from[client] + int(seq)
}

// get returns the write of id.
func (x *valueIndex) get(id uint64) (valueRef, bool) {
	if i := x.slot(id); i >= 0 {
		ref := x.dense.Get(i)
		return ref, ref.set
	}
	ref, ok := x.other[id]
	return ref, ok
}

// add notes that operation op's branch wrote id to key; a second write of id makes it a duplicate.
func (x *valueIndex) add(id uint64, op int32, branch int8, key int32) {
	i := x.slot(id)
	var ref valueRef
	if i >= 0 {
		ref = x.dense.Get(i)
	} else {
		ref = x.other[id]
	}
	if ref.set {
		ref.dup = ref.dup || ref.op != op || ref.key != key
	} else {
		ref = valueRef{key: key, op: op, branch: branch, set: true}
	}
	if i >= 0 {
		x.dense.Set(i, ref)
	} else {
		x.other[id] = ref
	}
}

// cleanSet returns the first of the two ways of id's set in clean.
func (x *valueIndex) cleanSet(id uint64) int {
	return int((id*0x9e3779b97f4a7c15)>>(64-bits.Len(uint(len(x.clean)-1)))) &^ 1
}

// isClean reports whether kv was found right lately: value, key and mod revision alike.
func (x *valueIndex) isClean(kv *history.KV) bool {
	i := x.cleanSet(kv.Value.ID)
	for w := range 2 {
		if s := &x.clean[i+w]; s.id == kv.Value.ID && s.rev == kv.ModRevision && s.key == kv.Key {
			if w == 1 {
				x.clean[i], x.clean[i+1] = x.clean[i+1], x.clean[i]
			}
			return true
		}
	}
	return false
}

// markClean notes that kv, the value of an answered write, was found right: the same sighting again needs
// no second look. It takes the place of the one of its set met longest ago.
func (x *valueIndex) markClean(kv *history.KV) {
	i := x.cleanSet(kv.Value.ID)
	x.clean[i+1] = x.clean[i]
	x.clean[i] = cleanSighting{id: kv.Value.ID, rev: kv.ModRevision, key: kv.Key}
}

// indexValues maps every written value id to the request that wrote it: a pass to size the index, and
// one to fill it.
func (c *checker) indexValues() {
	extents := newValueExtents(c.hist.Len())
	c.eachWrite(func(_ int32, _ int8, p *history.Put) { extents.note(p.Value.ID) })
	c.values = c.newValueIndex(extents, len(c.ks.keys))
	c.eachWrite(func(i int32, b int8, p *history.Put) { c.values.add(p.Value.ID, i, b, c.rank(p.Key)) })
}

// eachWrite calls fn with every put of a value, of either branch, of every operation.
func (c *checker) eachWrite(fn func(op int32, branch int8, p *history.Put)) {
	c.hist.Scan(func(i int, op *history.Operation) {
		v, ok := viewOf(op)
		if !ok {
			return
		}
		for b := range 2 {
			for _, sub := range v.branches[b] {
				if sub.Kind != history.KindPut || sub.Put == nil || sub.Put.Value.ID == 0 {
					continue
				}
				fn(int32(i), int8(b), sub.Put)
			}
		}
	})
}

// claim records that operation i wrote revision r. Two writes cannot share a revision.
func (c *checker) claim(i int32, r int64) {
	if r <= c.base || r > c.maxRev {
		return
	}
	if w := c.writer.Get(c.rev(r)); w >= 0 && w != i {
		a, b := c.op(int(w)), c.op(int(i))
		c.vs.add(Violation{Check: CheckLinearizability, Kind: "duplicate revision", Revision: r, Key: opKey(b),
			Ops: []int{int(w), int(i)}, Time: min(a.Call, b.Call),
			Message: fmt.Sprintf("two writes took revision %d: %s and %s", r, c.describe(int(w)), c.describe(int(i)))})
		return
	}
	c.writer.Set(c.rev(r), i)
}

// claimAnswered gives every answered write its revision: the response header's.
func (c *checker) claimAnswered() {
	c.hist.Scan(func(i int, op *history.Operation) {
		oi := c.ops.Get(i)
		if oi.state != opAcked {
			return
		}
		v, ok := viewOf(op)
		if !ok {
			return
		}
		wrote, ok := answeredWrote(op, v, oi.taken)
		if !ok {
			c.vs.add(Violation{Check: CheckLinearizability, Kind: "malformed response", Key: opKey(op), Ops: []int{i}, Time: op.Call,
				Message: fmt.Sprintf("the response does not match the request: %s", c.describe(i))})
			oi.state = opIgnored
			c.ops.Set(i, oi)
			return
		}
		if wrote {
			oi.wrote, oi.rev = true, oi.hdr
			c.ops.Set(i, oi)
			c.claim(int32(i), oi.hdr)
		}
	})
}

// resolveFromAnswers, resolveFromWatch and claimResolved match every value seen (in reads, previous values
// and watch events) with its write. An answered write must be seen at its own revision and key; a failed
// write whose value was seen took effect, at the revision it was seen with.
func (c *checker) resolveFromAnswers() {
	var buf []history.KV
	c.hist.Scan(func(i int, op *history.Operation) {
		if op.Response != nil {
			forEachKV(op.Response, &buf, func(kv history.KV) { c.see(&kv, op.Return, sighting{op: int32(i)}) })
		}
	})
}

// resolveFromWatch matches the values of a watch record's events and their previous values.
func (c *checker) resolveFromWatch(r *history.WatchResponse) {
	for j := range r.Events {
		e := &r.Events[j]
		c.see(&e.KV, r.Time, sighting{op: -1, watcher: int32(r.Watcher)})
		if e.PrevKV != nil {
			c.see(e.PrevKV, r.Time, sighting{op: -1, watcher: int32(r.Watcher), prev: true})
		}
	}
}

// claimResolved gives every failed write whose value was seen the revision it was seen with.
func (c *checker) claimResolved() {
	for i := range c.ops.Len() {
		if c.ops.Get(i).state == opResolved {
			c.claim(int32(i), c.ops.Get(i).rev)
		}
	}
}

// sighting says who saw a value: an operation's answer, or a watcher's event or its previous value.
type sighting struct {
	op      int32 // -1 for a watcher
	watcher int32
	prev    bool
}

// String is the sighting as a message begins it.
func (w sighting) String() string {
	switch {
	case w.op >= 0:
		return "a read returned"
	case w.prev:
		return fmt.Sprintf("watcher %d received as previous value", w.watcher)
	}
	return fmt.Sprintf("watcher %d received", w.watcher)
}

// ops returns the operations of the sighting (none for a watcher).
func (w sighting) ops() []int {
	if w.op < 0 {
		return nil
	}
	return []int{int(w.op)}
}

// see matches one value seen, at time at, by who, with its write.
func (c *checker) see(kv *history.KV, at int64, who sighting) {
	if kv.Value.ID == 0 || kv.ModRevision <= c.base {
		return // not a value of this run (keys-only reads, foreign or earlier writes)
	}
	if c.values.isClean(kv) {
		return // an answered write's value seen again under its key at the same revision, found right before
	}
	ref, ok := c.values.get(kv.Value.ID)
	if !ok {
		c.vs.add(Violation{Check: CheckLinearizability, Kind: "phantom value", Key: kv.Key, Revision: kv.ModRevision, Ops: who.ops(), Time: at,
			Message: fmt.Sprintf("%s value #%d at revision %d, which no request of the run wrote", who, kv.Value.ID, kv.ModRevision)})
		return
	}
	if ref.dup {
		return
	}
	if c.key(ref.key) != kv.Key { // every key written is in the keyspace: ref.key is a rank
		c.vs.add(Violation{Check: CheckLinearizability, Kind: "value under wrong key", Key: kv.Key, Revision: kv.ModRevision,
			Ops: append([]int{int(ref.op)}, who.ops()...), Time: at,
			Message: fmt.Sprintf("%s value #%d under key %q, but %s wrote it to %q", who, kv.Value.ID, kv.Key, c.describe(int(ref.op)), c.key(ref.key))})
		return
	}
	if r, ok := c.refused[ref.op]; ok {
		c.seeRefused(kv, at, who, ref.op, r)
		return
	}
	oi := c.ops.Get(int(ref.op))
	switch oi.state {
	case opAcked:
		if c.seeAnswered(kv, at, who, ref, &oi) {
			c.values.markClean(kv)
		}
	case opUnresolved:
		oi.state, oi.rev, oi.taken, oi.seen = opResolved, kv.ModRevision, ref.branch, at
		c.ops.Set(int(ref.op), oi)
		c.stats.ResolvedWrites++
	case opResolved:
		if oi.rev != kv.ModRevision {
			c.vs.add(Violation{Check: CheckLinearizability, Kind: "value at two revisions", Key: kv.Key, Revision: kv.ModRevision,
				Ops: append([]int{int(ref.op)}, who.ops()...), Time: min(at, oi.seen),
				Message: fmt.Sprintf("value #%d of %s was seen with mod revisions %d and %d", kv.Value.ID, c.describe(int(ref.op)), oi.rev, kv.ModRevision)})
		}
		oi.seen = min(oi.seen, at)
		c.ops.Set(int(ref.op), oi)
	}
}

// seeAnswered checks a value seen against its write, which etcd answered (oi): it must be seen at the
// revision the write was acknowledged at, and only from the branch it took. It reports whether the
// sighting was found right.
func (c *checker) seeAnswered(kv *history.KV, at int64, who sighting, ref valueRef, oi *opInfo) bool {
	found := len(c.vs.list)
	if oi.wrote && oi.taken == ref.branch && kv.ModRevision != oi.rev {
		c.vs.add(Violation{Check: CheckLinearizability, Kind: "write at wrong revision", Key: kv.Key, Revision: oi.rev,
			Ops: append([]int{int(ref.op)}, who.ops()...), Time: min(at, oi.call),
			Message: fmt.Sprintf("%s was acknowledged at revision %d, but %s it with mod revision %d", c.describe(int(ref.op)), oi.rev, who, kv.ModRevision)})
	}
	if oi.taken != ref.branch {
		if rev, ok := ownSighting(c.op(int(ref.op)), kv.Value.ID); ok && rev == kv.ModRevision {
			c.appliedTwice(ref, kv, oi)
			return false
		}
		c.vs.add(Violation{Check: CheckLinearizability, Kind: "write from untaken branch", Key: kv.Key, Revision: kv.ModRevision,
			Ops: append([]int{int(ref.op)}, who.ops()...), Time: min(at, oi.call),
			Message: fmt.Sprintf("%s value #%d, written by the branch %s did not take", who, kv.Value.ID, c.describe(int(ref.op)))})
	}
	return len(c.vs.list) == found
}

// ownSighting returns the mod revision with which an operation's own answer shows value id, if it does.
func ownSighting(op *history.Operation, id uint64) (rev int64, ok bool) {
	if op.Response == nil {
		return 0, false
	}
	forEachKV(op.Response, nil, func(kv history.KV) {
		if !ok && kv.Value.ID == id {
			rev, ok = kv.ModRevision, true
		}
	})
	return rev, ok
}

// appliedTwice reports, once per operation, a transaction whose own answer shows the value its untaken
// branch writes: the branch it did not take was applied before the one it took, so etcd applied the
// one request twice. Every other sighting of that value at that revision is the same anomaly. Whether the
// request was sent twice (a client's retry: a known issue) is for the attempts the history recorded to
// say (attribute.go), not for this message.
func (c *checker) appliedTwice(ref valueRef, kv *history.KV, oi *opInfo) {
	if c.twice == nil {
		c.twice = map[int32]bool{}
	}
	if c.twice[ref.op] {
		return
	}
	c.twice[ref.op] = true
	branch := [2]string{"else", "then"}
	c.vs.add(Violation{Check: CheckLinearizability, Kind: "request applied twice", Key: kv.Key, Revision: kv.ModRevision,
		Ops: []int{int(ref.op)}, Time: oi.call,
		Message: fmt.Sprintf("%s took its %s branch at revision %d, yet its own answer shows value #%d, which only "+
			"its %s branch writes, with mod revision %d: etcd applied the one request twice",
			c.describe(int(ref.op)), branch[1-ref.branch], oi.hdr, kv.Value.ID, branch[ref.branch], kv.ModRevision)})
}

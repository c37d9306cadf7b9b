package linearizability

// Who wrote each revision: an answered write took its header's revision; a failed write whose unique
// value any answer or watch event shows took effect at the revision it was seen with. Two writes cannot
// share a revision.

import (
	"fmt"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// valueRef locates the write of a value id: which operation and branch wrote it, to which key.
type valueRef struct {
	key    string
	op     int32
	branch int8
	dup    bool  // written by more than one request: useless as evidence
	set    bool  // an entry of the dense index (its zero value is no write)
	clean  int64 // a mod revision the value was seen with and found right (answered writes), or 0
}

// valueIndex maps every written value id to the request that wrote it. The run's ids are a client's number
// plus one in the high 32 bits and its own sequence number in the low ones (workloads.Client.NewValue), so
// each client's ids are dense: they index a slice of that client's writes, with no hashing. An id outside
// that scheme (a history from elsewhere) goes to a map; ids that would make a client's slice much longer
// than the history has operations do too, so a stray id cannot make the index large.
type valueIndex struct {
	clients [][]valueRef
	other   map[uint64]valueRef
	limit   uint64 // longest a client's slice may grow
}

// maxIndexedClients bounds the clients whose ids are indexed densely.
const maxIndexedClients = 1 << 16

func newValueIndex(ops int) *valueIndex {
	return &valueIndex{other: map[uint64]valueRef{}, limit: 4*uint64(ops) + 4096}
}

// slot returns the dense entry of id, or nil when id goes to the map; grow makes room for it.
func (x *valueIndex) slot(id uint64, grow bool) *valueRef {
	client, seq := id>>32, id&(1<<32-1)
	if client >= maxIndexedClients || seq >= x.limit {
		return nil
	}
	if client >= uint64(len(x.clients)) {
		if !grow {
			return nil
		}
		x.clients = append(x.clients, make([][]valueRef, int(client)+1-len(x.clients))...)
	}
	refs := x.clients[client]
	if seq >= uint64(len(refs)) {
		if !grow {
			return nil
		}
		refs = append(refs, make([]valueRef, int(seq)+1-len(refs))...)
		x.clients[client] = refs[:cap(refs)]
		refs = x.clients[client]
	}
	return &refs[seq]
}

// get returns the write of id.
func (x *valueIndex) get(id uint64) (valueRef, bool) {
	if ref := x.slot(id, false); ref != nil {
		return *ref, ref.set
	}
	ref, ok := x.other[id]
	return ref, ok
}

// markClean notes that id, of an answered write, was seen with mod revision rev and found right: the same
// sighting again (a list shows every object's value, again and again) needs no second look, which would
// read the write's info back from its page.
func (x *valueIndex) markClean(id uint64, rev int64) {
	if ref := x.slot(id, false); ref != nil {
		ref.clean = rev
		return
	}
	if ref, ok := x.other[id]; ok {
		ref.clean = rev
		x.other[id] = ref
	}
}

// add notes that operation op's branch wrote id to key; a second write of id makes it a duplicate.
func (x *valueIndex) add(id uint64, op int32, branch int8, key string) {
	ref := x.slot(id, true)
	var mapped valueRef
	if ref == nil {
		mapped = x.other[id]
		ref = &mapped
	}
	if ref.set {
		ref.dup = ref.dup || ref.op != op || ref.key != key
	} else {
		*ref = valueRef{key: key, op: op, branch: branch, set: true}
	}
	if ref == &mapped {
		x.other[id] = mapped
	}
}

// indexValues maps every written value id to the request that wrote it.
func (c *checker) indexValues() {
	c.values = newValueIndex(c.hist.Len())
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
				c.values.add(sub.Put.Value.ID, int32(i), int8(b), sub.Put.Key)
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
	c.hist.Scan(func(i int, op *history.Operation) {
		if op.Response != nil {
			forEachKV(op.Response, func(kv history.KV) { c.see(&kv, op.Return, sighting{op: int32(i)}) })
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
	ref, ok := c.values.get(kv.Value.ID)
	if !ok {
		c.vs.add(Violation{Check: CheckLinearizability, Kind: "phantom value", Key: kv.Key, Revision: kv.ModRevision, Ops: who.ops(), Time: at,
			Message: fmt.Sprintf("%s value #%d at revision %d, which no request of the run wrote", who, kv.Value.ID, kv.ModRevision)})
		return
	}
	if ref.dup {
		return
	}
	if ref.key != kv.Key {
		c.vs.add(Violation{Check: CheckLinearizability, Kind: "value under wrong key", Key: kv.Key, Revision: kv.ModRevision,
			Ops: append([]int{int(ref.op)}, who.ops()...), Time: at,
			Message: fmt.Sprintf("%s value #%d under key %q, but %s wrote it to %q", who, kv.Value.ID, kv.Key, c.describe(int(ref.op)), ref.key)})
		return
	}
	if ref.clean == kv.ModRevision {
		return // an answered write's value seen again at the same revision, found right before
	}
	oi := c.ops.Get(int(ref.op))
	switch oi.state {
	case opAcked:
		if c.seeAnswered(kv, at, who, ref, &oi) {
			c.values.markClean(kv.Value.ID, kv.ModRevision)
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
	forEachKV(op.Response, func(kv history.KV) {
		if !ok && kv.Value.ID == id {
			rev, ok = kv.ModRevision, true
		}
	})
	return rev, ok
}

// appliedTwice reports, once per operation, a transaction whose own answer shows the value its untaken
// branch writes: the branch it did not take was applied before the one it took, so etcd applied the
// one request twice. Every other sighting of that value at that revision is the same anomaly.
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
			"its %s branch writes, with mod revision %d: etcd applied the one request twice (a write sent again after "+
			"its first attempt was applied; etcd's Go client retries writes that end in DeadlineExceeded or Canceled "+
			"from the server: etcd-io/etcd#18424)",
			c.describe(int(ref.op)), branch[1-ref.branch], oi.hdr, kv.Value.ID, branch[ref.branch], kv.ModRevision)})
}

package linearizability

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// maxRevisionSpan bounds the revisions one check covers, so that a corrupt or absurd revision in a history
// cannot make the checker allocate without bound.
const maxRevisionSpan = 64 << 20

// watcher is one watch of the run with its records in arrival order.
type watcher struct {
	id, client int
	req        history.WatchRequest
	hasReq     bool
	requested  int64   // when the watch was asked for (its request record), or its first record
	recs       []int32 // indexes in History.Watches
}

// valueRef locates the write of a value id: which operation, branch and branch position wrote it.
type valueRef struct {
	op     int32
	branch int8
	key    string
	dup    bool // written by more than one request: useless as evidence
}

// compaction is an answered or failed compaction request.
type compaction struct {
	rev       int64
	call, ret int64 // ret is infinity when it failed
	acked     bool
}

// leaseSlack is how much earlier than the history's clock allows a lease may expire without a violation:
// etcd times leases with its own clock, and clocks tick at slightly different rates.
const leaseSlack = int64(100 * time.Millisecond)

// leaseInfo is what the history says about one lease.
type leaseInfo struct {
	// minExpiry is the earliest moment etcd may expire the lease: every answered grant or keep-alive sent
	// at call with TTL ttl proves the lease lives until at least call+ttl (leader changes only extend it).
	minExpiry int64
	revoked   int64 // return time of the first answered revoke; 0 when never revoked
	revokeOp  int32
	// expired is when the lease's expiry (or a failed revoke) was known to have deleted its keys: the
	// first revision only watchers saw that deleted every key attached to it, with nothing else to
	// explain the deletions. 0 when never.
	expired    int64
	expiredRev int64
}

// obsEvent is one event seen by a watcher, for the union of what all watchers saw.
type obsEvent struct {
	rev  int64
	rank int32
	rec  int32 // index of the watch record in History.Watches
	ev   int32 // index of the event in the record
}

// checker holds one check of one history.
type checker struct {
	h   *history.History
	ops []opInfo
	ks  keyspace
	vs  violations

	base, maxRev int64 // revisions base+1..maxRev are the run's; base and below came before it
	preRun       bool  // the store was not empty at the start: keys' first states are unknown

	values   map[uint64]valueRef
	writer   []int32 // by revision-base: the operation that wrote it, -1 none known
	existed  []int64 // by revision-base: earliest time some revision >= it was known to exist
	observed []obsEvent
	obsAt    []int32 // by revision-base: start of its events in observed; obsAt[len] = len(observed)

	// Uncertainty: revisions whose writer is unknown, and what might have written them.
	gaps      []int64 // revisions nobody observed and no answered or resolved operation wrote
	uncertain []int64 // gaps and revisions only watchers observed, sorted
	candFrom  []int64 // by key rank: first revision an unresolved operation could have written it (0: none)
	revokeAt  map[int64][]int32
	candRevok map[int64]int64 // lease: first revision a failed revoke of it could have taken effect

	watchers    []*watcher
	spans       []span
	coverage    [][]span // by key rank, computed on demand
	compactions []compaction
	leases      map[int64]*leaseInfo
	revokes     map[int64][]int32 // answered revokes by header revision

	stats Stats
}

// Stats counts what a check covered and what it could only check in part.
type Stats struct {
	Operations       int   `json:"operations"`
	WatchEvents      int   `json:"watch_events"`
	Watchers         int   `json:"watchers"`
	Keys             int   `json:"keys"`
	Revisions        int64 `json:"revisions"`
	FailedWrites     int   `json:"failed_writes"`
	ResolvedWrites   int   `json:"resolved_writes"`
	DroppedWrites    int   `json:"dropped_writes"`
	UnresolvedWrites int   `json:"unresolved_writes"`
	Gaps             int   `json:"gaps"`
	// Uncertain counts observations of keys that an unresolved write or a lease expiry may have changed
	// just before: checked per key and for what no unknown write can explain, not against the replay.
	Uncertain        int `json:"uncertain_observations"`
	Partitions       int `json:"partitions"`
	LongestPartition int `json:"longest_partition"`
}

func (c *checker) rev(r int64) int { return int(r - c.base) }

func (c *checker) key(rank int32) string { return c.ks.keys[rank] }

func (c *checker) rank(key string) int32 {
	if r, ok := c.ks.rank[key]; ok {
		return r
	}
	return -1
}

// prepare indexes the history: keys, watchers, value ids, the revision each write took, the revisions
// nobody can explain, and which failed writes may have taken effect.
func (c *checker) prepare() error {
	c.collectKeys()
	c.groupWatchers()
	c.classify()
	if err := c.bounds(); err != nil {
		return err
	}
	c.indexValues()
	c.claimAnswered()
	c.resolveFromEvidence()
	c.unionObserved()
	c.computeExisted()
	c.findGaps()
	c.watchSpans()
	c.candidates()
	return nil
}

// span is what one watcher vouches for: every change of the keys [lo, hi) at revisions from..to reached
// it (the watch checks hold it to that). A write nobody observed cannot have changed a covered key.
type span struct {
	lo, hi   int32
	from, to int64
}

// watchSpans computes the watchers' spans: from the revision each starts at to the last one it delivered
// an event or progress notification for.
func (c *checker) watchSpans() {
	for _, w := range c.watchers {
		if !w.hasReq {
			continue
		}
		from, to := w.req.Revision, int64(0)
		for _, i := range w.recs {
			r := &c.h.Watches[i]
			if r.Created && from == 0 {
				from = r.Revision + 1
			}
			if r.Progress {
				to = max(to, r.Revision)
			}
			for j := range r.Events {
				to = max(to, r.Events[j].KV.ModRevision)
			}
		}
		if from == 0 || to < from {
			continue
		}
		lo, hi := c.ks.interval(w.req.Key, w.req.End)
		c.spans = append(c.spans, span{lo: lo, hi: hi, from: from, to: to})
	}
	c.coverage = make([][]span, len(c.ks.keys))
}

// covered reports whether a watcher saw every change of key k at revision r.
func (c *checker) covered(k int32, r int64) bool {
	if len(c.spans) == 0 {
		return false
	}
	cov := c.coverage[k]
	if cov == nil {
		cov = []span{}
		for _, sp := range c.spans {
			if k >= sp.lo && k < sp.hi {
				cov = append(cov, span{from: sp.from, to: sp.to})
			}
		}
		slices.SortFunc(cov, func(a, b span) int { return cmpInt(a.from, b.from) })
		// Merge overlapping intervals.
		merged := cov[:0]
		for _, sp := range cov {
			if n := len(merged); n > 0 && sp.from <= merged[n-1].to+1 {
				merged[n-1].to = max(merged[n-1].to, sp.to)
				continue
			}
			merged = append(merged, sp)
		}
		cov = merged
		c.coverage[k] = cov
	}
	i := sort.Search(len(cov), func(i int) bool { return cov[i].to >= r })
	return i < len(cov) && cov[i].from <= r
}

// candidateRevisions returns the first and last revision a failed write may have taken effect at: a
// revision nobody is known to have written, known to exist only after the write was sent, at which no
// watcher covered a key the write certainly changes (each branch puts its keys). ok is false when there is
// none: the write never took effect.
func (c *checker) candidateRevisions(i int, from int64) (first, last int64, ok bool) {
	op := &c.h.Operations[i]
	// Each branch that writes: the keys it puts and the single keys it deletes. A put of a covered key
	// would have been seen (and resolved the write); a delete of a covered key either shows as a delete
	// event at that revision or, when the key did not exist, takes no revision at all.
	type branch struct{ puts, dels []int32 }
	var branches []branch
	if op.Request.Kind == history.KindLeaseRevoke {
		branches = []branch{{}}
	} else {
		v, _ := viewOf(op)
		for b := range 2 {
			writes := false
			var br branch
			for _, sub := range v.branches[b] {
				switch sub.Kind {
				case history.KindPut:
					writes = true
					br.puts = append(br.puts, c.rank(sub.Put.Key))
				case history.KindDelete:
					writes = true
					if sub.Delete.End == "" {
						br.dels = append(br.dels, c.rank(sub.Delete.Key))
					}
				}
			}
			if writes {
				branches = append(branches, br)
			}
		}
	}
	deletedAt := func(k int32, g int64) bool {
		for _, o := range c.observedAt(g) {
			if o.rank == k && c.event(o).Type == history.EventDelete {
				return true
			}
		}
		return false
	}
	possible := func(g int64) bool {
		for _, br := range branches {
			free := true
			for _, k := range br.puts {
				if c.covered(k, g) {
					free = false
					break
				}
			}
			for _, k := range br.dels {
				if free && c.covered(k, g) && !deletedAt(k, g) {
					free = false
				}
			}
			if free {
				return true
			}
		}
		return false
	}
	j := sort.Search(len(c.uncertain), func(j int) bool { return c.uncertain[j] >= from })
	for ; j < len(c.uncertain); j++ {
		if possible(c.uncertain[j]) {
			first, ok = c.uncertain[j], true
			break
		}
	}
	if !ok {
		return 0, 0, false
	}
	for k := len(c.uncertain) - 1; k >= j; k-- {
		if possible(c.uncertain[k]) {
			return first, c.uncertain[k], true
		}
	}
	return first, first, true
}

func (c *checker) collectKeys() {
	keys := map[string]struct{}{}
	add := func(k string) { keys[k] = struct{}{} }
	addKVs := func(kvs []history.KV) {
		for i := range kvs {
			add(kvs[i].Key)
		}
	}
	var addReq func(r *history.Request)
	addReq = func(r *history.Request) {
		switch r.Kind {
		case history.KindRange:
			if r.Range != nil && r.Range.End == "" {
				add(r.Range.Key)
			}
		case history.KindPut:
			if r.Put != nil {
				add(r.Put.Key)
			}
		case history.KindDelete:
			if r.Delete != nil && r.Delete.End == "" {
				add(r.Delete.Key)
			}
		case history.KindTxn:
			if r.Txn != nil {
				for _, cmp := range r.Txn.Compares {
					add(cmp.Key)
				}
				for i := range r.Txn.Then {
					addReq(&r.Txn.Then[i])
				}
				for i := range r.Txn.Else {
					addReq(&r.Txn.Else[i])
				}
			}
		}
	}
	var addResp func(r *history.Response)
	addResp = func(r *history.Response) {
		if r.Range != nil {
			for i := range r.Range.Len() {
				add(r.Range.At(i).Key)
			}
		}
		if r.Put != nil && r.Put.PrevKV != nil {
			add(r.Put.PrevKV.Key)
		}
		if r.Delete != nil {
			addKVs(r.Delete.PrevKVs)
		}
		if r.Txn != nil {
			for i := range r.Txn.Results {
				addResp(&r.Txn.Results[i])
			}
		}
	}
	for i := range c.h.Operations {
		op := &c.h.Operations[i]
		addReq(&op.Request)
		if op.Response != nil {
			addResp(op.Response)
		}
	}
	for i := range c.h.Watches {
		for _, e := range c.h.Watches[i].Events {
			add(e.KV.Key)
		}
	}
	c.ks = newKeyspace(keys)
	c.stats.Keys = len(c.ks.keys)
}

func (c *checker) groupWatchers() {
	byID := map[int]*watcher{}
	for i := range c.h.Watches {
		r := &c.h.Watches[i]
		w := byID[r.Watcher]
		if w == nil {
			w = &watcher{id: r.Watcher, client: r.Client, requested: r.Time}
			byID[r.Watcher] = w
			c.watchers = append(c.watchers, w)
		}
		if r.Request != nil && !w.hasReq {
			w.req, w.hasReq = *r.Request, true
			w.requested = min(w.requested, r.Time)
		}
		if r.Request != nil && r.Revision == 0 && !r.Created && len(r.Events) == 0 && !r.Progress && !r.Canceled && r.CompactRevision == 0 {
			continue // the request record
		}
		w.recs = append(w.recs, int32(i))
		c.stats.WatchEvents += len(r.Events)
	}
	slices.SortFunc(c.watchers, func(a, b *watcher) int { return a.id - b.id })
	c.stats.Watchers = len(c.watchers)
}

// classify fills opInfo for every operation and collects leases and compactions.
func (c *checker) classify() {
	c.ops = make([]opInfo, len(c.h.Operations))
	c.leases = map[int64]*leaseInfo{}
	c.revokes = map[int64][]int32{}
	c.stats.Operations = len(c.ops)
	lease := func(id int64) *leaseInfo {
		l := c.leases[id]
		if l == nil {
			l = &leaseInfo{}
			c.leases[id] = l
		}
		return l
	}
	for i := range c.h.Operations {
		op := &c.h.Operations[i]
		oi := &c.ops[i]
		oi.call, oi.ret, oi.taken = op.Call, op.Return, -1
		oi.writes = canWrite(&op.Request)
		failed := op.Response == nil
		if failed {
			oi.ret = infinity
			oi.state = opIgnored
			if oi.writes {
				oi.state = opUnresolved
				c.stats.FailedWrites++
			}
		} else {
			oi.state = opAcked
			oi.hdr = op.Response.Revision
			oi.taken = takenBranch(op)
		}
		switch op.Request.Kind {
		case history.KindLeaseGrant:
			if !failed && op.Response.Lease != nil {
				l := lease(op.Response.Lease.ID)
				l.minExpiry = max(l.minExpiry, op.Call+op.Response.Lease.TTL*1e9)
			}
		case history.KindLeaseKeepAlive:
			if !failed && op.Response.Lease != nil && op.Request.Lease != nil && op.Response.Lease.TTL > 0 {
				l := lease(op.Request.Lease.ID)
				l.minExpiry = max(l.minExpiry, op.Call+op.Response.Lease.TTL*1e9)
			}
		case history.KindLeaseRevoke:
			if op.Request.Lease == nil {
				oi.state = opIgnored
				continue
			}
			l := lease(op.Request.Lease.ID)
			if !failed {
				if l.revoked == 0 || op.Return < l.revoked {
					l.revoked, l.revokeOp = op.Return, int32(i)
				}
				c.revokes[oi.hdr] = append(c.revokes[oi.hdr], int32(i))
			}
		case history.KindCompact:
			if op.Request.Compact != nil {
				c.compactions = append(c.compactions, compaction{rev: op.Request.Compact.Revision, call: op.Call, ret: oi.ret, acked: !failed})
			}
			if failed {
				oi.state = opIgnored
			}
		}
	}
}

// bounds finds the revisions the run covers. base is the last revision before the run: the lowest header
// any answer carried, or the revision before the first write. A store that was empty at the start has
// base 1 (etcd starts at revision 1 with no keys).
func (c *checker) bounds() error {
	base, maxRev := int64(1<<62), int64(1)
	note := func(r int64) {
		if r > maxRev {
			maxRev = r
		}
	}
	for i := range c.h.Operations {
		op := &c.h.Operations[i]
		if op.Response == nil {
			continue
		}
		h := op.Response.Revision
		if h > 0 {
			base = min(base, h)
			note(h)
		}
		if v, ok := viewOf(op); ok && h > 0 {
			if wrote, ok := answeredWrote(op, v, takenBranch(op)); ok && wrote {
				base = min(base, h-1) // its own revision: the one before it existed
			}
		}
		forEachKV(op.Response, func(kv *history.KV) { note(kv.ModRevision) })
	}
	for i := range c.h.Watches {
		r := &c.h.Watches[i]
		note(r.Revision)
		for j := range r.Events {
			note(r.Events[j].KV.ModRevision)
		}
	}
	if base == 1<<62 {
		base = 1
	}
	base = max(base, 1)
	c.base, c.maxRev = base, max(maxRev, base)
	c.preRun = base > 1
	if span := c.maxRev - c.base; span > maxRevisionSpan {
		return fmt.Errorf("the history spans revisions %d to %d: more than %d revisions, refusing to check", c.base, c.maxRev, maxRevisionSpan)
	}
	c.stats.Revisions = c.maxRev - c.base
	n := c.rev(c.maxRev) + 1
	c.writer = make([]int32, n)
	for i := range c.writer {
		c.writer[i] = -1
	}
	return nil
}

// forEachKV calls fn for every key-value in a response, nested ones included.
func forEachKV(r *history.Response, fn func(kv *history.KV)) {
	if r.Range != nil {
		for i := range r.Range.Len() {
			fn(r.Range.At(i))
		}
	}
	if r.Put != nil && r.Put.PrevKV != nil {
		fn(r.Put.PrevKV)
	}
	if r.Delete != nil {
		for i := range r.Delete.PrevKVs {
			fn(&r.Delete.PrevKVs[i])
		}
	}
	if r.Txn != nil {
		for i := range r.Txn.Results {
			forEachKV(&r.Txn.Results[i], fn)
		}
	}
}

// indexValues maps every written value id to the request that wrote it.
func (c *checker) indexValues() {
	c.values = map[uint64]valueRef{}
	for i := range c.h.Operations {
		op := &c.h.Operations[i]
		v, ok := viewOf(op)
		if !ok {
			continue
		}
		for b := range 2 {
			for _, sub := range v.branches[b] {
				if sub.Kind != history.KindPut || sub.Put == nil || sub.Put.Value.ID == 0 {
					continue
				}
				id := sub.Put.Value.ID
				if ref, ok := c.values[id]; ok {
					ref.dup = ref.dup || ref.op != int32(i) || ref.key != sub.Put.Key
					c.values[id] = ref
					continue
				}
				c.values[id] = valueRef{op: int32(i), branch: int8(b), key: sub.Put.Key}
			}
		}
	}
}

// claim records that operation i wrote revision r. Two writes cannot share a revision.
func (c *checker) claim(i int32, r int64) {
	if r <= c.base || r > c.maxRev {
		return
	}
	if w := c.writer[c.rev(r)]; w >= 0 && w != i {
		a, b := &c.h.Operations[w], &c.h.Operations[i]
		c.vs.add(Violation{Check: CheckLinearizability, Kind: "duplicate revision", Revision: r, Key: opKey(b),
			Ops: []int{int(w), int(i)}, Time: min(a.Call, b.Call),
			Message: fmt.Sprintf("two writes took revision %d: %s and %s", r, c.describe(int(w)), c.describe(int(i)))})
		return
	}
	c.writer[c.rev(r)] = i
}

// claimAnswered gives every answered write its revision: the response header's.
func (c *checker) claimAnswered() {
	for i := range c.h.Operations {
		op := &c.h.Operations[i]
		oi := &c.ops[i]
		if oi.state != opAcked {
			continue
		}
		v, ok := viewOf(op)
		if !ok {
			continue
		}
		wrote, ok := answeredWrote(op, v, oi.taken)
		if !ok {
			c.vs.add(Violation{Check: CheckLinearizability, Kind: "malformed response", Key: opKey(op), Ops: []int{i}, Time: op.Call,
				Message: fmt.Sprintf("the response does not match the request: %s", c.describe(i))})
			oi.state = opIgnored
			continue
		}
		if wrote {
			oi.wrote, oi.rev = true, oi.hdr
			c.claim(int32(i), oi.hdr)
		}
	}
}

// resolveFromEvidence matches every value seen (in reads, previous values and watch events) with its write.
// An answered write must be seen at its own revision and key; a failed write whose value was seen took
// effect, at the revision it was seen with.
func (c *checker) resolveFromEvidence() {
	see := func(kv *history.KV, at int64, who string, ops []int) {
		if kv.Value.ID == 0 || kv.ModRevision <= c.base {
			return // not a value of this run (keys-only reads, foreign or earlier writes)
		}
		ref, ok := c.values[kv.Value.ID]
		if !ok {
			c.vs.add(Violation{Check: CheckLinearizability, Kind: "phantom value", Key: kv.Key, Revision: kv.ModRevision, Ops: ops, Time: at,
				Message: fmt.Sprintf("%s value #%d at revision %d, which no request of the run wrote", who, kv.Value.ID, kv.ModRevision)})
			return
		}
		if ref.dup {
			return
		}
		if ref.key != kv.Key {
			c.vs.add(Violation{Check: CheckLinearizability, Kind: "value under wrong key", Key: kv.Key, Revision: kv.ModRevision,
				Ops: append([]int{int(ref.op)}, ops...), Time: at,
				Message: fmt.Sprintf("%s value #%d under key %q, but %s wrote it to %q", who, kv.Value.ID, kv.Key, c.describe(int(ref.op)), ref.key)})
			return
		}
		oi := &c.ops[ref.op]
		switch oi.state {
		case opAcked:
			if oi.wrote && oi.taken == ref.branch && kv.ModRevision != oi.rev {
				c.vs.add(Violation{Check: CheckLinearizability, Kind: "write at wrong revision", Key: kv.Key, Revision: oi.rev,
					Ops: append([]int{int(ref.op)}, ops...), Time: min(at, oi.call),
					Message: fmt.Sprintf("%s was acknowledged at revision %d, but %s it with mod revision %d", c.describe(int(ref.op)), oi.rev, who, kv.ModRevision)})
			}
			if oi.taken != ref.branch {
				c.vs.add(Violation{Check: CheckLinearizability, Kind: "write from untaken branch", Key: kv.Key, Revision: kv.ModRevision,
					Ops: append([]int{int(ref.op)}, ops...), Time: min(at, oi.call),
					Message: fmt.Sprintf("%s value #%d, written by the branch %s did not take", who, kv.Value.ID, c.describe(int(ref.op)))})
			}
		case opUnresolved:
			oi.state, oi.rev, oi.taken, oi.seen = opResolved, kv.ModRevision, ref.branch, at
			c.stats.ResolvedWrites++
		case opResolved:
			if oi.rev != kv.ModRevision {
				c.vs.add(Violation{Check: CheckLinearizability, Kind: "value at two revisions", Key: kv.Key, Revision: kv.ModRevision,
					Ops: append([]int{int(ref.op)}, ops...), Time: min(at, oi.seen),
					Message: fmt.Sprintf("value #%d of %s was seen with mod revisions %d and %d", kv.Value.ID, c.describe(int(ref.op)), oi.rev, kv.ModRevision)})
			}
			oi.seen = min(oi.seen, at)
		}
	}
	for i := range c.h.Operations {
		op := &c.h.Operations[i]
		if op.Response == nil {
			continue
		}
		forEachKV(op.Response, func(kv *history.KV) { see(kv, op.Return, "a read returned", []int{i}) })
	}
	for i := range c.h.Watches {
		r := &c.h.Watches[i]
		for j := range r.Events {
			e := &r.Events[j]
			see(&e.KV, r.Time, fmt.Sprintf("watcher %d received", r.Watcher), nil)
			if e.PrevKV != nil {
				see(e.PrevKV, r.Time, fmt.Sprintf("watcher %d received as previous value", r.Watcher), nil)
			}
		}
	}
	for i := range c.ops {
		if c.ops[i].state == opResolved {
			c.claim(int32(i), c.ops[i].rev)
		}
	}
}

// unionObserved collects every event any watcher saw, by revision and key. Watchers must agree on what
// happened at a revision; a revision nobody wrote that watchers saw is still known, from them.
func (c *checker) unionObserved() {
	all := make([]obsEvent, 0, c.stats.WatchEvents)
	for i := range c.h.Watches {
		r := &c.h.Watches[i]
		for j := range r.Events {
			e := &r.Events[j]
			rev := e.KV.ModRevision
			if rev <= c.base || rev > c.maxRev {
				continue
			}
			all = append(all, obsEvent{rev: rev, rank: c.rank(e.KV.Key), rec: int32(i), ev: int32(j)})
		}
	}
	slices.SortFunc(all, func(a, b obsEvent) int {
		if a.rev != b.rev {
			return cmpInt(a.rev, b.rev)
		}
		if a.rank != b.rank {
			return int(a.rank - b.rank)
		}
		return int(a.rec - b.rec)
	})
	// Keep one event per revision and key; the others must agree with it.
	out := all[:0]
	for _, o := range all {
		if n := len(out); n > 0 && out[n-1].rev == o.rev && out[n-1].rank == o.rank {
			first := c.event(out[n-1])
			e := c.event(o)
			if first.Type != e.Type || !sameRecord(&first.KV, &e.KV) {
				w1, w2 := &c.h.Watches[out[n-1].rec], &c.h.Watches[o.rec]
				c.vs.add(Violation{Check: CheckWatch, Kind: "watchers disagree", Key: e.KV.Key, Revision: o.rev, Watcher: w2.Watcher, Time: min(w1.Time, w2.Time),
					Message: fmt.Sprintf("watcher %d received %s but watcher %d received %s", w1.Watcher, describeEvent(first), w2.Watcher, describeEvent(e))})
			}
			continue
		}
		out = append(out, o)
	}
	c.observed = slices.Clone(out) // the watchers' copies of each event are gone: keep what remains only
	n := c.rev(c.maxRev) + 1
	c.obsAt = make([]int32, n+1)
	j := 0
	for r := range n {
		c.obsAt[r] = int32(j)
		for j < len(out) && c.rev(out[j].rev) == r {
			j++
		}
	}
	c.obsAt[n] = int32(len(out))
}

func (c *checker) event(o obsEvent) *history.Event { return &c.h.Watches[o.rec].Events[o.ev] }

func (c *checker) observedAt(r int64) []obsEvent {
	i := c.rev(r)
	return c.observed[c.obsAt[i]:c.obsAt[i+1]]
}

// sameRecord reports whether two key-values are the same record (delete events carry only the key and
// the deletion's revision).
func sameRecord(a, b *history.KV) bool {
	return a.Key == b.Key && a.ModRevision == b.ModRevision && a.CreateRevision == b.CreateRevision &&
		a.Version == b.Version && a.Lease == b.Lease && a.Value.ID == b.Value.ID
}

// computeExisted finds, for every revision, the earliest moment the run knew it existed: an answer or
// watch response carrying that revision or a later one.
func (c *checker) computeExisted() {
	n := c.rev(c.maxRev) + 1
	c.existed = make([]int64, n)
	for i := range c.existed {
		c.existed[i] = infinity
	}
	note := func(r, t int64) {
		if r > c.base && r <= c.maxRev {
			i := c.rev(r)
			c.existed[i] = min(c.existed[i], t)
		}
	}
	for i := range c.h.Operations {
		op := &c.h.Operations[i]
		oi := &c.ops[i]
		switch {
		case op.Response != nil:
			note(op.Response.Revision, op.Return)
		case oi.state == opResolved:
			note(oi.rev, oi.seen)
		}
	}
	for i := range c.h.Watches {
		r := &c.h.Watches[i]
		note(r.Revision, r.Time)
		for j := range r.Events {
			note(r.Events[j].KV.ModRevision, r.Time)
		}
	}
	for i := n - 2; i >= 0; i-- {
		c.existed[i] = min(c.existed[i], c.existed[i+1])
	}
}

// existedAt returns when revision r was first known to exist.
func (c *checker) existedAt(r int64) int64 {
	if r <= c.base {
		return -infinity
	}
	if r > c.maxRev {
		return infinity
	}
	return c.existed[c.rev(r)]
}

// firstAfter returns the first revision known to exist only after time t: the first revision an operation
// called at t could have written.
func (c *checker) firstAfter(t int64) int64 {
	i := sort.Search(len(c.existed), func(i int) bool { return c.existed[i] > t })
	return c.base + int64(i)
}

func (c *checker) findGaps() {
	for r := c.base + 1; r <= c.maxRev; r++ {
		if c.writer[c.rev(r)] >= 0 {
			continue
		}
		if len(c.observedAt(r)) == 0 && len(c.revokes[r]) == 0 {
			c.gaps = append(c.gaps, r)
		}
		c.uncertain = append(c.uncertain, r)
	}
	c.stats.Gaps = len(c.gaps)
}

// candidates decides, for every failed write not resolved from evidence, whether it may have taken effect:
// only at a revision nobody is known to have written, known to exist only after the write was sent. A
// failed write with no such revision never took effect. The others may have, and their effect happened
// before the last such revision was known to exist, which bounds their return time.
func (c *checker) candidates() {
	c.candFrom = make([]int64, len(c.ks.keys))
	c.candRevok = map[int64]int64{}
	var lastUncertain int64 = -1
	if n := len(c.uncertain); n > 0 {
		lastUncertain = c.uncertain[n-1]
	}
	for i := range c.ops {
		oi := &c.ops[i]
		if oi.state != opUnresolved {
			continue
		}
		first, last, ok := c.candidateRevisions(i, c.firstAfter(oi.call))
		if lastUncertain < 0 || !ok {
			oi.state = opDropped
			c.stats.DroppedWrites++
			continue
		}
		oi.from = first
		c.stats.UnresolvedWrites++
		if t := c.existedAt(last); t < infinity {
			oi.ret = t
		}
		op := &c.h.Operations[i]
		if op.Request.Kind == history.KindLeaseRevoke {
			id := op.Request.Lease.ID
			if f, ok := c.candRevok[id]; !ok || oi.from < f {
				c.candRevok[id] = oi.from
			}
			continue
		}
		v, _ := viewOf(op)
		for b := range 2 {
			for _, sub := range v.branches[b] {
				lo, hi := int32(0), int32(0)
				switch sub.Kind {
				case history.KindPut:
					lo, hi = c.ks.interval(sub.Put.Key, "")
				case history.KindDelete:
					lo, hi = c.ks.interval(sub.Delete.Key, sub.Delete.End)
				}
				for k := lo; k < hi; k++ {
					if c.candFrom[k] == 0 || oi.from < c.candFrom[k] {
						c.candFrom[k] = oi.from
					}
				}
			}
		}
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

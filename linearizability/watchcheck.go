package linearizability

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// delivered is one event a watcher received.
type delivered struct {
	rank int32
	e    *history.Event
	rev  int64
	time int64
}

// checkWatches checks every watcher against the replay: etcd's watch guarantees, each as its own kind of
// violation (https://etcd.io/docs/latest/learning/api_guarantees/#watch-apis).
//
// One pass over the watch records checks every watcher at once, each response as it arrives and what it
// received one revision at a time, so that no watcher's events are held beyond the revision being
// compared. A watcher that received events out of revision order (a violation already) cannot be compared
// that way: it is checked again, alone, from its records held in memory. Each watcher's violations are
// reported together, in watcher order.
func (c *checker) checkWatches(s *sweep) {
	compactions := slices.Clone(c.compactions)
	slices.SortFunc(compactions, func(a, b compaction) int { return cmp.Compare(a.call, b.call) })
	streams := make(map[int]*watchStream, len(c.watchers))
	for _, w := range c.watchers {
		streams[w.id] = c.newWatchStream(s, w, compactions, false)
	}
	c.eachWatch(func(_ int32, r *history.WatchResponse) {
		if st := streams[r.Watcher]; !st.disordered && !isRequestRecord(r) {
			st.response(r)
		}
	})
	held := map[int][]*history.WatchResponse{}
	for _, w := range c.watchers {
		if streams[w.id].disordered || c.wl.holdAll {
			held[w.id] = []*history.WatchResponse{}
		}
	}
	if len(held) > 0 {
		c.eachWatch(func(_ int32, r *history.WatchResponse) {
			if recs, ok := held[r.Watcher]; ok && !isRequestRecord(r) {
				held[r.Watcher] = append(recs, r)
			}
		})
	}
	for _, w := range c.watchers {
		st := streams[w.id]
		if recs, ok := held[w.id]; ok {
			w.found, w.missed = nil, nil
			st = c.newWatchStream(s, w, compactions, true)
			for _, r := range recs {
				st.response(r)
			}
		}
		st.finish()
		for _, v := range append(w.found, w.missed...) {
			c.vs.add(v)
		}
		w.found, w.missed = nil, nil
	}
}

// watchViolation records what the checks of a watcher's responses found; deliveryViolation what comparing
// them with the replay found. A watcher's findings are reported in that order, as when each watcher was
// checked on its own, one check after the other.
func (c *checker) watchViolation(w *watcher, kind string, key string, rev, t int64, format string, args ...any) {
	w.found = append(w.found, c.newWatchViolation(w, kind, key, rev, t, format, args...))
}

func (c *checker) deliveryViolation(w *watcher, kind string, key string, rev, t int64, format string, args ...any) {
	w.missed = append(w.missed, c.newWatchViolation(w, kind, key, rev, t, format, args...))
}

func (c *checker) newWatchViolation(w *watcher, kind string, key string, rev, t int64, format string, args ...any) Violation {
	return Violation{Check: CheckWatch, Kind: kind, Key: key, Revision: rev, Watcher: w.id, Time: t,
		Message: fmt.Sprintf("watcher %d (client %d, %s): ", w.id, w.client, describeWatch(w)) + fmt.Sprintf(format, args...)}
}

func describeWatch(w *watcher) string {
	if !w.hasReq {
		return "request unknown"
	}
	s := fmt.Sprintf("watch %q", w.req.Key)
	if w.req.End != "" {
		s += fmt.Sprintf("..%q", w.req.End)
	}
	if w.req.Revision != 0 {
		s += fmt.Sprintf(" from %d", w.req.Revision)
	}
	return s
}

// watchStream is one watcher's responses as they arrived: each response is checked against what came
// before it (order, uniqueness, atomicity, progress), which only the arrival order shows; what the
// watcher received is compared with the replay revision by revision (deliveryCheck).
type watchStream struct {
	c *checker
	w *watcher
	// start is the first revision the watcher must deliver, earliest the first it may (see newWatchStream).
	start, earliest int64
	compactedBefore int64 // compacted by a compaction acknowledged before the watch was requested

	// held: every delivered event is kept in got and compared at the end (a watcher whose events came
	// out of order); otherwise only the current revision's, in cur, and compared as the next arrives.
	held       bool
	disordered bool // not held, and an event came out of revision order: check the watcher again, held
	got, cur   []delivered
	count      int // events delivered so far
	dc         deliveryCheck
	responses  int // responses so far

	lastEv, lastProg int64 // the highest event revision and progress notification so far
	lastRespLast     int64 // the revision of the last event of the latest response with events (-1: none)

	// Events of the current revision seen so far, to catch a duplicate: events arrive in revision order
	// or the order check already fails, so remembering one revision's keys is enough.
	curRev  int64
	curKeys []int32
	curSet  map[int32]bool // curKeys as a set, once a revision has many events (a revoke of a shared lease)
}

// newWatchStream starts the stream of watcher w at the first revision it must deliver: the one asked
// for. A watch from revision 0 starts after the revision of the member that registered it, at most the
// revision its created response carries (etcd reads that one after registering the watcher, so writes in
// between are delivered too; and the etcd client resumes such a watch at that revision, not the one
// after), and at least... nothing: a member catching up after a restart or a pause may be far behind the
// cluster. So events up to the created revision are optional, but once one is delivered, every later one
// is due.
func (c *checker) newWatchStream(s *sweep, w *watcher, compactions []compaction, held bool) *watchStream {
	st := &watchStream{c: c, w: w, lastRespLast: -1, curRev: -1, held: held}
	st.compactedBefore, _ = c.compactedBefore(w.requested)
	if w.hasReq && w.req.Revision > 0 {
		st.start, st.earliest = w.req.Revision, w.req.Revision
	} else if w.created {
		st.start, st.earliest = w.createdRev+1, c.base+1
	}
	st.dc = deliveryCheck{s: s, w: w, hi: int32(len(c.ks.keys)), first: true, compactions: compactions}
	if w.hasReq {
		st.dc.lo, st.dc.hi = c.ks.interval(w.req.Key, w.req.End)
	}
	return st
}

// response checks the stream's next response: a revision's events all in one response (atomic), then
// each event, a progress notification, a cancellation for compaction.
func (st *watchStream) response(r *history.WatchResponse) {
	c, w := st.c, st.w
	n := st.responses
	st.responses++
	if len(r.Events) > 0 {
		first := r.Events[0].KV.ModRevision
		if first == st.lastRespLast {
			c.watchViolation(w, "watch not atomic", r.Events[0].KV.Key, first, r.Time,
				"the events of revision %d were split across two responses", first)
		}
		st.lastRespLast = r.Events[len(r.Events)-1].KV.ModRevision
	}
	for j := range r.Events {
		st.event(r, j)
		if st.disordered {
			return
		}
	}
	if r.Progress {
		st.progress(r)
	}
	if r.CompactRevision > 0 {
		st.canceledForCompaction(n, r)
	}
}

// event checks the j-th event of response r against the events before it: within the
// watched range, not twice, in revision order, after no progress notification that covered it, not
// before the watch's start or a compaction it could not have outlived, not before its write was sent.
// An event that passes the range and duplicate checks counts as delivered.
func (st *watchStream) event(r *history.WatchResponse, j int) {
	c, w := st.c, st.w
	e := &r.Events[j]
	rev := e.KV.ModRevision
	k := c.rank(e.KV.Key)
	if w.hasReq && !inRange(e.KV.Key, w.req.Key, w.req.End) {
		c.watchViolation(w, "watch filter", e.KV.Key, rev, r.Time, "received %s, outside the watched range", describeEvent(e))
		return
	}
	if rev < st.lastEv && !st.held {
		st.disordered = true // whether it is a duplicate needs every event before it
		return
	}
	dup := st.seenInRevision(rev, k) || (rev < st.lastEv && c.deliveredBefore(st.got, rev, k))
	switch {
	case dup:
		c.watchViolation(w, "watch event duplicated", e.KV.Key, rev, r.Time, "received %s twice", describeEvent(e))
		return
	case rev < st.lastEv:
		c.watchViolation(w, "watch not ordered", e.KV.Key, rev, r.Time, "received %s after an event of revision %d", describeEvent(e), st.lastEv)
	case rev <= st.lastProg:
		c.watchViolation(w, "watch not bookmarkable", e.KV.Key, rev, r.Time,
			"received %s after a progress notification for revision %d, which promised every event up to it", describeEvent(e), st.lastProg)
	}
	if st.start > 0 && rev < st.earliest {
		c.watchViolation(w, "watch not resumable", e.KV.Key, rev, r.Time, "received %s, before the first revision %d it covers", describeEvent(e), st.earliest)
	}
	if st.count == 0 && rev < st.start && rev >= st.earliest {
		st.start = rev // the watch started earlier than its created response says: from here on, all is due
	}
	if w.req.Revision > 0 && rev < st.compactedBefore {
		c.watchViolation(w, "watch of compacted revision", e.KV.Key, rev, r.Time,
			"received %s, but compaction to %d had been acknowledged before the watch was requested (etcd cancels such watches)", describeEvent(e), st.compactedBefore)
	}
	if rev > c.base && rev <= c.maxRev {
		if wi := c.writer.Get(c.rev(rev)); wi >= 0 && c.ops.Get(int(wi)).call > r.Time {
			c.watchViolation(w, "watch event from the future", e.KV.Key, rev, r.Time,
				"received %s at %s, before %s, which wrote it, was sent at %s", describeEvent(e), fmtTime(r.Time), c.describe(int(wi)), fmtTime(c.ops.Get(int(wi)).call))
		}
	}
	st.lastEv = max(st.lastEv, rev)
	st.deliver(delivered{rank: k, e: e, rev: rev, time: r.Time})
}

// seenInRevision reports whether an event of key k came earlier in revision rev's events, and remembers
// this one. A set replaces the list once a revision has many events, so that a revoke of a lease shared
// by thousands of keys does not cost the square of them.
func (st *watchStream) seenInRevision(rev int64, k int32) bool {
	if rev != st.curRev {
		st.curRev, st.curKeys, st.curSet = rev, st.curKeys[:0], nil
	}
	var seen bool
	switch {
	case st.curSet != nil:
		seen = st.curSet[k]
	case len(st.curKeys) >= 32:
		st.curSet = make(map[int32]bool, 2*len(st.curKeys))
		for _, x := range st.curKeys {
			st.curSet[x] = true
		}
		seen = st.curSet[k]
	default:
		seen = slices.Contains(st.curKeys, k)
	}
	st.curKeys = append(st.curKeys, k)
	if st.curSet != nil {
		st.curSet[k] = true
	}
	return seen
}

// progress checks a progress notification: it never goes back, never comes after an event of a later
// revision, which it would claim is not there yet, and never falls below the revision the watch asked
// to start from: a watch on a future revision told of an older one (etcd-io/etcd#20221) makes a client
// that resumes from its progress, as the etcd client does on a new stream, receive events it never
// asked for.
func (st *watchStream) progress(r *history.WatchResponse) {
	c, w := st.c, st.w
	p := r.Revision
	switch {
	case w.hasReq && w.req.Revision > 0 && p < w.req.Revision-1:
		c.watchViolation(w, "watch progress before its start", w.req.Key, p, r.Time,
			"progress notification for revision %d on a watch asked to start at revision %d", p, w.req.Revision)
	case p < st.lastProg:
		c.watchViolation(w, "watch not bookmarkable", w.req.Key, p, r.Time, "progress notification for revision %d after one for %d", p, st.lastProg)
	case p < st.lastEv:
		c.watchViolation(w, "watch not bookmarkable", w.req.Key, p, r.Time, "progress notification for revision %d after an event of revision %d", p, st.lastEv)
	}
	st.lastProg = max(st.lastProg, p)
}

// canceledForCompaction checks the stream's n-th response, a cancellation for compaction: etcd cancels a
// watch for compaction when the next revision it needs is below the compacted one; before the first event
// a watch from revision 0 may need revisions from its earliest start.
func (st *watchStream) canceledForCompaction(n int, r *history.WatchResponse) {
	next := max(st.earliest, st.lastEv+1, st.lastProg+1)
	if r.CompactRevision <= next-1 && n > 0 {
		st.c.watchViolation(st.w, "watch canceled without compaction", st.w.req.Key, r.CompactRevision, r.Time,
			"canceled for compaction to %d, but it had delivered everything up to %d and needed only later revisions", r.CompactRevision, next-1)
	}
}

// deliver takes an event the watcher received: held, or compared with the replay once its revision is
// complete (events arrive in revision order, or the stream is disordered and checked again held).
func (st *watchStream) deliver(d delivered) {
	st.count++
	if !st.w.hasReq || st.start == 0 {
		return // what the watcher should have received is unknown
	}
	if st.held {
		st.got = append(st.got, d)
		return
	}
	if st.count == 1 {
		st.dc.begin(st.start) // the start is settled by the first event
	}
	if d.rev < st.dc.next {
		return
	}
	if len(st.cur) > 0 && st.cur[0].rev != d.rev {
		st.dc.upTo(st.cur[0].rev, st.cur)
		st.cur = st.cur[:0]
	}
	st.cur = append(st.cur, d)
}

// finish compares the rest of what the watcher received with the replay, up to the last revision it
// vouched for with an event or a progress notification.
func (st *watchStream) finish() {
	if !st.w.hasReq || st.start == 0 {
		return // what the watcher should have received is unknown
	}
	end := min(max(st.lastEv, st.lastProg), st.c.maxRev)
	if st.count == 0 || st.held {
		st.dc.begin(st.start)
	}
	if st.held {
		st.dc.all(st.got, end)
		return
	}
	if len(st.cur) > 0 {
		st.dc.upTo(st.cur[0].rev, st.cur)
	}
	st.dc.upTo(end, nil)
}

// deliveryCheck compares what a watcher received, revision by revision, with the replay's changes to its
// range [lo, hi) from its start on: reliable (nothing missing), resumable (nothing missing at the start),
// and each event's content, previous value and create flag.
type deliveryCheck struct {
	s           *sweep
	w           *watcher
	lo, hi      int32
	start, next int64 // next: the first revision not compared yet
	first       bool  // nothing compared yet
	compactions []compaction
}

// begin sets the first revision to compare.
func (dc *deliveryCheck) begin(start int64) {
	dc.start, dc.next = start, max(start, dc.s.c.base+1)
}

// all compares every event a watcher received (held, in arrival order) up to revision end.
func (dc *deliveryCheck) all(got []delivered, end int64) {
	slices.SortStableFunc(got, func(a, b delivered) int {
		if a.rev != b.rev {
			return cmp.Compare(a.rev, b.rev)
		}
		return int(a.rank - b.rank)
	})
	gi := 0
	for gi < len(got) && got[gi].rev < dc.next {
		gi++
	}
	for r := dc.next; r <= end; r++ {
		if dc.s.gap.Get(dc.s.c.rev(r)) {
			continue
		}
		j := gi
		for gi < len(got) && got[gi].rev == r {
			gi++
		}
		dc.revision(r, got[j:gi])
	}
	dc.next = max(dc.next, end+1)
}

// upTo compares the revisions up to end, where have holds the events received at end (in arrival
// order) and none were received at the revisions before it.
func (dc *deliveryCheck) upTo(end int64, have []delivered) {
	slices.SortStableFunc(have, func(a, b delivered) int { return int(a.rank - b.rank) })
	for r := dc.next; r <= end; r++ {
		if dc.s.gap.Get(dc.s.c.rev(r)) {
			continue
		}
		if r == end {
			dc.revision(r, have)
		} else {
			dc.revision(r, nil)
		}
	}
	dc.next = max(dc.next, end+1)
}

// revision compares the events received at revision r, sorted by key, with the replay's changes there.
func (dc *deliveryCheck) revision(r int64, have []delivered) {
	s, c, w := dc.s, dc.s.c, dc.w
	ri := c.rev(r)
	var want []canonEvent
	for j := s.canonAt.Get(ri); j < s.canonAt.Get(ri+1); j++ {
		if e := s.canon.Get(int(j)); e.rank >= dc.lo && e.rank < dc.hi {
			want = append(want, e)
		}
	}
	slices.SortFunc(want, func(a, b canonEvent) int { return int(a.rank - b.rank) })
	wi, hi2 := 0, 0
	for wi < len(want) || hi2 < len(have) {
		switch {
		case hi2 >= len(have) || (wi < len(want) && want[wi].rank < have[hi2].rank):
			e := &want[wi]
			wi++
			if e.maybe {
				continue
			}
			kind := "watch not reliable"
			if dc.first && r == dc.start {
				kind = "watch not resumable"
			}
			c.deliveryViolation(w, kind, c.key(e.rank), r, c.existedAt(r), "missed the %s of %q at revision %d", eventName(e), c.key(e.rank), r)
		case wi >= len(want) || have[hi2].rank < want[wi].rank:
			d := have[hi2]
			hi2++
			c.deliveryViolation(w, "phantom watch event", d.e.KV.Key, r, d.time, "received %s, but the replay changed nothing of %q at revision %d", describeEvent(d.e), d.e.KV.Key, r)
		default:
			var prev rec
			if want[wi].prevExists == 1 {
				prev = s.prevOfChange(&want[wi])
			}
			c.checkEvent(w, &want[wi], prev, have[hi2], dc.compactions)
			wi++
			hi2++
		}
		dc.first = false
	}
	if len(want) > 0 || len(have) > 0 {
		dc.first = false
	}
}

// deliveredBefore reports whether an event of key k at revision rev is among those already received.
// Only needed for events out of order, which are a violation anyway.
func (c *checker) deliveredBefore(got []delivered, rev int64, k int32) bool {
	for i := len(got) - 1; i >= 0; i-- {
		if got[i].rev == rev && got[i].rank == k {
			return true
		}
	}
	return false
}

func eventName(e *canonEvent) string {
	if e.del {
		return "delete"
	}
	return "put"
}

// checkEvent compares one received event with the replay's change, which found the key at version prev.
func (c *checker) checkEvent(w *watcher, want *canonEvent, prev rec, d delivered, compactions []compaction) {
	e := d.e
	key := e.KV.Key
	if want.del != (e.Type == history.EventDelete) {
		c.deliveryViolation(w, "wrong watch event", key, d.rev, d.time, "received %s, but the replay has a %s", describeEvent(e), eventName(want))
		return
	}
	if !want.del {
		kv := &e.KV
		bad := kv.Value.ID != want.r.value || kv.Lease != want.r.lease ||
			(want.unk&unkCreate == 0 && kv.CreateRevision != want.r.create) || (want.unk&unkVersion == 0 && kv.Version != want.r.version)
		if bad {
			c.deliveryViolation(w, "wrong watch event", key, d.rev, d.time, "received %s, but the replay has %s", describeEvent(e), describeRec(key, want.r))
		}
		if want.prevExists >= 0 && e.IsCreate != (want.prevExists == 0) {
			c.deliveryViolation(w, "wrong watch IsCreate", key, d.rev, d.time, "received %s with IsCreate %v, but %q %s before", describeEvent(e), e.IsCreate, key,
				map[int8]string{0: "did not exist", 1: "existed"}[want.prevExists])
		}
	}
	if !w.req.PrevKV {
		return
	}
	switch {
	case want.prevExists == 0 && e.PrevKV != nil:
		c.deliveryViolation(w, "wrong watch prevKV", key, d.rev, d.time, "received %s with previous value %s, but %q did not exist before", describeEvent(e), describeKV(e.PrevKV), key)
	case want.prevExists == 1 && e.PrevKV == nil:
		// etcd reads the previous value when it sends the event; a compaction past it in between makes
		// the read fail and the event goes without one. Anything else is a missing previous value.
		if !compactedSince(compactions, d.rev-1, d.time) {
			c.deliveryViolation(w, "missing watch prevKV", key, d.rev, d.time, "received %s without the previous value it asked for (%s)", describeEvent(e), describeRec(key, prev))
		}
	case want.prevExists == 1:
		p := e.PrevKV
		bad := p.Key != key || p.ModRevision != prev.mod || (want.prevUnk&unkValue == 0 && p.Value.ID != prev.value) || p.Lease != prev.lease ||
			(want.prevUnk&unkCreate == 0 && p.CreateRevision != prev.create) || (want.prevUnk&unkVersion == 0 && p.Version != prev.version)
		if bad {
			c.deliveryViolation(w, "wrong watch prevKV", key, d.rev, d.time, "received %s with previous value %s, but the replay has %s", describeEvent(e), describeKV(p), describeRec(key, prev))
		}
	}
}

// compactedSince reports whether a compaction past revision rev may have been applied before t.
func compactedSince(cs []compaction, rev, t int64) bool {
	for _, cp := range cs {
		if cp.call >= t {
			break
		}
		if cp.rev > rev {
			return true
		}
	}
	return false
}

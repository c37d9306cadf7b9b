package linearizability

import (
	"fmt"
	"slices"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// delivered is one event a watcher received.
type delivered struct {
	rank int32
	rec  int32 // index in History.Watches
	ev   int32
	rev  int64
	time int64
}

// checkWatches checks every watcher against the replay: etcd's watch guarantees, each as its own kind of
// violation (https://etcd.io/docs/latest/learning/api_guarantees/#watch-apis).
func (c *checker) checkWatches(s *sweep) {
	compactions := slices.Clone(c.compactions)
	slices.SortFunc(compactions, func(a, b compaction) int { return cmpInt(a.call, b.call) })
	for _, w := range c.watchers {
		c.checkWatcher(s, w, compactions)
	}
}

func (c *checker) watchViolation(w *watcher, kind string, key string, rev, t int64, format string, args ...any) {
	c.vs.add(Violation{Check: CheckWatch, Kind: kind, Key: key, Revision: rev, Watcher: w.id, Time: t,
		Message: fmt.Sprintf("watcher %d (client %d, %s): ", w.id, w.client, describeWatch(w)) + fmt.Sprintf(format, args...)})
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

func (c *checker) checkWatcher(s *sweep, w *watcher, compactions []compaction) {
	var lo, hi int32 = 0, int32(len(c.ks.keys))
	if w.hasReq {
		lo, hi = c.ks.interval(w.req.Key, w.req.End)
	}
	// The first revision the watcher must deliver: the one asked for. A watch from revision 0 starts after
	// the revision of the member that registered it, at most the revision its created response carries
	// (etcd reads that one after registering the watcher, so writes in between are delivered too; and the
	// etcd client resumes such a watch at that revision, not the one after), and at least... nothing: a
	// member catching up after a restart or a pause may be far behind the cluster. So events up to the
	// created revision are optional, but once one is delivered, every later one is due.
	start, earliest := int64(0), int64(0)
	compactedBefore, _ := c.compactedBefore(w.requested)
	if w.hasReq && w.req.Revision > 0 {
		start, earliest = w.req.Revision, w.req.Revision
	} else {
		for _, ri := range w.recs {
			if r := &c.h.Watches[ri]; r.Created {
				start, earliest = r.Revision+1, c.base+1
				break
			}
		}
	}

	var got []delivered
	var lastEv, lastProg int64
	var lastRespLast int64 = -1
	// Events of the current revision seen so far, to catch a duplicate: events arrive in revision order
	// or the order check already fails, so remembering one revision's keys is enough.
	var curRev int64 = -1
	var curKeys []int32
	var curSet map[int32]bool // curKeys as a set, once a revision has many events (a revoke of a shared lease)
	for n, idx := range w.recs {
		r := &c.h.Watches[idx]
		if len(r.Events) > 0 {
			first := r.Events[0].KV.ModRevision
			if first == lastRespLast {
				c.watchViolation(w, "watch not atomic", r.Events[0].KV.Key, first, r.Time,
					"the events of revision %d were split across two responses", first)
			}
			lastRespLast = r.Events[len(r.Events)-1].KV.ModRevision
		}
		for j := range r.Events {
			e := &r.Events[j]
			rev := e.KV.ModRevision
			k := c.rank(e.KV.Key)
			if w.hasReq && !inRange(e.KV.Key, w.req.Key, w.req.End) {
				c.watchViolation(w, "watch filter", e.KV.Key, rev, r.Time, "received %s, outside the watched range", describeEvent(e))
				continue
			}
			if rev != curRev {
				curRev, curKeys, curSet = rev, curKeys[:0], nil
			}
			var seen bool
			switch {
			case curSet != nil:
				seen = curSet[k]
			case len(curKeys) >= 32:
				curSet = make(map[int32]bool, 2*len(curKeys))
				for _, x := range curKeys {
					curSet[x] = true
				}
				seen = curSet[k]
			default:
				seen = slices.Contains(curKeys, k)
			}
			dup := seen || (rev < lastEv && c.deliveredBefore(got, rev, k))
			curKeys = append(curKeys, k)
			if curSet != nil {
				curSet[k] = true
			}
			switch {
			case dup:
				c.watchViolation(w, "watch event duplicated", e.KV.Key, rev, r.Time, "received %s twice", describeEvent(e))
				continue
			case rev < lastEv:
				c.watchViolation(w, "watch not ordered", e.KV.Key, rev, r.Time, "received %s after an event of revision %d", describeEvent(e), lastEv)
			case rev <= lastProg:
				c.watchViolation(w, "watch not bookmarkable", e.KV.Key, rev, r.Time,
					"received %s after a progress notification for revision %d, which promised every event up to it", describeEvent(e), lastProg)
			}
			if start > 0 && rev < earliest {
				c.watchViolation(w, "watch not resumable", e.KV.Key, rev, r.Time, "received %s, before the first revision %d it covers", describeEvent(e), earliest)
			}
			if len(got) == 0 && rev < start && rev >= earliest {
				start = rev // the watch started earlier than its created response says: from here on, all is due
			}
			if w.req.Revision > 0 && rev < compactedBefore {
				c.watchViolation(w, "watch of compacted revision", e.KV.Key, rev, r.Time,
					"received %s, but compaction to %d had been acknowledged before the watch was requested (etcd cancels such watches)", describeEvent(e), compactedBefore)
			}
			if rev > c.base && rev <= c.maxRev {
				if wi := c.writer[c.rev(rev)]; wi >= 0 && c.h.Operations[wi].Call > r.Time {
					c.watchViolation(w, "watch event from the future", e.KV.Key, rev, r.Time,
						"received %s at %s, before %s, which wrote it, was sent at %s", describeEvent(e), fmtTime(r.Time), c.describe(int(wi)), fmtTime(c.h.Operations[wi].Call))
				}
			}
			lastEv = max(lastEv, rev)
			got = append(got, delivered{rank: k, rec: int32(idx), ev: int32(j), rev: rev, time: r.Time})
		}
		if r.Progress {
			p := r.Revision
			switch {
			case p < lastProg:
				c.watchViolation(w, "watch not bookmarkable", w.req.Key, p, r.Time, "progress notification for revision %d after one for %d", p, lastProg)
			case p < lastEv:
				c.watchViolation(w, "watch not bookmarkable", w.req.Key, p, r.Time, "progress notification for revision %d after an event of revision %d", p, lastEv)
			}
			lastProg = max(lastProg, p)
		}
		if r.CompactRevision > 0 {
			// etcd cancels a watch for compaction when the next revision it needs is below the compacted
			// one; before the first event a watch from revision 0 may need revisions from its earliest start.
			next := max(earliest, lastEv+1, lastProg+1)
			if r.CompactRevision <= next-1 && n > 0 {
				c.watchViolation(w, "watch canceled without compaction", w.req.Key, r.CompactRevision, r.Time,
					"canceled for compaction to %d, but it had delivered everything up to %d and needed only later revisions", r.CompactRevision, next-1)
			}
		}
	}
	if !w.hasReq || start == 0 {
		return // what the watcher should have received is unknown
	}
	end := min(max(lastEv, lastProg), c.maxRev)
	c.checkDelivered(s, w, got, lo, hi, start, end, compactions)
}

// checkDelivered compares what a watcher received, revision by revision, with the replay's changes to its
// range from start to end: reliable (nothing missing), resumable (nothing missing at the start), and each
// event's content, previous value and create flag.
func (c *checker) checkDelivered(s *sweep, w *watcher, got []delivered, lo, hi int32, start, end int64, compactions []compaction) {
	slices.SortStableFunc(got, func(a, b delivered) int {
		if a.rev != b.rev {
			return cmpInt(a.rev, b.rev)
		}
		return int(a.rank - b.rank)
	})
	gi := 0
	first := true
	from := max(start, c.base+1)
	for gi < len(got) && got[gi].rev < from {
		gi++
	}
	for r := from; r <= end; r++ {
		ri := c.rev(r)
		if s.gap[ri] {
			continue
		}
		canon := s.canon[s.canonAt[ri]:s.canonAt[ri+1]]
		var want []*canonEvent
		for j := range canon {
			if e := &canon[j]; e.rank >= lo && e.rank < hi {
				want = append(want, e)
			}
		}
		slices.SortFunc(want, func(a, b *canonEvent) int { return int(a.rank - b.rank) })
		var have []delivered
		for gi < len(got) && got[gi].rev == r {
			have = append(have, got[gi])
			gi++
		}
		wi, hi2 := 0, 0
		for wi < len(want) || hi2 < len(have) {
			switch {
			case hi2 >= len(have) || (wi < len(want) && want[wi].rank < have[hi2].rank):
				e := want[wi]
				wi++
				if e.maybe {
					continue
				}
				kind := "watch not reliable"
				if first && r == start {
					kind = "watch not resumable"
				}
				c.watchViolation(w, kind, c.key(e.rank), r, c.existedAt(r), "missed the %s of %q at revision %d", eventName(e), c.key(e.rank), r)
			case wi >= len(want) || have[hi2].rank < want[wi].rank:
				d := have[hi2]
				hi2++
				ev := &c.h.Watches[d.rec].Events[d.ev]
				c.watchViolation(w, "phantom watch event", ev.KV.Key, r, d.time, "received %s, but the replay changed nothing of %q at revision %d", describeEvent(ev), ev.KV.Key, r)
			default:
				c.checkEvent(w, want[wi], have[hi2], compactions)
				wi++
				hi2++
			}
			first = false
		}
		if len(want) > 0 || len(have) > 0 {
			first = false
		}
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

// checkEvent compares one received event with the replay's change.
func (c *checker) checkEvent(w *watcher, want *canonEvent, d delivered, compactions []compaction) {
	r := &c.h.Watches[d.rec]
	e := &r.Events[d.ev]
	key := e.KV.Key
	if want.del != (e.Type == history.EventDelete) {
		c.watchViolation(w, "wrong watch event", key, d.rev, d.time, "received %s, but the replay has a %s", describeEvent(e), eventName(want))
		return
	}
	if !want.del {
		kv := &e.KV
		bad := kv.Value.ID != want.r.value || kv.Lease != want.r.lease ||
			(want.unk&unkCreate == 0 && kv.CreateRevision != want.r.create) || (want.unk&unkVersion == 0 && kv.Version != want.r.version)
		if bad {
			c.watchViolation(w, "wrong watch event", key, d.rev, d.time, "received %s, but the replay has %s", describeEvent(e), describeRec(key, want.r))
		}
		if want.prevExists >= 0 && e.IsCreate != (want.prevExists == 0) {
			c.watchViolation(w, "wrong watch IsCreate", key, d.rev, d.time, "received %s with IsCreate %v, but %q %s before", describeEvent(e), e.IsCreate, key,
				map[int8]string{0: "did not exist", 1: "existed"}[want.prevExists])
		}
	}
	if !w.req.PrevKV {
		return
	}
	switch {
	case want.prevExists == 0 && e.PrevKV != nil:
		c.watchViolation(w, "wrong watch prevKV", key, d.rev, d.time, "received %s with previous value %s, but %q did not exist before", describeEvent(e), describeKV(e.PrevKV), key)
	case want.prevExists == 1 && e.PrevKV == nil:
		// etcd reads the previous value when it sends the event; a compaction past it in between makes
		// the read fail and the event goes without one. Anything else is a missing previous value.
		if !compactedSince(compactions, d.rev-1, d.time) {
			c.watchViolation(w, "missing watch prevKV", key, d.rev, d.time, "received %s without the previous value it asked for (%s)", describeEvent(e), describeRec(key, want.prev))
		}
	case want.prevExists == 1:
		p := e.PrevKV
		bad := p.Key != key || p.ModRevision != want.prev.mod || (want.prevUnk&unkValue == 0 && p.Value.ID != want.prev.value) || p.Lease != want.prev.lease ||
			(want.prevUnk&unkCreate == 0 && p.CreateRevision != want.prev.create) || (want.prevUnk&unkVersion == 0 && p.Version != want.prev.version)
		if bad {
			c.watchViolation(w, "wrong watch prevKV", key, d.rev, d.time, "received %s with previous value %s, but the replay has %s", describeEvent(e), describeKV(p), describeRec(key, want.prev))
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

package linearizability

// The watchers of a history and what they saw: each watcher's records in arrival order, the union of
// every event any of them received (what happened at revisions nobody answered for), and the spans of keys
// and revisions each vouches for, inside which no write can have gone unseen.

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// watcher is one watch of the run with its records in arrival order.
type watcher struct {
	id, client int
	req        history.WatchRequest
	hasReq     bool
	requested  int64   // when the watch was asked for (its request record), or its first record
	recs       []int32 // indexes in History.Watches
}

// groupWatchers gathers each watcher's records in arrival order, its request apart: the watch checks
// take one watcher at a time.
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

// obsEvent is one event seen by a watcher, for the union of what all watchers saw.
type obsEvent struct {
	rev  int64
	rank int32
	rec  int32 // index of the watch record in History.Watches
	ev   int32 // index of the event in the record
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
			return cmp.Compare(a.rev, b.rev)
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

// event is the watch event an observed event points at.
func (c *checker) event(o obsEvent) *history.Event { return &c.h.Watches[o.rec].Events[o.ev] }

// observedAt is what watchers saw happen at revision r, one event per key.
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
		slices.SortFunc(cov, func(a, b span) int { return cmp.Compare(a.from, b.from) })
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

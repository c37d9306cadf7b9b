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

// watcher is one watch of the run: its request and what the passes over its records derive.
type watcher struct {
	id, client int
	req        history.WatchRequest
	hasReq     bool
	requested  int64 // when the watch was asked for (its request record), or its first record
	// created and createdRev: whether a record confirmed the watch, and the revision the first one
	// carries; createdFrom is the revision after the first confirmation that carries one other than -1.
	created                 bool
	createdRev, createdFrom int64
	seenTo                  int64       // the highest revision of any event or progress notification it received
	found, missed           []Violation // the watch checks' findings (see watchViolation)
}

// groupWatchers finds the run's watchers and, for each, its request, its first confirmation and the
// highest revision it vouches for: the watch checks read each watcher's records again in arrival order,
// the request apart. On the way it finds the keys of every event and the highest revision any record
// names. A run folds the records while it writes them (Follower): then it only takes the result.
func (c *checker) groupWatchers() (keys map[string]struct{}, maxRev int64) {
	g := c.grouped
	c.grouped = nil // its watchers are this check's from here on
	if g == nil {
		g = newWatcherGroups()
		c.eachWatch(func(_ int32, r *history.WatchResponse) { g.add(r) })
	}
	c.watchers, c.progress, c.stats.WatchEvents = g.watchers, g.progress, g.events
	slices.SortFunc(c.watchers, func(a, b *watcher) int { return a.id - b.id })
	c.stats.Watchers = len(c.watchers)
	return g.keys, g.maxRev
}

// watcherGroups is what groupWatchers finds, record by record: it depends on the watch records alone, in
// file order, so a run can fold them as they are written.
type watcherGroups struct {
	byID     map[int]*watcher
	watchers []*watcher // in the order first met
	keys     map[string]struct{}
	maxRev   int64
	progress bool
	events   int
}

func newWatcherGroups() *watcherGroups {
	return &watcherGroups{byID: map[int]*watcher{}, keys: map[string]struct{}{}}
}

// add folds the next watch record in.
func (g *watcherGroups) add(r *history.WatchResponse) {
	g.maxRev = max(g.maxRev, r.Revision)
	for j := range r.Events {
		g.keys[r.Events[j].KV.Key] = struct{}{}
		g.maxRev = max(g.maxRev, r.Events[j].KV.ModRevision)
	}
	w := g.byID[r.Watcher]
	if w == nil {
		w = &watcher{id: r.Watcher, client: r.Client, requested: r.Time}
		g.byID[r.Watcher] = w
		g.watchers = append(g.watchers, w)
	}
	if r.Request != nil && !w.hasReq {
		w.req, w.hasReq = *r.Request, true
		w.requested = min(w.requested, r.Time)
	}
	g.progress = g.progress || r.Progress
	if isRequestRecord(r) {
		return
	}
	if r.Created {
		if !w.created {
			w.created, w.createdRev = true, r.Revision
		}
		if w.createdFrom == 0 {
			w.createdFrom = r.Revision + 1
		}
	}
	if r.Progress {
		w.seenTo = max(w.seenTo, r.Revision)
	}
	for j := range r.Events {
		w.seenTo = max(w.seenTo, r.Events[j].KV.ModRevision)
	}
	g.events += len(r.Events)
}

// obsPlace is where an event any watcher saw is: its revision, key, record (its number in file order)
// and index in the record.
type obsPlace struct {
	rev           int64
	rank, rec, ev int32
}

// compare orders places by revision, key, record and position in the record.
func (a obsPlace) compare(b obsPlace) int {
	return cmp.Or(cmp.Compare(a.rev, b.rev), cmp.Compare(a.rank, b.rank), cmp.Compare(a.rec, b.rec), cmp.Compare(a.ev, b.ev))
}

// sameChange reports whether two places are of one revision and key.
func (a obsPlace) sameChange(b obsPlace) bool { return a.rev == b.rev && a.rank == b.rank }

// obsEvent is one event seen by a watcher, for the union of what all watchers saw: the first watch record
// (in file order) that carried an event of its revision and key, and a copy of that event without its
// previous value and its key (the place's rank names it), so that the union can be paged.
type obsEvent struct {
	obsPlace
	watcher  int
	time     int64
	del      bool
	isCreate bool
	value    history.Value
	create   int64
	mod      int64
	version  int64
	lease    int64
}

// placeOf returns the place of the j-th event of record i, r, and false when its revision is outside the
// run's.
func (c *checker) placeOf(i int32, r *history.WatchResponse, j int) (obsPlace, bool) {
	kv := &r.Events[j].KV
	if kv.ModRevision <= c.base || kv.ModRevision > c.maxRev {
		return obsPlace{}, false
	}
	return obsPlace{rev: kv.ModRevision, rank: c.rank(kv.Key), rec: i, ev: int32(j)}, true
}

// placeObserved appends the places of record i's events within the run's revisions to places.
func (c *checker) placeObserved(places *history.Paged[obsPlace], i int32, r *history.WatchResponse) {
	for j := range r.Events {
		if p, ok := c.placeOf(i, r, j); ok {
			places.Add(p)
		}
	}
}

// unionObserved collects every event any watcher saw, by revision and key, from the places of all of them.
// Watchers must agree on what happened at a revision; a revision nobody wrote that watchers saw is still
// known, from them. The first event of each revision and key is the one kept; another pass over the
// records copies it and compares every other event with it, so that only one event per revision and key
// is held.
func (c *checker) unionObserved(places *history.Paged[obsPlace]) {
	all := sortPaged(c, places, obsPlace.compare)
	c.observed = newArray[obsEvent](c, 0)
	var last obsPlace
	for i := range all.Len() {
		if p := all.Get(i); i == 0 || !last.sameChange(p) {
			c.observed.Add(obsEvent{obsPlace: p})
			last = p
		}
	}
	all.Close()
	c.checkObservedAgree()
	n := c.rev(c.maxRev) + 1
	c.obsAt = newArray[int32](c, n+1)
	j := 0
	for r := range n {
		c.obsAt.Set(r, int32(j))
		for j < c.observed.Len() && c.rev(c.observed.Get(j).rev) == r {
			j++
		}
	}
	c.obsAt.Set(n, int32(c.observed.Len()))
}

// checkObservedAgree copies the first event of each revision and key into the union, and reports every other
// event of that revision and key that differs from it, in the union's order.
func (c *checker) checkObservedAgree() {
	type disagreement struct {
		at obsPlace
		v  Violation
	}
	var found []disagreement
	c.eachWatch(func(i int32, r *history.WatchResponse) {
		for j := range r.Events {
			o, ok := c.placeOf(i, r, j)
			if !ok {
				continue
			}
			e := &r.Events[j]
			k := sort.Search(c.observed.Len(), func(k int) bool {
				a := c.observed.Get(k)
				return cmp.Or(cmp.Compare(a.rev, o.rev), cmp.Compare(a.rank, o.rank)) >= 0
			})
			first := c.observed.Get(k)
			if first.rec == i && first.ev == int32(j) {
				first.watcher, first.time = r.Watcher, r.Time
				first.del, first.isCreate = e.Type == history.EventDelete, e.IsCreate
				kv := &e.KV
				first.value, first.create, first.mod, first.version, first.lease = kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease
				c.observed.Set(k, first)
				continue
			}
			if fe := c.event(&first); fe.Type != e.Type || !sameRecord(&fe.KV, &e.KV) {
				found = append(found, disagreement{at: o, v: Violation{Check: CheckWatch, Kind: "watchers disagree", Key: e.KV.Key, Revision: o.rev, Watcher: r.Watcher, Time: min(first.time, r.Time),
					Message: fmt.Sprintf("watcher %d received %s but watcher %d received %s", first.watcher, describeEvent(fe), r.Watcher, describeEvent(e))}})
			}
		}
	})
	slices.SortFunc(found, func(a, b disagreement) int { return a.at.compare(b.at) })
	for _, d := range found {
		c.vs.add(d.v)
	}
}

// event is the watch event an observed event holds (without its previous value).
func (c *checker) event(o *obsEvent) *history.Event {
	e := &history.Event{Type: history.EventPut, IsCreate: o.isCreate, KV: history.KV{Key: c.key(o.rank), Value: o.value,
		CreateRevision: o.create, ModRevision: o.mod, Version: o.version, Lease: o.lease}}
	if o.del {
		e.Type = history.EventDelete
	}
	return e
}

// pruneObserved keeps, of the union of what watchers saw, only the revisions nobody is known to have
// written: the replay applies those from it and every other revision from its writer, and no pass reads
// the union for any other revision once the writers are known. On a kube-shaped history that is a few
// hundred revisions of hundreds of thousands.
func (c *checker) pruneObserved() {
	kept := newArray[obsEvent](c, 0)
	for r := range c.obsAt.Len() - 1 {
		from, to := c.obsAt.Get(r), c.obsAt.Get(r+1)
		c.obsAt.Set(r, int32(kept.Len()))
		if c.writer.Get(r) < 0 {
			for j := from; j < to; j++ {
				kept.Add(c.observed.Get(int(j)))
			}
		}
	}
	c.obsAt.Set(c.obsAt.Len()-1, int32(kept.Len()))
	c.observed.Close()
	c.observed = kept
}

// observedAt is what watchers saw happen at revision r, one event per key (a copy).
func (c *checker) observedAt(r int64) []obsEvent {
	i := c.rev(r)
	from, to := c.obsAt.Get(i), c.obsAt.Get(i+1)
	if from == to {
		return nil
	}
	obs := make([]obsEvent, 0, to-from)
	for j := from; j < to; j++ {
		obs = append(obs, c.observed.Get(int(j)))
	}
	return obs
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
		from, to := w.req.Revision, w.seenTo
		if from == 0 {
			from = w.createdFrom
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

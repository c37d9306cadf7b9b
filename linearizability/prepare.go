package linearizability

// Preparing a check: the checker's indexes of one history, built by prepare's passes in order before
// the replay. The passes' concepts have files of their own: the keys (keyspace.go), the watchers and what
// they saw, the operations with their leases and compactions, the writer of each revision, when each
// revision existed, and the failed writes that may have taken effect.

import (
	"fmt"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// maxRevisionSpan bounds the revisions one check covers, so that a corrupt or absurd revision in a history
// cannot make the checker allocate without bound.
const maxRevisionSpan = 64 << 20

// checker holds one check of one history.
type checker struct {
	hist operations // the operations; the watch records are read through wl
	wl   watchLog
	ops  *history.Paged[opInfo]
	ks   keyspace
	vs   violations

	base, maxRev int64 // revisions base+1..maxRev are the run's; base and below came before it
	preRun       bool  // the store was not empty at the start: keys' first states are unknown

	values   *valueIndex
	twice    map[int32]bool        // transactions found applied twice, reported once each
	writer   *history.Paged[int32] // by revision-base: the operation that wrote it, -1 none known
	existed  *history.Paged[int64] // by revision-base: earliest time some revision >= it was known to exist
	observed *history.Paged[obsEvent]
	obsAt    *history.Paged[int32] // by revision-base: start of its events in observed; obsAt[len] = len(observed)

	// Uncertainty: revisions whose writer is unknown, and what might have written them.
	gaps      []int64 // revisions nobody observed and no answered or resolved operation wrote
	uncertain []int64 // gaps and revisions only watchers observed, sorted
	candFrom  []int64 // by key rank: first revision an unresolved operation could have written it (0: none)
	revokeAt  map[int64][]int32
	candRevok map[int64]int64 // lease: first revision a failed revoke of it could have taken effect

	watchers    []*watcher
	progress    bool  // some watcher received a progress notification
	readErr     error // reading the watch records again failed
	spans       []span
	coverage    [][]span // by key rank, computed on demand
	compactions []compaction
	// refused are the transactions etcd refused for a read at a past revision (pastreads.go): none of
	// them was applied, so none of their values may be seen.
	refused map[int32]refusal
	leases  map[int64]*leaseInfo
	revokes map[int64][]int32 // answered revokes by header revision

	stats      Stats
	paging     bool // the paged arrays have files, in pageDir (see paged.go)
	pageDir    string
	pageBudget int      // bytes of each paged array in memory (0: pageBudget)
	pageBytes  int      // bytes per page of a paged array (0: pageBytes)
	paged      []func() // closes the paged arrays' files
	phaseDone  func(phase string)
	proofs     *Proofs // segments proved linearizable before, and the place to remember those proved now
	workers    int     // porcupine's goroutines (0: one per CPU)
	stop       func() bool
	grouped    *watcherGroups // the watch records folded while they were written (Follower), or nil
	fold       *opFold        // the operations folded so far (by the Follower while they were written)
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
	// ProvedBefore counts the partitions (of Partitions) found among Options.Proofs, proved linearizable
	// by an earlier check of the same run's history (DuringLoad), and not searched again.
	ProvedBefore int `json:"proved_before,omitempty"`
}

// phase tells Options.phaseDone, when set, that a phase of the check ended.
func (c *checker) phase(name string) {
	if c.phaseDone != nil {
		c.phaseDone(name)
	}
}

// rev indexes the slices kept by revision (writer, existed, obsAt): revision base is index 0.
func (c *checker) rev(r int64) int { return int(r - c.base) }

// key and rank turn a key rank into its key and back; rank is -1 for a key the history never mentions.
func (c *checker) key(rank int32) string { return c.ks.keys[rank] }

func (c *checker) rank(key string) int32 {
	if r, ok := c.ks.rank[key]; ok {
		return r
	}
	return -1
}

// prepare indexes the history: keys, watchers, value ids, the revision each write took, the revisions
// nobody can explain, and which failed writes may have taken effect.
//
// The watch records are read three times here (and twice more by the checks, see watchlog.go): for the
// watchers, the keys and the highest revision (while the load writes them, when the run reads its
// history then: Follower); for the values the watchers saw, where their events are and when revisions
// existed; and to keep one copy of each revision's events (unionObserved). The operations' first pass
// (opFold) is also made while the load writes them, in that case.
func (c *checker) prepare() error {
	keys, watchMaxRev := c.groupWatchers()
	if c.fold == nil || c.ops.Len() != c.hist.Len() {
		// Nothing folded while the operations were written (or not all of them: never, the follower read
		// the store's own records), so fold them now.
		c.fold = newOpFold()
		c.startClassify()
		c.stats.FailedWrites, c.compactions, c.refused = 0, nil, nil
		c.hist.Scan(c.foldOp)
	}
	c.stats.Operations = c.ops.Len()
	c.collectKeys(keys)
	if err := c.bounds(watchMaxRev); err != nil {
		return err
	}
	c.phase("keys")
	c.indexValues()
	c.phase("values")
	c.claimAnswered()
	c.resolveFromAnswers()
	c.initExisted()
	places := newArray[obsPlace](c, 0)
	c.eachWatch(func(i int32, r *history.WatchResponse) {
		c.resolveFromWatch(r)
		c.placeObserved(places, i, r)
		c.noteExistedWatch(r)
	})
	c.claimResolved()
	c.phase("resolve")
	c.values = nil // every value seen is matched: the index of writes by value has no reader left
	c.unionObserved(places)
	c.computeExisted()
	c.findGaps()
	c.watchSpans()
	c.candidates()
	c.pruneObserved()
	return nil
}

// bounds finds the revisions the run covers, from what the operations carry (opFold) and the highest
// revision any watch record names. base is the last revision before the run: the lowest header any
// answer carried, or the revision before the first write. A store that was empty at the start has
// base 1 (etcd starts at revision 1 with no keys).
func (c *checker) bounds(watchMaxRev int64) error {
	base, maxRev := c.fold.base, max(c.fold.maxRev, watchMaxRev)
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
	c.writer = newArray[int32](c, n)
	for i := range n {
		c.writer.Set(i, -1)
	}
	return nil
}

// forEachKV calls fn for every key-value in a response, nested ones included. It hands out copies: the
// key-values of an answer from the store are read, not held. A range answer's are read into *buf (which
// it keeps for the next call), or a slice of their own when buf is nil.
func forEachKV(r *history.Response, buf *[]history.KV, fn func(kv history.KV)) {
	if r.Range != nil {
		var kvs []history.KV
		if buf != nil {
			kvs = r.Range.AppendKeyValues((*buf)[:0])
			*buf = kvs
		} else {
			kvs = r.Range.AppendKeyValues(nil)
		}
		for _, kv := range kvs {
			fn(kv)
		}
	}
	if r.Put != nil && r.Put.PrevKV != nil {
		fn(*r.Put.PrevKV)
	}
	if r.Delete != nil {
		for i := range r.Delete.PrevKVs {
			fn(r.Delete.PrevKVs[i])
		}
	}
	if r.Txn != nil {
		for i := range r.Txn.Results {
			forEachKV(&r.Txn.Results[i], buf, fn)
		}
	}
}

package linearizability

import (
	"math/bits"
	"slices"
	"sort"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// keyspace is every key a history mentions, sorted, so that the checker can name keys by rank (an int32)
// and turn etcd's [key, end) ranges into rank intervals.
type keyspace struct {
	keys []string
	rank map[string]int32
}

func newKeyspace(keys map[string]struct{}) keyspace {
	ks := keyspace{keys: make([]string, 0, len(keys)), rank: make(map[string]int32, len(keys))}
	for k := range keys {
		ks.keys = append(ks.keys, k)
	}
	slices.Sort(ks.keys)
	for i, k := range ks.keys {
		ks.rank[k] = int32(i)
	}
	return ks
}

// opFold is what the passes that look at one operation at a time gather, besides its opInfo (classifyOp):
// every key the history names (single keys of requests, since a range's bounds need not be keys, and every
// key of answers) and the revisions answers carry (bounds). It depends on the operations alone, in file
// order, so a run folds them in as they are written (Follower); CheckDir otherwise folds them in one pass.
type opFold struct {
	keys map[string]struct{}
	// Most keys are answered again and again (every page of every list), each time with the store's one
	// copy of its bytes: the cache spares hashing them into the set.
	recent       *history.RecentStrings
	base, maxRev int64 // the lowest base and highest revision the answers show so far (see bounds)
	buf          []history.KV
}

func newOpFold() *opFold {
	return &opFold{keys: map[string]struct{}{}, recent: history.NewRecentStrings(16), base: 1 << 62, maxRev: 1}
}

// foldOp folds operation i, the next one, in: its opInfo, leases and compactions, its keys, its revisions.
func (c *checker) foldOp(i int, op *history.Operation) {
	c.classifyOp(i, op)
	f := c.fold
	f.addReq(&op.Request)
	if op.Response == nil {
		return
	}
	f.addResp(op.Response)
	h := op.Response.Revision
	if h > 0 {
		f.base = min(f.base, h)
		f.maxRev = max(f.maxRev, h)
	}
	if v, ok := viewOf(op); ok && h > 0 {
		if wrote, ok := answeredWrote(op, v, takenBranch(op)); ok && wrote {
			f.base = min(f.base, h-1) // its own revision: the one before it existed
		}
	}
	forEachKV(op.Response, &f.buf, func(kv history.KV) { f.maxRev = max(f.maxRev, kv.ModRevision) })
}

func (f *opFold) add(k string) {
	if _, ok := f.recent.Get(k); !ok {
		f.keys[k] = struct{}{}
		f.recent.Put(k, 0)
	}
}

func (f *opFold) addReq(r *history.Request) {
	switch r.Kind {
	case history.KindRange:
		if r.Range != nil && r.Range.End == "" {
			f.add(r.Range.Key)
		}
	case history.KindPut:
		if r.Put != nil {
			f.add(r.Put.Key)
		}
	case history.KindDelete:
		if r.Delete != nil && r.Delete.End == "" {
			f.add(r.Delete.Key)
		}
	case history.KindTxn:
		if r.Txn != nil {
			for _, cmp := range r.Txn.Compares {
				f.add(cmp.Key)
			}
			for i := range r.Txn.Then {
				f.addReq(&r.Txn.Then[i])
			}
			for i := range r.Txn.Else {
				f.addReq(&r.Txn.Else[i])
			}
		}
	}
}

func (f *opFold) addResp(r *history.Response) {
	if r.Range != nil {
		for i := range r.Range.Len() {
			f.add(r.Range.Key(i))
		}
	}
	if r.Put != nil && r.Put.PrevKV != nil {
		f.add(r.Put.PrevKV.Key)
	}
	if r.Delete != nil {
		for i := range r.Delete.PrevKVs {
			f.add(r.Delete.PrevKVs[i].Key)
		}
	}
	if r.Txn != nil {
		for i := range r.Txn.Results {
			f.addResp(&r.Txn.Results[i])
		}
	}
}

// collectKeys builds the keyspace from every key the history names: the operations' (opFold) and those of
// watch events, keys.
func (c *checker) collectKeys(keys map[string]struct{}) {
	for k := range c.fold.keys {
		if _, ok := keys[k]; !ok {
			keys[k] = struct{}{}
		}
	}
	c.ks = newKeyspace(keys)
	c.stats.Keys = len(c.ks.keys)
}

// interval returns the ranks [lo, hi) of the keys in etcd range [key, end): end "" is the key alone and
// end "\x00" is every key from key on, as in etcd.
func (ks *keyspace) interval(key, end string) (lo, hi int32) {
	lo = int32(sort.SearchStrings(ks.keys, key))
	switch end {
	case "":
		if int(lo) < len(ks.keys) && ks.keys[lo] == key {
			return lo, lo + 1
		}
		return lo, lo
	case "\x00":
		return lo, int32(len(ks.keys))
	}
	hi = int32(sort.SearchStrings(ks.keys, end))
	return lo, max(hi, lo)
}

// inRange reports whether key k lies in etcd range [key, end).
func inRange(k, key, end string) bool {
	switch end {
	case "":
		return k == key
	case "\x00":
		return k >= key
	}
	return k >= key && k < end
}

// rankSet is a set of key ranks with fast in-order iteration: a bitset with a summary level, so that
// long runs of absent keys (deleted pods, expired events) are skipped 4096 at a time.
type rankSet struct {
	words   []uint64
	summary []uint64 // bit i set when words[i] is not zero
}

func newRankSet(n int) rankSet {
	w := (n + 63) / 64
	return rankSet{words: make([]uint64, w), summary: make([]uint64, (w+63)/64)}
}

func (s *rankSet) add(k int32) {
	w := k >> 6
	s.words[w] |= 1 << (k & 63)
	s.summary[w>>6] |= 1 << (w & 63)
}

func (s *rankSet) remove(k int32) {
	w := k >> 6
	s.words[w] &^= 1 << (k & 63)
	if s.words[w] == 0 {
		s.summary[w>>6] &^= 1 << (w & 63)
	}
}

func (s *rankSet) has(k int32) bool { return s.words[k>>6]&(1<<(k&63)) != 0 }

// next returns the smallest member >= k and below hi, or -1.
func (s *rankSet) next(k, hi int32) int32 {
	if k >= hi {
		return -1
	}
	w := int(k >> 6)
	if rest := s.words[w] >> (k & 63); rest != 0 {
		if r := k + int32(bits.TrailingZeros64(rest)); r < hi {
			return r
		}
		return -1
	}
	// Find the next non-empty word through the summary.
	w++
	for w < len(s.words) {
		sw := w >> 6
		if m := s.summary[sw] >> (w & 63); m != 0 {
			w += bits.TrailingZeros64(m)
			r := int32(w<<6) + int32(bits.TrailingZeros64(s.words[w]))
			if r < hi {
				return r
			}
			return -1
		}
		w = (sw + 1) << 6
	}
	return -1
}

// fenwick counts members of a rank set by interval in logarithmic time.
type fenwick []int32

func (f fenwick) add(k int32, d int32) {
	for i := int(k) + 1; i <= len(f); i += i & -i {
		f[i-1] += d
	}
}

// prefix returns the count of ranks below k.
func (f fenwick) prefix(k int32) int64 {
	var s int64
	for i := int(k); i > 0; i -= i & -i {
		s += int64(f[i-1])
	}
	return s
}

func (f fenwick) count(lo, hi int32) int64 {
	if hi <= lo {
		return 0
	}
	return f.prefix(hi) - f.prefix(lo)
}

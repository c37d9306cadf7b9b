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

// collectKeys builds the keyspace from every key the history names: single keys of requests (a range's
// bounds need not be keys), and every key of answers; keys holds those of watch events.
func (c *checker) collectKeys(keys map[string]struct{}) {
	// Most keys are answered again and again (every page of every list), each time with the store's one
	// copy of its bytes: the cache spares hashing them into the set.
	recent := history.NewRecentStrings(16)
	add := func(k string) {
		if _, ok := recent.Get(k); !ok {
			keys[k] = struct{}{}
			recent.Put(k, 0)
		}
	}
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
				add(r.Range.Key(i))
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
	c.hist.Scan(func(_ int, op *history.Operation) {
		addReq(&op.Request)
		if op.Response != nil {
			addResp(op.Response)
		}
	})
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

package linearizability

// The checker's paged arrays (history.Paged): what it derives per operation, per revision, per change and
// per watch event of a long history, in files next to the history. See the package documentation
// (# Memory).

import (
	"cmp"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// pageBudget is how much of each paged array of a check is in memory at most (by default: the tests
// take less, to read pages back all the time). A check holds about fifteen.
const pageBudget = 4 << 20

// newArray returns a paged array of n values for check c: in a file of its own when the check pages
// (CheckDir), in memory otherwise. A page that cannot be written or read back panics with a
// history.ReadBackError, which check turns into its error: a value not read is never taken for zero.
func newArray[T any](c *checker, n int) *history.Paged[T] {
	if !c.paging {
		return history.NewPaged[T](nil, n, 0, c.pageBytes)
	}
	f, err := history.SpillFile(c.pageDir, "check")
	if err != nil {
		panic(&history.ReadBackError{Err: err})
	}
	a := history.NewPaged[T](f, n, cmp.Or(c.pageBudget, pageBudget), c.pageBytes)
	c.paged = append(c.paged, a.Close)
	return a
}

// sortPaged sorts a (see history.SortPaged) into a new array of c when it does not fit in memory.
func sortPaged[T any](c *checker, a *history.Paged[T], cmp func(T, T) int) *history.Paged[T] {
	return history.SortPaged(a, cmp, func() *history.Paged[T] { return newArray[T](c, 0) })
}

// keyLists is a list of numbers per key rank (the operations that project onto a key, the changes of a
// key), in one paged array sorted by key: key k's are all[from[k]:from[k+1]], in increasing order. What
// it holds in memory grows with the keys; the lists themselves are paged.
type keyLists struct {
	from []int
	all  *history.Paged[int32]
}

// keyEntry is number v of key rank k's list.
type keyEntry struct{ k, v int32 }

// keyLists sorts entries (given back) into the lists of key ranks.
func (c *checker) keyLists(entries *history.Paged[keyEntry], keys int) keyLists {
	sorted := sortPaged(c, entries, func(a, b keyEntry) int { return cmp.Or(cmp.Compare(a.k, b.k), cmp.Compare(a.v, b.v)) })
	l := keyLists{from: make([]int, keys+1), all: newArray[int32](c, sorted.Len())}
	for i := range sorted.Len() {
		e := sorted.Get(i)
		l.from[e.k+1]++
		l.all.Set(i, e.v)
	}
	sorted.Close()
	for k := range keys {
		l.from[k+1] += l.from[k]
	}
	return l
}

// count returns the length of key rank k's list.
func (l keyLists) count(k int32) int { return l.from[k+1] - l.from[k] }

// list returns a copy of key rank k's list.
func (l keyLists) list(k int32) []int32 {
	out := make([]int32, 0, l.count(k))
	for i := l.from[k]; i < l.from[k+1]; i++ {
		out = append(out, l.all.Get(i))
	}
	return out
}

package history

// Paged arrays: what a long history's checks and stores hold per operation, per revision or per key-value,
// in a file of which a bounded number of pages are in memory.

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"reflect"
	"slices"
	"unsafe"
)

// PageBytes is about the size of one page of a paged array, unless told otherwise: large enough that a
// pass going in order reads the file in large steps, small enough that a pass jumping about (the per-key
// checks go key by key through the whole run) does not read much more than it uses.
const PageBytes = 16 << 10

// minPages is the fewest pages a paged array with a file keeps in memory: a pass that alternates
// between a few places of one array (the writer of a revision and the operation at hand) never reads a
// page back for each step.
const minPages = 8

// Paged is an array of values of a fixed-size type without pointers, in pages. Without a file every page
// stays in memory; with one, at most limit pages are in memory, the rest in the file, and a page that is
// needed again replaces the page least recently needed (a clock: each resident page has a bit set when
// it is used and cleared when the hand passes it).
//
// Get returns a copy and Set writes one value: no pointer into a page escapes, so reading a page back
// over one that is evicted can never leave a caller writing to a page no longer in the array. A page
// that cannot be written or read back panics with a ReadBackError. An array is not safe for concurrent
// use: even Get moves the clock.
type Paged[T any] struct {
	f      *os.File
	n      int
	shift  uint
	mask   int
	size   int          // bytes per page
	table  []*pageOf[T] // by page number: the page when it is in memory
	ring   []int32      // the pages in memory, in the order the clock visits them
	hand   int
	limit  int
	closed bool
}

type pageOf[T any] struct {
	v          []T
	no         int32
	dirty, ref bool
}

// NewPaged returns an array of n zero values, kept in file f (nil: in memory; see SpillFile) with at most
// budget bytes of it in memory (and at least minPages pages), in pages of about pageBytes (0: PageBytes).
// The array is the file's only user, and closes it: page p is at p times the page size.
func NewPaged[T any](f *os.File, n, budget, pageBytes int) *Paged[T] {
	var zero T
	if hasPointers(reflect.TypeOf(zero)) {
		panic(fmt.Sprintf("paged array of %T: a type with pointers cannot be kept in a file", zero))
	}
	sz := max(int(unsafe.Sizeof(zero)), 1)
	if pageBytes <= 0 {
		pageBytes = PageBytes
	}
	per := 1 << max(bits.Len(uint(pageBytes/sz))-1, 0)
	a := &Paged[T]{f: f, shift: uint(bits.TrailingZeros(uint(per))), mask: per - 1, size: per * sz}
	a.limit = max(budget/a.size, minPages)
	a.grow(n)
	return a
}

// hasPointers reports whether values of type t hold pointers (which the garbage collector must see, so
// they cannot live in a file).
func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr, reflect.Float32,
		reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	}
	return true
}

// Len returns the number of values.
func (a *Paged[T]) Len() int { return a.n }

// grow makes the array n values long (the new ones zero).
func (a *Paged[T]) grow(n int) {
	a.n = max(a.n, n)
	for len(a.table)<<a.shift < a.n {
		a.table = append(a.table, nil)
	}
}

// Get returns value i.
func (a *Paged[T]) Get(i int) T {
	if uint(i) >= uint(a.n) {
		panic(fmt.Sprintf("paged array: index %d out of range [0:%d]", i, a.n))
	}
	return a.page(i >> a.shift).v[i&a.mask]
}

// Set makes value i v.
func (a *Paged[T]) Set(i int, v T) {
	if uint(i) >= uint(a.n) {
		panic(fmt.Sprintf("paged array: index %d out of range [0:%d]", i, a.n))
	}
	pg := a.page(i >> a.shift)
	pg.v[i&a.mask] = v
	pg.dirty = true
}

// Add appends v.
func (a *Paged[T]) Add(v T) {
	a.grow(a.n + 1)
	a.Set(a.n-1, v)
}

// page returns page p, reading it in when it is not in memory.
func (a *Paged[T]) page(p int) *pageOf[T] {
	if a.closed {
		panic(&ReadBackError{Err: fmt.Errorf("paged array: %w", os.ErrClosed)})
	}
	if pg := a.table[p]; pg != nil {
		pg.ref = true
		return pg
	}
	var pg *pageOf[T]
	if a.f == nil || len(a.ring) < a.limit {
		pg = &pageOf[T]{v: make([]T, a.mask+1)}
		a.ring = append(a.ring, int32(p))
	} else {
		pg = a.evict()
		a.ring[a.hand] = int32(p)
		a.hand = (a.hand + 1) % len(a.ring)
		a.read(pg, p)
	}
	pg.no, pg.ref = int32(p), true
	a.table[p] = pg
	return pg
}

// evict takes the page the clock's hand stops at out of memory, writing it out first if it changed, and
// returns it for reuse; the hand is left on its slot of the ring.
func (a *Paged[T]) evict() *pageOf[T] {
	for {
		pg := a.table[a.ring[a.hand]]
		if !pg.ref {
			if pg.dirty {
				if _, err := a.f.WriteAt(a.bytes(pg), int64(pg.no)*int64(a.size)); err != nil {
					panic(&ReadBackError{fmt.Errorf("write page %d: %w", pg.no, err)})
				}
			}
			a.table[pg.no] = nil
			pg.dirty = false
			return pg
		}
		pg.ref = false
		a.hand = (a.hand + 1) % len(a.ring)
	}
}

// read fills pg with page p from the file; what the file does not hold yet was never written, so is zero.
func (a *Paged[T]) read(pg *pageOf[T], p int) {
	b := a.bytes(pg)
	n, err := a.f.ReadAt(b, int64(p)*int64(a.size))
	if err != nil && !errors.Is(err, io.EOF) {
		panic(&ReadBackError{fmt.Errorf("read page %d: %w", p, err)})
	}
	clear(b[n:])
}

func (a *Paged[T]) bytes(pg *pageOf[T]) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(pg.v))), a.size)
}

// Close gives the array's file and memory back; reading it afterwards panics with a ReadBackError.
func (a *Paged[T]) Close() {
	if a.f != nil {
		a.f.Close()
	}
	a.table, a.ring, a.closed = nil, nil, true
}

// SortPaged sorts array a by cmp, which must order every two values (no ties between different values:
// the order of equal ones is not kept), and returns the sorted array: a itself when it fits in memory
// at once, otherwise fresh(), filled, and a closed. Runs of what fits in memory are sorted in place, then
// merged, each run read in order.
func SortPaged[T any](a *Paged[T], cmp func(T, T) int, fresh func() *Paged[T]) *Paged[T] {
	run := a.n
	if a.f != nil {
		run = max(a.limit<<a.shift/2, 1) // the other half is for the pages the merge reads and writes
	}
	buf := make([]T, 0, min(run, a.n))
	for lo := 0; lo < a.n; lo += run {
		buf = buf[:0]
		for i := lo; i < min(lo+run, a.n); i++ {
			buf = append(buf, a.Get(i))
		}
		slices.SortFunc(buf, cmp)
		for i, v := range buf {
			a.Set(lo+i, v)
		}
	}
	if a.n <= run {
		return a
	}
	buf = nil
	m := &merge[T]{cmp: cmp}
	for lo := 0; lo < a.n; lo += run {
		m.runs = append(m.runs, cursor[T]{head: a.Get(lo), pos: lo, end: min(lo+run, a.n)})
	}
	heap.Init(m)
	out := fresh()
	for len(m.runs) > 0 {
		r := &m.runs[0]
		out.Add(r.head)
		if r.pos++; r.pos < r.end {
			r.head = a.Get(r.pos)
			heap.Fix(m, 0)
		} else {
			heap.Pop(m)
		}
	}
	a.Close()
	return out
}

// merge is the runs SortPaged merges, a heap by their next value.
type merge[T any] struct {
	cmp  func(T, T) int
	runs []cursor[T]
}

type cursor[T any] struct {
	head     T
	pos, end int
}

func (m *merge[T]) Len() int           { return len(m.runs) }
func (m *merge[T]) Less(i, j int) bool { return m.cmp(m.runs[i].head, m.runs[j].head) < 0 }
func (m *merge[T]) Swap(i, j int)      { m.runs[i], m.runs[j] = m.runs[j], m.runs[i] }
func (m *merge[T]) Push(x any)         { m.runs = append(m.runs, x.(cursor[T])) }
func (m *merge[T]) Pop() any {
	x := m.runs[len(m.runs)-1]
	m.runs = m.runs[:len(m.runs)-1]
	return x
}

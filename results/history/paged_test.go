package history

import (
	"cmp"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// TestPagedAgreesWithSlice: a paged array in a file, a few pages of it in memory, holds what a slice
// holds through random reads, writes and appends, every page written out and read back many times.
func TestPagedAgreesWithSlice(t *testing.T) {
	type rec struct {
		a int64
		b int32
		c bool
	}
	for _, file := range []bool{false, true} {
		var f *os.File
		if file {
			var err error
			if f, err = os.CreateTemp(t.TempDir(), "paged"); err != nil {
				t.Fatal(err)
			}
		}
		a := NewPaged[rec](f, 1000, 1, 64) // four values a page, eight pages in memory
		want := make([]rec, 1000)
		rng := rand.New(rand.NewPCG(1, 2))
		for step := range 200_000 {
			switch i := rng.IntN(len(want)); rng.IntN(10) {
			case 0:
				v := rec{a: int64(step), b: int32(i), c: step%2 == 0}
				a.Add(v)
				want = append(want, v)
			case 1, 2, 3, 4:
				v := rec{a: rng.Int64(), b: rng.Int32(), c: rng.IntN(2) == 0}
				a.Set(i, v)
				want[i] = v
			default:
				if got := a.Get(i); got != want[i] {
					t.Fatalf("file %v, step %d: value %d is %+v, want %+v", file, step, i, got, want[i])
				}
			}
		}
		if a.Len() != len(want) {
			t.Fatalf("len %d, want %d", a.Len(), len(want))
		}
		for i := range want {
			if got := a.Get(i); got != want[i] {
				t.Fatalf("file %v: value %d is %+v, want %+v", file, i, got, want[i])
			}
		}
		if file && len(a.ring) != minPages {
			t.Errorf("%d pages in memory, want %d", len(a.ring), minPages)
		}
		a.Close()
	}
}

// TestPagedRefusesPointers: a type the garbage collector must see into cannot be paged out.
func TestPagedRefusesPointers(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a paged array of a type with a pointer was made")
		}
	}()
	NewPaged[struct {
		n int
		s string
	}](nil, 1, 0, 0)
}

// TestPagedReadError: a page that cannot be read back panics with a ReadBackError (the checker turns it
// into its error): a value not read is never taken for zero.
func TestPagedReadError(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "paged")
	if err != nil {
		t.Fatal(err)
	}
	a := NewPaged[int64](f, 100, 1, 8)
	for i := range 100 {
		a.Set(i, int64(i))
	}
	f.Close()
	defer func() {
		e, ok := recover().(*ReadBackError)
		if !ok || !errors.Is(e, os.ErrClosed) {
			t.Errorf("recovered %v, want a ReadBackError of a closed file", e)
		}
	}()
	a.Get(0)
}

// TestSortPaged: an array sorted in runs that fit in its pages in memory, then merged, is in order and
// holds what it held, in memory (one run) and in a file (many).
func TestSortPaged(t *testing.T) {
	for _, paging := range []bool{false, true} {
		array := func() *Paged[int64] {
			if !paging {
				return NewPaged[int64](nil, 0, 0, 0)
			}
			f, err := SpillFile(t.TempDir(), "sort")
			if err != nil {
				t.Fatal(err)
			}
			return NewPaged[int64](f, 0, 1, 64) // eight values a page, eight pages in memory
		}
		a := array()
		rng := rand.New(rand.NewPCG(3, 4))
		var want []int64
		for range 10_000 {
			v := rng.Int64N(1 << 20)
			a.Add(v)
			want = append(want, v)
		}
		slices.Sort(want)
		var fresh *Paged[int64]
		got := SortPaged(a, cmp.Compare[int64], func() *Paged[int64] { fresh = array(); return fresh })
		if got.Len() != len(want) {
			t.Fatalf("paging %v: %d values sorted, want %d", paging, got.Len(), len(want))
		}
		for i := range want {
			if v := got.Get(i); v != want[i] {
				t.Fatalf("paging %v: value %d is %d, want %d", paging, i, v, want[i])
			}
		}
		if paging != (got == fresh && got != a) {
			t.Errorf("paging %v: sorted in place %v", paging, got == a)
		}
		got.Close()
	}
}

package workloads

import "testing"

// TestShareAddsUp: the shares of n workers deal out every client, key and slot exactly once.
func TestShareAddsUp(t *testing.T) {
	for _, of := range []int{1, 2, 3, 4, 7} {
		for _, n := range []int{0, 1, 5, 64, 1000, 10007} {
			parts, next := 0, 0
			for i := range of {
				s := Share{Index: i, Of: of}
				parts += s.Part(n)
				first, count := s.Range(n)
				if first != next {
					t.Fatalf("%d workers, %d keys: worker %d starts at %d, want %d (ranges must be contiguous and disjoint)", of, n, i, first, next)
				}
				next = first + count
			}
			if parts != n || next != n {
				t.Fatalf("%d workers, %d things: parts add up to %d and ranges to %d", of, n, parts, next)
			}
			for slot := range 100 {
				owners := 0
				for i := range of {
					if (Share{Index: i, Of: of}).Owns(slot) {
						owners++
					}
				}
				if owners != 1 {
					t.Fatalf("%d workers: slot %d has %d owners", of, slot, owners)
				}
			}
		}
	}
	if got := (Share{Index: 2, Of: 4}).Rate(1000); got != 250 {
		t.Fatalf("rate share: %v", got)
	}
	a, b := Share{Index: 0, Of: 3}.IDBase(), Share{Index: 1, Of: 3}.IDBase()
	if b-a < 1<<20 || (Share{}).IDBase() != 0 {
		t.Fatalf("id bases %d, %d: workers' clients must be far apart", a, b)
	}
}

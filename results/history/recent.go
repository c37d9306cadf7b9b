package history

import "unsafe"

// RecentStrings remembers strings by where their bytes are, each with a number: a cache in front of a map
// keyed by the strings' contents. A decoded history holds one copy of each of its strings (the file
// format writes a string once and names it by number after that, and a store's records share its
// strings), and its readers meet the same keys again and again (every page of every list): a cache hit
// costs one load where the map would hash the string and compare it. A string the cache does not know (new,
// forgotten, or a copy with bytes elsewhere) is for the caller to look up, and to remember afterwards.
//
// The cache is direct-mapped and never wrong: a slot holds the last string put there (and so keeps its
// bytes from being freed and their address reused), compared by address and length, so a string is only
// ever found under the number it was remembered with.
type RecentStrings struct {
	slots []recentSlot
	shift uint
}

type recentSlot struct {
	s string
	v uint64
}

// NewRecentStrings returns a cache of 2^bits slots (24 bytes each).
func NewRecentStrings(bits uint) *RecentStrings {
	return &RecentStrings{slots: make([]recentSlot, 1<<bits), shift: 64 - bits}
}

func (r *RecentStrings) slot(s string) *recentSlot {
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	return &r.slots[uint64(p)*0x9e3779b97f4a7c15>>r.shift] // Fibonacci hashing of the address
}

// Get returns the number s was remembered with, if its bytes are the ones remembered.
func (r *RecentStrings) Get(s string) (uint64, bool) {
	sl := r.slot(s)
	if len(s) > 0 && unsafe.StringData(sl.s) == unsafe.StringData(s) && len(sl.s) == len(s) {
		return sl.v, true
	}
	return 0, false
}

// Put remembers s, by its bytes, with number v (in place of whatever the slot held).
func (r *RecentStrings) Put(s string, v uint64) {
	if len(s) == 0 {
		return // an empty string has no bytes of its own to tell it by
	}
	*r.slot(s) = recentSlot{s: s, v: v}
}

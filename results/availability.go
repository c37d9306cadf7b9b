package results

import (
	"math/bits"
	"strings"
	"time"
)

// This file holds chaosbench's one definition of availability. The fault windows of summary.json (Phases),
// the report (package report) and the comparison of runs (chaosbench compare) all measure it with
// LongestGap, from an Activity each fills from what it has: live records, the history, or the per-second
// rows of timeseries.jsonl.
//
// Writes and reads are measured separately, because they fail differently: a member cut off from the
// quorum may go on serving reads (serializable ones at least) while no write can commit, and a read-only
// outage (a stuck ReadIndex) leaves writes going.
//
//   - A write is a request that changes the key space: put, delete, and a transaction with a put or a
//     delete in either branch (the kube workload's creates, updates and deletes are such transactions).
//   - A read is a range request (get, list, count) and a transaction that only reads (etcd serves it
//     as a read, through ReadIndex).
//   - Neither: lease grants, revokes and keep-alives, compactions, status and progress requests, watch
//     events and waits for a watch cache. They are few or not requests of the key space at all, and a
//     stretch without them says more about the schedule than about the cluster.
//
// A request succeeds when etcd answered it without an error; a transaction whose comparison failed was
// answered, and counts as a success.
//
// The gap of a class over a span [from, until] is the longest stretch without a successful request of
// the class, by completion time:
//
//   - stretches run between consecutive successes;
//   - the first one starts at the last success at or before from, or at from when there was none;
//   - the last one runs from the last success to until, and is open (the class had not recovered when the
//     span ended), when a request of the class was still being tried after that success: one failed, or
//     was sent, or was in flight, after it. When nobody tried, there is no such stretch: a workload that
//     stopped writing is not an outage;
//   - a class with no request at all during the span has no gap.
//
// A fault window's span runs from its injection to the end of its observation: the cluster healthy again
// and the settle time passed, the next fault's injection, or the end of the load, whichever comes first
// (FaultWindow.Availability.ObservedToNs). A run without faults has one span, its measured window.
//
// Times are kept at one-millisecond resolution (a set bit per millisecond), so that memory stays bounded
// by the span's length however many requests it holds, and records may arrive in any order.

// Access is what a request does to etcd's key space, as far as availability is concerned.
type Access uint8

// Accesses. The zero value, AccessNone, counts in neither gap.
const (
	AccessNone Access = iota
	AccessRead
	AccessWrite
)

// String names the access as timeseries.jsonl does: "write", "read" or "none".
func (a Access) String() string {
	switch a {
	case AccessRead:
		return "read"
	case AccessWrite:
		return "write"
	}
	return "none"
}

// ParseAccess reads what String wrote; anything else is AccessNone.
func ParseAccess(s string) Access {
	switch s {
	case "read":
		return AccessRead
	case "write":
		return AccessWrite
	}
	return AccessNone
}

// AccessOf classifies a request by its kind, as the history names it ("put", "delete", "range",
// "txn", "lease-grant", ...). A transaction is a read until Branch finds a write among its branches.
// Classifying allocates nothing: every request the workloads send goes through it.
func AccessOf(kind string) Access {
	switch kind {
	case "put", "delete":
		return AccessWrite
	case "range", "txn":
		return AccessRead
	}
	return AccessNone
}

// Branch returns the access of a transaction classified a so far that also holds a request of the given
// kind in one of its branches: a write once one of them writes.
func (a Access) Branch(kind string) Access {
	if AccessOf(kind) == AccessWrite {
		return AccessWrite
	}
	return a
}

// IsWatchEvent reports whether operation name records watch events rather than requests ("watch",
// "watch-event/pods").
func IsWatchEvent(op string) bool { return strings.HasPrefix(op, "watch") }

// IsRequest reports whether operation name counts etcd requests. Watch events and the waits for a watch
// cache to catch up ("cache-sync/pods") are recorded as operations, but a client sent none of them:
// they count neither as requests nor against a target request rate.
func IsRequest(op string) bool {
	return !IsWatchEvent(op) && !strings.HasPrefix(op, "cache-sync/")
}

// Requests sums the counts of the operations that are requests (see IsRequest).
func Requests(ops map[string]*Operation) int64 {
	var n int64
	for name, op := range ops {
		if IsRequest(name) {
			n += op.Count
		}
	}
	return n
}

// Rates returns the throughput of the requests among ops and, apart from it, of the watch events: a
// target rate is one of requests, and events are not sent by anyone.
func Rates(ops map[string]*Operation) (requests, watchEvents float64) {
	for name, op := range ops {
		switch {
		case IsRequest(name):
			requests += op.Throughput
		case IsWatchEvent(name):
			watchEvents += op.Throughput
		}
	}
	return requests, watchEvents
}

// Activity is what the availability gap needs to know of the requests of one class: when they succeeded
// and when they were in flight, at one-millisecond resolution. The zero value is empty and ready to use;
// requests may be added in any order.
type Activity struct {
	ok   msSet // completion of every successful request
	busy msSet // every millisecond during which a request was in flight
}

// Add records a request sent at start that completed at end, successfully when ok. Times are offsets
// from the run's time base.
func (a *Activity) Add(start, end time.Duration, ok bool) {
	a.busy.addRange(toMs(start), toMs(end))
	if ok {
		a.ok.add(toMs(end))
	}
}

// Empty reports whether no request was added.
func (a *Activity) Empty() bool { return len(a.busy.words) == 0 && len(a.ok.words) == 0 }

// Activities holds the activity of both classes.
type Activities struct {
	Writes, Reads Activity
}

// Add records a request of the given access (requests of neither class are ignored).
func (a *Activities) Add(access Access, start, end time.Duration, ok bool) {
	switch access {
	case AccessWrite:
		a.Writes.Add(start, end, ok)
	case AccessRead:
		a.Reads.Add(start, end, ok)
	}
}

// Gap is the longest stretch of a span without a successful request of one class. From is the completion
// of the last success before it (or the span's start); To the completion of the first success after it,
// or the span's end when Open.
type Gap struct {
	From, To time.Duration
	// Open says that no request of the class had succeeded since From when the span ended, though some
	// were tried: the class had not recovered.
	Open bool
}

// Length is how long the stretch lasted.
func (g Gap) Length() time.Duration { return g.To - g.From }

// LongestGap returns the availability gap of the class whose requests a holds over the span
// [from, until], as the comment at the top of this file defines it; ok is false when no request of the
// class was in flight or succeeded during the span (it has no gap). Times are offsets from the run's time
// base; the gap's are whole milliseconds.
func LongestGap(a *Activity, from, until time.Duration) (g Gap, ok bool) {
	lo, hi := toMs(from), max(toMs(until), toMs(from))
	if !a.ok.any(lo, hi) && !a.busy.any(lo, hi) {
		return Gap{}, false
	}
	prev := a.ok.prev(lo)
	if prev < 0 {
		prev = lo
	}
	best := [2]int64{prev, prev}
	for {
		next := a.ok.next(prev + 1)
		if next < 0 || next > hi {
			break
		}
		if next-prev > best[1]-best[0] {
			best = [2]int64{prev, next}
		}
		prev = next
	}
	open := false
	if hi-prev > best[1]-best[0] && a.busy.any(prev+1, hi) {
		best, open = [2]int64{prev, hi}, true
	}
	return Gap{From: time.Duration(best[0]) * time.Millisecond, To: time.Duration(best[1]) * time.Millisecond, Open: open}, true
}

// FaultSpans returns the span each fault window's availability is measured over (see the comment at the
// top of this file): from its injection to the end of its observation. A window without an observation
// (recorded by an older version) is taken as observed until the next window's injection or loadEnd; one
// that never took effect (skipped: it ends where it starts) spans that instant.
func FaultSpans(faults []FaultWindow, loadEnd time.Duration) [][2]time.Duration {
	out := make([][2]time.Duration, len(faults))
	for i, f := range faults {
		from, until := time.Duration(f.StartNs), time.Duration(f.EndNs)
		switch {
		case f.Availability != nil && f.Availability.ObservedToNs > 0:
			until = time.Duration(f.Availability.ObservedToNs)
		case f.EndNs > f.StartNs:
			until = max(until, loadEnd)
			for _, g := range faults {
				if g.StartNs > f.StartNs && time.Duration(g.StartNs) < until {
					until = max(time.Duration(g.StartNs), time.Duration(f.EndNs))
				}
			}
		}
		out[i] = [2]time.Duration{from, max(until, from)}
	}
	return out
}

func toMs(d time.Duration) int64 { return max(int64(d/time.Millisecond), 0) }

// msSet is a set of milliseconds, one bit each from base (a multiple of 64), so that a span's requests
// take a few kilobytes per minute however many there are.
type msSet struct {
	base  int64
	words []uint64
}

// grow makes room for [from, to] and returns the word indexes of both ends.
func (s *msSet) grow(from, to int64) (int, int) {
	if len(s.words) == 0 {
		s.base = from &^ 63
	}
	if from < s.base {
		nb := from &^ 63
		words := make([]uint64, int((s.base-nb)/64)+len(s.words))
		copy(words[(s.base-nb)/64:], s.words)
		s.base, s.words = nb, words
	}
	last := int((to - s.base) / 64)
	for len(s.words) <= last {
		s.words = append(s.words, 0)
	}
	return int((from - s.base) / 64), last
}

func (s *msSet) add(ms int64) {
	i, _ := s.grow(ms, ms)
	s.words[i] |= 1 << uint((ms-s.base)%64)
}

// addRange adds every millisecond of [from, to].
func (s *msSet) addRange(from, to int64) {
	if to < from {
		return
	}
	first, last := s.grow(from, to)
	for w := first; w <= last; w++ {
		mask := ^uint64(0)
		if w == first {
			mask &= ^uint64(0) << uint((from-s.base)%64)
		}
		if w == last {
			mask &= ^uint64(0) >> (63 - uint((to-s.base)%64))
		}
		s.words[w] |= mask
	}
}

// any reports whether a member lies in [from, to].
func (s *msSet) any(from, to int64) bool {
	n := s.next(from)
	return n >= 0 && n <= to
}

// prev returns the largest member <= ms, or -1.
func (s *msSet) prev(ms int64) int64 {
	if len(s.words) == 0 || ms < s.base {
		return -1
	}
	off := ms - s.base
	w := int(off / 64)
	if w >= len(s.words) {
		w, off = len(s.words)-1, int64(len(s.words))*64-1
	}
	for ; w >= 0; w-- {
		word := s.words[w]
		if int64(w) == off/64 {
			word &= ^uint64(0) >> (63 - uint(off%64))
		}
		if word != 0 {
			return s.base + int64(w)*64 + int64(63-bits.LeadingZeros64(word))
		}
	}
	return -1
}

// next returns the smallest member >= ms, or -1.
func (s *msSet) next(ms int64) int64 {
	if len(s.words) == 0 {
		return -1
	}
	off := max(ms-s.base, 0)
	for w := int(off / 64); w < len(s.words); w++ {
		word := s.words[w]
		if int64(w) == off/64 {
			word &= ^uint64(0) << uint(off%64)
		}
		if word != 0 {
			return s.base + int64(w)*64 + int64(bits.TrailingZeros64(word))
		}
	}
	return -1
}

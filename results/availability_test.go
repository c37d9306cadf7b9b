package results

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// req is one request for the availability tests: sent at start, completed at end (milliseconds).
type req struct {
	access     Access
	start, end int64
	ok         bool
}

// every returns requests of one access sent every step ms in [from, to), each taking 1 ms; those that
// complete inside an outage [o[0], o[1]) fail.
func every(access Access, from, to, step int64, outages ...[2]int64) []req {
	var out []req
	for t := from; t < to; t += step {
		ok := true
		for _, o := range outages {
			if t+1 >= o[0] && t+1 < o[1] {
				ok = false
			}
		}
		out = append(out, req{access, t, t + 1, ok})
	}
	return out
}

func millis(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func TestLongestGap(t *testing.T) {
	type want struct {
		from, to int64
		open     bool
		ok       bool
	}
	none := want{}
	tests := []struct {
		name        string
		reqs        []req
		from, until int64
		writes      want
		reads       want
	}{
		{name: "steady, no outage", reqs: every(AccessWrite, 0, 3000, 10), from: 1000, until: 2000,
			writes: want{991, 1001, false, true}, reads: none},
		{name: "outage inside and after the injection", reqs: every(AccessWrite, 0, 3000, 10, [2]int64{1000, 1600}),
			from: 1000, until: 2500,
			// last success completes at 991 ms, first after the outage at 1601 ms
			writes: want{991, 1601, false, true}, reads: none},
		{name: "outage before the span does not count", reqs: every(AccessWrite, 0, 3000, 10, [2]int64{200, 700}),
			from: 1000, until: 2000, writes: want{991, 1001, false, true}, reads: none},
		{name: "no success at all", reqs: every(AccessWrite, 0, 3000, 10, [2]int64{0, 3000}),
			from: 1000, until: 2000, writes: want{1000, 2000, true, true}, reads: none},
		{name: "success only before, failures after", reqs: every(AccessWrite, 0, 3000, 10, [2]int64{500, 3000}),
			from: 1000, until: 2000, writes: want{491, 2000, true, true}, reads: none},
		{name: "success only before, nothing tried after: no gap",
			reqs: every(AccessWrite, 0, 500, 10), from: 1000, until: 2000, writes: none, reads: none},
		{name: "success only before, one request stuck across the span",
			reqs:   append(every(AccessWrite, 0, 500, 10), req{AccessWrite, 495, 2500, false}),
			from:   1000,
			until:  2000,
			writes: want{491, 2000, true, true}, reads: none},
		{name: "the workload stopped writing inside the span: not an outage",
			reqs: every(AccessWrite, 0, 1500, 10), from: 1000, until: 2000, writes: want{991, 1001, false, true}, reads: none},
		{name: "reads only", reqs: every(AccessRead, 0, 3000, 10, [2]int64{1200, 1500}), from: 1000, until: 2000,
			writes: none, reads: want{1191, 1501, false, true}},
		{name: "interleaved: writes stop, reads go on",
			reqs: slices.Concat(every(AccessWrite, 0, 3000, 10, [2]int64{1000, 1800}), every(AccessRead, 5, 3000, 10)),
			from: 1000, until: 2500,
			writes: want{991, 1801, false, true}, reads: want{996, 1006, false, true}},
		{name: "interleaved: reads stall longer than writes",
			reqs: slices.Concat(every(AccessWrite, 0, 3000, 10, [2]int64{1000, 1100}), every(AccessRead, 5, 3000, 10, [2]int64{1000, 1700})),
			from: 1000, until: 2500,
			writes: want{991, 1101, false, true}, reads: want{996, 1706, false, true}},
		{name: "a longer closed stretch outranks a shorter open one",
			reqs: every(AccessWrite, 0, 3000, 10, [2]int64{1000, 1900}, [2]int64{2300, 3000}),
			from: 1000, until: 2500, writes: want{991, 1901, false, true}, reads: none},
		{name: "no success before the span: the gap starts with it",
			reqs: every(AccessWrite, 0, 3000, 10, [2]int64{0, 1300}), from: 1000, until: 2000,
			writes: want{1000, 1301, false, true}, reads: none},
		{name: "requests of neither class count in neither gap",
			reqs: every(AccessNone, 0, 3000, 10), from: 1000, until: 2000, writes: none, reads: none},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(order string, reqs []req) {
				var a Activities
				for _, r := range reqs {
					a.Add(r.access, millis(r.start), millis(r.end), r.ok)
				}
				for _, c := range []struct {
					name string
					act  *Activity
					want want
				}{{"writes", &a.Writes, tt.writes}, {"reads", &a.Reads, tt.reads}} {
					g, ok := LongestGap(c.act, millis(tt.from), millis(tt.until))
					got := want{int64(g.From / time.Millisecond), int64(g.To / time.Millisecond), g.Open, ok}
					if got != c.want {
						t.Errorf("%s, %s: got %+v, want %+v", order, c.name, got, c.want)
					}
				}
			}
			check("in order", tt.reqs)
			shuffled := slices.Clone(tt.reqs)
			rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			check("shuffled", shuffled)
		})
	}
}

func TestAccessOf(t *testing.T) {
	tests := []struct {
		kind     string
		branches []string
		want     Access
	}{
		{"put", nil, AccessWrite},
		{"delete", nil, AccessWrite},
		{"range", nil, AccessRead},
		{"txn", []string{"range", "put"}, AccessWrite},
		{"txn", []string{"put", "range"}, AccessWrite},
		{"txn", []string{"range"}, AccessRead},
		{"txn", []string{"delete"}, AccessWrite},
		{"txn", nil, AccessRead},
		{"lease-grant", nil, AccessNone},
		{"lease-keepalive", nil, AccessNone},
		{"compact", nil, AccessNone},
	}
	for _, tt := range tests {
		got := AccessOf(tt.kind)
		for _, b := range tt.branches {
			got = got.Branch(b)
		}
		if got != tt.want {
			t.Errorf("%s %v: %v, want %v", tt.kind, tt.branches, got, tt.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { AccessOf("txn").Branch("range").Branch("put") }); n != 0 {
		t.Errorf("classifying allocates %v times", n)
	}
	for op, want := range map[string]bool{"put": true, "list/pods": true, "watch": false, "watch-event/pods": false, "cache-sync/pods": false} {
		if IsRequest(op) != want {
			t.Errorf("IsRequest(%q) = %v", op, !want)
		}
	}
}

// TestMsSet: members added in any order, below the first one too, and ranges across words.
func TestMsSet(t *testing.T) {
	var s msSet
	s.add(1000)
	s.add(3)
	s.addRange(60, 200)
	s.add(5000)
	for _, tt := range []struct{ at, prev, next int64 }{
		{0, -1, 3}, {3, 3, 3}, {4, 3, 60}, {130, 130, 130}, {201, 200, 1000}, {999, 200, 1000}, {1001, 1000, 5000}, {6000, 5000, -1},
	} {
		if p, n := s.prev(tt.at), s.next(tt.at); p != tt.prev || n != tt.next {
			t.Errorf("at %d: prev %d next %d, want %d %d", tt.at, p, n, tt.prev, tt.next)
		}
	}
	if s.any(201, 999) || !s.any(199, 999) {
		t.Error("any")
	}
}

// BenchmarkLongestGap measures an hour of writes at 1000/s with one outage.
func BenchmarkLongestGap(b *testing.B) {
	var a Activity
	for t := int64(0); t < 3600_000; t++ {
		a.Add(millis(t), millis(t+1), t < 1000_000 || t > 1005_000)
	}
	b.ResetTimer()
	for b.Loop() {
		if g, _ := LongestGap(&a, 0, millis(3600_000)); g.Length() < 5*time.Second {
			b.Fatal(g)
		}
	}
}

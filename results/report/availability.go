package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	lin "github.com/etcd-chaosbench/chaosbench/linearizability"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// Gap is the availability gap around one fault window: the longest time without a successful request
// among the intervals between consecutive successes that overlap the window, that is from the last success
// before the fault (or within it) to the first success after it. Only writes count when the run wrote
// (reads served by a member that lost quorum would hide a write outage); otherwise every request counts.
// Without faults, the gap is the longest over the measured load.
type Gap struct {
	// Fault names the fault ("kill m1"); Index is its position in faults.jsonl, -1 for the whole load.
	Fault string `json:"fault"`
	Index int    `json:"index"`
	// WindowStart and WindowEnd are the fault window, Start and End the gap, in seconds from the time base.
	WindowStart float64 `json:"window_start_s"`
	WindowEnd   float64 `json:"window_end_s"`
	Start       float64 `json:"start_s"`
	End         float64 `json:"end_s"`
	Seconds     float64 `json:"gap_s"`
	// Recovered is false when no request succeeded after the window until the load ended.
	Recovered bool `json:"recovered"`
	// Requests and Errors count the requests issued during the window.
	Requests int64 `json:"requests"`
	Errors   int64 `json:"errors"`
	// Kind is "writes" or "requests"; Resolution is 1ms (from history.jsonl) or 1s (from timeseries.jsonl,
	// when the run recorded no history).
	Kind       string `json:"kind"`
	Resolution string `json:"resolution"`
}

// Label names the gap's fault for tables and verdicts.
func (g Gap) Label() string {
	if g.Index < 0 {
		return "whole load"
	}
	return g.Fault
}

// LongestGap returns the longest availability gap of the run.
func (r *Run) LongestGap() (Gap, bool) {
	var best Gap
	for i, g := range r.Gaps {
		if i == 0 || g.Seconds > best.Seconds {
			best = g
		}
	}
	return best, len(r.Gaps) > 0
}

func faultLabel(f results.FaultWindow) string {
	if len(f.Targets) > 0 {
		return f.Fault + " " + strings.Join(f.Targets, ",")
	}
	return f.Fault
}

// msSet is a set of milliseconds since the time base: one bit per millisecond, so that a long run's
// request completions take a few hundred kilobytes instead of eight bytes each.
type msSet struct{ words []uint64 }

func (s *msSet) add(ms int64) {
	if ms < 0 {
		return
	}
	w := int(ms / 64)
	for len(s.words) <= w {
		s.words = append(s.words, 0)
	}
	s.words[w] |= 1 << uint(ms%64)
}

func (s *msSet) empty() bool {
	for _, w := range s.words {
		if w != 0 {
			return false
		}
	}
	return true
}

// prev returns the largest member <= ms, or -1.
func (s *msSet) prev(ms int64) int64 {
	if ms < 0 {
		return -1
	}
	w := int(ms / 64)
	if w >= len(s.words) {
		w, ms = len(s.words)-1, int64(len(s.words))*64-1
	}
	for ; w >= 0; w-- {
		word := s.words[w]
		if int64(w) == ms/64 {
			word &= ^uint64(0) >> (63 - uint(ms%64))
		}
		if word != 0 {
			return int64(w)*64 + int64(63-bits.LeadingZeros64(word))
		}
	}
	return -1
}

// next returns the smallest member >= ms, or -1.
func (s *msSet) next(ms int64) int64 {
	if ms < 0 {
		ms = 0
	}
	for w := int(ms / 64); w < len(s.words); w++ {
		word := s.words[w]
		if int64(w) == ms/64 {
			word &= ^uint64(0) << uint(ms%64)
		}
		if word != 0 {
			return int64(w)*64 + int64(bits.TrailingZeros64(word))
		}
	}
	return -1
}

// longestGap returns the longest interval between consecutive members of s among those that overlap
// [from, to] (milliseconds). When no member follows the window, the interval from the last member to
// until (the end of the load) counts, and recovered is false.
func (s *msSet) longestGap(from, to, until int64) (start, end int64, recovered bool) {
	prev := s.prev(from)
	if prev < 0 {
		prev = from
	}
	start, end = prev, prev
	for prev < to {
		next := s.next(prev + 1)
		if next < 0 {
			if open := max(until, to); open-prev > end-start {
				start, end = prev, open
			}
			return start, end, false
		}
		if next-prev > end-start {
			start, end = prev, next
		}
		prev = next
	}
	return start, end, true
}

func isWrite(k lin.Kind) bool {
	return k == lin.KindPut || k == lin.KindDelete || k == lin.KindTxn
}

// availabilityGaps measures the gap of every fault window (or of the measured load when there were no
// faults) from history.jsonl, or from timeseries.jsonl at one-second resolution when there is no history.
func availabilityGaps(dir string, faults []results.FaultWindow, series []results.TimeSeriesRow) ([]Gap, error) {
	var windows []gapWindow
	for i, f := range faults {
		to := f.EndNs
		if to < f.StartNs {
			to = f.StartNs // a fault still open when the run stopped
		}
		windows = append(windows, gapWindow{faultLabel(f), i, f.StartNs / 1e6, to / 1e6})
	}
	if len(windows) == 0 {
		from, to, ok := measuredWindow(series)
		if !ok {
			return nil, nil
		}
		windows = append(windows, gapWindow{"", -1, int64(from * 1000), int64(to * 1000)})
	}

	path := filepath.Join(dir, lin.HistoryFile)
	if _, err := os.Stat(path); err == nil {
		var writes, all msSet
		var lastReturn int64
		reqs, errs := make([]int64, len(windows)), make([]int64, len(windows))
		err := scanHistory(path, func(call, ret int64, write, failed bool) {
			callMs := call / 1e6
			lastReturn = max(lastReturn, ret/1e6)
			for i, w := range windows {
				if callMs >= w.from && callMs <= w.to {
					reqs[i]++
					if failed {
						errs[i]++
					}
				}
			}
			if failed {
				return
			}
			all.add(ret / 1e6)
			if write {
				writes.add(ret / 1e6)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("availability: %w", err)
		}
		set, kind := &writes, "writes"
		if writes.empty() {
			set, kind = &all, "requests"
		}
		if set.empty() {
			return nil, errors.New("availability: no request in history.jsonl succeeded")
		}
		var out []Gap
		for i, w := range windows {
			start, end, recovered := set.longestGap(w.from, w.to, lastReturn)
			out = append(out, Gap{
				Fault: w.label, Index: w.index,
				WindowStart: float64(w.from) / 1000, WindowEnd: float64(w.to) / 1000,
				Start: float64(start) / 1000, End: float64(end) / 1000, Seconds: float64(end-start) / 1000,
				Recovered: recovered, Requests: reqs[i], Errors: errs[i], Kind: kind, Resolution: "1ms",
			})
		}
		return out, nil
	}
	return seriesGaps(windows, series), nil
}

// scanHistory calls fn with the times, kind and outcome of every operation of a history file. It reads
// the few fields it needs straight from each line, which the history encoder writes in a fixed order, so
// that a run of millions of operations is scanned in a fraction of a second; a line it cannot read that way
// is decoded in full.
func scanHistory(path string, fn func(call, ret int64, write, failed bool)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		if call, ret, kind, failed, ok := fastOperation(line); ok {
			fn(call, ret, isWrite(lin.Kind(kind)), failed)
			continue
		}
		var op lin.Operation
		if err := json.Unmarshal(line, &op); err != nil {
			// A torn last line of a killed run; anything else is not a history.
			if !errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(err.Error(), "unexpected end") {
				return fmt.Errorf("read %s: %w", filepath.Base(path), err)
			}
			continue
		}
		fn(op.Call, op.Return, isWrite(op.Request.Kind), op.Error != "")
	}
	return sc.Err()
}

// fastOperation reads call, return, request kind and whether an error is set from one history line.
// Keys are matched with their quotes and colon, which a JSON string value cannot contain unescaped.
func fastOperation(line []byte) (call, ret int64, kind string, failed, ok bool) {
	num := func(key string) (int64, bool) {
		i := bytes.Index(line, []byte(key))
		if i < 0 {
			return 0, false
		}
		rest := line[i+len(key):]
		end := bytes.IndexAny(rest, ",}")
		if end < 0 {
			return 0, false
		}
		n, err := strconv.ParseInt(string(rest[:end]), 10, 64)
		return n, err == nil
	}
	var ok1, ok2 bool
	call, ok1 = num(`"call":`)
	ret, ok2 = num(`"return":`)
	k := bytes.Index(line, []byte(`"req":{"kind":"`))
	if !ok1 || !ok2 || k < 0 {
		return 0, 0, "", false, false
	}
	rest := line[k+len(`"req":{"kind":"`):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return 0, 0, "", false, false
	}
	return call, ret, string(rest[:end]), bytes.Contains(line, []byte(`"error":"`)), true
}

// gapWindow is a span of the run to measure a gap in, in milliseconds from the time base.
type gapWindow struct {
	label    string
	index    int
	from, to int64
}

// measuredWindow returns the measured load's span in seconds from the time series.
func measuredWindow(series []results.TimeSeriesRow) (from, to float64, ok bool) {
	if len(series) == 0 {
		return 0, 0, false
	}
	from, to = series[0].T-1, series[0].T
	for _, r := range series {
		from, to = math.Min(from, r.T-1), math.Max(to, r.T)
	}
	return math.Max(from, 0), to, true
}

// seriesGaps measures gaps from per-second rows: a second without a successful request (a missing row
// counts as none) belongs to a gap.
func seriesGaps(windows []gapWindow, series []results.TimeSeriesRow) []Gap {
	if len(series) == 0 {
		return nil
	}
	writes := false
	for _, r := range series {
		if isWriteName(r.Op) {
			writes = true
		}
	}
	kind := "requests"
	if writes {
		kind = "writes"
	}
	t0 := series[0].T
	for _, r := range series {
		t0 = math.Min(t0, r.T)
	}
	ok := map[int]bool{} // interval k (ending at t0+k) had a success
	last, reqs, errs := 0, map[int]int64{}, map[int]int64{}
	for _, r := range series {
		k := int(math.Round(r.T - t0))
		last = max(last, k)
		reqs[k] += r.Count
		errs[k] += r.Errors
		if (!writes || isWriteName(r.Op)) && r.Count-r.Errors > 0 {
			ok[k] = true
		}
	}
	var out []Gap
	for _, v := range windows {
		g := Gap{Fault: v.label, Index: v.index, WindowStart: float64(v.from) / 1000, WindowEnd: float64(v.to) / 1000,
			Kind: kind, Resolution: "1s", Recovered: true}
		// Interval k covers (t0+k-1, t0+k].
		first := int(math.Ceil(float64(v.from)/1000 - t0))
		lastK := int(math.Ceil(float64(v.to)/1000 - t0))
		for k := max(first, 0); k <= min(lastK, last); k++ {
			g.Requests += reqs[k]
			g.Errors += errs[k]
		}
		run, runStart := 0, 0
		for k := max(first, 0); k <= last; k++ {
			if ok[k] {
				if k > lastK {
					break
				}
				run = 0
				continue
			}
			if run == 0 {
				runStart = k
			}
			run++
			if float64(run) > g.Seconds {
				g.Seconds = float64(run)
				g.Start, g.End = t0+float64(runStart)-1, t0+float64(k)
			}
			if k == last {
				g.Recovered = false
			}
		}
		out = append(out, g)
	}
	return out
}

// isWriteName guesses from an operation's name whether it writes, for runs without a history.
func isWriteName(op string) bool {
	verb, _, _ := strings.Cut(op, "/")
	for _, p := range []string{"put", "txn-put", "txn-write", "create", "update", "delete", "patch"} {
		if verb == p {
			return true
		}
	}
	return false
}

package report

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// Gap is the availability of one fault window (or of the measured load, when the run had no faults),
// measured by results.LongestGap, the one definition chaosbench has, for writes and reads apart: the
// longest stretch without a successful request of the class from the fault's injection to the end of
// its observation (see results.FaultSpans).
type Gap struct {
	// Fault names the fault ("kill m1"); Index is its position in faults.jsonl, -1 for the whole load.
	Fault string `json:"fault"`
	Index int    `json:"index"`
	// WindowStart and WindowEnd are the fault window (injection to heal), in seconds from the time base.
	WindowStart float64 `json:"window_start_s"`
	WindowEnd   float64 `json:"window_end_s"`
	// Start, End, Seconds and Recovered are the gap of Kind, the class a run's availability is judged by
	// (thresholds, verdicts, comparisons): "writes" when the run wrote, else "reads". Recovered is false
	// when the gap was still open when the observation ended.
	Start     float64 `json:"start_s"`
	End       float64 `json:"end_s"`
	Seconds   float64 `json:"gap_s"`
	Recovered bool    `json:"recovered"`
	// Requests and Errors count the requests issued during the window.
	Requests int64  `json:"requests"`
	Errors   int64  `json:"errors"`
	Kind     string `json:"kind"`
	// Resolution is 1ms (from the history) or 1s (from timeseries.jsonl, when the run recorded no
	// history). Kind and Resolution are empty when the run's files say nothing of its writes and reads:
	// the window is listed, not measured.
	Resolution string `json:"resolution"`
	// Writes and Reads are both gaps; nil when the window saw no request of the class.
	Writes *ClassGap `json:"writes,omitempty"`
	Reads  *ClassGap `json:"reads,omitempty"`
}

// ClassGap is the gap of one class (writes or reads), in seconds from the time base.
type ClassGap struct {
	Start     float64 `json:"start_s"`
	End       float64 `json:"end_s"`
	Seconds   float64 `json:"gap_s"`
	Recovered bool    `json:"recovered"`
}

// GapNote says under the availability table what its gaps are.
func (v *view) GapNote() string {
	return "Writes and reads are measured apart. A gap is the longest time without a successful request of the class, " +
		"from the last success before the fault's injection to the first one after it, as long as the fault was observed " +
		"(until the cluster was healthy again and settled, the next fault, or the end of the load); \"not recovered\": " +
		"none had succeeded again by then. Verdicts and thresholds judge the write gap (the read gap in runs that do not write)."
}

// classGapText shows one class's gap in the availability table.
func classGapText(c *ClassGap, kind, resolution string) string {
	switch {
	case resolution == "":
		return "-"
	case c == nil:
		return "no " + kind
	case resolution == "1s" && c.Seconds == 0:
		return "< 1 s (1 s resolution)"
	case resolution == "1s":
		return "≥ " + fmtSeconds(c.Seconds) + " (1 s resolution)"
	case !c.Recovered:
		return "> " + fmtSeconds(c.Seconds) + " (not recovered)"
	}
	return fmtSeconds(c.Seconds)
}

func classGap(a *results.Activity, span [2]time.Duration) *ClassGap {
	g, ok := results.LongestGap(a, span[0], span[1])
	if !ok {
		return nil
	}
	return &ClassGap{Start: g.From.Seconds(), End: g.To.Seconds(), Seconds: g.Length().Seconds(), Recovered: !g.Open}
}

// Label names the gap's fault for tables and verdicts.
func (g Gap) Label() string {
	if g.Index < 0 {
		return "whole load"
	}
	return g.Fault
}

// LongestGap returns the longest availability gap of the run; false when none was measured.
func (r *Run) LongestGap() (Gap, bool) {
	var best Gap
	found := false
	for _, g := range r.Gaps {
		if g.Kind != "" && (!found || g.Seconds > best.Seconds) {
			best, found = g, true
		}
	}
	return best, found
}

// Evidence is what the run's thresholds are judged on (results.EvaluateThresholds): its summary and its
// longest availability gap.
func (r *Run) Evidence() results.ThresholdEvidence {
	ev := results.ThresholdEvidence{Summary: r.Summary}
	if g, ok := r.LongestGap(); ok {
		ev.LongestGap = &results.JudgedGap{Label: g.Label(), Seconds: g.Seconds}
	}
	return ev
}

func faultLabel(f results.FaultWindow) string {
	if len(f.Targets) > 0 {
		return f.Fault + " " + strings.Join(f.Targets, ",")
	}
	return f.Fault
}

// gapWindow is a span of the run to measure a gap over, and the window whose requests it counts.
type gapWindow struct {
	label      string
	index      int
	from, to   time.Duration // the fault window
	span       [2]time.Duration
	reqs, errs int64
}

// HistoryActivity reads what results.LongestGap needs of every request of a history file (history.bin,
// or a legacy run's history.jsonl), and when the last of them returned.
func HistoryActivity(path string) (*results.Activities, time.Duration, error) {
	act := &results.Activities{}
	var last time.Duration
	err := scanHistory(path, func(call, ret time.Duration, access results.Access, failed bool) {
		last = max(last, ret)
		act.Add(access, call, ret, !failed)
	})
	return act, last, err
}

// availabilityGaps measures the gaps of every fault window (or of the measured load when there were no
// faults) from the run's history, or from timeseries.jsonl at one-second resolution when there is no history.
func availabilityGaps(dir string, faults []results.FaultWindow, series []results.TimeSeriesRow) ([]Gap, error) {
	var windows []gapWindow
	for i, f := range faults {
		windows = append(windows, gapWindow{label: faultLabel(f), index: i,
			from: time.Duration(f.StartNs), to: time.Duration(max(f.EndNs, f.StartNs))})
	}
	measuredFrom, measuredTo, measured := measuredWindow(series)
	if len(windows) == 0 {
		if !measured {
			return nil, nil
		}
		windows = append(windows, gapWindow{index: -1, from: seconds(measuredFrom), to: seconds(measuredTo)})
	}

	var act *results.Activities
	resolution := "1ms"
	loadEnd := seconds(measuredTo)
	if path, err := history.HistoryPath(dir); err == nil {
		act = &results.Activities{}
		err := scanHistory(path, func(call, ret time.Duration, access results.Access, failed bool) {
			loadEnd = max(loadEnd, ret)
			act.Add(access, call, ret, !failed)
			for i := range windows {
				if w := &windows[i]; call >= w.from && call <= w.to {
					w.reqs++
					if failed {
						w.errs++
					}
				}
			}
		})
		if err != nil {
			return nil, fmt.Errorf("availability: %w", err)
		}
	} else {
		if len(series) == 0 {
			return nil, nil
		}
		act, resolution = seriesActivity(series, windows), "1s"
	}
	kind, judged := "writes", &act.Writes
	if act.Writes.Empty() {
		kind, judged = "reads", &act.Reads
	}
	var err error
	if judged.Empty() {
		// The windows are still listed, unmeasured.
		kind, resolution = "", ""
		err = errors.New("availability: not measured: no write or read in the run's history or time series (a time series of an older version does not say which operations write or read)")
	}

	spans := results.FaultSpans(faults, loadEnd)
	var out []Gap
	for i, w := range windows {
		span := [2]time.Duration{w.from, w.to}
		if w.index >= 0 {
			span = spans[i]
		}
		g := Gap{Fault: w.label, Index: w.index, WindowStart: w.from.Seconds(), WindowEnd: w.to.Seconds(),
			Requests: w.reqs, Errors: w.errs, Kind: kind, Resolution: resolution, Recovered: true,
			Writes: classGap(&act.Writes, span), Reads: classGap(&act.Reads, span)}
		if c := classGap(judged, span); c != nil {
			g.Start, g.End, g.Seconds, g.Recovered = c.Start, c.End, c.Seconds, c.Recovered
		}
		out = append(out, g)
	}
	return out, err
}

// scanHistory calls fn with the times, kind and outcome of every operation of a history file (binary, or
// a legacy run's JSON lines).
func scanHistory(path string, fn func(call, ret time.Duration, access results.Access, failed bool)) error {
	return history.ReadOperations(path, func(op *history.Operation) error {
		fn(time.Duration(op.Call), time.Duration(op.Return), requestAccess(op.Request), op.Error != "")
		return nil
	})
}

// requestAccess classifies a decoded request by results.AccessOf.
func requestAccess(req history.Request) results.Access {
	a := results.AccessOf(string(req.Kind))
	if req.Txn != nil {
		for _, branch := range [2][]history.Request{req.Txn.Then, req.Txn.Else} {
			for _, r := range branch {
				a = a.Branch(string(r.Kind))
			}
		}
	}
	return a
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

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// seriesActivity builds the activity of a run from its per-second rows, for runs without a history, and
// counts the requests of each window. Each row covers the second before its time: one with a success
// counts as successes at both ends of that second, so that a gap is the whole seconds without any; one
// with requests and no success as requests in flight throughout. Rows of an older version, which do not
// say their access, count in neither class.
func seriesActivity(series []results.TimeSeriesRow, windows []gapWindow) *results.Activities {
	act := &results.Activities{}
	for _, r := range series {
		to := seconds(r.T)
		from := to - time.Second
		access := results.ParseAccess(r.Access)
		if r.Count-r.Errors > 0 {
			act.Add(access, from, from, true)
			act.Add(access, from, to, true)
		} else if r.Count > 0 {
			act.Add(access, from, to, false)
		}
		for i := range windows {
			// The row's second overlaps the window.
			if w := &windows[i]; to > w.from && from <= w.to {
				w.reqs += r.Count
				w.errs += r.Errors
			}
		}
	}
	return act
}

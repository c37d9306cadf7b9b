// Package merge merges the run directories of a load split over several generators (chaosbench run
// --workers) into one run directory, exactly: per-operation HDR histograms are merged from the workers'
// interval logs (same bounds, so Merge loses nothing), counters are added, interval logs and per-second
// series are laid on one timeline, the fault windows are worker 0's (only it injects faults), and the
// histories are merged into one, with every worker's clients kept apart and every operation's real-time
// interval widened by its worker's clock uncertainty, so that the consistency checks of the merged
// history can never see a violation that only skew between the workers' clocks made.
package merge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
	"github.com/etcd-chaosbench/chaosbench/results/report"
)

// Worker is one worker's run directory and its place on the merged timeline.
type Worker struct {
	Dir     string
	Summary *results.Summary
	// ShiftNs moves the worker's offsets onto the merged timeline (worker 0's); WidenNs widens each of its
	// operations' intervals by that much on either side: its clock uncertainty.
	ShiftNs, WidenNs int64
}

// Set is the workers of a split load as Load read them: those whose results are there, in worker order and
// placed on one timeline, the base run, warnings, and the shares that left no results.
type Set struct {
	Workers []Worker
	// Base is worker 0's run, or the observer's when one was given.
	Base     Worker
	Warnings []string
	// Missing says, for each share that left no results, which worker and directory: a harness error of
	// the merged run (whose history is then partial, so it is not checked).
	Missing []string
}

// Load reads the workers' summaries and places them on one timeline: worker i's offsets move by the
// difference between its time base and the base run's, both on the reference clock. The base run is
// worker 0's, or the observer's when one is given (the coordinator's run when every worker ran in a
// container): the merged run's fault windows and etcd metrics are the base run's. A worker whose clock
// was not measured (a --start-at run) is widened by assume, and named in the warnings.
//
// A directory that holds no summary.json (its worker never wrote one: it failed, or its pod never ran) is a
// missing share, listed in Missing, as long as the directories given are as many as the workers of the
// split and the base run is there: without the base run there is no cluster, no fault window and no
// timeline to merge onto, and that is an error. Directories that are not a split's workers, a worker given
// twice, or shares of different plans are usage errors.
func Load(dirs []string, observer string, assume time.Duration) (Set, error) {
	var base *Worker
	if observer != "" {
		sum, err := results.ReadSummary(observer)
		if err != nil || sum.Split == nil || !sum.Split.Observer {
			return Set{}, outcome.Usagef("merge: %s is not the observer of a split load", observer)
		}
		base = &Worker{Dir: observer, Summary: sum}
	}
	if len(dirs) < 2 && (base == nil || len(dirs) < 1) {
		return Set{}, outcome.Usagef("merge: give the run directories of every worker of a split load (at least 2, or 1 with --observer)")
	}
	ws, missing, err := read(dirs, base == nil)
	if err != nil {
		return Set{}, err
	}
	set := Set{Missing: missing}
	if set.Workers, set.Warnings, err = place(ws, base, assume); err != nil {
		return Set{}, err
	}
	set.Base = set.Workers[0]
	if base != nil {
		set.Base = *base
	}
	return set, nil
}

// read reads the workers' summaries into their places (by worker number) and lists the shares that left
// none; needBase says worker 0's results are required (no observer holds the cluster).
func read(dirs []string, needBase bool) ([]Worker, []string, error) {
	ws := make([]Worker, len(dirs))
	var absent []string
	for _, d := range dirs {
		sum, err := results.ReadSummary(d)
		if errors.Is(err, os.ErrNotExist) {
			absent = append(absent, d)
			continue
		}
		if err != nil {
			return nil, nil, outcome.Usagef("merge: %s: not a run directory (%v)", d, err)
		}
		sp := sum.Split
		if sp == nil || sp.Worker < 0 {
			return nil, nil, outcome.Usagef("merge: %s is not a worker's run of a split load (no split in its %s)", d, results.SummaryFile)
		}
		if sp.Workers != len(dirs) {
			return nil, nil, outcome.Usagef("merge: %s is worker %d of %d, but %d directories were given", d, sp.Worker, sp.Workers, len(dirs))
		}
		if ws[sp.Worker].Summary != nil {
			return nil, nil, outcome.Usagef("merge: %s and %s are both worker %d", ws[sp.Worker].Dir, d, sp.Worker)
		}
		ws[sp.Worker] = Worker{Dir: d, Summary: sum}
	}
	if len(absent) == len(dirs) {
		return nil, nil, outcome.Usagef("merge: no worker's results in %v (no %s)", dirs, results.SummaryFile)
	}
	// Which directory was which worker's cannot be read from a directory without results; with one such
	// directory it is plain.
	where := ""
	switch {
	case len(absent) == 1:
		where = fmt.Sprintf("%s holds no %s", absent[0], results.SummaryFile)
	case len(absent) > 1:
		where = fmt.Sprintf("none of %s holds a %s", strings.Join(absent, ", "), results.SummaryFile)
	}
	var present []Worker
	var missing []string
	for i, w := range ws {
		switch {
		case w.Summary != nil:
			present = append(present, w)
		case i == 0 && needBase:
			return nil, nil, fmt.Errorf("merge: worker 0 left no results (%s): its run holds the cluster, the fault windows and the timeline the others are merged onto", where)
		default:
			missing = append(missing, fmt.Sprintf("worker %d's share is missing: %s", i, where))
		}
	}
	return present, missing, nil
}

// place places the workers on the base run's timeline (worker 0's, or the observer's).
func place(ws []Worker, observer *Worker, assume time.Duration) ([]Worker, []string, error) {
	var warnings []string
	base := func(w Worker) (time.Time, int64) {
		c := w.Summary.Split.Clock
		if c == nil {
			return w.Summary.TimeBase, -1
		}
		return w.Summary.TimeBase.Add(time.Duration(c.OffsetNs)), c.UncertaintyNs
	}
	ref, _ := base(ws[0])
	if observer != nil {
		ref, _ = base(*observer)
	}
	for i := range ws {
		w := &ws[i]
		n := w.Summary.Split.Worker
		if w.Summary.Seed != ws[0].Summary.Seed {
			return nil, nil, outcome.Usagef("merge: worker %d ran seed %d, worker %d seed %d: not shares of one plan", n, w.Summary.Seed, ws[0].Summary.Split.Worker, ws[0].Summary.Seed)
		}
		if w.Summary.TimeBase.IsZero() {
			return nil, nil, outcome.Usagef("merge: %s recorded no time base (its load never started)", w.Dir)
		}
		b, u := base(*w)
		w.ShiftNs = int64(b.Sub(ref))
		if u < 0 {
			u = int64(assume)
			warnings = append(warnings, fmt.Sprintf("worker %d's clock was not measured against a reference (--start-at without --clock-ref): its operations are placed by its own clock, widened by %s (--clock-uncertainty); a larger skew can fake a violation or hide one", n, assume))
		}
		w.WidenNs = u
	}
	return ws, warnings, nil
}

// Operations merges the workers' operations: histograms from their interval logs, counters from their
// summaries. measured is the merged run's measured time, for throughputs; series is the merged
// per-interval series, for the spread of throughput per interval.
func Operations(ws []Worker, measured float64, series []results.TimeSeriesRow) (map[string]*results.Operation, error) {
	hists, err := histograms(ws)
	if err != nil {
		return nil, err
	}
	out := map[string]*results.Operation{}
	for _, w := range ws {
		for name, op := range w.Summary.Operations {
			m := out[name]
			if m == nil {
				m = &results.Operation{}
				out[name] = m
			}
			m.Count += op.Count
			m.Errors += op.Errors
			m.Failed += op.Failed
			m.MissedBacklog += op.MissedBacklog
			m.MissedLag += op.MissedLag
			for class, n := range op.ErrorsByClass {
				if m.ErrorsByClass == nil {
					m.ErrorsByClass = map[string]int64{}
				}
				m.ErrorsByClass[class] += n
			}
		}
	}
	for name, m := range out {
		h := hists[name]
		if h.response.TotalCount() != m.Count {
			return nil, fmt.Errorf("merge %s: the workers' interval logs hold %d records, their summaries %d", name, h.response.TotalCount(), m.Count)
		}
		m.Response, m.Service = results.LatencyOf(h.response), results.LatencyOf(h.service)
		if measured > 0 {
			m.Throughput = float64(m.Count) / measured
		}
		m.ThroughputPerSecond = spread(series, name)
	}
	return out, nil
}

type opHists struct{ response, service *hdr.Histogram }

// WriteHGRM writes the merged distributions of every operation into out's HGRMDir.
func WriteHGRM(out string, ws []Worker) error {
	hists, err := histograms(ws)
	if err != nil {
		return err
	}
	for name, h := range hists {
		if err := results.WriteOperationHGRM(filepath.Join(out, results.HGRMDir), name, h.response, h.service); err != nil {
			return err
		}
	}
	return nil
}

// histograms merges every interval histogram of every worker's latency.hlog by operation.
func histograms(ws []Worker) (map[string]opHists, error) {
	out := map[string]opHists{}
	for _, w := range ws {
		err := readLog(w.Dir, func(op, kind string, h *hdr.Histogram) error {
			m, ok := out[op]
			if !ok {
				m = opHists{results.NewHistogram(), results.NewHistogram()}
				out[op] = m
			}
			into := m.response
			if kind == "service" {
				into = m.service
			}
			if dropped := into.Merge(h); dropped != 0 {
				return fmt.Errorf("%s: %d values of %s out of the histograms' bounds", w.Dir, dropped, op)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readLog streams the interval histograms of a run directory's latency.hlog, by operation and kind
// (response or service).
func readLog(dir string, fn func(op, kind string, h *hdr.Histogram) error) error {
	f, err := os.Open(filepath.Join(dir, results.LatencyLogFile))
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	defer f.Close()
	r := hdr.NewHistogramLogReader(f)
	for {
		h, err := r.NextIntervalHistogram()
		if err != nil {
			return fmt.Errorf("merge: %s: %w", f.Name(), err)
		}
		if h == nil {
			return nil
		}
		op, kind := splitTag(h.Tag())
		if err := fn(op, kind, h); err != nil {
			return err
		}
	}
}

// splitTag splits an interval's tag, "<op>.response" or "<op>.service".
func splitTag(tag string) (op, kind string) {
	for i := len(tag) - 1; i >= 0; i-- {
		if tag[i] == '.' {
			return tag[:i], tag[i+1:]
		}
	}
	return tag, "response"
}

// Series merges the workers' per-interval rows onto worker 0's intervals: a row counts in the interval
// its end falls in once shifted onto the merged timeline. Counts are exact; latency columns of merged
// intervals are the largest of the workers' (an upper bound: the rows hold percentiles, not histograms).
func Series(ws []Worker) ([]results.TimeSeriesRow, error) {
	type key struct {
		t  float64
		op string
	}
	rows := map[key]*results.TimeSeriesRow{}
	for _, w := range ws {
		got, err := results.ReadTimeSeries(w.Dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("merge: %w", err)
		}
		for _, r := range got {
			t := math.Ceil(r.T + float64(w.ShiftNs)/1e9 - 1e-9)
			k := key{t, r.Op}
			m := rows[k]
			if m == nil {
				c := r
				c.T = t
				c.Throughput = 0
				rows[k] = &c
				m = &c
			} else {
				m.Count += r.Count
				m.Errors += r.Errors
				m.Failed += r.Failed
				m.Missed += r.Missed
				m.P50, m.P99, m.P999 = max(m.P50, r.P50), max(m.P99, r.P99), max(m.P999, r.P999)
				m.Max, m.ServiceP99 = max(m.Max, r.Max), max(m.ServiceP99, r.ServiceP99)
			}
		}
	}
	out := make([]results.TimeSeriesRow, 0, len(rows))
	for _, r := range rows {
		r.Throughput = float64(r.Count) // one-second intervals
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].T != out[j].T {
			return out[i].T < out[j].T
		}
		return out[i].Op < out[j].Op
	})
	return out, nil
}

// spread is the spread of an operation's per-interval throughput over the merged series, from its first
// interval with records.
func spread(series []results.TimeSeriesRow, op string) results.Spread {
	var xs []float64
	for _, r := range series {
		if r.Op == op {
			xs = append(xs, r.Throughput)
		}
	}
	if len(xs) == 0 {
		return results.Spread{}
	}
	s := results.Spread{Min: xs[0], Max: xs[0]}
	var sum float64
	for _, x := range xs {
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
		sum += x
	}
	s.Mean = sum / float64(len(xs))
	if len(xs) > 1 {
		var v float64
		for _, x := range xs {
			v += (x - s.Mean) * (x - s.Mean)
		}
		s.StdDev = math.Sqrt(v / float64(len(xs)-1))
	}
	return s
}

// WriteFiles writes the merged latency.hlog and timeseries.jsonl into out: every worker's interval
// histograms, with their times moved onto the merged timeline, and the merged series.
func WriteFiles(out string, ws []Worker, series []results.TimeSeriesRow) error {
	f, err := os.Create(filepath.Join(out, results.LatencyLogFile))
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	defer f.Close()
	lw := hdr.NewHistogramLogWriter(f)
	startMs := ws[0].Summary.TimeBase.UnixMilli()
	lw.SetBaseTime(startMs)
	if err := errors.Join(lw.OutputLogFormatVersion(),
		lw.OutputComment(fmt.Sprintf("chaosbench latency log merged from %d workers: values in nanoseconds; tags <op>.response and <op>.service", len(ws))),
		lw.OutputStartTime(startMs), lw.OutputBaseTime(startMs), lw.OutputLegend()); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	for _, w := range ws {
		shiftMs := w.ShiftNs / 1e6
		err := readLog(w.Dir, func(op, kind string, h *hdr.Histogram) error {
			h.SetStartTimeMs(h.StartTimeMs() + shiftMs)
			h.SetEndTimeMs(h.EndTimeMs() + shiftMs)
			return lw.OutputIntervalHistogram(h)
		})
		if err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	return results.WriteTimeSeries(out, series)
}

// Histories merges the workers' history.bin and watch.bin into out. Client and watcher numbers are the
// workers' own (each worker numbers from its Share.IDBase, so they never collide); times move onto the
// merged timeline, and each operation's interval is widened by its worker's clock uncertainty. It returns
// the number of operations and watch records written.
func Histories(out string, ws []Worker) (ops, watches int, err error) {
	hw, err := history.NewWriter(out)
	if err != nil {
		return 0, 0, err
	}
	seen := map[int]int{} // client -> worker, to catch numbering that collides
	for _, w := range ws {
		i := w.Summary.Split.Worker
		path, err := history.HistoryPath(w.Dir)
		if err != nil {
			hw.Close()
			return 0, 0, fmt.Errorf("merge: worker %d recorded no history: %w", i, err)
		}
		err = history.ReadOperations(path, func(op *history.Operation) error {
			if o, ok := seen[op.Client]; ok && o != i {
				return fmt.Errorf("client %d appears in the histories of workers %d and %d", op.Client, o, i)
			}
			seen[op.Client] = i
			op.Call += w.ShiftNs - w.WidenNs
			op.Return += w.ShiftNs + w.WidenNs
			for j := range op.Attempts { // on the worker's clock too
				op.Attempts[j].Start += w.ShiftNs - w.WidenNs
				op.Attempts[j].End += w.ShiftNs + w.WidenNs
			}
			hw.Operation(op)
			ops++
			return nil
		})
		if err != nil {
			hw.Close()
			return 0, 0, fmt.Errorf("merge: worker %d: %w", i, err)
		}
		if path, err := history.WatchPath(w.Dir); err == nil {
			err = history.ReadWatches(path, func(r *history.WatchResponse) error {
				r.Time += w.ShiftNs
				hw.Watch(r)
				watches++
				return nil
			})
			if err != nil {
				hw.Close()
				return 0, 0, fmt.Errorf("merge: worker %d: %w", i, err)
			}
		}
	}
	return ops, watches, hw.Close()
}

// CopyFile copies a file of worker 0's directory (faults.jsonl, server_metrics.jsonl) into out, when it
// has one.
func CopyFile(out, from, name string) error {
	src, err := os.Open(filepath.Join(from, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	defer src.Close()
	dst, err := os.Create(filepath.Join(out, name))
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return fmt.Errorf("merge: %w", err)
	}
	return dst.Close()
}

// Availability measures each fault window's availability again over the merged history, from every
// worker's requests: the write and read gaps, the successful writes and reads, the operations started and
// those that failed. The elections stay as the base run observed them. A window without an observation
// (skipped) is left as it is.
func Availability(out string, faults []results.FaultWindow) error {
	path, err := history.HistoryPath(out)
	if err != nil {
		return err
	}
	act, _, err := report.HistoryActivity(path)
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	type counts struct{ writes, reads, ops, errors int64 }
	cs := make([]counts, len(faults))
	err = history.ReadOperations(path, func(op *history.Operation) error {
		for i, f := range faults {
			a := f.Availability
			if a == nil || op.Call < f.StartNs || op.Call > a.ObservedToNs {
				continue
			}
			cs[i].ops++
			switch {
			case op.Error != "":
				cs[i].errors++
			case op.Request.IsWrite():
				cs[i].writes++
			case op.Request.Kind == history.KindRange:
				cs[i].reads++
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	for i := range faults {
		a := faults[i].Availability
		if a == nil {
			continue
		}
		m := *a
		m.Writes, m.Reads, m.Ops, m.Errors, m.ErrorsByClass = cs[i].writes, cs[i].reads, cs[i].ops, cs[i].errors, nil
		m.WriteGapMs, m.WriteGapFromNs, m.WriteGapToNs, m.WriteGapOpen = 0, 0, 0, false
		m.ReadGapMs, m.ReadGapFromNs, m.ReadGapToNs, m.ReadGapOpen = 0, 0, 0, false
		m.SetGaps(act, time.Duration(faults[i].StartNs), time.Duration(a.ObservedToNs))
		faults[i].Availability = &m
	}
	return nil
}

// WriteFaults writes the merged run's fault windows as its faults.jsonl.
func WriteFaults(out string, faults []results.FaultWindow) error {
	if len(faults) == 0 {
		return nil
	}
	var b []byte
	for _, f := range faults {
		line, err := json.Marshal(f)
		if err != nil {
			return fmt.Errorf("merge: %w", err)
		}
		b = append(append(b, line...), '\n')
	}
	if err := os.WriteFile(filepath.Join(out, results.FaultsFile), b, 0o644); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	return nil
}

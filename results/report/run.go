// Package report turns a run directory into what people read and what CI consumes: report.html (one
// self-contained page: verdicts first, then latency, throughput and etcd's own metrics over time with fault
// windows shaded), report.md (the same verdicts and tables, for CI logs and pull requests), junit.xml (one
// test case per check and threshold) and perfdash.json. It hands thresholds to the judge in package results
// with what it measures of a run (Run.Evidence), diagnoses in words why a run was slow or unavailable, and
// lays out comparisons of runs (their figures come from results/compare).
//
// Everything is computed from the files of a run directory (summary.json, timeseries.jsonl, latency.hlog,
// faults.jsonl, server_metrics.jsonl, history.bin), so a report can be re-rendered at any time with
// `chaosbench report DIR`, and a field a newer version adds to summary.json is shown even by a renderer
// that does not know it.
package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// Run is a run directory loaded for reporting.
type Run struct {
	Dir string
	// Label names the run in comparisons (default: the directory's base name).
	Label   string
	Summary *results.Summary
	// Extra holds summary.json's top-level fields this version does not know, in file order, rendered
	// generically; FaultExtra the unknown fields of each fault, by index.
	Extra      []Field
	FaultExtra []map[string]json.RawMessage
	Series     []results.TimeSeriesRow
	// Latencies holds what the report keeps of each operation's interval log (latency.hlog).
	Latencies map[string]*Latencies
	Faults    []results.FaultWindow
	Samples   []results.ServerSample
	// Gaps holds the availability gap of each fault window (or of the whole load when there was no fault).
	Gaps []Gap
	// Thresholds and Diagnosis are what Prepare computed; a loaded run starts with the summary's.
	Thresholds []results.ThresholdResult
	Diagnosis  []results.Finding
	// Warnings lists files that could not be read; the report says so instead of failing.
	Warnings []string
	// Banner is the verdict of a job the run was part of, shown first (banner.json; nil: none).
	Banner *Banner
}

// Field is one top-level field of summary.json.
type Field struct {
	Key string
	Raw json.RawMessage
}

// Load reads the run directory dir. Only summary.json is required; every other file is optional.
func Load(dir string) (*Run, error) {
	b, err := os.ReadFile(filepath.Join(dir, results.SummaryFile))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	var s results.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, results.SummaryFile), err)
	}
	r, err := FromSummary(dir, &s)
	if err != nil {
		return nil, err
	}
	r.Extra, r.FaultExtra = unknownFields(b)
	return r, nil
}

// FromSummary loads the files of run directory dir around a summary the caller already holds (a run that
// is finishing). The summary is not copied.
func FromSummary(dir string, s *results.Summary) (*Run, error) {
	r := &Run{Dir: dir, Label: filepath.Base(filepath.Clean(dir)), Summary: s,
		Thresholds: s.Thresholds, Diagnosis: s.Diagnosis}
	if s.Operations == nil {
		s.Operations = map[string]*results.Operation{}
	}
	warn := func(err error) {
		if err != nil {
			r.Warnings = append(r.Warnings, err.Error())
		}
	}
	var err error
	r.Series, err = readTimeSeries(dir)
	warn(err)
	r.Latencies, err = readLatencies(dir)
	warn(err)
	r.Samples, err = results.ReadServerSamples(dir)
	warn(err)
	r.Faults = s.Faults
	if len(r.Faults) == 0 {
		r.Faults, err = results.ReadFaults(dir)
		warn(err)
	}
	r.Gaps, err = availabilityGaps(dir, r.Faults, r.Series)
	warn(err)
	r.Banner, err = readBanner(dir)
	warn(err)
	return r, nil
}

// OperationNames returns the run's operation names, sorted.
func (r *Run) OperationNames() []string {
	names := make([]string, 0, len(r.Summary.Operations))
	for name := range r.Summary.Operations {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func readTimeSeries(dir string) ([]results.TimeSeriesRow, error) {
	f, err := os.Open(filepath.Join(dir, results.TimeSeriesFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []results.TimeSeriesRow
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var row results.TimeSeriesRow
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			// A run killed mid-write leaves a torn last line.
			break
		}
		out = append(out, row)
	}
	return out, sc.Err()
}

// Latencies is what a report keeps of one operation's interval log: the whole run's response and service
// time histograms, and the response histograms of up to maxBatches consecutive batches of whole intervals
// (the spread of a figure within the run). Keeping batches rather than every interval bounds a report's
// memory whatever the length of the run (an interval histogram takes about 150 KB).
type Latencies struct {
	Response, Service *hdr.Histogram
	Batches           []Batch

	plan batchPlan
	next int // index of the next response interval
}

// Batch is a run of consecutive whole intervals.
type Batch struct {
	Response *hdr.Histogram
	Seconds  float64
}

// Batches of whole intervals a report keeps per operation: at most maxBatches, and none with fewer than
// minBatches intervals (too few to say anything about the spread within a run).
const (
	minBatches = 4
	maxBatches = 10
)

// batchPlan assigns the whole intervals of an operation to batches of equal size; the remainder at the
// start and a last, partial interval (the end of the load) belong to none.
type batchPlan struct{ first, full, size int }

func planBatches(lengths []float64) batchPlan {
	n := len(lengths)
	if n >= 2 && lengths[n-1] < 0.9*lengths[0] {
		n--
	}
	k := min(maxBatches, n)
	if k < minBatches {
		return batchPlan{}
	}
	size := n / k
	return batchPlan{first: n - size*k, full: n, size: size}
}

// newLatencies prepares an operation's latencies for intervals of the given lengths (seconds).
func newLatencies(lengths []float64) *Latencies {
	l := &Latencies{Response: results.NewHistogram(), Service: results.NewHistogram(), plan: planBatches(lengths)}
	if l.plan.size > 0 {
		for range (l.plan.full - l.plan.first) / l.plan.size {
			l.Batches = append(l.Batches, Batch{Response: results.NewHistogram()})
		}
	}
	return l
}

// addResponse folds the next response-time interval in: into its batch, or, outside every batch, into the
// whole run's histogram, which takes the batches in finish (one merge of each interval, not two: merging
// is most of what reading a long run's log costs).
func (l *Latencies) addResponse(h *hdr.Histogram) {
	i := l.next
	l.next++
	if l.plan.size == 0 || i < l.plan.first || i >= l.plan.full {
		l.Response.Merge(h)
		return
	}
	b := &l.Batches[(i-l.plan.first)/l.plan.size]
	b.Response.Merge(h)
	b.Seconds += float64(h.EndTimeMs()-h.StartTimeMs()) / 1000
}

// finish completes the whole run's response histogram with the batches' intervals, once every interval
// is in.
func (l *Latencies) finish() {
	for _, b := range l.Batches {
		l.Response.Merge(b.Response)
	}
}

// LatenciesOf builds an operation's latencies from interval histograms held in memory.
func LatenciesOf(response, service []*hdr.Histogram) *Latencies {
	lengths := make([]float64, len(response))
	for i, h := range response {
		lengths[i] = float64(h.EndTimeMs()-h.StartTimeMs()) / 1000
	}
	l := newLatencies(lengths)
	for _, h := range response {
		l.addResponse(h)
	}
	l.finish()
	for _, h := range service {
		l.Service.Merge(h)
	}
	return l
}

// readLatencies reads latency.hlog (tags <op>.response and <op>.service) in two passes: the first reads
// only each interval's tag and length to plan the batches, the second decodes the histograms.
func readLatencies(dir string) (map[string]*Latencies, error) {
	path := filepath.Join(dir, results.LatencyLogFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	lengths := map[string][]float64{}
	if err := eachInterval(f, func(tag string, length float64, _ string) {
		if op, ok := strings.CutSuffix(tag, ".response"); ok {
			lengths[op] = append(lengths[op], length)
		}
	}); err != nil {
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	out := map[string]*Latencies{}
	get := func(op string) *Latencies {
		l, ok := out[op]
		if !ok {
			l = newLatencies(lengths[op])
			out[op] = l
		}
		return l
	}
	err = eachInterval(f, func(tag string, length float64, payload string) {
		h, err := hdr.Decode([]byte(payload))
		if err != nil {
			return // a torn last line of a killed run: keep what came before
		}
		h.SetEndTimeMs(int64(length * 1000)) // from 0: addResponse takes the interval's length
		switch {
		case strings.HasSuffix(tag, ".response"):
			get(strings.TrimSuffix(tag, ".response")).addResponse(h)
		case strings.HasSuffix(tag, ".service"):
			get(strings.TrimSuffix(tag, ".service")).Service.Merge(h)
		}
	})
	for _, l := range out {
		l.finish()
	}
	return out, err
}

// eachInterval calls fn with each interval line of a latency log: its tag, its length in seconds and its
// compressed histogram. It reads the lines itself rather than through hdrhistogram-go's log reader, which
// walks every decoded histogram twice more for the log's observed minimum and maximum: on a 10-minute kube
// run's log that was 2.2 of the report's 5.1 s of CPU, and the report is written before a run's verdict.
func eachInterval(r io.Reader, fn func(tag string, length float64, payload string)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Tag=")
		if !ok {
			continue
		}
		// Tag=TAG,StartTimestamp,Interval_Length,Interval_Max,Interval_Compressed_Histogram
		fields := strings.SplitN(rest, ",", 5)
		if len(fields) < 5 {
			continue
		}
		length, err := strconv.ParseFloat(fields[2], 64)
		if err != nil {
			continue
		}
		fn(fields[0], length, fields[4])
	}
	return sc.Err()
}

// response returns an operation's whole-run response histogram, or nil.
func (r *Run) response(op string) *hdr.Histogram {
	if l := r.Latencies[op]; l != nil && l.Response.TotalCount() > 0 {
		return l.Response
	}
	return nil
}

// service returns an operation's whole-run service histogram, or nil.
func (r *Run) service(op string) *hdr.Histogram {
	if l := r.Latencies[op]; l != nil && l.Service.TotalCount() > 0 {
		return l.Service
	}
	return nil
}

// renderedKeys are the summary.json fields the report renders in sections of their own; every other
// field (including ones other parts of chaosbench add later) is rendered generically.
func renderedKeys() map[string]bool {
	m := map[string]bool{}
	for _, k := range []string{"schema", "name", "command", "incomplete", "incomplete_reason", "seed", "versions",
		"cluster", "config", "start", "end", "duration_s", "warmup_s", "measured_s", "schedule", "total",
		"operations", "faults", "checks", "errors", "server_metrics", "thresholds", "diagnosis", "environment",
		"time_base", "kube", "generator_load", "outcome", "reasons", "interrupted", "allowed", "not_recovered"} {
		m[k] = true
	}
	return m
}

// renderedFaultKeys are the fault fields the availability table shows in columns of its own.
func renderedFaultKeys() map[string]bool {
	return map[string]bool{"fault": true, "spec": true, "targets": true, "leader": true, "start": true,
		"end": true, "start_ns": true, "end_ns": true, "outcome": true, "effect": true}
}

// unknownFields returns the top-level fields of a summary.json that the report does not render in a
// section of its own, in file order, and the other fields of each fault.
func unknownFields(b []byte) ([]Field, []map[string]json.RawMessage) {
	known := renderedKeys()
	dec := json.NewDecoder(bytes.NewReader(b))
	var extra []Field
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil
	}
	var faults json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return extra, nil
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return extra, nil
		}
		if key == "faults" {
			faults = raw
		}
		if !known[key] && !isEmptyJSON(raw) {
			extra = append(extra, Field{Key: key, Raw: raw})
		}
	}
	var faultExtra []map[string]json.RawMessage
	if len(faults) > 0 {
		var list []map[string]json.RawMessage
		if json.Unmarshal(faults, &list) == nil {
			knownFault := renderedFaultKeys()
			for _, f := range list {
				for k := range f {
					if knownFault[k] {
						delete(f, k)
					}
				}
				faultExtra = append(faultExtra, f)
			}
		}
	}
	return extra, faultExtra
}

func isEmptyJSON(raw json.RawMessage) bool {
	switch strings.TrimSpace(string(raw)) {
	case "null", "{}", "[]", `""`:
		return true
	}
	return false
}

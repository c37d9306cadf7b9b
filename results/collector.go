package results

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds: latencies are recorded in nanoseconds from 1 us to 60 s with 3 significant figures.
// Longer latencies are clamped to the maximum (and still counted).
const (
	LowestLatency      = time.Microsecond
	HighestLatency     = 60 * time.Second
	SignificantFigures = 3
)

// File names the collector writes into a run directory.
const (
	LatencyLogFile = "latency.hlog"
	TimeSeriesFile = "timeseries.jsonl"
)

// NewHistogram returns an empty histogram with the bounds every latency histogram of a run uses.
func NewHistogram() *hdr.Histogram {
	return hdr.New(int64(LowestLatency), int64(HighestLatency), SignificantFigures)
}

// CollectorOptions configures a Collector.
type CollectorOptions struct {
	// Dir receives latency.hlog and timeseries.jsonl; empty writes no files.
	Dir string
	// Start is the run's base time: record offsets are relative to it.
	Start time.Time
	// Warmup excludes records intended to start less than Warmup after the load began (see Begin).
	Warmup time.Duration
	// Interval is the length of a time-series interval (default 1 s).
	Interval time.Duration
	// Stripes spreads each operation's histograms over this many locks (default GOMAXPROCS/4, at least 1).
	Stripes int
}

// Collector folds records into per-operation HDR histograms and counters. Every Interval it writes one
// interval histogram per operation to latency.hlog and one row per operation to timeseries.jsonl, and adds
// the interval into the run's totals. Recording is safe for concurrent use and never blocks on file I/O.
type Collector struct {
	opts        CollectorOptions
	ops         sync.Map     // name -> *opState
	measureFrom atomic.Int64 // records intended earlier are ignored; no record counts before Begin
	begun       chan struct{}
	beginOnce   sync.Once
	begin       time.Duration

	mu       sync.Mutex // guards everything below: the ticking side
	scratch  *window
	ticks    int // full intervals folded so far
	lastTick time.Duration
	hlogFile *os.File
	hlogBuf  *bufio.Writer
	hlog     *hdr.HistogramLogWriter
	tsFile   *os.File
	tsBuf    *bufio.Writer
	tsEnc    *json.Encoder
	ioErr    error
	closed   bool
}

type opState struct {
	name    string
	stripes []stripe
	total   *window
	tput    runningStats // per full interval, from the op's first interval with records
	started bool
	access  atomic.Uint32 // the Access of the operation's records
}

type stripe struct {
	mu    sync.Mutex
	cur   *window
	spare *window
	_     [40]byte // keep neighbouring stripes' locks off one cache line
}

type window struct {
	service, response *hdr.Histogram
	count, errors     int64
	failed            int64
	backlog, lag      int64
	errClasses        map[string]int64
}

func newWindow() *window {
	return &window{service: NewHistogram(), response: NewHistogram(), errClasses: map[string]int64{}}
}

func (w *window) reset() {
	w.service.Reset()
	w.response.Reset()
	w.count, w.errors, w.failed, w.backlog, w.lag = 0, 0, 0, 0, 0
	clear(w.errClasses)
}

func (w *window) merge(from *window) {
	w.service.Merge(from.service)
	w.response.Merge(from.response)
	w.count += from.count
	w.errors += from.errors
	w.failed += from.failed
	w.backlog += from.backlog
	w.lag += from.lag
	for k, v := range from.errClasses {
		w.errClasses[k] += v
	}
}

func record(h *hdr.Histogram, d time.Duration) {
	v := min(max(int64(d), 0), int64(HighestLatency))
	// RecordValue only fails for values out of range, which the clamp rules out.
	_ = h.RecordValue(v)
}

// NewCollector creates a collector and, when opts.Dir is set, its files.
func NewCollector(opts CollectorOptions) (*Collector, error) {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.Stripes <= 0 {
		opts.Stripes = max(1, runtime.GOMAXPROCS(0)/4)
	}
	if opts.Start.IsZero() {
		opts.Start = time.Now()
	}
	c := &Collector{opts: opts, scratch: newWindow(), begun: make(chan struct{})}
	c.measureFrom.Store(math.MaxInt64)
	if opts.Dir == "" {
		return c, nil
	}
	var err error
	if c.hlogFile, err = os.Create(filepath.Join(opts.Dir, LatencyLogFile)); err != nil {
		return nil, fmt.Errorf("create latency log: %w", err)
	}
	if c.tsFile, err = os.Create(filepath.Join(opts.Dir, TimeSeriesFile)); err != nil {
		c.hlogFile.Close()
		return nil, fmt.Errorf("create time series: %w", err)
	}
	c.hlogBuf = bufio.NewWriter(c.hlogFile)
	c.hlog = hdr.NewHistogramLogWriter(c.hlogBuf)
	startMs := opts.Start.UnixMilli()
	c.hlog.SetBaseTime(startMs)
	c.ioErr = errors.Join(
		c.hlog.OutputLogFormatVersion(),
		c.hlog.OutputComment("chaosbench latency log: values in nanoseconds; tags <op>.response and <op>.service"),
		c.hlog.OutputStartTime(startMs),
		c.hlog.OutputBaseTime(startMs),
		c.hlog.OutputLegend(),
	)
	c.tsBuf = bufio.NewWriter(c.tsFile)
	c.tsEnc = json.NewEncoder(c.tsBuf)
	return c, nil
}

// Start returns the run's base time.
func (c *Collector) Start() time.Time { return c.opts.Start }

// Begin tells the collector that the measured load started at offset at: intervals are aligned on it and
// records intended before at+Warmup are ignored. Only the first call counts.
func (c *Collector) Begin(at time.Duration) {
	c.beginOnce.Do(func() {
		c.mu.Lock()
		c.begin, c.lastTick = at, at
		c.mu.Unlock()
		c.measureFrom.Store(int64(at + c.opts.Warmup))
		close(c.begun)
	})
}

// MeasureFrom returns the offset from which records count (load start plus warm-up), and false before
// Begin.
func (c *Collector) MeasureFrom() (time.Duration, bool) {
	v := c.measureFrom.Load()
	return time.Duration(v), v != math.MaxInt64
}

func (c *Collector) op(name string) *opState {
	if v, ok := c.ops.Load(name); ok {
		return v.(*opState)
	}
	st := &opState{name: name, stripes: make([]stripe, c.opts.Stripes), total: newWindow()}
	for i := range st.stripes {
		st.stripes[i].cur, st.stripes[i].spare = newWindow(), newWindow()
	}
	v, _ := c.ops.LoadOrStore(name, st)
	return v.(*opState)
}

// Record adds one record. Records intended to start during the warm-up are ignored.
func (c *Collector) Record(worker int, r *Record) {
	if int64(r.Intended) < c.measureFrom.Load() {
		return
	}
	st := c.op(r.Op)
	if r.Access != AccessNone && Access(st.access.Load()) != r.Access {
		st.access.Store(uint32(r.Access))
	}
	s := &st.stripes[uint(worker)%uint(len(st.stripes))]
	s.mu.Lock()
	w := s.cur
	w.count++
	switch r.Outcome {
	case Error:
		w.errors++
		w.errClasses[r.ErrClass]++
	case Failed:
		w.failed++
	}
	switch r.Miss {
	case Backlog:
		w.backlog++
	case Lag:
		w.lag++
	}
	record(w.service, r.ServiceTime())
	record(w.response, r.ResponseTime())
	s.mu.Unlock()
}

// Live returns the number of records and of errors so far, the current interval included, for progress
// displays. It is computed from the windows rather than kept in shared counters, which every record would
// otherwise update from every core.
func (c *Collector) Live() (ops, errs int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops.Range(func(_, v any) bool {
		st := v.(*opState)
		ops += st.total.count
		errs += st.total.errors
		for i := range st.stripes {
			s := &st.stripes[i]
			s.mu.Lock()
			ops += s.cur.count
			errs += s.cur.errors
			s.mu.Unlock()
		}
		return true
	})
	return ops, errs
}

// Run waits for Begin, then folds an interval every Interval until ctx is done. Call Close afterwards for
// the last partial interval.
func (c *Collector) Run(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-c.begun:
	}
	for k := 1; ; k++ {
		at := c.begin + time.Duration(k)*c.opts.Interval
		t := time.NewTimer(time.Until(c.opts.Start.Add(at)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
			c.tick(at, true)
		}
	}
}

// TimeSeriesRow is one line of timeseries.jsonl: one operation during one interval ending at T seconds.
// Latencies are response times in milliseconds; ServiceP99 is the service time's p99. Access is the
// operation's access ("write", "read"; empty for neither), for availability gaps of runs without a history.
type TimeSeriesRow struct {
	T          float64 `json:"t"`
	Op         string  `json:"op"`
	Access     string  `json:"access,omitempty"`
	Count      int64   `json:"count"`
	Errors     int64   `json:"errors,omitempty"`
	Failed     int64   `json:"failed,omitempty"`
	Missed     int64   `json:"missed,omitempty"`
	Throughput float64 `json:"throughput"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	P999       float64 `json:"p99_9_ms,omitempty"`
	Max        float64 `json:"max_ms"`
	ServiceP99 float64 `json:"service_p99_ms"`
}

func (c *Collector) tick(at time.Duration, full bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	from := c.lastTick
	c.lastTick = at
	if at <= from {
		return
	}
	seconds := (at - from).Seconds()
	var names []string
	c.ops.Range(func(k, _ any) bool {
		names = append(names, k.(string))
		return true
	})
	sort.Strings(names)
	startMs := c.opts.Start.Add(from).UnixMilli()
	endMs := c.opts.Start.Add(at).UnixMilli()
	for _, name := range names {
		// A tick is a burst of work: two compressed interval histograms and the quantiles of every
		// operation, tens of milliseconds for the kube workload's dozens of operations. On a generator
		// with one core that burst held the paced workers' timers back beyond the schedule's slack (1.9%
		// of the large preset's slots started late, all of them around ticks); yielding between
		// operations lets a due worker start at once (0.1%). Records never wait for the tick: they take
		// their stripe's lock, not c.mu.
		runtime.Gosched()
		st := c.op(name)
		iw := c.scratch
		iw.reset()
		for i := range st.stripes {
			s := &st.stripes[i]
			s.mu.Lock()
			s.cur, s.spare = s.spare, s.cur
			s.mu.Unlock()
			iw.merge(s.spare)
			s.spare.reset()
		}
		if iw.count > 0 {
			st.started = true
		}
		if full && st.started {
			st.tput.add(float64(iw.count) / seconds)
		}
		if iw.count == 0 {
			continue
		}
		st.total.merge(iw)
		if c.hlog != nil {
			for _, h := range []struct {
				tag  string
				hist *hdr.Histogram
			}{{name + ".response", iw.response}, {name + ".service", iw.service}} {
				h.hist.SetTag(sanitizeTag(h.tag))
				h.hist.SetStartTimeMs(startMs)
				h.hist.SetEndTimeMs(endMs)
				if err := c.hlog.OutputIntervalHistogram(h.hist); err != nil && c.ioErr == nil {
					c.ioErr = err
				}
			}
			row := TimeSeriesRow{
				T: at.Seconds(), Op: name, Count: iw.count, Errors: iw.errors, Failed: iw.failed,
				Missed:     iw.backlog + iw.lag,
				Throughput: float64(iw.count) / seconds,
				P50:        ms(iw.response.ValueAtQuantile(50)),
				P99:        ms(iw.response.ValueAtQuantile(99)),
				P999:       ms(iw.response.ValueAtQuantile(99.9)),
				Max:        ms(iw.response.Max()),
				ServiceP99: ms(iw.service.ValueAtQuantile(99)),
			}
			if a := Access(st.access.Load()); a != AccessNone {
				row.Access = a.String()
			}
			if err := c.tsEnc.Encode(row); err != nil && c.ioErr == nil {
				c.ioErr = err
			}
		}
	}
	if c.hlogBuf != nil {
		// Flush every interval so that a run killed with SIGKILL still leaves its latency log behind.
		if err := errors.Join(c.hlogBuf.Flush(), c.tsBuf.Flush()); err != nil && c.ioErr == nil {
			c.ioErr = err
		}
	}
	if full {
		c.ticks++
	}
}

// Close folds the last, partial interval at offset end, closes the files and returns the first I/O error.
// The collector keeps its totals for Summary.
func (c *Collector) Close(end time.Duration) error {
	c.tick(end, false)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.hlogFile == nil {
		return nil
	}
	err := errors.Join(c.ioErr, c.hlogBuf.Flush(), c.tsBuf.Flush(), c.hlogFile.Close(), c.tsFile.Close())
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// LiveTotals returns a copy of every operation's response histogram over the measured window folded so
// far (the current interval is not in it yet), and how many of its requests started late with clients free
// (lag): what a job that may end a load early (qualify) judges while it runs.
func (c *Collector) LiveTotals() (responses map[string]*hdr.Histogram, requests, lagged int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	responses = map[string]*hdr.Histogram{}
	c.ops.Range(func(k, v any) bool {
		st := v.(*opState)
		responses[k.(string)] = st.total.response.Clone()
		requests += st.total.count
		lagged += st.total.lag
		return true
	})
	return responses, requests, lagged
}

// Histograms returns copies of an operation's total service and response histograms (nil when the
// operation has no records).
func (c *Collector) Histograms(op string) (service, response *hdr.Histogram) {
	v, ok := c.ops.Load(op)
	if !ok {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := v.(*opState)
	return st.total.service.Clone(), st.total.response.Clone()
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

func sanitizeTag(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if ch == ',' || ch == ' ' || ch == '\r' || ch == '\n' {
			b[i] = '_'
		}
	}
	return string(b)
}

// runningStats keeps count, mean, min, max and variance of a series without storing it (Welford).
type runningStats struct {
	n        int64
	mean, m2 float64
	min, max float64
}

func (s *runningStats) add(x float64) {
	s.n++
	if s.n == 1 {
		s.min, s.max = x, x
	}
	s.min, s.max = math.Min(s.min, x), math.Max(s.max, x)
	d := x - s.mean
	s.mean += d / float64(s.n)
	s.m2 += d * (x - s.mean)
}

func (s *runningStats) stddev() float64 {
	if s.n < 2 {
		return 0
	}
	return math.Sqrt(s.m2 / float64(s.n-1))
}

// ReadTimeSeries reads the rows of a run directory's timeseries.jsonl, in file order.
func ReadTimeSeries(dir string) ([]TimeSeriesRow, error) {
	f, err := os.Open(filepath.Join(dir, TimeSeriesFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []TimeSeriesRow
	dec := json.NewDecoder(bufio.NewReader(f))
	for {
		var r TimeSeriesRow
		if err := dec.Decode(&r); err == io.EOF {
			return rows, nil
		} else if err != nil {
			return rows, fmt.Errorf("%s: %w", f.Name(), err)
		}
		rows = append(rows, r)
	}
}

// WriteTimeSeries writes rows as a run directory's timeseries.jsonl.
func WriteTimeSeries(dir string, rows []TimeSeriesRow) error {
	f, err := os.Create(filepath.Join(dir, TimeSeriesFile))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			f.Close()
			return err
		}
	}
	return errors.Join(w.Flush(), f.Close())
}

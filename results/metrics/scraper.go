package metrics

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// DefaultInterval is the scrape interval when Options leaves it zero: the same resolution as the latency
// time series, so that a stall in one shows up in the same second of the other.
const DefaultInterval = time.Second

// LastScrapeDir holds each member's last /metrics exposition, for questions the summary does not answer.
const LastScrapeDir = "metrics"

// maxBody bounds what one scrape reads: etcd serves about 160 KB.
const maxBody = 16 << 20

// Target is one member's metrics endpoint.
type Target struct {
	Member string
	URL    string
}

// Options configures a Scraper.
type Options struct {
	Targets []Target
	// TLS is the cluster's client TLS configuration, used for https targets.
	TLS *tls.Config
	// Interval between scrapes (default DefaultInterval).
	Interval time.Duration
	// Dir receives server_metrics.jsonl and, at Stop, each member's last exposition as
	// metrics/<member>.prom; empty writes nothing.
	Dir string
	// Base is the run's time base: sample times are offsets from it, as in timeseries.jsonl.
	Base time.Time
	// MeasureFrom returns the offset from which the run's figures count (load start plus warm-up), and false
	// before the load started. Nil counts every scrape.
	MeasureFrom func() (time.Duration, bool)
}

// Scraper scrapes every target every Interval until Stop, writing one sample per member per scrape. A member
// that does not answer in time (paused, killed, overloaded) gets a sample marked down, and is not asked
// again while a request to it is still open.
type Scraper struct {
	opts   Options
	client *http.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex // guards everything below
	members  []*member
	inflight []bool
	last     [][]byte // each member's last exposition
	gen      generator
	file     *os.File
	buf      *bufio.Writer
	ioErr    error
	scrapes  int
	failures int
	stopped  bool
}

// Start begins scraping in the background; the first scrape happens at once. ctx bounds the scraper's
// life: it stops scraping when ctx ends, though Stop must still be called.
func Start(ctx context.Context, opts Options) (*Scraper, error) {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Base.IsZero() {
		opts.Base = time.Now()
	}
	transport := &http.Transport{
		Proxy:               nil, // members are reached directly, never through an HTTP proxy of the environment
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     time.Minute,
	}
	if opts.TLS != nil {
		transport.TLSClientConfig = opts.TLS.Clone()
	}
	s := &Scraper{
		opts:     opts,
		client:   &http.Client{Transport: transport},
		inflight: make([]bool, len(opts.Targets)),
		last:     make([][]byte, len(opts.Targets)),
	}
	for _, t := range opts.Targets {
		s.members = append(s.members, &member{name: t.Member})
	}
	if opts.Dir != "" {
		f, err := os.Create(filepath.Join(opts.Dir, results.ServerMetricsFile))
		if err != nil {
			return nil, fmt.Errorf("create server metrics file: %w", err)
		}
		s.file, s.buf = f, bufio.NewWriter(f)
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.wg.Add(1)
	go s.loop(ctx)
	return s, nil
}

func (s *Scraper) loop(ctx context.Context) {
	defer s.wg.Done()
	ticker := time.NewTicker(s.opts.Interval)
	defer ticker.Stop()
	for {
		s.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// timeout bounds one scrape: a member that takes longer than an interval (and at least two seconds) to
// render its metrics is reported down for that scrape.
func (s *Scraper) timeout() time.Duration { return max(s.opts.Interval, 2*time.Second) }

// tick scrapes every member without an open request, and samples the generator.
func (s *Scraper) tick(ctx context.Context) {
	now := time.Since(s.opts.Base)
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.write(s.gen.observe(now, s.measuring(now)))
	for i := range s.members {
		if s.inflight[i] {
			continue
		}
		s.inflight[i] = true
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.scrape(ctx, i)
		}()
	}
	s.mu.Unlock()
}

// scrape asks member i for its metrics and folds the answer in.
func (s *Scraper) scrape(ctx context.Context, i int) {
	at := time.Since(s.opts.Base)
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	body, snap, err := s.fetch(ctx, s.opts.Targets[i].URL)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight[i] = false
	if s.stopped && ctx.Err() != nil {
		return // cut short by Stop: not a failure of the member
	}
	s.scrapes++
	m := s.members[i]
	if err != nil {
		s.failures++
		s.write(m.failed(at, err, s.measuring(at)))
		return
	}
	s.last[i] = body
	s.write(m.observe(at, snap, s.measuring(at)))
}

func (s *Scraper) fetch(ctx context.Context, url string) ([]byte, *snapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	// Ask for the text format: it is what expfmt's text parser reads, and what every etcd serves.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", url, err)
	}
	snap, err := parse(bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return body, snap, nil
}

func (s *Scraper) measuring(at time.Duration) bool {
	if s.opts.MeasureFrom == nil {
		return true
	}
	from, ok := s.opts.MeasureFrom()
	return ok && at >= from
}

// write appends a sample to the file; the caller holds mu.
func (s *Scraper) write(sample results.ServerSample) {
	if s.buf == nil || s.ioErr != nil {
		return
	}
	b, err := json.Marshal(sample)
	if err == nil {
		_, err = s.buf.Write(append(b, '\n'))
	}
	if err == nil {
		// Flushed per sample, so that a run killed with SIGKILL still leaves its metrics behind.
		err = s.buf.Flush()
	}
	s.ioErr = err
}

// Live returns the measured window's figures so far (the summary Stop would return now, without a last
// scrape).
func (s *Scraper) Live() *results.ServerMetrics {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.summary()
}

// Stop stops the background scrapes, takes a last scrape of every member (so that the measured window's
// end is covered), closes the files and returns the summary. Call it before the cluster stops.
func (s *Scraper) Stop(ctx context.Context) (*results.ServerMetrics, error) {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()

	fctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	var wg sync.WaitGroup
	for i := range s.members {
		wg.Go(func() { s.finalScrape(fctx, i) })
	}
	wg.Wait()

	s.mu.Lock()
	defer s.mu.Unlock()
	s.write(s.gen.observe(time.Since(s.opts.Base), s.measuring(time.Since(s.opts.Base))))
	err := s.ioErr
	if s.file != nil {
		err = errors.Join(err, s.buf.Flush(), s.file.Close())
		dir := filepath.Join(s.opts.Dir, LastScrapeDir)
		for i, body := range s.last {
			if body == nil {
				continue
			}
			err = errors.Join(err, os.MkdirAll(dir, 0o755),
				os.WriteFile(filepath.Join(dir, s.members[i].name+".prom"), body, 0o644))
		}
	}
	if err != nil {
		err = fmt.Errorf("write server metrics: %w", err)
	}
	return s.summary(), err
}

func (s *Scraper) finalScrape(ctx context.Context, i int) {
	at := time.Since(s.opts.Base)
	body, snap, err := s.fetch(ctx, s.opts.Targets[i].URL)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scrapes++
	m := s.members[i]
	if err != nil {
		s.failures++
		s.write(m.failed(at, err, s.measuring(at)))
		return
	}
	s.last[i] = body
	s.write(m.observe(at, snap, s.measuring(at)))
}

// summary assembles the measured window's figures; the caller holds mu.
func (s *Scraper) summary() *results.ServerMetrics {
	return summarize(s.members, &s.gen, s.opts.Interval, s.scrapes, s.failures)
}

func summarize(members []*member, gen *generator, interval time.Duration, scrapes, failures int) *results.ServerMetrics {
	out := &results.ServerMetrics{IntervalSeconds: interval.Seconds(), Scrapes: scrapes, Failed: failures}
	c := &out.Cluster
	for _, m := range members {
		mm := m.summary()
		out.Members = append(out.Members, mm)
		if mm.WALFsync.P99 >= c.WALFsync.P99 && mm.WALFsync.Count > 0 {
			c.WALFsync, c.WALFsyncMember = mm.WALFsync, mm.Name
		}
		if mm.BackendCommit.P99 >= c.BackendCommit.P99 && mm.BackendCommit.Count > 0 {
			c.BackendCommit, c.BackendCommitBy = mm.BackendCommit, mm.Name
		}
		if mm.Apply.P99 >= c.Apply.P99 && mm.Apply.Count > 0 {
			c.Apply = mm.Apply
		}
		if mm.PeerRTT.P99 >= c.PeerRTT.P99 && mm.PeerRTT.Count > 0 {
			c.PeerRTT = mm.PeerRTT
		}
		c.LeaderChanges = max(c.LeaderChanges, mm.LeaderChanges)
		c.ProposalsFailed += mm.ProposalsFailed
		c.ProposalsPending = math.Max(c.ProposalsPending, mm.ProposalsPending)
		c.HeartbeatFailures += mm.HeartbeatFailures
		c.SlowApplies += mm.SlowApplies
		c.SlowReadIndexes += mm.SlowReadIndexes
		c.SlowWatchers = math.Max(c.SlowWatchers, mm.SlowWatchers)
		c.DBSizeBytes = math.Max(c.DBSizeBytes, mm.DBSizeBytes)
		c.DBInUseBytes = math.Max(c.DBInUseBytes, mm.DBInUseBytes)
		c.QuotaBackendBytes = math.Max(c.QuotaBackendBytes, m.all.quota)
	}
	if gen != nil && gen.started {
		out.Generator = gen.summary()
	}
	return out
}

// Exposition is one recorded scrape of one member, for Replay: Body is what /metrics answered (nil for a
// scrape that failed), T its offset from the time base, Measuring whether T lies in the measured window.
type Exposition struct {
	Member    string
	T         time.Duration
	Measuring bool
	Body      []byte
}

// Replay folds recorded expositions, in order, into the samples and the summary a Scraper would have
// produced from them (without the generator's figures, which are not in an exposition). It makes the
// summary reproducible from saved expositions, for tests and for offline analysis.
func Replay(interval time.Duration, exps []Exposition) (*results.ServerMetrics, []results.ServerSample, error) {
	var members []*member
	index := map[string]*member{}
	var samples []results.ServerSample
	failures := 0
	for _, e := range exps {
		m, ok := index[e.Member]
		if !ok {
			m = &member{name: e.Member}
			index[e.Member] = m
			members = append(members, m)
		}
		if e.Body == nil {
			failures++
			samples = append(samples, m.failed(e.T, errors.New("no answer"), e.Measuring))
			continue
		}
		snap, err := parse(bytes.NewReader(e.Body))
		if err != nil {
			return nil, nil, fmt.Errorf("replay %s at %s: %w", e.Member, e.T, err)
		}
		samples = append(samples, m.observe(e.T, snap, e.Measuring))
	}
	return summarize(members, nil, interval, len(exps), failures), samples, nil
}

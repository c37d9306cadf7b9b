package metrics

import (
	"math"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// member folds one member's scrapes into interval samples and measured-window totals. Counters and
// histograms are accumulated from scrape to scrape; a new process start time, or a value lower than the
// previous one (Prometheus' reset rule), means the member restarted and counted from zero again, so that a
// killed and restarted member neither loses its earlier counts nor shows a negative increase.
type member struct {
	name string

	prev  *snapshot     // last successful scrape
	prevT time.Duration // its offset
	acc   *snapshot     // counters and histograms accumulated since the first scrape (gauges unused)
	// base is acc at the last scrape before the measured window (nil: zero), with that scrape's committed
	// and applied indexes, which are gauges.
	base                       *snapshot
	baseCommitted, baseApplied float64

	all, measured gauges
}

// gauges aggregates a member's samples over a part of the run.
type gauges struct {
	scrapes, failed              int
	leader                       bool
	pendingMax, slowWatchersMax  float64
	dbSize, dbInUse, rssMax      float64
	cpuSum, cpuMax               float64
	cpuN                         int
	version, goVersion           string
	goroutinesMax, maxFDs        float64
	quota                        float64
	firstCommitted, firstApplied float64
	lastCommitted, lastApplied   float64
	haveCommitted                bool
}

func (g *gauges) observe(s *snapshot, cpuPercent float64, haveCPU bool) {
	g.scrapes++
	g.leader = g.leader || s.isLeader == 1
	g.pendingMax = math.Max(g.pendingMax, s.pending)
	g.slowWatchersMax = math.Max(g.slowWatchersMax, s.slowWatchers)
	g.dbSize, g.dbInUse = s.dbSize, s.dbInUse
	g.rssMax = math.Max(g.rssMax, s.rss)
	if haveCPU {
		g.cpuSum += cpuPercent
		g.cpuMax = math.Max(g.cpuMax, cpuPercent)
		g.cpuN++
	}
	if s.version != "" {
		g.version = s.version
	}
	if s.goVersion != "" {
		g.goVersion = s.goVersion
	}
	g.goroutinesMax = math.Max(g.goroutinesMax, s.goroutines)
	if s.maxFDs > 0 {
		g.maxFDs = s.maxFDs
	}
	if s.quota > 0 {
		g.quota = s.quota
	}
	if !g.haveCommitted {
		g.firstCommitted, g.firstApplied, g.haveCommitted = s.committed, s.applied, true
	}
	g.lastCommitted, g.lastApplied = s.committed, s.applied
}

// observe folds one scrape taken at offset t into the member's state and returns its sample. measuring
// says whether t lies in the measured window.
func (m *member) observe(t time.Duration, s *snapshot, measuring bool) results.ServerSample {
	sample := results.ServerSample{T: t.Seconds(), Member: m.name, Up: true}
	var intervals [4]histogram
	cpuPercent, haveCPU := 0.0, false
	if m.prev == nil {
		m.acc = &snapshot{}
		for i, h := range s.histograms() {
			*m.acc.histograms()[i] = histogram{bounds: h.bounds, cum: make([]float64, len(h.cum))}
		}
	} else {
		restarted := s.startTime != m.prev.startTime
		for i, c := range s.counters() {
			if restarted {
				*m.acc.counters()[i] += *c
			} else {
				*m.acc.counters()[i] += increase(*m.prev.counters()[i], *c)
			}
		}
		for i, h := range s.histograms() {
			acc, prev := m.acc.histograms()[i], m.prev.histograms()[i]
			var d histogram
			switch {
			case !restarted && h.sameLayout(*prev) && h.count() >= prev.count():
				d = h.minus(*prev)
			default:
				// Restarted (counts fell) or a new layout (another etcd version): everything counted since.
				d = h.clone()
			}
			if !acc.sameLayout(d) {
				// Counts of two layouts cannot be added: keep counting in the new one from here.
				*acc = histogram{bounds: d.bounds, cum: make([]float64, len(d.cum))}
				if m.base != nil {
					*m.base.histograms()[i] = histogram{bounds: d.bounds, cum: make([]float64, len(d.cum))}
				}
			}
			acc.add(d)
			intervals[i] = d
		}
		if dt := (t - m.prevT).Seconds(); dt > 0 && s.hasCPU && m.prev.hasCPU && !restarted {
			cpuPercent, haveCPU = 100*increase(m.prev.cpuSeconds, s.cpuSeconds)/dt, true
		}
	}
	m.prev, m.prevT = s, t

	sample.WALFsyncCount, sample.WALFsyncP50, sample.WALFsyncP99 = int64(intervals[0].count()), ms(intervals[0].quantile(0.5)), ms(intervals[0].quantile(0.99))
	sample.BackendCommitCount, sample.BackendCommitP99 = int64(intervals[1].count()), ms(intervals[1].quantile(0.99))
	sample.ApplyCount, sample.ApplyP99 = int64(intervals[2].count()), ms(intervals[2].quantile(0.99))
	sample.PeerRTTP99 = ms(intervals[3].quantile(0.99))
	sample.IsLeader, sample.HasLeader = s.isLeader == 1, s.hasLeader == 1
	sample.LeaderChanges = int64(m.acc.leaderChanges)
	sample.ProposalsCommitted, sample.ProposalsApplied, sample.ProposalsPending = s.committed, s.applied, s.pending
	sample.ProposalsFailed = int64(m.acc.proposalsFailed)
	sample.HeartbeatFailures = int64(m.acc.heartbeatFailures)
	sample.SlowApplies = int64(m.acc.slowApplies)
	sample.SlowReadIndexes = int64(m.acc.slowReadIndexes)
	sample.PeerSentFailures = int64(m.acc.peerSentFailures)
	sample.DBSizeBytes, sample.DBInUseBytes = s.dbSize, s.dbInUse
	sample.SlowWatchers = s.slowWatchers
	sample.RSSBytes = s.rss
	sample.QuotaBackendBytes = s.quota
	sample.ServerVersion = s.version
	if haveCPU {
		sample.CPUPercent = round(cpuPercent, 1)
	}

	m.all.observe(s, cpuPercent, haveCPU)
	if measuring {
		m.measured.observe(s, cpuPercent, haveCPU)
	} else {
		m.base = m.acc.cloneAccumulated()
		m.baseCommitted, m.baseApplied = s.committed, s.applied
	}
	return sample
}

// failed records a scrape that got no answer.
func (m *member) failed(t time.Duration, err error, measuring bool) results.ServerSample {
	m.all.failed++
	if measuring {
		m.measured.failed++
	}
	return results.ServerSample{T: t.Seconds(), Member: m.name, Error: err.Error()}
}

// summary returns the member's figures over the measured window (the whole scrape span when no scrape
// fell into it).
func (m *member) summary() results.MemberMetrics {
	g := m.measured
	base := m.base
	if g.scrapes == 0 {
		g, base = m.all, nil
		g.failed = m.all.failed
	}
	out := results.MemberMetrics{
		Name: m.name, Scrapes: g.scrapes + g.failed, Failed: g.failed, Leader: g.leader,
		ProposalsPending: g.pendingMax, SlowWatchers: g.slowWatchersMax,
		DBSizeBytes: g.dbSize, DBInUseBytes: g.dbInUse, RSSBytesMax: g.rssMax, ServerVersion: g.version,
		GoVersion: g.goVersion, GoroutinesMax: g.goroutinesMax, MaxFDs: g.maxFDs, QuotaBackendBytes: g.quota,
	}
	if g.cpuN > 0 {
		out.CPUPercentMean, out.CPUPercentMax = round(g.cpuSum/float64(g.cpuN), 1), round(g.cpuMax, 1)
	}
	if g.haveCommitted {
		from, fromApplied := g.firstCommitted, g.firstApplied
		if base != nil {
			from, fromApplied = m.baseCommitted, m.baseApplied
		}
		out.ProposalsCommitted = g.lastCommitted - from
		out.ProposalsApplied = g.lastApplied - fromApplied
	}
	if m.acc == nil {
		return out
	}
	d := m.acc.cloneAccumulated()
	if base != nil {
		for i, c := range d.counters() {
			*c -= *base.counters()[i]
		}
		for i, h := range d.histograms() {
			if b := base.histograms()[i]; h.sameLayout(*b) {
				*h = h.minus(*b)
			}
		}
	}
	out.WALFsync = bucketed(d.walFsync)
	out.BackendCommit = bucketed(d.backendCommit)
	out.Apply = bucketed(d.apply)
	out.PeerRTT = bucketed(d.peerRTT)
	out.LeaderChanges = int64(d.leaderChanges)
	out.ProposalsFailed = int64(d.proposalsFailed)
	out.HeartbeatFailures = int64(d.heartbeatFailures)
	out.SlowApplies = int64(d.slowApplies)
	out.SlowReadIndexes = int64(d.slowReadIndexes)
	out.PeerSentFailures = int64(d.peerSentFailures)
	out.CPUSeconds = round(d.cpuSeconds, 3)
	return out
}

func (s *snapshot) cloneAccumulated() *snapshot {
	c := *s
	for i, h := range s.histograms() {
		*c.histograms()[i] = h.clone()
	}
	return &c
}

// increase is how much a counter grew from prev to cur, with Prometheus' reset rule.
func increase(prev, cur float64) float64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// bucketed summarises a histogram of seconds in milliseconds.
func bucketed(h histogram) results.Bucketed {
	n := h.count()
	if n == 0 {
		return results.Bucketed{}
	}
	return results.Bucketed{
		Count: int64(n),
		Mean:  round(1000*h.sum/n, 3),
		P50:   ms(h.quantile(0.5)),
		P90:   ms(h.quantile(0.9)),
		P99:   ms(h.quantile(0.99)),
		P999:  ms(h.quantile(0.999)),
	}
}

// ms converts seconds to milliseconds rounded to the microsecond; NaN (no data) becomes 0.
func ms(seconds float64) float64 {
	if math.IsNaN(seconds) {
		return 0
	}
	return round(seconds*1000, 3)
}

func round(v float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(v*p) / p
}

// Package metrics scrapes etcd's own Prometheus metrics from every member while a run is going, so that a
// report can say why a cluster was slow: the disk (WAL fsync, backend commit), the leader (elections,
// heartbeat failures), the network (peer round trips), the CPU, or the watchers. Every scrape becomes a
// line of server_metrics.jsonl; the measured window is summarised into summary.json.
package metrics

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// histogram is a Prometheus histogram: cumulative counts per upper bound (seconds), the last bound +Inf.
type histogram struct {
	bounds []float64
	cum    []float64
	sum    float64
}

func (h histogram) count() float64 {
	if len(h.cum) == 0 {
		return 0
	}
	return h.cum[len(h.cum)-1]
}

func (h histogram) sameLayout(o histogram) bool {
	if len(h.bounds) != len(o.bounds) {
		return false
	}
	for i := range h.bounds {
		if h.bounds[i] != o.bounds[i] {
			return false
		}
	}
	return true
}

// add adds o into h, bucket by bucket; h takes o's layout when it has none.
func (h *histogram) add(o histogram) {
	if len(h.bounds) == 0 {
		h.bounds = append([]float64(nil), o.bounds...)
		h.cum = make([]float64, len(o.cum))
	}
	if !h.sameLayout(o) {
		return
	}
	for i := range o.cum {
		h.cum[i] += o.cum[i]
	}
	h.sum += o.sum
}

// minus returns h - o (both cumulative since some origin); the caller ensures the same layout.
func (h histogram) minus(o histogram) histogram {
	out := histogram{bounds: h.bounds, cum: make([]float64, len(h.cum)), sum: h.sum - o.sum}
	for i := range h.cum {
		out.cum[i] = h.cum[i]
		if i < len(o.cum) {
			out.cum[i] -= o.cum[i]
		}
	}
	return out
}

func (h histogram) clone() histogram {
	return histogram{bounds: h.bounds, cum: append([]float64(nil), h.cum...), sum: h.sum}
}

// quantile returns the q-quantile (0 < q < 1) in seconds, interpolating linearly inside the bucket the rank
// falls into, as Prometheus' histogram_quantile does: the lowest bucket starts at 0, and a rank in the +Inf
// bucket returns the highest finite bound. An empty histogram returns NaN.
func (h histogram) quantile(q float64) float64 {
	n := len(h.cum)
	total := h.count()
	if n < 2 || total <= 0 {
		return math.NaN()
	}
	rank := q * total
	i := sort.Search(n, func(i int) bool { return h.cum[i] >= rank })
	if i >= n-1 {
		return h.bounds[n-2]
	}
	lower, before := 0.0, 0.0
	if i > 0 {
		lower, before = h.bounds[i-1], h.cum[i-1]
	}
	in := h.cum[i] - before
	if in <= 0 {
		return h.bounds[i]
	}
	return lower + (h.bounds[i]-lower)*(rank-before)/in
}

// snapshot is what one scrape of one member says, reduced to what chaosbench uses. Histograms with labels
// (apply by operation, peer round trip by peer) are summed over their label sets.
type snapshot struct {
	walFsync, backendCommit, apply, peerRTT histogram

	// counters
	leaderChanges, proposalsFailed, heartbeatFailures, slowApplies, slowReadIndexes, peerSentFailures,
	cpuSeconds float64

	// gauges
	isLeader, hasLeader, committed, applied, pending, dbSize, dbInUse, slowWatchers, rss, quota float64
	hasCPU                                                                                      bool
	// startTime is process_start_time_seconds: when it changes, the member restarted and every counter
	// started again from zero, even one that has already grown past its old value.
	startTime float64

	version string
	// goVersion is the Go release the member was built with (etcd_server_go_version); goroutines and
	// maxFDs are its process's (go_goroutines, process_max_fds).
	goVersion          string
	goroutines, maxFDs float64
}

// counters returns the counters a snapshot keeps, in a fixed order.
func (s *snapshot) counters() []*float64 {
	return []*float64{&s.leaderChanges, &s.proposalsFailed, &s.heartbeatFailures, &s.slowApplies,
		&s.slowReadIndexes, &s.peerSentFailures, &s.cpuSeconds}
}

func (s *snapshot) histograms() []*histogram {
	return []*histogram{&s.walFsync, &s.backendCommit, &s.apply, &s.peerRTT}
}

// wanted reports whether fromFamilies reads the family name.
func wanted(name string) bool {
	switch name {
	case "etcd_disk_wal_fsync_duration_seconds", "etcd_disk_backend_commit_duration_seconds",
		"etcd_server_apply_duration_seconds", "etcd_network_peer_round_trip_time_seconds",
		"etcd_server_leader_changes_seen_total", "etcd_server_proposals_failed_total",
		"etcd_server_heartbeat_send_failures_total", "etcd_server_slow_apply_total",
		"etcd_server_slow_read_indexes_total", "etcd_network_peer_sent_failures_total",
		"process_cpu_seconds_total", "process_start_time_seconds", "etcd_server_is_leader",
		"etcd_server_has_leader", "etcd_server_proposals_committed_total",
		"etcd_server_proposals_applied_total", "etcd_server_proposals_pending",
		"etcd_mvcc_db_total_size_in_bytes", "etcd_mvcc_db_total_size_in_use_in_bytes",
		"etcd_debugging_mvcc_slow_watcher_total", "process_resident_memory_bytes",
		"etcd_server_quota_backend_bytes", "etcd_server_version", "etcd_server_go_version",
		"go_goroutines", "process_max_fds":
		return true
	}
	return false
}

// family returns the metric family a line of a text exposition belongs to: the name of a # HELP or # TYPE
// line, or a sample's name without the _bucket, _sum and _count suffixes of histograms.
func family(line []byte) string {
	if bytes.HasPrefix(line, []byte("# ")) {
		f := bytes.Fields(line)
		if len(f) >= 3 {
			return string(f[2])
		}
		return ""
	}
	end := bytes.IndexAny(line, "{ ")
	if end < 0 {
		return ""
	}
	name := string(line[:end])
	if !wanted(name) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok {
				return base
			}
		}
	}
	return name
}

// parse reads a text exposition (what /metrics serves) into a snapshot. Lines of the families chaosbench
// does not read (most of an etcd exposition: gRPC and Go runtime metrics) are dropped before the text
// parser sees them, which makes a scrape several times cheaper for the generator.
func parse(r io.Reader) (*snapshot, error) {
	body, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	kept := make([]byte, 0, len(body)/4)
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i+1], body[i+1:]
		} else {
			body = nil
		}
		if wanted(family(bytes.TrimRight(line, "\n"))) {
			kept = append(kept, line...)
		}
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(bytes.NewReader(kept))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return fromFamilies(fams), nil
}

func fromFamilies(fams map[string]*dto.MetricFamily) *snapshot {
	s := &snapshot{}
	for name, f := range fams {
		switch name {
		case "etcd_disk_wal_fsync_duration_seconds":
			s.walFsync = sumHistograms(f)
		case "etcd_disk_backend_commit_duration_seconds":
			s.backendCommit = sumHistograms(f)
		case "etcd_server_apply_duration_seconds":
			s.apply = sumHistograms(f)
		case "etcd_network_peer_round_trip_time_seconds":
			s.peerRTT = sumHistograms(f)
		case "etcd_server_leader_changes_seen_total":
			s.leaderChanges = sumValues(f)
		case "etcd_server_proposals_failed_total":
			s.proposalsFailed = sumValues(f)
		case "etcd_server_heartbeat_send_failures_total":
			s.heartbeatFailures = sumValues(f)
		case "etcd_server_slow_apply_total":
			s.slowApplies = sumValues(f)
		case "etcd_server_slow_read_indexes_total":
			s.slowReadIndexes = sumValues(f)
		case "etcd_network_peer_sent_failures_total":
			s.peerSentFailures = sumValues(f)
		case "process_cpu_seconds_total":
			s.cpuSeconds, s.hasCPU = sumValues(f), true
		case "process_start_time_seconds":
			s.startTime = sumValues(f)
		case "etcd_server_is_leader":
			s.isLeader = sumValues(f)
		case "etcd_server_has_leader":
			s.hasLeader = sumValues(f)
		case "etcd_server_proposals_committed_total":
			s.committed = sumValues(f)
		case "etcd_server_proposals_applied_total":
			s.applied = sumValues(f)
		case "etcd_server_proposals_pending":
			s.pending = sumValues(f)
		case "etcd_mvcc_db_total_size_in_bytes":
			s.dbSize = sumValues(f)
		case "etcd_mvcc_db_total_size_in_use_in_bytes":
			s.dbInUse = sumValues(f)
		case "etcd_debugging_mvcc_slow_watcher_total":
			s.slowWatchers = sumValues(f)
		case "process_resident_memory_bytes":
			s.rss = sumValues(f)
		case "etcd_server_quota_backend_bytes":
			s.quota = sumValues(f)
		case "etcd_server_version":
			s.version = labelValue(f, "server_version")
		case "etcd_server_go_version":
			s.goVersion = labelValue(f, "server_go_version")
		case "go_goroutines":
			s.goroutines = sumValues(f)
		case "process_max_fds":
			s.maxFDs = sumValues(f)
		}
	}
	return s
}

// labelValue is the value of label name on the family's series (info metrics carry one series).
func labelValue(f *dto.MetricFamily, name string) string {
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
	}
	return ""
}

// sumValues adds up the values of every series of a counter, gauge or untyped family.
func sumValues(f *dto.MetricFamily) float64 {
	var v float64
	for _, m := range f.GetMetric() {
		switch {
		case m.Counter != nil:
			v += m.Counter.GetValue()
		case m.Gauge != nil:
			v += m.Gauge.GetValue()
		case m.Untyped != nil:
			v += m.Untyped.GetValue()
		}
	}
	return v
}

// sumHistograms adds up the series of a histogram family that share the first series' bucket layout.
func sumHistograms(f *dto.MetricFamily) histogram {
	var out histogram
	for _, m := range f.GetMetric() {
		ph := m.GetHistogram()
		if ph == nil {
			continue
		}
		h := histogram{sum: ph.GetSampleSum()}
		for _, b := range ph.GetBucket() {
			h.bounds = append(h.bounds, b.GetUpperBound())
			h.cum = append(h.cum, float64(b.GetCumulativeCount()))
		}
		if len(h.bounds) == 0 || !math.IsInf(h.bounds[len(h.bounds)-1], 1) {
			// The text format lists the +Inf bucket; the protobuf one may leave it implicit.
			h.bounds = append(h.bounds, math.Inf(1))
			h.cum = append(h.cum, float64(ph.GetSampleCount()))
		}
		out.add(h)
	}
	return out
}

package results

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ServerMetricsFile holds etcd's own metrics as scraped from every member during a run: one ServerSample per
// member per scrape, in scrape order.
const ServerMetricsFile = "server_metrics.jsonl"

// Generator is the member name of the samples that describe chaosbench's own process and its machine.
const Generator = "chaosbench"

// ServerSample is one line of server_metrics.jsonl: what one member's /metrics said at offset T (seconds
// from the run's time base, as in timeseries.jsonl). Histogram figures (the _ms fields and their counts)
// cover the interval since the member's previous scrape; counters (_total) are cumulative since the first
// scrape, corrected for member restarts; gauges are the value at T. Samples with Member == Generator
// describe chaosbench's own process (CPU, memory) and the host's CPU instead.
type ServerSample struct {
	T      float64 `json:"t"`
	Member string  `json:"member"`
	Up     bool    `json:"up"`
	Error  string  `json:"error,omitempty"`

	WALFsyncCount      int64   `json:"wal_fsync_count,omitempty"`
	WALFsyncP50        float64 `json:"wal_fsync_p50_ms,omitempty"`
	WALFsyncP99        float64 `json:"wal_fsync_p99_ms,omitempty"`
	BackendCommitCount int64   `json:"backend_commit_count,omitempty"`
	BackendCommitP99   float64 `json:"backend_commit_p99_ms,omitempty"`
	ApplyCount         int64   `json:"apply_count,omitempty"`
	ApplyP99           float64 `json:"apply_p99_ms,omitempty"`
	PeerRTTP99         float64 `json:"peer_rtt_p99_ms,omitempty"`

	IsLeader           bool    `json:"is_leader,omitempty"`
	HasLeader          bool    `json:"has_leader,omitempty"`
	LeaderChanges      int64   `json:"leader_changes_total,omitempty"`
	ProposalsCommitted float64 `json:"proposals_committed,omitempty"`
	ProposalsApplied   float64 `json:"proposals_applied,omitempty"`
	ProposalsPending   float64 `json:"proposals_pending,omitempty"`
	ProposalsFailed    int64   `json:"proposals_failed_total,omitempty"`
	HeartbeatFailures  int64   `json:"heartbeat_send_failures_total,omitempty"`
	SlowApplies        int64   `json:"slow_applies_total,omitempty"`
	SlowReadIndexes    int64   `json:"slow_read_indexes_total,omitempty"`
	DBSizeBytes        float64 `json:"db_size_bytes,omitempty"`
	DBInUseBytes       float64 `json:"db_in_use_bytes,omitempty"`
	SlowWatchers       float64 `json:"slow_watchers,omitempty"`
	CPUPercent         float64 `json:"cpu_percent,omitempty"`
	RSSBytes           float64 `json:"rss_bytes,omitempty"`
	HostCPUBusyPercent float64 `json:"host_cpu_busy_percent,omitempty"`
	PeerSentFailures   int64   `json:"peer_sent_failures_total,omitempty"`
	ServerVersion      string  `json:"server_version,omitempty"`
	QuotaBackendBytes  float64 `json:"quota_backend_bytes,omitempty"`
}

// ReadServerSamples reads dir/server_metrics.jsonl; a run without one returns nil. A torn last line (a run
// killed mid-write) is ignored.
func ReadServerSamples(dir string) ([]ServerSample, error) {
	f, err := os.Open(filepath.Join(dir, ServerMetricsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read server metrics: %w", err)
	}
	defer f.Close()
	var out []ServerSample
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var s ServerSample
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			break
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// ServerMetrics summarises etcd's own metrics over the measured window (summary.json "server_metrics").
// Histogram percentiles are interpolated within Prometheus buckets, as histogram_quantile does, so they
// match what a Grafana dashboard of the same members shows.
type ServerMetrics struct {
	// IntervalSeconds is the scrape interval; Scrapes counts scrapes of all members, Failed those that
	// failed (a paused or killed member, a slow answer).
	IntervalSeconds float64 `json:"scrape_interval_s"`
	Scrapes         int     `json:"scrapes"`
	Failed          int     `json:"failed_scrapes"`
	// Cluster holds the worst member's figures: the member a threshold or a diagnosis is about.
	Cluster ClusterMetrics `json:"cluster"`
	// Members holds each member's figures, in member order.
	Members []MemberMetrics `json:"members"`
	// Generator is chaosbench's own process and its machine, sampled at the same instants.
	Generator *GeneratorMetrics `json:"generator,omitempty"`
}

// ClusterMetrics are the cluster-wide figures: the worst member for latencies and peaks, the largest count
// for leader changes (every member sees every change it survives).
type ClusterMetrics struct {
	WALFsync          Bucketed `json:"wal_fsync_ms"`
	WALFsyncMember    string   `json:"wal_fsync_member,omitempty"`
	BackendCommit     Bucketed `json:"backend_commit_ms"`
	BackendCommitBy   string   `json:"backend_commit_member,omitempty"`
	Apply             Bucketed `json:"apply_ms"`
	PeerRTT           Bucketed `json:"peer_rtt_ms"`
	LeaderChanges     int64    `json:"leader_changes"`
	ProposalsFailed   int64    `json:"proposals_failed"`
	ProposalsPending  float64  `json:"proposals_pending_max"`
	HeartbeatFailures int64    `json:"heartbeat_send_failures"`
	SlowApplies       int64    `json:"slow_applies"`
	SlowReadIndexes   int64    `json:"slow_read_indexes"`
	SlowWatchers      float64  `json:"slow_watchers_max"`
	DBSizeBytes       float64  `json:"db_size_bytes_max"`
	DBInUseBytes      float64  `json:"db_in_use_bytes_max"`
	QuotaBackendBytes float64  `json:"quota_backend_bytes,omitempty"`
}

// MemberMetrics are one member's figures over the measured window.
type MemberMetrics struct {
	Name    string `json:"name"`
	Scrapes int    `json:"scrapes"`
	Failed  int    `json:"failed_scrapes"`
	// Leader is true when the member was leader at any scrape of the measured window.
	Leader bool `json:"leader"`

	WALFsync      Bucketed `json:"wal_fsync_ms"`
	BackendCommit Bucketed `json:"backend_commit_ms"`
	Apply         Bucketed `json:"apply_ms"`
	PeerRTT       Bucketed `json:"peer_rtt_ms"`

	LeaderChanges      int64   `json:"leader_changes"`
	ProposalsCommitted float64 `json:"proposals_committed"`
	ProposalsApplied   float64 `json:"proposals_applied"`
	ProposalsFailed    int64   `json:"proposals_failed"`
	ProposalsPending   float64 `json:"proposals_pending_max"`
	HeartbeatFailures  int64   `json:"heartbeat_send_failures"`
	SlowApplies        int64   `json:"slow_applies"`
	SlowReadIndexes    int64   `json:"slow_read_indexes"`
	PeerSentFailures   int64   `json:"peer_sent_failures"`
	SlowWatchers       float64 `json:"slow_watchers_max"`
	DBSizeBytes        float64 `json:"db_size_bytes"`
	DBInUseBytes       float64 `json:"db_in_use_bytes"`
	CPUSeconds         float64 `json:"cpu_seconds"`
	CPUPercentMean     float64 `json:"cpu_percent_mean"`
	CPUPercentMax      float64 `json:"cpu_percent_max"`
	RSSBytesMax        float64 `json:"rss_bytes_max"`
	ServerVersion      string  `json:"server_version,omitempty"`
	// GoVersion is the Go release the member was built with; GoroutinesMax and MaxFDs are its process's;
	// QuotaBackendBytes its database quota. What an external cluster's members say of themselves.
	GoVersion         string  `json:"go_version,omitempty"`
	GoroutinesMax     float64 `json:"goroutines_max,omitempty"`
	MaxFDs            float64 `json:"max_fds,omitempty"`
	QuotaBackendBytes float64 `json:"quota_backend_bytes,omitempty"`
	// CPUThrottledPercent is, for a member under a CPU limit (docker --member-cpus), the share of CPU
	// periods in which the kernel throttled it, since its container started (nil: no limit, or unknown).
	CPUThrottledPercent *float64 `json:"cpu_throttled_percent,omitempty"`
}

// GeneratorMetrics describe chaosbench's own process and the machine it ran on, sampled with the members.
type GeneratorMetrics struct {
	CPUPercentMean     float64 `json:"cpu_percent_mean"`
	CPUPercentMax      float64 `json:"cpu_percent_max"`
	HostCPUBusyMean    float64 `json:"host_cpu_busy_percent_mean"`
	HostCPUBusyMax     float64 `json:"host_cpu_busy_percent_max"`
	HostCPUs           int     `json:"host_cpus"`
	RSSBytesMax        float64 `json:"rss_bytes_max"`
	SaturatedIntervals int     `json:"host_saturated_intervals"`
	Intervals          int     `json:"intervals"`
}

// Bucketed summarises a Prometheus histogram of durations, in milliseconds.
type Bucketed struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
}

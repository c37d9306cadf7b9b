package diskprobe

import (
	"fmt"
	"strings"
)

// etcd's hardware guidance (see ../shared/reference/anchors.md): the WAL's fdatasync p99 under 10 ms with at
// least 50 sequential synced writes per second; under heavy load 500 of them at 2 ms; bbolt commits under
// 25 ms at p99.
const (
	FsyncLimitMs      = 10.0
	HeavyFsyncLimitMs = 2.0
	MinIOPS           = 50.0
	HeavyIOPS         = 500.0
	CommitLimitMs     = 25.0
)

// Judgement is a probe's result held against etcd's guidance.
type Judgement struct {
	// Fit: WAL fdatasync p99 < 10 ms, at least 50 synced writes/s, bbolt commit p99 < 25 ms. A disk that
	// is not fit is too slow for any etcd cluster.
	Fit bool `json:"fit"`
	// Heavy: also the heavy-load bar, WAL fdatasync p99 < 2 ms with at least 500 synced writes/s.
	Heavy bool `json:"heavy"`
	// WALFsyncP99 is the worst WAL pattern's fdatasync p99 (ms), WALPattern that pattern.
	WALFsyncP99 float64 `json:"wal_fdatasync_p99_ms"`
	WALPattern  string  `json:"wal_pattern"`
	// IOPS is the lowest synced-write rate of the WAL patterns.
	IOPS float64 `json:"iops"`
	// CommitP99 is the bbolt pattern's commit p99 (ms).
	CommitP99 float64 `json:"commit_p99_ms"`
	// Unfit says why the disk is not fit, NotHeavy why it misses the heavy-load bar; each entry is a short
	// sentence with the measured figure and the limit.
	Unfit    []string `json:"unfit,omitempty"`
	NotHeavy []string `json:"not_heavy,omitempty"`
}

// Judge holds r against etcd's guidance.
func Judge(r *Result) Judgement {
	var j Judgement
	first := true
	for _, p := range r.Patterns {
		if !strings.HasPrefix(p.Name, "wal-") {
			continue
		}
		if first || p.Fdatasync.P99 > j.WALFsyncP99 {
			j.WALFsyncP99, j.WALPattern = p.Fdatasync.P99, p.Name
		}
		if first || p.IOPS < j.IOPS {
			j.IOPS = p.IOPS
		}
		first = false
	}
	if b, ok := r.Pattern("bbolt"); ok && b.Commit != nil {
		j.CommitP99 = b.Commit.P99
	}
	if first {
		j.Unfit = append(j.Unfit, "no WAL pattern was measured")
	}
	if j.WALFsyncP99 >= FsyncLimitMs {
		j.Unfit = append(j.Unfit, fmt.Sprintf("WAL fdatasync p99 %s >= %s (%s)", Ms(j.WALFsyncP99), Ms(FsyncLimitMs), j.WALPattern))
	}
	if j.IOPS < MinIOPS {
		j.Unfit = append(j.Unfit, fmt.Sprintf("%.0f synced sequential writes/s < %.0f", j.IOPS, MinIOPS))
	}
	if j.CommitP99 >= CommitLimitMs {
		j.Unfit = append(j.Unfit, fmt.Sprintf("bbolt commit p99 %s >= %s", Ms(j.CommitP99), Ms(CommitLimitMs)))
	}
	if j.WALFsyncP99 >= HeavyFsyncLimitMs {
		j.NotHeavy = append(j.NotHeavy, fmt.Sprintf("WAL fdatasync p99 %s >= %s (heavy-load bar)", Ms(j.WALFsyncP99), Ms(HeavyFsyncLimitMs)))
	}
	if j.IOPS < HeavyIOPS {
		j.NotHeavy = append(j.NotHeavy, fmt.Sprintf("%.0f synced sequential writes/s < %.0f (heavy-load bar)", j.IOPS, HeavyIOPS))
	}
	j.Fit = len(j.Unfit) == 0
	j.Heavy = j.Fit && len(j.NotHeavy) == 0
	return j
}

// Ms formats milliseconds with three significant digits: "0.412 ms", "14.2 ms", "251 ms".
func Ms(v float64) string {
	switch {
	case v < 1:
		return fmt.Sprintf("%.3f ms", v)
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 100:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

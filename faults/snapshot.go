package faults

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// A partition held until a snapshot (partition:follower=until-snapshot@20s+60s) keeps its targets cut off
// until the leader has taken a snapshot that compacted its raft log past the index the targets had
// reached when they were cut off: from then on the leader cannot send them the entries they miss, and
// healing makes it send a whole snapshot instead, the path where etcd bugs such as lost or resurrected
// keys after a snapshot have hidden. The targets' applied index and the leader's applied index, snapshot
// count and snapshots sent come from the members' own metrics.

// defaultCatchUpEntries is etcd's --snapshot-catchup-entries default: entries kept after a snapshot.
const defaultCatchUpEntries = 5000

// inFlightMargin bounds the entries a target may have received beyond the commit index it knew of when it
// was cut off (appends in flight; etcd's leader sends at most a few hundred ahead).
const inFlightMargin = 512

// snapshotWatch is what a partition held until a snapshot learned.
type snapshotWatch struct {
	compacted bool    // the leader compacted past the targets while they were cut off
	past      float64 // the index the targets may have reached when they were cut off
	// sentAt are the snapshots each member but the targets had sent when the leader compacted past the
	// targets: leadership may move before the heal (another fault), and the member leading then sends.
	sentAt map[string]float64
	sent   float64 // snapshots sent after the heal
	sender string  // the member that sent them
	leader string
	why    string // why the hold ended without a compaction past the targets
}

// holdUntilSnapshot holds the partition until the leader's log is compacted past the targets, or timeout.
func (f *Partition) holdUntilSnapshot(ctx context.Context, timeout time.Duration) {
	catchUp := float64(f.env.SnapshotCatchUpEntries)
	if catchUp <= 0 {
		catchUp = defaultCatchUpEntries
	}
	procs := processByName(f.env.Cluster)
	// The highest index a target knew committed when cut off, plus what may have been in flight to it:
	// its log can hold a little more than it knows committed.
	var behind float64
	for _, t := range f.targets {
		if p := procs[t.Name()]; p != nil {
			if v, err := scrape(ctx, p.MetricsURL(), "etcd_server_proposals_committed_total"); err == nil && v > behind {
				behind = v
			}
		}
	}
	behind += inFlightMargin
	deadline := time.Now().Add(timeout)
	snapsAtPast := -1.0 // the leader's snapshot count once its applied index was catchUp past the targets
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if l, err := f.env.Cluster.Leader(ctx); err == nil && !slices.ContainsFunc(f.targets, func(m clusters.Member) bool { return m.Name() == l.Name() }) {
			if p := procs[l.Name()]; p != nil {
				applied, aerr := scrape(ctx, p.MetricsURL(), "etcd_server_proposals_applied_total")
				snaps, serr := scrape(ctx, p.MetricsURL(), "etcd_debugging_snap_save_total_duration_seconds_count")
				if aerr == nil && serr == nil {
					if l.Name() != f.snap.leader {
						f.snap.leader, snapsAtPast = l.Name(), -1 // a new leader: start over
					}
					if snapsAtPast < 0 && applied-catchUp > behind {
						snapsAtPast = snaps
					}
					if snapsAtPast >= 0 && snaps > snapsAtPast {
						f.snap.compacted, f.snap.past = true, behind
						f.snap.sentAt = map[string]float64{}
						for name, q := range procs {
							if !slices.ContainsFunc(f.targets, func(m clusters.Member) bool { return m.Name() == name }) {
								f.snap.sentAt[name], _ = scrape(ctx, q.MetricsURL(), "etcd_network_snapshot_send_success")
							}
						}
						f.env.logf("fault %s: leader %s compacted its log past index %.0f (applied %.0f, %.0f entries kept): healing", f.name, l.Name(), behind, applied, catchUp)
						return
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			f.snap.why = "the run stopped first"
			return
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			f.snap.why = fmt.Sprintf("the leader did not compact its log %.0f entries past index %.0f within %s (lower --etcd-flag snapshot-count and snapshot-catchup-entries, or lengthen +for)", catchUp, behind, timeout.Round(time.Second))
			return
		}
	}
}

// awaitSnapshotSent waits, after the heal, for a member to send the targets a snapshot: the leader that
// compacted, or the one leading since (a fault on the leader meanwhile).
func (f *Partition) awaitSnapshotSent(ctx context.Context) {
	if !f.snap.compacted {
		return
	}
	procs := processByName(f.env.Cluster)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		for name, at := range f.snap.sentAt {
			p := procs[name]
			if p == nil || !p.Running() {
				continue
			}
			// A member restarted meanwhile counts from zero again: only a count above the one taken counts.
			if v, err := scrape(ctx, p.MetricsURL(), "etcd_network_snapshot_send_success"); err == nil && v > at {
				f.snap.sent, f.snap.sender = v-at, name
				f.env.logf("fault %s: %s sent %.0f snapshot(s) after the heal (etcd_network_snapshot_send_success)", f.name, name, f.snap.sent)
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// NotFired says why a partition held until a snapshot did not make the leader send one ("" when it did,
// and for every other partition).
func (f *Partition) NotFired() string {
	switch {
	case !f.p.untilSnapshot:
		return ""
	case !f.snap.compacted:
		return "no snapshot: " + f.snap.why
	case f.snap.sent == 0:
		return fmt.Sprintf("leader %s saved a snapshot past the partitioned members but no member sent them one within 30 s of the heal "+
			"(a leader does not compact its log for 30 s after it sent any snapshot, so they may have caught up from the log: start the partition later)", f.snap.leader)
	}
	return ""
}

// Effect is what a partition held until a snapshot achieved: the leader's compaction past the targets
// and the snapshots it sent after the heal (nil for every other partition).
func (f *Partition) Effect() *results.Effect {
	switch {
	case !f.p.untilSnapshot:
		return nil
	case !f.snap.compacted:
		return &results.Effect{Detail: "no snapshot: " + f.snap.why}
	}
	then := "then no member sent one after the heal"
	if f.snap.sender != "" {
		then = fmt.Sprintf("then %s sent %.0f snapshot(s) after the heal", f.snap.sender, f.snap.sent)
	}
	return &results.Effect{SnapshotsSent: int(f.snap.sent),
		Detail: fmt.Sprintf("leader %s compacted its log past index %.0f, %s", f.snap.leader, f.snap.past, then)}
}

// processByName returns the cluster's member processes by name.
func processByName(c clusters.Cluster) map[string]clusters.Process {
	out := map[string]clusters.Process{}
	for _, p := range clusters.Processes(c) {
		out[p.Name()] = p
	}
	return out
}

// scrape reads a member's /metrics and returns the sum of a metric's series (counters and gauges; the
// sample count of a histogram's _count).
func scrape(ctx context.Context, metricsURL, name string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	family := strings.TrimSuffix(name, "_count")
	var parser expfmt.TextParser
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("parse %s/metrics: %w", metricsURL, err)
	}
	mf, ok := mfs[family]
	if !ok {
		return 0, nil
	}
	var sum float64
	for _, m := range mf.GetMetric() {
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil && family != name:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, nil
}

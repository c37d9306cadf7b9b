package report

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// Limits the diagnosis judges by. The disk limits are etcd's hardware guidance; the apply limit is where
// etcd logs "apply request took too long"; the others are where a figure stops being noise.
const (
	fsyncLimitMs        = 10.0
	commitLimitMs       = 25.0
	applyLimitMs        = 100.0
	missedLimitPercent  = 1.0
	saturatedCPUPercent = 90.0
	quotaWarnFraction   = 0.5
	quotaProblemFrac    = 0.8
	throughputShortfall = 0.95
	defaultHeartbeatMs  = 100.0
	defaultElectionMs   = 1000.0
)

// Diagnose says, from the evidence of a run, why it was slow or unavailable: the disk, the leader, the
// network, the CPU, the generator itself, the watchers or the quota. Suspects the evidence clears are
// said to be cleared, so that a reader knows they were looked at. Findings are ordered most severe first.
func Diagnose(r *Run) []results.Finding {
	d := &diagnosis{r: r, s: r.Summary}
	d.run()
	d.disk()
	d.leader()
	d.network()
	d.cpuAndGenerator()
	d.throughput()
	d.errors()
	d.availability()
	d.proposalsAndApply()
	d.watchers()
	d.quota()
	d.consistency()
	sort.SliceStable(d.out, func(i, j int) bool { return severityRank(d.out[i].Severity) < severityRank(d.out[j].Severity) })
	return d.out
}

func severityRank(s string) int {
	switch s {
	case results.SeverityProblem:
		return 0
	case results.SeverityWarning:
		return 1
	}
	return 2
}

type diagnosis struct {
	r   *Run
	s   *results.Summary
	out []results.Finding
}

func (d *diagnosis) add(severity, topic, format string, args ...any) {
	d.out = append(d.out, results.Finding{Severity: severity, Topic: topic, Message: fmt.Sprintf(format, args...)})
}

func (d *diagnosis) server() *results.ServerMetrics {
	if d.s.Server == nil || len(d.s.Server.Members) == 0 {
		return nil
	}
	return d.s.Server
}

func (d *diagnosis) run() {
	if d.s.Incomplete {
		d.add(results.SeverityProblem, "run", "the run is incomplete: %s", d.s.IncompleteReason)
	}
	for _, e := range d.s.Errors {
		d.add(results.SeverityProblem, "run", "%s", e)
	}
	if d.server() == nil {
		d.add(results.SeverityWarning, "run", "no etcd metrics were scraped, so the disk, leader, network and CPU cannot be judged (scraping off, or every member's /metrics unreachable)")
		return
	}
	for _, m := range d.s.Server.Members {
		switch {
		case m.Failed > 0 && m.Failed == m.Scrapes:
			d.add(results.SeverityWarning, "run", "member %s never answered its /metrics, so its figures are missing from every judgement", m.Name)
		case m.Failed > 0 && len(d.r.Faults) == 0:
			d.add(results.SeverityWarning, "run", "member %s did not answer %d of %d metrics scrapes without any fault injected: it was stalled or overloaded", m.Name, m.Failed, m.Scrapes)
		}
	}
}

// measuredSpan is the measured load in seconds from the time base.
func (d *diagnosis) measuredSpan() (from, to float64) {
	from, to, ok := measuredWindow(d.r.Series)
	if !ok {
		return 0, math.Inf(1)
	}
	return from, to
}

// inFault reports which fault window, widened by slack seconds after its end, overlaps (from, to]; of
// several, the one that began last, since an effect follows its most recent cause.
func (d *diagnosis) inFault(from, to, slack float64) (string, bool) {
	best, bestStart := "", math.Inf(-1)
	for _, f := range d.r.Faults {
		s, e := float64(f.StartNs)/1e9, float64(f.EndNs)/1e9+slack
		if e < s {
			e = math.Inf(1)
		}
		if to >= s && from <= e && s > bestStart {
			best, bestStart = faultLabel(f), s
		}
	}
	return best, best != ""
}

// slowIntervals counts a member's measured samples whose interval value exceeds limit, and how many of
// those fall in fault windows.
func (d *diagnosis) slowIntervals(member string, value func(results.ServerSample) (float64, bool), limit float64) (slow, total, inFaults int, faults []string) {
	from, to := d.measuredSpan()
	prevT := math.NaN()
	seen := map[string]bool{}
	for _, s := range d.r.Samples {
		if s.Member != member || !s.Up {
			continue
		}
		start := prevT
		prevT = s.T
		if s.T < from || s.T > to+1 || math.IsNaN(start) {
			continue
		}
		v, ok := value(s)
		if !ok {
			continue
		}
		total++
		if v > limit {
			slow++
			if f, ok := d.inFault(start, s.T, 0); ok {
				inFaults++
				if !seen[f] {
					seen[f] = true
					faults = append(faults, f)
				}
			}
		}
	}
	return slow, total, inFaults, faults
}

func (d *diagnosis) disk() {
	sv := d.server()
	if sv == nil {
		return
	}
	c := sv.Cluster
	fs := ""
	if d.s.Environment != nil && d.s.Environment.RunDirFS != "" && d.s.Cluster.Backend == "embed" {
		fs = " (" + d.s.Environment.RunDirFS + ")"
	}
	judge := func(name, what string, b results.Bucketed, member string, limit float64, value func(results.ServerSample) (float64, bool), of func(results.MemberMetrics) results.Bucketed) bool {
		if b.Count == 0 {
			return true
		}
		if b.P99 <= limit {
			return true
		}
		msg := fmt.Sprintf("%s p99 %s on %s > %s (etcd's hardware guidance): the disk%s is too slow for etcd; %s",
			name, fmtMs(b.P99), member, fmtMs(limit), fs, what)
		var others []string
		for _, m := range sv.Members {
			if o := of(m); m.Name != member && o.Count > 0 {
				others = append(others, fmt.Sprintf("%s %s", m.Name, fmtMs(o.P99)))
			}
		}
		if len(others) > 0 {
			msg += " (other members: " + strings.Join(others, ", ") + ")"
		}
		if slow, total, inFaults, faults := d.slowIntervals(member, value, limit); total > 0 {
			msg += fmt.Sprintf("; above the limit in %d of %d seconds", slow, total)
			if slow > 0 && inFaults == slow {
				msg += fmt.Sprintf(", all during fault windows (%s)", strings.Join(faults, ", "))
			} else if inFaults > 0 {
				msg += fmt.Sprintf(", %d during fault windows (%s)", inFaults, strings.Join(faults, ", "))
			}
		}
		if d.machineSaturated() {
			msg += "; the machine's CPU was saturated too, which also delays etcd's fsync calls: rerun on an idle machine to tell the two apart"
		}
		d.add(results.SeverityProblem, "disk", "%s", msg)
		return false
	}
	fsyncOK := judge("WAL fsync", "every write waits for this fsync before etcd acknowledges it", c.WALFsync, c.WALFsyncMember, fsyncLimitMs,
		func(s results.ServerSample) (float64, bool) { return s.WALFsyncP99, s.WALFsyncCount > 0 },
		func(m results.MemberMetrics) results.Bucketed { return m.WALFsync })
	commitOK := judge("backend commit", "bbolt commits stall applies and reads", c.BackendCommit, c.BackendCommitBy, commitLimitMs,
		func(s results.ServerSample) (float64, bool) { return s.BackendCommitP99, s.BackendCommitCount > 0 },
		func(m results.MemberMetrics) results.Bucketed { return m.BackendCommit })
	if fsyncOK && commitOK && c.WALFsync.Count > 0 {
		d.add(results.SeverityOK, "disk", "disk%s is fast enough: WAL fsync p99 %s (guidance < 10ms), backend commit p99 %s (< 25ms), worst member",
			fs, fmtMs(c.WALFsync.P99), fmtMs(c.BackendCommit.P99))
	}
	if fs == " (tmpfs)" || fs == " (ramfs)" {
		d.add(results.SeverityWarning, "disk", "members kept their data on %s: memory, not a disk, so disk figures say nothing about production hardware", strings.Trim(fs, " ()"))
	}
}

// etcdFlagMs returns an etcd flag of the run in milliseconds, or def.
func (d *diagnosis) etcdFlagMs(name string, def float64) float64 {
	for _, f := range d.s.Cluster.EtcdFlags {
		k, v, ok := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if ok && k == name {
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				return n
			}
		}
	}
	return def
}

func (d *diagnosis) leader() {
	sv := d.server()
	if sv == nil {
		return
	}
	n := sv.Cluster.LeaderChanges
	measured := d.s.MeasuredSeconds
	if n == 0 {
		d.add(results.SeverityOK, "leader", "the leader did not change during the measured %s", fmtSeconds(measured))
		return
	}
	// Locate the changes in time with the member that saw the most.
	who := ""
	for _, m := range sv.Members {
		if m.LeaderChanges == n {
			who = m.Name
			break
		}
	}
	from, to := d.measuredSpan()
	election := d.etcdFlagMs("election-timeout", defaultElectionMs) / 1000
	var prev *results.ServerSample
	inFaults, outside := 0, 0
	faultNames := map[string]bool{}
	for i := range d.r.Samples {
		s := &d.r.Samples[i]
		if s.Member != who || !s.Up {
			continue
		}
		if prev != nil && s.T >= from && s.T <= to+1 && s.LeaderChanges > prev.LeaderChanges {
			k := int(s.LeaderChanges - prev.LeaderChanges)
			if f, ok := d.inFault(prev.T, s.T, election+1); ok {
				inFaults += k
				faultNames[f] = true
			} else {
				outside += k
			}
		}
		prev = s
	}
	msg := fmt.Sprintf("the leader changed %d times in %s", n, fmtSeconds(measured))
	if n == 1 {
		msg = fmt.Sprintf("the leader changed once in %s", fmtSeconds(measured))
	}
	severity := results.SeverityProblem
	switch {
	case len(d.r.Faults) > 0 && outside == 0 && inFaults > 0:
		msg += fmt.Sprintf(", all during or just after fault windows (%s): expected", strings.Join(sortedKeys(faultNames), ", "))
		severity = results.SeverityWarning
	case inFaults > 0:
		msg += fmt.Sprintf(": %d during fault windows (%s), %d without a fault", inFaults, strings.Join(sortedKeys(faultNames), ", "), outside)
	}
	if severity == results.SeverityProblem {
		msg += "; elections without a fault mean followers missed heartbeats for an election timeout: a slow disk, a saturated CPU or a slow network"
	}
	if sv.Cluster.HeartbeatFailures > 0 {
		msg += fmt.Sprintf("; the leader failed to send %d heartbeats in time (etcd: likely overloaded from a slow disk)", sv.Cluster.HeartbeatFailures)
	}
	d.add(severity, "leader", "%s", msg)
}

func (d *diagnosis) network() {
	sv := d.server()
	if sv == nil || sv.Cluster.PeerRTT.Count == 0 {
		return
	}
	heartbeat := d.etcdFlagMs("heartbeat-interval", defaultHeartbeatMs)
	rtt := sv.Cluster.PeerRTT.P99
	if rtt > heartbeat/2 {
		d.add(results.SeverityProblem, "network", "peer round-trip p99 %s is more than half the %s heartbeat interval: the network between members is too slow for these timeouts (etcd tuning: heartbeat ≈ round trip, election timeout ≥ 10× round trip)",
			fmtMs(rtt), fmtMs(heartbeat))
		return
	}
	d.add(results.SeverityOK, "network", "network between members is fast: peer round-trip p99 %s (heartbeat %s)", fmtMs(rtt), fmtMs(heartbeat))
}

// machineSaturated reports whether the machine's CPU was saturated for most of the measured window.
func (d *diagnosis) machineSaturated() bool {
	if d.s.Server == nil || d.s.Server.Generator == nil || d.s.Server.Generator.Intervals == 0 {
		return false
	}
	g := d.s.Server.Generator
	return g.HostCPUBusyMean >= saturatedCPUPercent || float64(g.SaturatedIntervals)/float64(g.Intervals) >= 0.5
}

func (d *diagnosis) cpuAndGenerator() {
	sched := d.s.Schedule
	var gen *results.GeneratorMetrics
	if sv := d.server(); sv != nil {
		gen = sv.Generator
	} else if d.s.Server != nil {
		gen = d.s.Server.Generator
	}
	saturated := d.machineSaturated()
	if gen != nil && gen.Intervals > 0 {
		if saturated {
			d.add(results.SeverityProblem, "cpu", "the machine's CPU was saturated: %.0f%% busy on average over %d cores, ≥ %.0f%% in %d of %d seconds; etcd and the generator competed for it, so latencies measure the machine as much as etcd",
				gen.HostCPUBusyMean, gen.HostCPUs, saturatedCPUPercent, gen.SaturatedIntervals, gen.Intervals)
		} else {
			d.add(results.SeverityOK, "cpu", "CPU had headroom: the machine was %.0f%% busy on average (peak %.0f%%) over %d cores", gen.HostCPUBusyMean, gen.HostCPUBusyMax, gen.HostCPUs)
		}
		if sv := d.server(); sv != nil {
			for _, m := range sv.Members {
				if m.CPUPercentMean >= 0.8*100*float64(gen.HostCPUs) {
					d.add(results.SeverityProblem, "cpu", "member %s used %.0f%% CPU on average, most of the machine's %d cores", m.Name, m.CPUPercentMean, gen.HostCPUs)
				}
			}
		}
	}
	if sched.Mode != "open" || d.s.Total.Count == 0 {
		return
	}
	missed := sched.MissedBacklog + sched.MissedLag
	if sched.MissedPercent <= missedLimitPercent {
		d.add(results.SeverityOK, "generator", "the generator kept its schedule: %.2f%% of requests started late", sched.MissedPercent)
		return
	}
	if sched.MissedLag >= sched.MissedBacklog {
		msg := fmt.Sprintf("the generator missed %.1f%% of its schedule with clients free (generator lag)", sched.MissedPercent)
		switch {
		case gen != nil && gen.Intervals > 0 && gen.HostCPUBusyMean >= 85 && gen.CPUPercentMean < 0.5*gen.HostCPUBusyMean*float64(gen.HostCPUs):
			msg += fmt.Sprintf(": it was starved of CPU, the machine being %.0f%% busy with other work (chaosbench itself used %.0f%% of a core)", gen.HostCPUBusyMean, gen.CPUPercentMean)
		case gen != nil && gen.Intervals > 0:
			msg += fmt.Sprintf(": its own CPU could not keep up (chaosbench used %.0f%% of a core, the machine was %.0f%% busy)", gen.CPUPercentMean, gen.HostCPUBusyMean)
		case saturated:
			msg += ": the machine's CPU was saturated"
		}
		severity := results.SeverityWarning
		if sched.MissedPercent > 5 {
			severity = results.SeverityProblem
			msg += "; latency figures are unreliable: run the generator on another machine, or lower --rate"
		} else {
			msg += "; response times include these delays"
		}
		d.add(severity, "generator", "%s", msg)
		return
	}
	msg := fmt.Sprintf("%.1f%% of requests started late because every client was busy (%d of %d)", sched.MissedPercent, missed, results.Requests(d.s.Operations))
	var meanService float64
	for _, op := range d.s.Operations {
		meanService += op.Service.Mean * float64(op.Count)
	}
	meanService /= float64(d.s.Total.Count)
	if d.s.Kube != nil {
		// The kube workload's streams have as many clients as the cluster they emulate: when they are all
		// busy, the cluster is too slow for that cluster's traffic.
		msg += ": the cluster could not keep up with the emulated Kubernetes cluster's traffic (response times include the wait)"
	} else if need := sched.TargetRate * meanService / 1000; need > float64(sched.Clients) {
		msg += fmt.Sprintf(": at %.0f ops/s and %s mean service time the schedule needs about %.0f clients in flight, more than --clients %d; raise --clients, or the cluster cannot sustain this rate",
			sched.TargetRate, fmtMs(meanService), math.Ceil(need), sched.Clients)
	} else {
		msg += ": the cluster stalled at times (response times include the wait)"
	}
	d.add(results.SeverityWarning, "generator", "%s", msg)
}

func (d *diagnosis) throughput() {
	sched := d.s.Schedule
	if sched.Mode != "open" || sched.TargetRate <= 0 || d.s.Total.Count == 0 {
		return
	}
	// The target is a rate of requests; watch events do not make up for missing ones.
	got, _ := results.Rates(d.s.Operations)
	if got < throughputShortfall*sched.TargetRate {
		d.add(results.SeverityProblem, "load", "throughput %.1f requests/s is %.0f%% of the %.0f requests/s target", got, 100*got/sched.TargetRate, sched.TargetRate)
	}
}

// errorExplanations says what each error class usually means.
func errorExplanation(class string) string {
	switch class {
	case "deadline":
		return "requests timed out (--request-timeout)"
	case "no_leader":
		return "the cluster had no leader (an election was going on)"
	case "leader_changed":
		return "the leader changed while requests were in flight"
	case "server_timeout":
		return "etcd gave up waiting for consensus (lost quorum or a very slow disk)"
	case "stopped":
		return "a member was stopping"
	case "unavailable":
		return "members could not be reached"
	case "too_many_requests":
		return "etcd refused requests: too many proposals pending (apply fell behind commit)"
	case "no_space":
		return "the database reached its quota (NOSPACE alarm): writes are refused until it is compacted and defragmented"
	case "too_large":
		return "requests exceeded etcd's request size limit"
	case "compacted":
		return "reads or watches asked for compacted revisions"
	}
	return "see client.log"
}

func (d *diagnosis) errors() {
	t := d.s.Total
	if t.Errors == 0 {
		return
	}
	byClass := map[string]int64{}
	for _, op := range d.s.Operations {
		for c, n := range op.ErrorsByClass {
			byClass[c] += n
		}
	}
	classes := sortedKeys(byClass)
	sort.SliceStable(classes, func(i, j int) bool { return byClass[classes[i]] > byClass[classes[j]] })
	var parts []string
	for _, c := range classes {
		parts = append(parts, fmt.Sprintf("%d %s: %s", byClass[c], c, errorExplanation(c)))
	}
	msg := fmt.Sprintf("%d of %d operations failed (%.3g%%)", t.Errors, t.Count, 100*float64(t.Errors)/float64(t.Count))
	if len(parts) > 0 {
		msg += ": " + strings.Join(parts, "; ")
	}
	severity := results.SeverityProblem
	if len(d.r.Faults) > 0 {
		severity = results.SeverityWarning
		msg += " (the run injected faults)"
	}
	d.add(severity, "errors", "%s", msg)
}

func (d *diagnosis) availability() {
	for _, g := range d.r.Gaps {
		for _, c := range []struct {
			kind string
			gap  *ClassGap
		}{{"write", g.Writes}, {"read", g.Reads}} {
			if c.gap == nil {
				continue
			}
			if g.Index < 0 {
				if c.gap.Seconds >= 1 {
					d.add(results.SeverityProblem, "availability", "no %s succeeded for %s (from %s to %s) without any fault injected", c.kind, fmtSeconds(c.gap.Seconds), fmtSeconds(c.gap.Start), fmtSeconds(c.gap.End))
				}
				continue
			}
			if !c.gap.Recovered {
				d.add(results.SeverityProblem, "availability", "after %s no %s succeeded for %s, until the fault's observation ended", g.Fault, c.kind, fmtSeconds(c.gap.Seconds))
				continue
			}
			if c.gap.Seconds >= 1 {
				d.add(results.SeverityWarning, "availability", "%s: no %s succeeded for %s (%d of %d requests in the window failed)", g.Fault, c.kind, fmtSeconds(c.gap.Seconds), g.Errors, g.Requests)
			}
		}
	}
}

// gapKind names the class a gap's headline figures belong to: "write" or "read".
func gapKind(g Gap) string { return strings.TrimSuffix(g.Kind, "s") }

func (d *diagnosis) proposalsAndApply() {
	sv := d.server()
	if sv == nil {
		return
	}
	c := sv.Cluster
	if c.ProposalsFailed > 0 {
		d.add(results.SeverityWarning, "leader", "%s failed (usually dropped during leader elections; clients see them as errors or retries)", plural(c.ProposalsFailed, "proposal"))
	}
	if c.Apply.Count > 0 && c.Apply.P99 > applyLimitMs {
		d.add(results.SeverityProblem, "apply", "apply p99 %s > %s (etcd logs \"apply request took too long\"): expensive requests (large ranges, big transactions) or a slow backend", fmtMs(c.Apply.P99), fmtMs(applyLimitMs))
	} else if c.SlowApplies > 0 {
		d.add(results.SeverityWarning, "apply", "etcd counted %s (over 100ms)", plural(c.SlowApplies, "slow apply"))
	}
	if c.SlowReadIndexes > 0 {
		d.add(results.SeverityWarning, "leader", "%d linearizable reads waited too long for the leader's read index (slow or overloaded leader)", c.SlowReadIndexes)
	}
}

func (d *diagnosis) watchers() {
	sv := d.server()
	if sv == nil || sv.Cluster.SlowWatchers == 0 {
		return
	}
	d.add(results.SeverityWarning, "watch", "up to %.0f watchers were slow (unsynced): they fell behind the event stream, so their events arrive late; watch consumers are too slow or too many events are produced", sv.Cluster.SlowWatchers)
}

func (d *diagnosis) quota() {
	sv := d.server()
	if sv == nil || sv.Cluster.QuotaBackendBytes == 0 || sv.Cluster.DBSizeBytes == 0 {
		return
	}
	frac := sv.Cluster.DBSizeBytes / sv.Cluster.QuotaBackendBytes
	msg := fmt.Sprintf("the database reached %s of its %s quota (%.0f%%)", fmtBytes(sv.Cluster.DBSizeBytes), fmtBytes(sv.Cluster.QuotaBackendBytes), 100*frac)
	if inUse := sv.Cluster.DBInUseBytes; inUse > 0 && inUse < 0.5*sv.Cluster.DBSizeBytes {
		msg += fmt.Sprintf("; only %s is in use: defragment to return the rest", fmtBytes(inUse))
	}
	switch {
	case frac >= quotaProblemFrac:
		d.add(results.SeverityProblem, "quota", "%s: writes fail with NOSPACE when it is full", msg)
	case frac >= quotaWarnFraction:
		d.add(results.SeverityWarning, "quota", "%s", msg)
	}
}

func (d *diagnosis) consistency() {
	for _, c := range d.s.Checks {
		switch c.Verdict {
		case results.VerdictViolation:
			d.add(results.SeverityProblem, "consistency", "%s found a violation: %s", c.Name, c.Detail)
		case results.VerdictUnknown:
			d.add(results.SeverityWarning, "consistency", "%s could not decide (unknown is not a pass): %s", c.Name, c.Detail)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func fmtSeconds(s float64) string {
	switch {
	case s < 10:
		return strconv.FormatFloat(math.Round(s*100)/100, 'f', -1, 64) + " s"
	case s < 120:
		return strconv.FormatFloat(math.Round(s*10)/10, 'f', -1, 64) + " s"
	}
	return fmt.Sprintf("%.0f s", s)
}

func fmtBytes(b float64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", b/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.0f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

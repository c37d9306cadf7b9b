package chaosbench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/etcd-chaosbench/chaosbench/clusters/diskprobe"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/workloads"
)

// Verdicts of a step of the ladder. Undecided is never a pass nor a fail of the hardware: the generator or
// the harness could not do what the step needed.
const (
	StepPass      = "pass"
	StepFail      = "fail"
	StepUndecided = "undecided"
)

// cpuLimitShare is the share of its container's CPU limit a member's mean use must reach to count as held
// by it: the quota is enforced in bursts, so a member at 60% on average spent part of the time throttled.
const cpuLimitShare = 0.6

// throttledShare is the share of CPU periods (percent) in which a member container may be throttled by its
// CPU limit before the limit, not the disk its delayed fsyncs point at, is named the resource that gave
// out: the kernel's own count of the periods the member wanted more CPU than its quota.
const throttledShare = 10.0

// throughputFloor is the fraction of the planned request rate a class must sustain.
const throughputFloor = 0.9

// generatorLagLimit is the percentage of requests that may start late with clients free (the generator's
// own lag) before a step says nothing about the hardware.
const generatorLagLimit = 1.0

// Qualification is the result of `chaosbench qualify` (qualification.json; results/SCHEMA.md).
type Qualification struct {
	Schema string `json:"schema"`
	// Verdict is the answer in one line; Outcome decides the exit code.
	Verdict string          `json:"verdict"`
	Outcome outcome.Outcome `json:"outcome"`
	// Requested is the class asked for, or "auto"; Qualified the largest class that passed ("" for none).
	Requested string           `json:"requested"`
	Qualified string           `json:"qualified_class"`
	ExitCode  int              `json:"exit_code"`
	Seed      int64            `json:"seed"`
	Start     time.Time        `json:"start"`
	End       time.Time        `json:"end"`
	Cluster   QualifiedCluster `json:"cluster"`
	// StepSeconds and WarmupSeconds are each step's measured load and the warm-up before it.
	StepSeconds   float64            `json:"step_s"`
	WarmupSeconds float64            `json:"warmup_s"`
	Disk          *DiskQualification `json:"disk,omitempty"`
	// MemberDisks are the disk probes of an external cluster's member hosts (--disk-result); Disk is the
	// worst of them.
	MemberDisks []HostDisk   `json:"member_disks,omitempty"`
	Network     *Network     `json:"network,omitempty"`
	Steps       []Step       `json:"steps"`
	Compat      []CompatStep `json:"etcdctl_compat,omitempty"`
	// Faults is the --with-faults step at the highest passing class.
	Faults *FaultStep `json:"faults,omitempty"`
}

// QualifiedCluster is the cluster the qualification ran on.
type QualifiedCluster struct {
	Backend      string   `json:"backend"`
	Members      int      `json:"members,omitempty"`
	EtcdFlags    []string `json:"etcd_flags,omitempty"`
	Endpoints    []string `json:"endpoints,omitempty"`
	MemberCPUs   float64  `json:"member_cpus,omitempty"`
	MemberMemory string   `json:"member_memory,omitempty"`
	DataRoot     string   `json:"data_root,omitempty"`
}

// Step is one class of the load ladder, judged.
type Step struct {
	Class string `json:"class"`
	Nodes int    `json:"nodes"`
	// Dir is the step's run directory, relative to the qualification directory.
	Dir     string `json:"dir"`
	Verdict string `json:"verdict"`
	// Reasons say why the step failed or is undecided, one line each.
	Reasons []string `json:"reasons,omitempty"`
	// Resource is what gave out in a failed step (disk, cpu, network, memory, consistency, unattributed),
	// or why an undecided step could not decide (generator, harness); Evidence are the diagnosis's findings
	// behind it, and Context the figures that clear the other suspects.
	Resource string   `json:"resource,omitempty"`
	Evidence []string `json:"evidence,omitempty"`
	Context  string   `json:"context,omitempty"`
	// RunOutcome is the step's own run outcome (summary.json).
	RunOutcome outcome.Kind `json:"run_outcome"`
	// Figures, over the measured window: requests/s planned and achieved, the worst Kubernetes SLO p99 per
	// API call class, etcd's disk histograms (worst member), leader changes, CPU.
	PlannedRate   float64 `json:"planned_requests_per_s"`
	Throughput    float64 `json:"requests_per_s"`
	MutatingP99   float64 `json:"mutating_p99_ms"`
	GetP99        float64 `json:"get_p99_ms"`
	ListP99       float64 `json:"list_p99_ms"`
	WALFsyncP99   float64 `json:"wal_fsync_p99_ms"`
	CommitP99     float64 `json:"backend_commit_p99_ms"`
	PeerRTTP99    float64 `json:"peer_rtt_p99_ms"`
	LeaderChanges int64   `json:"leader_changes"`
	MemberCPUMax  float64 `json:"member_cpu_percent_max"`
	// MemberThrottledMax is the highest share of CPU periods (percent) a member container was throttled
	// in by --member-cpus (0: no limit).
	MemberThrottledMax float64 `json:"member_cpu_throttled_percent_max,omitempty"`
	HostCPUBusy        float64 `json:"host_cpu_busy_percent_mean"`
	MissedLagPct       float64 `json:"missed_lag_percent"`
	MissedBacklgPct    float64 `json:"missed_backlog_percent"`
	// Peers is each member's peer round-trip p99 (ms), for the network judgement.
	Peers map[string]float64 `json:"peer_rtt_p99_ms_by_member,omitempty"`
	// ClientRTT is the round trip to each member's client port, measured before the load.
	ClientRTT []ClientRTT `json:"client_rtt,omitempty"`
}

// line is the step's result in one line.
func (st *Step) line() string {
	switch st.Verdict {
	case StepPass:
		return fmt.Sprintf("pass: %.0f of %.0f requests/s, WAL fsync p99 %s, mutating p99 %s", st.Throughput, st.PlannedRate, diskprobe.Ms(st.WALFsyncP99), diskprobe.Ms(st.MutatingP99))
	case StepFail:
		return fmt.Sprintf("FAIL (%s): %s", st.Resource, strings.Join(st.Reasons, "; "))
	}
	return fmt.Sprintf("UNDECIDED (%s): %s", st.Resource, strings.Join(st.Reasons, "; "))
}

// judgeStep decides a step from its run's summary (and the disk probe, when there was one). The run's own
// outcome comes first: a harness error or an undecided check leaves the step undecided, a consistency
// violation fails it; then the generator's schedule (its own lag makes the step undecided); then the
// thresholds, the throughput and the disk probe.
func judgeStep(class string, s *results.Summary, disk *DiskQualification) *Step {
	st := &Step{Class: class, Nodes: classNodes(class), PlannedRate: s.Schedule.TargetRate}
	o := s.Verdict()
	st.RunOutcome = o.Kind
	if s.MeasuredSeconds > 0 {
		st.Throughput = float64(results.Requests(s.Operations)) / s.MeasuredSeconds
	}
	if s.Kube != nil {
		for _, slo := range s.Kube.SLO {
			p := map[string]*float64{"mutating": &st.MutatingP99, "get": &st.GetP99, "list": &st.ListP99}[slo.Class]
			if p != nil && slo.P99MS > *p {
				*p = slo.P99MS
			}
		}
	}
	if sv := s.Server; sv != nil {
		c := sv.Cluster
		st.WALFsyncP99, st.CommitP99, st.PeerRTTP99, st.LeaderChanges = c.WALFsync.P99, c.BackendCommit.P99, c.PeerRTT.P99, c.LeaderChanges
		for _, m := range sv.Members {
			st.MemberCPUMax = max(st.MemberCPUMax, m.CPUPercentMean)
			if m.CPUThrottledPercent != nil {
				st.MemberThrottledMax = max(st.MemberThrottledMax, *m.CPUThrottledPercent)
			}
			if m.PeerRTT.Count > 0 {
				if st.Peers == nil {
					st.Peers = map[string]float64{}
				}
				st.Peers[m.Name] = m.PeerRTT.P99
			}
		}
		if sv.Generator != nil {
			st.HostCPUBusy = sv.Generator.HostCPUBusyMean
		}
	}
	if n := s.Total.Count; n > 0 {
		st.MissedLagPct = 100 * float64(s.Schedule.MissedLag) / float64(n)
		st.MissedBacklgPct = 100 * float64(s.Schedule.MissedBacklog) / float64(n)
	}
	st.Context = stepContext(st, s.Cluster.MemberCPUs)

	if o.Kind == outcome.Violation {
		st.Verdict, st.Resource = StepFail, "consistency"
		st.Reasons = o.Texts(outcome.Violation)
		return st
	}
	if ev := quotaExhausted(s, o); len(ev) > 0 {
		// The cluster refused the class's data: that decides the step whatever else happened in it. Its
		// quota, not the harness, ended a step that stopped; and a generator that fell behind delays
		// requests, it does not fill the database.
		st.Verdict, st.Resource, st.Evidence = StepFail, "memory", ev
		st.Reasons = []string{"the database reached its quota (NOSPACE): the cluster cannot hold this class's data"}
		return st
	}
	switch o.Kind {
	case outcome.Undecided, outcome.HarnessError, outcome.Incomplete:
		st.Verdict, st.Resource = StepUndecided, "harness"
		st.Reasons = o.Texts(outcome.Undecided, outcome.HarnessError, outcome.Incomplete)
		return st
	}
	if st.MissedLagPct > generatorLagLimit {
		st.Verdict, st.Resource = StepUndecided, "generator"
		st.Reasons = []string{fmt.Sprintf("the generator could not keep its schedule: %.1f%% of requests started late with clients free (generator lag), so the step measured the generator, not the hardware", st.MissedLagPct)}
		st.Evidence = findings(s, "generator", "cpu")
		return st
	}
	for _, t := range s.Thresholds {
		if t.Verdict != results.ThresholdFail {
			continue
		}
		text := t.Detail
		if text == "" || t.Set == "" {
			text = fmt.Sprintf("%s: observed %s", t.Expr, t.Observed)
			if t.Subject != "" {
				text += " (" + t.Subject + ")"
			}
		}
		st.Reasons = append(st.Reasons, text)
	}
	if st.PlannedRate > 0 && st.Throughput < throughputFloor*st.PlannedRate {
		st.Reasons = append(st.Reasons, fmt.Sprintf("throughput %.0f requests/s < %.0f%% of the planned %.0f", st.Throughput, 100*throughputFloor, st.PlannedRate))
	}
	diskBars := disk != nil && !disk.allows(class)
	if diskBars {
		st.Reasons = append(st.Reasons, "disk probe: "+disk.why(class))
	}
	if len(st.Reasons) == 0 {
		st.Verdict = StepPass
		return st
	}
	st.Verdict = StepFail
	st.Resource, st.Evidence = attribute(s, diskBars)
	return st
}

// attribute names the resource that gave out in a failed step, from the run's diagnosis (results/report's
// Diagnose): its problem findings about the disk, the CPU, the network or the quota, in that order, or the
// members' CPU and memory against their container limits. The disk probe's failure counts for the disk.
func attribute(s *results.Summary, diskBars bool) (string, []string) {
	// A container's CPU limit is not the machine's: the diagnosis judges members against the machine's
	// cores, so a member held near its own limit is found here, and first: the kernel throttles a member at
	// its quota in bursts, which delays its fsync calls too, so its slow disk figures follow from the CPU.
	if lim := s.Cluster.MemberCPUs; lim > 0 && s.Server != nil {
		for _, m := range s.Server.Members {
			if th := m.CPUThrottledPercent; th != nil && *th >= throttledShare {
				ev := []string{fmt.Sprintf("member %s was CPU-throttled in %.0f%% of the kernel's scheduling periods by its limit of %g cores (--member-cpus), using %.0f%% of a core on average", m.Name, *th, lim, m.CPUPercentMean)}
				if d := problems(s, "disk"); len(d) > 0 {
					ev = append(ev, "a throttled member's fsync calls wait for CPU too: "+d[0])
				}
				return "cpu", ev
			}
			if m.CPUPercentMean >= cpuLimitShare*100*lim {
				ev := []string{fmt.Sprintf("member %s used %.0f%% of a core on average, %.0f%% of its limit of %g cores (--member-cpus): it was throttled", m.Name, m.CPUPercentMean, m.CPUPercentMean/lim, lim)}
				if d := problems(s, "disk"); len(d) > 0 {
					ev = append(ev, "a throttled member's fsync calls wait for CPU too: "+d[0])
				}
				return "cpu", ev
			}
		}
	}
	for _, r := range []struct{ topic, resource string }{{"disk", "disk"}, {"cpu", "cpu"}, {"network", "network"}, {"quota", "memory"}} {
		if f := problems(s, r.topic); len(f) > 0 {
			return r.resource, f
		}
	}
	if lim := s.Cluster.MemberMemoryBytes; lim > 0 && s.Server != nil {
		for _, m := range s.Server.Members {
			if m.RSSBytesMax >= 0.9*float64(lim) {
				return "memory", []string{fmt.Sprintf("member %s reached %.0f MiB resident of its %.0f MiB limit", m.Name, m.RSSBytesMax/(1<<20), float64(lim)/(1<<20))}
			}
		}
	}
	if diskBars {
		return "disk", nil
	}
	return "unattributed", problems(s, "")
}

// quotaExhausted returns the evidence that a step ended because the database reached its quota: etcd's
// NOSPACE error stopped the load (the preload of a class too big for --quota-backend-bytes) or failed its
// requests, with the database size against the quota where the metrics have them; nil when it did not.
func quotaExhausted(s *results.Summary, o outcome.Outcome) []string {
	var ev []string
	for _, text := range o.Texts() {
		if strings.Contains(text, rpctypes.ErrNoSpace.Error()) {
			ev = append(ev, text)
		}
	}
	var refused int64
	for _, op := range s.Operations {
		refused += op.ErrorsByClass[workloads.ErrNoSpace]
	}
	if refused > 0 {
		ev = append(ev, fmt.Sprintf("%d requests failed with NOSPACE (database space exceeded)", refused))
	}
	if len(ev) == 0 {
		return nil
	}
	if sv := s.Server; sv != nil && sv.Cluster.QuotaBackendBytes > 0 {
		ev = append(ev, fmt.Sprintf("database %.1f MiB of its %.1f MiB quota (--quota-backend-bytes)", sv.Cluster.DBSizeBytes/(1<<20), sv.Cluster.QuotaBackendBytes/(1<<20)))
	}
	return append(ev, problems(s, "quota")...)
}

// problems returns the diagnosis's problem findings on topic ("" for every topic).
func problems(s *results.Summary, topic string) []string {
	var out []string
	for _, f := range s.Diagnosis {
		if f.Severity == results.SeverityProblem && (topic == "" || f.Topic == topic) {
			out = append(out, f.Message)
		}
	}
	return out
}

// findings returns the diagnosis's problem and warning findings on the topics.
func findings(s *results.Summary, topics ...string) []string {
	var out []string
	for _, f := range s.Diagnosis {
		if f.Severity != results.SeverityOK && slices.Contains(topics, f.Topic) {
			out = append(out, f.Message)
		}
	}
	return out
}

// stepContext is the figures a reader needs to weigh the suspects: CPU, peer RTT, disk.
func stepContext(st *Step, cpuLimit float64) string {
	var parts []string
	if st.MemberCPUMax > 0 || st.HostCPUBusy > 0 {
		limit := ""
		if cpuLimit > 0 {
			limit = fmt.Sprintf(" (limit %g cores, throttled in %.0f%% of periods)", cpuLimit, st.MemberThrottledMax)
		}
		parts = append(parts, fmt.Sprintf("member CPU up to %.0f%% of a core%s, machine %.0f%% busy", st.MemberCPUMax, limit, st.HostCPUBusy))
	}
	if st.PeerRTTP99 > 0 {
		parts = append(parts, "peer RTT p99 "+diskprobe.Ms(st.PeerRTTP99))
	}
	if st.WALFsyncP99 > 0 {
		parts = append(parts, "WAL fsync p99 "+diskprobe.Ms(st.WALFsyncP99))
	}
	return strings.Join(parts, ", ")
}

// Network is the network judgement: the members' peer round trips (etcd's own
// etcd_network_peer_round_trip_time_seconds) held against the heartbeat interval, and the timeouts etcd's
// tuning guide recommends for them.
type Network struct {
	// PeerRTTP99 is the worst member's peer round-trip p99 (ms) over every step; Peers each member's.
	PeerRTTP99 float64            `json:"peer_rtt_p99_ms"`
	Peers      map[string]float64 `json:"peer_rtt_p99_ms_by_member,omitempty"`
	// HeartbeatMs and ElectionMs are the cluster's settings; Recommended* what the guide asks for the RTT.
	HeartbeatMs            float64 `json:"heartbeat_interval_ms"`
	ElectionMs             float64 `json:"election_timeout_ms"`
	RecommendedHeartbeatMs float64 `json:"recommended_heartbeat_interval_ms"`
	RecommendedElectionMs  float64 `json:"recommended_election_timeout_ms"`
	Pass                   bool    `json:"pass"`
	Verdict                string  `json:"verdict"`
	// ClientRTTMs is the highest median client-to-member round trip (TCP connect), reported, not judged:
	// it adds to every request's latency but etcd's guidance sets no limit for it.
	ClientRTTMs float64 `json:"client_rtt_p50_ms,omitempty"`
}

// judgeNetwork judges the peer round trips the steps measured. etcd's tuning guide: the heartbeat interval
// near the round trip between members, the election timeout at least ten round trips (and ten heartbeats);
// like the diagnosis, a p99 round trip above half the heartbeat interval fails (a heartbeat would not
// return before the next is due). Nil when nothing was measured.
func judgeNetwork(steps []Step, etcdFlags []string, members int) *Network {
	n := &Network{HeartbeatMs: etcdFlagMs(etcdFlags, "heartbeat-interval", 100), ElectionMs: etcdFlagMs(etcdFlags, "election-timeout", 1000)}
	for _, st := range steps {
		for m, v := range st.Peers {
			if n.Peers == nil {
				n.Peers = map[string]float64{}
			}
			n.Peers[m] = max(n.Peers[m], v)
			n.PeerRTTP99 = max(n.PeerRTTP99, v)
		}
	}
	clientRTT, _, haveClient := worstClientRTT(steps)
	if n.Peers == nil && !haveClient {
		return nil
	}
	n.ClientRTTMs = clientRTT
	if n.Peers == nil {
		// etcd observes the peer round trip every 30 s (rafthttp's statusMonitoringInterval): a short step
		// of a cluster with peers may hold no observation, which is not a pass.
		n.Pass = members == 1
		n.Verdict = "no peer round trip was observed (etcd samples it every 30 s: steps of at least 30 s measure it)"
		if members == 1 {
			n.Verdict = "single member: no peer round trips to judge"
		}
		if haveClient {
			n.Verdict += "; " + describeClientRTT(steps)
		}
		return n
	}
	n.RecommendedHeartbeatMs = max(100, math.Ceil(2*n.PeerRTTP99/10)*10)
	n.RecommendedElectionMs = max(1000, 10*n.RecommendedHeartbeatMs)
	n.Pass = n.PeerRTTP99 <= n.HeartbeatMs/2
	rec := fmt.Sprintf("recommended --heartbeat-interval=%.0f --election-timeout=%.0f", n.RecommendedHeartbeatMs, n.RecommendedElectionMs)
	if n.Pass {
		n.Verdict = fmt.Sprintf("peer RTT p99 %s, within half the %.0f ms heartbeat interval; %s (etcd's defaults unless the RTT needs more)", diskprobe.Ms(n.PeerRTTP99), n.HeartbeatMs, rec)
	} else {
		n.Verdict = fmt.Sprintf("peer RTT p99 %s > half the %.0f ms heartbeat interval: the network is too slow for these timeouts; %s", diskprobe.Ms(n.PeerRTTP99), n.HeartbeatMs, rec)
	}
	if haveClient {
		n.Verdict += "; " + describeClientRTT(steps)
	}
	return n
}

// etcdFlagMs returns an etcd flag (name=value) in milliseconds, or def.
func etcdFlagMs(flags []string, name string, def float64) float64 {
	for _, f := range flags {
		k, v, ok := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if ok && k == name {
			if x, err := strconv.ParseFloat(v, 64); err == nil {
				return x
			}
		}
	}
	return def
}

// decide sets the qualified class, the verdict line, the outcome and the exit code from the steps.
func (q *Qualification) decide(interrupted bool, stepErr error) {
	target := q.Requested
	if target == "auto" {
		target = Classes[0]
	}
	var passed []Step
	var stop *Step
	for i := range q.Steps {
		if q.Steps[i].Verdict == StepPass {
			passed = append(passed, q.Steps[i])
			continue
		}
		stop = &q.Steps[i]
		break
	}
	var head string
	if len(passed) > 0 {
		last := passed[len(passed)-1]
		q.Qualified = last.Class
		head = fmt.Sprintf("qualified for %s (%d nodes)", last.Class, last.Nodes)
		if q.Requested == "auto" && last.Class == Classes[len(Classes)-1] {
			head += ", the largest class"
		}
	}
	var tail string
	switch {
	case stop != nil && stop.Verdict == StepFail:
		why := stop.Reasons[0]
		if len(stop.Reasons) > 1 {
			why += fmt.Sprintf(" (and %d more)", len(stop.Reasons)-1)
		}
		tail = fmt.Sprintf("%s at the %d-node load (%s", why, stop.Nodes, stop.Resource)
		if stop.Context != "" {
			tail += ": " + stop.Context
		}
		tail += ")"
		if head == "" {
			head = fmt.Sprintf("not qualified for %s (%d nodes): %s", stop.Class, stop.Nodes, tail)
		} else {
			head += fmt.Sprintf("; not %s: %s", stop.Class, tail)
		}
	case stop != nil:
		tail = fmt.Sprintf("%s undecided (%s): %s", stop.Class, stop.Resource, strings.Join(stop.Reasons, "; "))
		if head == "" {
			head = tail
		} else {
			head += "; " + tail
		}
	case interrupted || stepErr != nil:
		if head == "" {
			head = "not decided"
		}
		if stepErr != nil {
			head += fmt.Sprintf("; stopped: %v", stepErr)
		} else {
			head += "; interrupted"
		}
	}
	var rs []outcome.Reason
	if q.Faults != nil {
		r, text := q.Faults.faultReason()
		head += "; " + text
		rs = append(rs, r)
	}
	q.Verdict = head

	targetStep := -1
	for i, st := range q.Steps {
		if st.Class == target {
			targetStep = i
		}
	}
	switch {
	case interrupted:
		rs = append(rs, outcome.New(outcome.Incomplete, "interrupted"))
	case stepErr != nil:
		rs = append(rs, outcome.New(outcome.HarnessError, "%v", stepErr))
	case targetStep < 0:
		rs = append(rs, outcome.New(outcome.Undecided, "class %s was not run", target))
	case q.Steps[targetStep].Verdict == StepFail:
		rs = append(rs, outcome.New(outcome.ThresholdFailed, "%s", head))
	case q.Steps[targetStep].Verdict == StepUndecided:
		rs = append(rs, outcome.New(outcome.Undecided, "%s", head))
	}
	q.Outcome = outcome.Decide(rs...)
	q.ExitCode = q.Outcome.ExitCode()
}

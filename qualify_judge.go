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
	// Verdict is the verdict in one line (the outcome, then the answer). The outcome decides the exit code;
	// embedded, it is stored as summary.json stores a run's: "outcome" (the kind) and "reasons".
	Verdict string `json:"verdict"`
	outcome.Outcome
	// Requested is the class asked for, or "auto"; Qualified the largest class that passed ("" for none).
	// CompatLoad is the --etcdctl-compat load asked for ("auto" or a load; "" for the ladder).
	Requested string `json:"requested"`
	// Profile is the kube workload profile a growth ladder climbs, and Ladder its rungs (growth factors,
	// "1x", "1.5x", ...); both empty for the preset classes.
	Profile    string           `json:"profile,omitempty"`
	Ladder     []string         `json:"ladder,omitempty"`
	CompatLoad string           `json:"compat_load,omitempty"`
	Qualified  string           `json:"qualified_class"`
	ExitCode   int              `json:"exit_code"`
	Seed       int64            `json:"seed"`
	Start      time.Time        `json:"start"`
	End        time.Time        `json:"end"`
	Cluster    QualifiedCluster `json:"cluster"`
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
	// Interrupted says the qualification was stopped by a signal; StoppedBy is what else stopped it that no
	// step recorded (a step's directory that could not be made, a load that could not start).
	Interrupted bool   `json:"interrupted,omitempty"`
	StoppedBy   string `json:"stopped_by,omitempty"`
	// answer is what the hardware qualified for, in words: the verdict line without its outcome.
	answer string
	// written are the reasons of the qualification's own writing (its files, the steps' banners).
	written []outcome.Reason
}

// QualifiedCluster is the cluster the qualification ran on: what was asked of it, and (Members,
// EtcdVersion, Machine) what the steps' runs observed of it, never a flag's default.
type QualifiedCluster struct {
	Backend string `json:"backend"`
	// Members is how many members the steps found (0: no step ran to see them).
	Members int `json:"members,omitempty"`
	// EtcdVersion is the version the cluster reported, and each member's build when chaosbench built
	// them; Machine is the machine chaosbench (and embedded members) ran on.
	EtcdVersion  string   `json:"etcd_version,omitempty"`
	Machine      string   `json:"machine,omitempty"`
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
	// Outcome is the step's outcome: its run's (results.Decide of its summary.json) with the step's own
	// reasons (see judgeStep); the qualification's outcome combines every step's. RunOutcome is the run's
	// alone.
	Outcome    outcome.Outcome `json:"outcome"`
	RunOutcome outcome.Kind    `json:"run_outcome"`
	// Observed is the cluster as the step's run saw it.
	Observed
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
	// MeasuredSeconds is the load the step measured: the step's duration, or less when it ended early
	// (EarlyStop says why).
	MeasuredSeconds float64    `json:"measured_s"`
	EarlyStop       *EarlyStop `json:"early_stop,omitempty"`
}

// Observed is the cluster as a step's run saw it (its summary.json): what a qualification states about the
// cluster comes from here, never from a flag's default.
type Observed struct {
	// Members is how many members the cluster had (for an external cluster: as it listed them).
	Members int `json:"members,omitempty"`
	// EtcdServer is the version the cluster reported; EtcdVersions each member's build, when chaosbench
	// built them from releases.
	EtcdServer   string   `json:"etcd_server,omitempty"`
	EtcdVersions []string `json:"etcd_versions,omitempty"`
	// Machine is the machine chaosbench ran on (and the embedded members with it), in one line.
	Machine string `json:"machine,omitempty"`
	// EtcdFlags are the etcd settings the run gave the members it started.
	EtcdFlags []string `json:"-"`
	Backend   string   `json:"-"`
}

// observe returns what a step's run saw of the cluster.
func observe(s *results.Summary) Observed {
	o := Observed{Members: s.Cluster.Members, EtcdServer: s.Versions.EtcdServer, EtcdVersions: s.Cluster.EtcdVersions, EtcdFlags: s.Cluster.EtcdFlags,
		Backend: s.Cluster.Backend}
	if s.Environment != nil {
		o.Machine = s.Environment.Machine()
	}
	return o
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

// judgeStep decides a step from its run's summary (and the disk probe, when there was one). Its outcome is
// its run's, as results.Decide reads the summary, with the step's own reasons beside the run's: the database
// reached its quota, the generator fell behind its schedule, the throughput fell short of the plan, the disk
// probe bars the class. outcome.Decide ranks them: a violation or a crashed member decides the step whatever
// else happened, an undecided check or a generator that fell behind leaves it undecided before any
// threshold fails it.
func judgeStep(class string, s *results.Summary, disk *DiskQualification) *Step {
	st := &Step{Class: class, Nodes: stepNodes(class, s), PlannedRate: s.Schedule.TargetRate, Observed: observe(s), MeasuredSeconds: s.MeasuredSeconds}
	run := results.Decide(s)
	st.RunOutcome = run.Kind
	stepFigures(st, s)
	st.Context = stepContext(st, s.Cluster.MemberCPUs)

	rs, quota, lagged := stepReasons(st, s, run)
	diskBars := disk != nil && !disk.allowsStep(class, st.PlannedRate)
	if diskBars {
		rs = append(rs, outcome.New(outcome.ThresholdFailed, "disk probe: %s", disk.whyStep(class, st.PlannedRate)))
	}
	st.Outcome = outcome.Decide(rs...)
	st.Verdict = stepVerdict(st.Outcome)
	if st.Verdict != StepPass {
		st.Reasons = st.Outcome.Texts(st.Outcome.Kind)
	}
	switch k := st.Outcome.Kind; {
	case k == outcome.Violation:
		st.Resource = "consistency"
	case k == outcome.MemberCrashed:
		st.Resource = "crash"
		for _, c := range s.Crashes {
			st.Evidence = append(st.Evidence, c.LogTail[max(0, len(c.LogTail)-3):]...)
		}
	case k == outcome.ThresholdFailed && len(quota) > 0:
		st.Resource, st.Evidence = "memory", quota
	case k == outcome.ThresholdFailed:
		st.Resource, st.Evidence = attribute(s, diskBars)
	case k == outcome.Undecided && lagged:
		st.Resource, st.Evidence = "generator", findings(s, "generator", "cpu")
	case k == outcome.Undecided:
		st.Resource = "check"
	case k == outcome.HarnessError:
		st.Resource = "harness"
	case k == outcome.Incomplete:
		st.Resource = "interrupted"
	}
	return st
}

// stepVerdict is a step's verdict in the ladder's words: it passes when its outcome does (known issues pass,
// named), fails when a threshold failed or etcd failed (a violation, a crashed member), and is undecided
// otherwise (an undecided check, the generator, the harness, an interrupt).
func stepVerdict(o outcome.Outcome) string {
	switch {
	case o.Passed():
		return StepPass
	case o.Kind == outcome.ThresholdFailed || o.Kind.Severe():
		return StepFail
	}
	return StepUndecided
}

// stepReasons are the run's reasons and the step's own, but the disk probe's. A database that reached its
// quota (NOSPACE) fails the step for memory: the cluster refused the class's data, so a load that stopped
// on it failed a threshold of the class, not the harness, and a generator that fell behind delayed requests,
// it did not fill the database. It returns the quota's evidence and whether the generator fell behind.
func stepReasons(st *Step, s *results.Summary, run outcome.Outcome) ([]outcome.Reason, []string, bool) {
	quota := quotaExhausted(s, run)
	var rs []outcome.Reason
	if len(quota) > 0 {
		rs = append(rs, outcome.New(outcome.ThresholdFailed, "the database reached its quota (NOSPACE): the cluster cannot hold this class's data"))
	}
	for _, r := range run.Reasons {
		if len(quota) > 0 && r.Kind == outcome.HarnessError && strings.Contains(r.Text, rpctypes.ErrNoSpace.Error()) {
			r.Kind = outcome.ThresholdFailed
		}
		rs = append(rs, r)
	}
	lagged := len(quota) == 0 && st.MissedLagPct > generatorLagLimit
	if lagged {
		rs = append(rs, outcome.New(outcome.Undecided, "the generator could not keep its schedule: %.1f%% of requests started late with clients free (generator lag), so the step measured the generator, not the hardware", st.MissedLagPct))
	}
	if st.PlannedRate > 0 && st.Throughput < throughputFloor*st.PlannedRate {
		rs = append(rs, outcome.New(outcome.ThresholdFailed, "throughput %.0f requests/s < %.0f%% of the planned %.0f", st.Throughput, 100*throughputFloor, st.PlannedRate))
	}
	return rs, quota, lagged
}

// stepFigures copies the step's figures over the measured window from its summary.
func stepFigures(st *Step, s *results.Summary) {
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
// return before the next is due). members is how many members the steps observed; nil when no step
// observed the cluster (none ran).
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
	if n.Peers == nil && !haveClient && members == 0 {
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

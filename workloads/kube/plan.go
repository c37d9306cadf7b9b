package kube

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/workloads"
)

// PlannedOp is the rate an actor is planned to send one operation at.
type PlannedOp struct {
	Actor string  `json:"actor"`
	Op    string  `json:"op"`
	Rate  float64 `json:"rate"` // per second
}

// Plan returns the planned request rates of the active actors, per operation, for a cluster with the given
// number of client endpoints (Maintenance.Status polls each). Watch events are the rates at which watch
// caches receive writes. Operations whose count depends on etcd (conflict retries, progress requests,
// relists, lookups of objects missing from a cache) are not planned.
//
// The plan is the configuration's share (Config.Share): what goes through the apiservers it simulates.
// The plans of all the shares of a split load add up to the plan of the whole (Whole).
func (c Config) Plan(endpoints int) []PlannedOp {
	plan := c.wholePlan(endpoints)
	if c.Share.Whole() {
		return plan
	}
	out := plan[:0]
	for _, p := range plan {
		p.Rate *= c.shareOf(p)
		if p.Rate > 0 {
			out = append(out, p)
		}
	}
	return out
}

// Whole returns the configuration of the whole load that c is a share of.
func (c Config) Whole() Config {
	c.Share = workloads.Share{}
	return c
}

// LocalApiservers returns the number of apiservers the share simulates.
func (c Config) LocalApiservers() int {
	n := 0
	for a := range c.Apiservers {
		if c.Share.Owns(a) {
			n++
		}
	}
	return n
}

// shareOf returns the fraction of an operation of the whole plan that goes through the share's
// apiservers, following how the actors spread their requests over apiservers: a kubelet's by its node, a
// controller's election by its component, everything else round robin (or one stream per apiserver).
func (c Config) shareOf(p PlannedOp) float64 {
	a := c.Apiservers
	owned := func(n int, apiserverOf func(int) int) float64 {
		k := 0
		for i := range n {
			if c.Share.Owns(apiserverOf(i)) {
				k++
			}
		}
		return float64(k) / float64(n)
	}
	comps := len(electedComponents)
	switch {
	case p.Actor == ActorHeartbeats:
		return owned(c.Nodes, func(node int) int { return node % a })
	case p.Actor == ActorElection && p.Op == "get/"+ResLeases:
		return owned(c.standbySlots(), func(i int) int { return (i%comps + 1 + i/comps) % a })
	case p.Actor == ActorElection:
		return owned(comps, func(comp int) int { return comp % a })
	}
	return float64(c.LocalApiservers()) / float64(a)
}

// wholePlan is Plan of the whole load.
func (c Config) wholePlan(endpoints int) []PlannedOp {
	var plan []PlannedOp
	add := func(actor, op string, rate float64) {
		if c.Active[actor] && rate > 0 {
			plan = append(plan, PlannedOp{actor, op, rate})
		}
	}
	a := float64(c.Apiservers)
	comps := float64(len(electedComponents))
	writes := map[string]float64{} // puts of cached resources per second, for watch events

	nodeLeases, nodeStatus := c.nodeLeaseRate(), c.nodeStatusRate()
	add(ActorHeartbeats, "update/"+ResLeases, nodeLeases)
	add(ActorHeartbeats, "update/"+ResNodes, nodeStatus)
	if c.Active[ActorHeartbeats] {
		writes[ResLeases] += nodeLeases
		writes[ResNodes] += nodeStatus
	}

	churn := c.Churn
	add(ActorChurn, "create/"+ResPods, churn)
	add(ActorChurn, "update/"+ResPods, churn*c.updatesPerPod())
	add(ActorChurn, "delete/"+ResPods, churn*c.removals())
	add(ActorChurn, "get/"+ResPods, churn*c.deleteCalls())
	add(ActorChurn, "create/"+ResEvents, churn*c.eventsPerPod())
	add(ActorChurn, "grant/"+ResLeases, c.eventGrantRate())
	if c.Active[ActorChurn] {
		writes[ResPods] += churn * (1 + c.updatesPerPod())
	}

	add(ActorElection, "update/"+ResLeases, comps/electionRetryPeriod.Seconds())
	add(ActorElection, "get/"+ResLeases, c.leaseReadRate())
	if c.Active[ActorElection] {
		writes[ResLeases] += comps / electionRetryPeriod.Seconds()
	}

	masters := a / masterLeaseRenew.Seconds()
	add(ActorMasterLeases, "update/"+ResLeases, masters)
	for _, res := range []string{ResMasterLeases, ResPeerServerLeases} {
		add(ActorMasterLeases, "get/"+res, masters)
		add(ActorMasterLeases, "grant/"+res, masters)
		add(ActorMasterLeases, "update/"+res, masters)
	}
	add(ActorMasterLeases, "list/"+ResMasterLeases, masters)
	if c.Active[ActorMasterLeases] {
		writes[ResLeases] += masters
		writes[ResMasterLeases] += masters
	}

	add(ActorLists, "list/"+ResPods, c.ListRate*float64(c.pagesPerNamespaceList()))
	add(ActorLists, "current-rv/"+ResPods, c.CacheListRate)
	if c.Active[ActorWatchCache] {
		add(ActorLists, "cache-sync/"+ResPods, c.CacheListRate)
	}
	for _, res := range countedResources {
		add(ActorPolls, "count/"+res, c.countRate()/float64(len(countedResources)))
	}
	if c.Active[ActorWatchCache] {
		// Every watched resource's current revision every minute per apiserver, or at the rate
		// CacheReads sets; a cached resource's read is followed by the wait for its cache.
		rate := func(i int) float64 {
			if r, ok := c.CacheReads[watchedAPI(i)]; ok {
				return r
			}
			return a / countPollPeriod.Seconds()
		}
		for i, res := range cachedResources {
			add(ActorPolls, "current-rv/"+res, rate(i))
		}
		for j, res := range idleResources {
			add(ActorPolls, idleCurrentRV(res), rate(len(cachedResources)+j))
		}
		for i, res := range cachedResources {
			add(ActorPolls, "cache-sync/"+res, rate(i))
		}
	}
	add(ActorPolls, "status", c.statusRate(endpoints))
	add(ActorPolls, "get/health", c.healthRate())

	interval := c.CompactionInterval.Seconds()
	add(ActorCompactor, "compact-txn", a/interval)
	add(ActorCompactor, "compact", 1/interval)

	for _, res := range cachedResources {
		add(ActorWatchCache, "watch-event/"+res, a*writes[res])
	}
	return plan
}

// eventGrantRate is the rate of event lease grants: the lease manager of each apiserver events go
// through grants a lease per reuse period (60 s for the default hour-long TTL) or per 1000 events,
// whichever comes first.
func (c Config) eventGrantRate() float64 {
	ttl := c.EventTTL
	reuse := min(time.Duration(leaseReuseFraction*float64(ttl)), leaseReuseMax)
	n := float64(c.eventApiservers())
	perApiserver := c.Churn * c.eventsPerPod() / n
	return n * math.Max(1/reuse.Seconds(), perApiserver/leaseMaxObjects)
}

// eventApiservers is the number of apiservers events are created through (the first ones).
func (c Config) eventApiservers() int {
	if c.EventApiservers > 0 {
		return min(c.EventApiservers, c.Apiservers)
	}
	return c.Apiservers
}

// standbySlots are the leader-election reads of a round: each standby of each elected component (one
// replica per apiserver, one of them the leader), or, with one apiserver and a set read rate, each
// component's.
func (c Config) standbySlots() int {
	return len(electedComponents) * max(1, c.Apiservers-1)
}

// leaseReadRate is the leader elections' lease reads per second: Options.LeaseReads, or each standby's
// every retry period.
func (c Config) leaseReadRate() float64 {
	return rateOr(c.LeaseReads, float64(len(electedComponents)*(c.Apiservers-1))/electionRetryPeriod.Seconds())
}

// pagesPerNamespaceList is the mean number of 500-object pages of a namespace's pod list.
func (c Config) pagesPerNamespaceList() int {
	perNamespace := (c.Pods() + c.Namespaces - 1) / c.Namespaces
	return max(1, (perNamespace+kubectlPageSize-1)/kubectlPageSize)
}

// PlanTotal is the total planned rate of etcd requests (watch events excluded).
func PlanTotal(plan []PlannedOp) float64 {
	var t float64
	for _, p := range plan {
		if p.Actor != ActorWatchCache {
			t += p.Rate
		}
	}
	return t
}

// WritePlan prints the plan as a table: actor, operation, requests per second.
func WritePlan(w io.Writer, c Config, plan []PlannedOp) error {
	fmt.Fprintf(w, "kube workload: %s\n", c)
	fmt.Fprintf(w, "objects: %d pods, %d nodes and leases, %d namespaces; sizes %s\n", c.Pods(), c.Nodes, c.Namespaces+len(systemNamespaces()), c.Sizes)
	fmt.Fprintf(w, "compaction every %s, events live %s, lists %g/s\n\n", c.CompactionInterval, c.EventTTL, c.ListRate)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "actor\toperation\trate/s\t")
	for _, p := range plan {
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", p.Actor, p.Op, formatRate(p.Rate))
	}
	fmt.Fprintf(tw, "total\tetcd requests\t%s\t\n", formatRate(PlanTotal(plan)))
	return tw.Flush()
}

func formatRate(r float64) string {
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0f", r)
	case r >= 1:
		return fmt.Sprintf("%.2f", r)
	}
	return fmt.Sprintf("%.4f", r)
}

// Summary is the workload's part of the run summary: the plan against the measured operations, the
// workload's own counters and the SLO verdict. ops are the run's measured operations.
func (w *Workload) Summary(ops map[string]*results.Operation, measuredSeconds float64, endpoints int) *results.Kube {
	planned := map[string]float64{}
	actors := map[string][]string{}
	for _, p := range w.cfg.Plan(endpoints) {
		planned[p.Op] += p.Rate
		actors[p.Op] = append(actors[p.Op], p.Actor)
	}
	k := &results.Kube{Cluster: w.cfg.String(), Conflicts: map[string]int64{}, Compactions: w.stats.wins.Load(), NotFound: w.stats.notFound.Load()}
	k.Mix, k.MixDeviationPercent = results.CompareMix(planned, actors, ops, measuredSeconds)
	w.stats.conflicts.Range(func(op, n any) bool {
		k.Conflicts[op.(string)] = n.(*atomic.Int64).Load()
		return true
	})
	for _, a := range w.local {
		for _, wc := range a.caches {
			k.Relists += wc.relists.Load()
			k.CacheLists += wc.lists.Load()
		}
		k.EventLeaseGrants += int64(a.events.granted())
	}
	k.SLO, k.SLOPass = results.JudgeSLO(ops)
	return k
}

// MergeSummaries is the kube summary of a merged split load: the whole plan against the merged
// operations, and the workers' counters added up.
func MergeSummaries(cfg Config, parts []*results.Kube, ops map[string]*results.Operation, measuredSeconds float64, endpoints int) *results.Kube {
	cfg = cfg.Whole()
	planned := map[string]float64{}
	actors := map[string][]string{}
	for _, p := range cfg.Plan(endpoints) {
		planned[p.Op] += p.Rate
		actors[p.Op] = append(actors[p.Op], p.Actor)
	}
	k := &results.Kube{Cluster: cfg.String(), Conflicts: map[string]int64{}}
	k.Mix, k.MixDeviationPercent = results.CompareMix(planned, actors, ops, measuredSeconds)
	for _, p := range parts {
		if p == nil {
			continue
		}
		for op, n := range p.Conflicts {
			k.Conflicts[op] += n
		}
		k.NotFound += p.NotFound
		k.Relists += p.Relists
		k.CacheLists += p.CacheLists
		k.EventLeaseGrants += p.EventLeaseGrants
		k.Compactions += p.Compactions
	}
	k.SLO, k.SLOPass = results.JudgeSLO(ops)
	return k
}

// statusRate is the rate of Maintenance.Status requests: every apiserver's of every endpoint every 30 s,
// unless the options set it (a profile: Kubernetes 1.37 reads the database size when its metrics are
// scraped).
func (c Config) statusRate(endpoints int) float64 {
	return rateOr(c.StatusRate, float64(c.Apiservers*endpoints)/statusPollPeriod.Seconds())
}

// sortedKeys returns a map's keys in order, for schedules and plans that do not depend on map order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// countRate is the count-only ranges per second of the resources without a watch cache, all together:
// every apiserver's of each once a minute, or Options.Counts.
func (c Config) countRate() float64 {
	return rateOr(c.Counts, float64(c.Apiservers*len(countedResources))/countPollPeriod.Seconds())
}

// healthRate is the etcd health checks per second, all apiservers together: each apiserver's once a second
// (the most its prober sends while something probes it), or Options.HealthChecks.
func (c Config) healthRate() float64 {
	return rateOr(c.HealthChecks, float64(c.Apiservers)/healthCheckPeriod.Seconds())
}

// nodeStatusRate is the node status updates per second, all nodes together: each kubelet's every 5
// minutes, or Options.NodeStatus.
func (c Config) nodeStatusRate() float64 {
	return rateOr(c.NodeStatus, float64(c.Nodes)/nodeStatusReport.Seconds())
}

// nodeLeaseRate is the node lease renewals per second, all nodes together: each kubelet's every 10 s, or
// Options.NodeLeases.
func (c Config) nodeLeaseRate() float64 {
	return rateOr(c.NodeLeases, float64(c.Nodes)/nodeLeaseRenew.Seconds())
}

// ControlPlaneLeaseUpdates is the lease updates per second a control plane of that many apiservers sends
// besides its nodes': the leader elections' renewals (every 2 s each) and the apiservers' identity leases
// (every 10 s each).
func ControlPlaneLeaseUpdates(apiservers int) float64 {
	return float64(len(electedComponents))/electionRetryPeriod.Seconds() + float64(apiservers)/masterLeaseRenew.Seconds()
}

// rateOr is an Options rate that overrides a default: the rate when positive, none when negative (the
// profile's "none in its window"), def when zero (not given).
func rateOr(rate, def float64) float64 {
	switch {
	case rate > 0:
		return rate
	case rate < 0:
		return 0
	}
	return def
}

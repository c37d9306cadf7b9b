package profile

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/workloads/kube"
)

// maxEventsPerPod and maxStatusPerPod are what the kube workload's pod life holds.
const (
	maxEventsPerPod = 5
	maxStatusPerPod = 5
	minDeleteCalls  = 1
	maxDeleteCalls  = 3
)

// systemNamespaces are the namespaces every cluster has besides its workloads'.
const systemNamespaces = 4 // default, kube-system, kube-public, kube-node-lease

// emulated maps the kube workload's resources (as its keys name them) to the profile's.
var emulated = map[string]string{kube.ResPods: "pods", kube.ResNodes: "nodes", kube.ResLeases: "leases", kube.ResEvents: "events",
	kube.ResConfigMaps: "configmaps", kube.ResSecrets: "secrets", kube.ResNamespaces: "namespaces"}

// Scale says how to grow a profile: Factor multiplies its objects, rates and watchers together (nodes,
// and with them heartbeats and node leases; pods, churn, lists) or, with RatesOnly, its request rates
// alone (churn and lists; the objects and what follows from them stay).
type Scale struct {
	Factor    float64
	RatesOnly bool
}

// String is "2.5x" or "2.5x rates".
func (s Scale) String() string {
	f := s.Factor
	if f == 0 {
		f = 1
	}
	out := fmt.Sprintf("%gx", f)
	if s.RatesOnly {
		out += " rates"
	}
	return out
}

// figure returns a figure of the profile, or what was assumed for it.
func (p *Profile) figure(name string, v float64) float64 {
	if v > 0 {
		return v
	}
	a, _ := p.assumed(name)
	return a
}

// Options returns the kube workload's options for the profile at a scale: the apiservers it was read
// from; its nodes, pods and namespaces; pod churn from its pod creates; clients' namespace lists from its
// pod lists; its object sizes (mean ± 25%); the compaction interval from etcd's compactions. Figures the
// profile lacks are its assumptions.
func (p *Profile) Options(s Scale) (kube.Options, error) {
	f := s.Factor
	if f == 0 {
		f = 1
	}
	if f < 0.01 || f > 1000 || math.IsNaN(f) {
		return kube.Options{}, outcome.Usagef("--scale %g: between 0.01 and 1000", s.Factor)
	}
	objects := f
	if s.RatesOnly {
		objects = 1
	}
	res := func(r string) *Resource {
		if x := p.Resources[r]; x != nil {
			return x
		}
		return &Resource{}
	}
	nodes := p.figure("resources.nodes.objects", res("nodes").Objects)
	pods := p.figure("resources.pods.objects", res("pods").Objects)
	o := kube.Options{
		Apiservers: max(1, p.Source.Apiservers),
		Nodes:      max(1, int(math.Round(nodes*objects))),
	}
	o.PodsPerNode = min(1000, max(1, int(math.Round(pods/math.Max(nodes, 1)))))
	if ns := res("namespaces").Objects - systemNamespaces; ns >= 1 {
		o.Namespaces = min(o.Nodes*o.PodsPerNode, max(1, int(math.Round(ns*objects))))
	}
	// Churn: pods created per second. A profile without churn runs none (a tiny rate stands for zero,
	// which the workload would read as "derive it from the nodes").
	o.Churn = res("pods").EtcdRequests["create"] * f
	if o.Churn <= 0 {
		o.Churn = 1e-9
	}
	// Lists: the workload's list rate is namespace lists per second, each of pods-per-namespace/500
	// pages; the profile counts pages (one etcd request each).
	pages := res("pods").EtcdRequests["list"]
	if pages > 0 {
		o.ListRate = pages * f / float64(pagesPer(o))
	} else {
		o.ListRate = -1
	}
	p.podLife(&o)
	// Events through the apiservers that created them in the window (one scheduler's through one).
	if n := res("events").CreatedThrough; n > 0 {
		o.EventApiservers = min(n, o.Apiservers)
	}
	// Leader elections' lease reads: the cluster's reads of leases (a control plane without standbys
	// reads few), not scaled: control-plane components do not grow with the cluster.
	if gets := res("leases").EtcdRequests["get"]; gets > 0 {
		o.LeaseReads = gets
	} else if res("leases").EtcdRequests["update"] > 0 {
		o.LeaseReads = -1
	}
	p.readRates(&o, f, pages)
	// Status: what the cluster's etcd served (1.37 apiservers read the database size when scraped).
	if p.Etcd != nil {
		if st := p.Etcd.GRPCRequests["Status"]; st > 0 {
			o.StatusRate = st // the scrapes' pace, not the cluster's size
		} else {
			o.StatusRate = -1
		}
	}
	// Node lease renewals: the profile's lease updates less the control plane's own, scaled with the
	// nodes.
	if up := res("leases").EtcdRequests["update"] - kube.ControlPlaneLeaseUpdates(o.Apiservers); up > 0 && res("nodes").Objects > 0 {
		o.NodeLeases = up * objects
	}
	// Node status updates at the profile's rate, scaled with the nodes (none in its window: none).
	if up := res("nodes").EtcdRequests["update"]; up > 0 {
		o.NodeStatus = up * objects
	} else if res("nodes").Objects > 0 {
		o.NodeStatus = -1
	}
	// etcd health checks: as often as the cluster's apiservers were probed.
	if h := p.HealthChecks; h != nil {
		if o.HealthChecks = *h; *h <= 0 {
			o.HealthChecks = -1
		}
	}
	// Events live an hour (--event-ttl): the cluster kept those created before the window.
	if ev := res("events"); ev.Objects > 0 {
		o.Events = max(0, int(math.Round((ev.Objects-ev.EtcdRequests["create"]*p.Source.WindowSeconds)*f)))
	}
	if n := res("secrets").Objects; n > 0 {
		o.Secrets = max(1, int(math.Round(n*objects)))
	}
	o.Others = p.others(objects)
	if c := p.compactionInterval(); c > 0 {
		o.CompactionInterval = c
	}
	o.ObjectSizes = p.objectSizes()
	return o, nil
}

// objectSizes is the workload's --object-sizes from the profile's mean sizes (mean ± 25%).
func (p *Profile) objectSizes() string {
	res := p.resourceOf
	var sizes []string
	for _, k := range sortedKeys(emulated) {
		r := emulated[k]
		mean := p.figure("resources."+r+".mean_bytes", res(r).MeanBytes)
		if mean <= 0 {
			continue
		}
		lo, hi := max(8, int(mean*0.75)), max(8, int(mean*1.25))
		sizes = append(sizes, fmt.Sprintf("%s=%d-%d", k, lo, hi))
		if k == kube.ResConfigMaps {
			// The profile's mean is every configmap's, the large ones' included: the workload's few
			// large configmaps take it too, or they would double the mean (0.49 measured).
			sizes = append(sizes, fmt.Sprintf("%s=%d-%d", largeConfigMaps, lo, hi))
		}
	}
	return strings.Join(sizes, ",")
}

// currentRV is the apiserver's name of a read of the current revision (etcd_requests_total's operation),
// and countPoll the period of its count timers (--etcd-count-metric-poll-period's default).
const (
	currentRV = "getCurrentResourceVersion"
	countPoll = time.Minute
)

// largeConfigMaps is the kube workload's size class of its few large configmaps (--object-sizes).
const largeConfigMaps = "large-configmaps"

// otherMeanBytes is the size of an object of a resource the workload does not model when the profile
// has none: about a flowschema's or a cluster role's.
const otherMeanBytes = 1024

// modeledProfile are the profile's resources the kube workload writes (besides those it maps in emulated):
// apiserver identity and endpoint leases are leases.
var modeledProfile = map[string]bool{"masterleases": true, "peerserverleases": true}

// others are the objects of the profile's resources the kube workload does not model, at a scale of their
// counts, with their mean sizes (otherMeanBytes when unknown), under their storage prefixes.
func (p *Profile) others(scale float64) []kube.Others {
	mapped := map[string]bool{}
	for _, r := range emulated {
		mapped[r] = true
	}
	var out []kube.Others
	for _, r := range sortedKeys(p.Resources) {
		x := p.Resources[r]
		n := int(math.Round(x.Objects * scale))
		if mapped[r] || modeledProfile[r] || n <= 0 {
			continue
		}
		b := x.MeanBytes
		if b <= 0 {
			b = otherMeanBytes
		}
		out = append(out, kube.Others{Prefix: storagePrefix(r), Objects: min(n, 1_000_000), Bytes: min(1<<20, max(1, int(math.Round(b))))})
	}
	return out
}

// storagePrefix is where kube-apiserver keeps a resource under /registry/ (k8s.io/kubernetes
// pkg/registry/*/storage): its plural, but for the few built-in resources stored under other names
// (services/specs, services/endpoints, controllers, ingress, minions), the aggregator's and the CRDs'
// resources under their groups, and custom resources (plural.group) under group/plural.
func storagePrefix(r string) string {
	switch r {
	case "services":
		return "services/specs"
	case "endpoints":
		return "services/endpoints"
	case "replicationcontrollers":
		return "controllers"
	case "ingresses":
		return "ingress"
	case "nodes":
		return "minions"
	case "apiservices":
		return "apiregistration.k8s.io/apiservices"
	case "customresourcedefinitions":
		return "apiextensions.k8s.io/customresourcedefinitions"
	}
	if plural, group, ok := strings.Cut(r, "."); ok {
		return group + "/" + plural
	}
	return r
}

// pagesPer is the pages of a namespace's pod list, as the workload pages it (500 a page).
func pagesPer(o kube.Options) int {
	ns := o.Namespaces
	if ns == 0 {
		ns = max(1, (o.Nodes+9)/10)
	}
	per := (o.Nodes*o.PodsPerNode + ns - 1) / ns
	return max(1, (per+499)/500)
}

// compactionInterval is the interval between the apiservers' compactions, from etcd's Compact requests;
// zero when etcd did not compact in the window.
func (p *Profile) compactionInterval() time.Duration {
	if p.Etcd == nil || p.Etcd.GRPCRequests["Compact"] <= 0 {
		return 0
	}
	d := time.Duration(float64(time.Second) / p.Etcd.GRPCRequests["Compact"]).Round(time.Second)
	return max(time.Second, d)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// resourceOf is the profile's resource r, or an empty one (the profile unchanged).
func (p *Profile) resourceOf(r string) *Resource {
	if x := p.Resources[r]; x != nil {
		return x
	}
	return &Resource{}
}

// podLife sets a pod's life in o from the profile's pod requests per pod created: its events, its DELETE
// calls, its stale removals and its status updates.
func (p *Profile) podLife(o *kube.Options) {
	// A pod's life: its events and status updates per pod created (a pod's updates less its binding and
	// the two of its deletion), within what the workload's pod life holds.
	if creates := p.resourceOf("pods").EtcdRequests["create"]; creates > 0 {
		if ev := p.resourceOf("events").EtcdRequests["create"]; ev > 0 {
			o.EventsPerPod = math.Min(maxEventsPerPod, ev/creates)
		} else {
			o.EventsPerPod = 1e-6 // none: zero would be the default
		}
		// Every DELETE call reads the pod from etcd, and the workload reads pods for nothing else: the
		// pod reads per pod created are its deletion's DELETE calls (KWOK sends a third).
		if gets := p.resourceOf("pods").EtcdRequests["get"]; gets > 0 {
			o.DeleteCalls = math.Min(maxDeleteCalls, math.Max(minDeleteCalls, gets/creates))
		}
		calls := o.DeleteCalls
		if calls == 0 {
			calls = 2
		}
		// Delete transactions per pod: the kubelet's removal (one, two when the cache's copy was
		// stale) for the share of pods it removed and, with a third call, its failed one: the rest are
		// the stale removals.
		if dels := p.resourceOf("pods").EtcdRequests["delete"]; dels > 0 {
			removed, third := math.Min(1, calls-1), math.Max(0, calls-2)
			o.DeleteConflicts = round(math.Min(removed, math.Max(0, dels/creates-removed-third)), 4)
		}
		// Updates per pod: the binding, the statuses, and the updates of the first two DELETE calls.
		if up := p.resourceOf("pods").EtcdRequests["update"]; up > 0 {
			o.StatusPerPod = math.Min(maxStatusPerPod, math.Max(1e-6, up/creates-1-math.Min(calls, 2)))
		}
	}
}

// readRates sets in o the reads of the current revision per watched resource, the counts of events and
// pods' consistent lists from the watch cache, at scale f; pages are the profile's pod list pages a
// second.
func (p *Profile) readRates(o *kube.Options, f, pages float64) {
	// Reads of the current revision: every minute per apiserver and watched resource (the count
	// timers, which do not grow with the cluster), and one per consistent list served from the watch
	// cache. Pods' lists are the workload's lists from the cache; the other resources are read at the
	// profile's rates (namespaces' and limitranges' consistent lists: admission's live lookups, ...).
	timers := float64(o.Apiservers) / countPoll.Seconds()
	reads := func(g float64) float64 { return math.Min(g, timers) + math.Max(0, g-timers)*f }
	for _, r := range sortedKeys(p.Resources) {
		if g := p.Resources[r].EtcdRequests[currentRV]; g > 0 && r != "pods" && kube.Watched(r) {
			if o.CacheReads == nil {
				o.CacheReads = map[string]float64{}
			}
			o.CacheReads[r] = round(reads(g), 4)
		}
	}
	// Counts of events in etcd (no watch cache): the count timers' at the profile's rate.
	if n := p.resourceOf("events").EtcdRequests["listWithCount"]; n > 0 {
		o.Counts = n
	}
	// Consistent lists of pods from the watch cache, apart from the pages read from etcd: the pods'
	// reads of the current revision beyond the timers', or else the lists the caches served.
	if g := p.resourceOf("pods").EtcdRequests[currentRV]; g > timers {
		o.CacheListRate = (g - timers) * f
	} else if cl := p.resourceOf("pods").CacheLists; cl > 0 && g == 0 {
		o.CacheListRate = cl * f
	} else if pages > 0 || g > 0 {
		o.CacheListRate = -1
	}
}

// Package kube emulates the etcd traffic of kube-apiservers serving a Kubernetes cluster of a given size:
// the watch caches' paged lists and prefix watches, kubelets' node-lease heartbeats and status updates, pod
// churn through optimistic-concurrency transactions, events on shared leases, leader election, clients'
// paged and consistent lists, count and status polls, the apiserver's compactor and master leases.
//
// Every request has the shape kube-apiserver's storage layer gives it (see the reference in docs/workloads.md):
// creates are Txn(ModRevision == 0), updates are Txn(ModRevision == known) Then Put Else Get with the known
// revision taken from the simulated apiserver's watch cache, lists are paged Ranges pinned to the first
// page's revision. Operations are named verb/resource after the apiserver's etcd request metrics
// (create/pods, update/leases, list/pods, get/minions, watch-event/pods, grant/leases, compact, ...), so
// that results read like an apiserver's etcd dashboards.
//
// Rates follow from the cluster's size (Options), and Plan states them before the run: the measured
// operation mix of a run matches its plan.
package kube

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/workloads"
)

// Actor names, in the order plans list them.
const (
	ActorWatchCache   = "watch-cache"
	ActorHeartbeats   = "heartbeats"
	ActorChurn        = "churn"
	ActorElection     = "election"
	ActorLists        = "lists"
	ActorPolls        = "polls"
	ActorCompactor    = "compactor"
	ActorMasterLeases = "master-leases"
)

// Actors lists every actor.
var Actors = []string{ActorWatchCache, ActorHeartbeats, ActorChurn, ActorElection, ActorLists, ActorPolls, ActorCompactor, ActorMasterLeases}

// Presets names the size presets, after etcd's cluster size classes.
var Presets = []string{"small", "medium", "large", "xlarge"}

// Options sizes the emulated Kubernetes cluster. Zero values are derived from the others (see Resolve).
type Options struct {
	// Preset fills Nodes (and the values derived from it) from a size class: small (50 nodes), medium
	// (250), large (1000) or xlarge (3000). Explicit settings override the preset.
	Preset string `json:"preset,omitempty"`
	// Nodes is the number of kubelets: node objects, node leases, heartbeats.
	Nodes int `json:"nodes"`
	// PodsPerNode sets the preloaded pod count (Nodes * PodsPerNode), which churn keeps steady.
	PodsPerNode int `json:"pods-per-node"`
	// Namespaces holds the pods, spread evenly (0: one per ten nodes).
	Namespaces int `json:"namespaces"`
	// Churn is the pod churn in pods per second: each creates one pod and deletes an old one (0: one per
	// twenty nodes, at most 20/s, Kubernetes' tested churn limit).
	Churn float64 `json:"churn"`
	// ListRate is clients' paged, consistent lists of a namespace's pods per second (kubectl get pods,
	// label-selector lists) and as many consistent lists served from the watch cache (0: one per 200 nodes;
	// negative: none).
	ListRate float64 `json:"list-rate"`
	// CacheListRate is the consistent lists of pods served from the watch cache per second (0: as many as
	// ListRate; negative: none): a profile sets it apart, as Kubernetes 1.34+ serves most lists from the
	// cache and pages few from etcd.
	CacheListRate float64 `json:"cache-list-rate,omitempty"`
	// CacheReads are the reads of the current revision per second by API resource (pods, namespaces,
	// limitranges, ...; any resource the apiservers watch), all apiservers together: the count timers'
	// and the consistent lists' served from the watch cache, each of which waits for the cache to reach
	// that revision (progress requests meanwhile). A resource listed is read at its rate instead of once a
	// minute per apiserver; pods' CacheListRate comes on top. A profile sets them from its
	// getCurrentResourceVersion requests.
	CacheReads map[string]float64 `json:"cache-reads,omitempty"`
	// Counts are the count-only ranges of events (the resource without a watch cache) per second, all
	// apiservers together (0: every apiserver's once a minute, --etcd-count-metric-poll-period; negative:
	// none); a profile sets them from its listWithCount requests.
	Counts float64 `json:"counts,omitempty"`
	// NodeLeases is the node lease renewals per second, all nodes together (0: every kubelet's every
	// 10 s; negative: none); a profile sets it from its lease updates less the control plane's own, as
	// kubelets (or KWOK) that lag behind renew less often.
	NodeLeases float64 `json:"node-leases,omitempty"`
	// NodeStatus is the node status updates per second, all nodes together (0: every kubelet's every 5
	// minutes; negative: none); a profile sets it from its nodes' updates (KWOK reports a node's status
	// every 10 to 20 minutes, and a short window may hold none).
	NodeStatus float64 `json:"node-status,omitempty"`
	// HealthChecks are the apiservers' etcd health checks per second, all together (0: one a second per
	// apiserver, as a probed apiserver sends at most; negative: none). An apiserver reads etcd's health
	// only when its /healthz, /livez or /readyz is probed: a profile sets them from its probes.
	HealthChecks float64 `json:"health-checks,omitempty"`
	// Apiservers is the number of simulated kube-apiservers, each with its own etcd client and watch caches.
	Apiservers int `json:"apiservers"`
	// EventTTL is the lifetime of events (kube-apiserver's --event-ttl).
	EventTTL time.Duration `json:"event-ttl"`
	// CompactionInterval is the apiserver's --etcd-compaction-interval (0: 5 minutes, or a quarter of a
	// shorter run, at least 10 s).
	CompactionInterval time.Duration `json:"compaction-interval"`
	// ObjectSizes overrides value size distributions, resource=size or resource=min-max, comma-separated
	// (e.g. pods=4k-16k,events=1k); see DefaultSizes.
	ObjectSizes string `json:"object-sizes,omitempty"`
	// StatusRate is the Maintenance.Status requests per second, all apiservers together (0: each
	// apiserver polls every endpoint every 30 s; negative: none).
	StatusRate float64 `json:"status-rate,omitempty"`
	// EventsPerPod and StatusPerPod are the events (0 to 5) and status updates (0 to 5) of a pod's life on
	// average, pods alternating between the whole numbers around them (0: 5 events, 2.5 updates); a
	// profile sets them from a cluster's own events and pod updates per pod created.
	EventsPerPod float64 `json:"events-per-pod,omitempty"`
	StatusPerPod float64 `json:"status-per-pod,omitempty"`
	// DeleteCalls is the DELETE calls of a pod's deletion on average, 1 to 3 (0: 2, the user's and the
	// kubelet's); a profile sets it from a cluster's pod reads per pod created (KWOK sends a third; below
	// 2, a share of the deletions wait for a kubelet that lags behind, and the pods stay).
	DeleteCalls float64 `json:"delete-calls,omitempty"`
	// DeleteConflicts is the share of pod deletions (0 to 1) whose kubelet removal starts from a watch
	// cache that has not seen the kubelet's update yet, and so fails once and retries (0: as the
	// emulated caches are, which are rarely that late); a profile sets it from its pod delete requests
	// per pod created.
	DeleteConflicts float64 `json:"delete-conflicts,omitempty"`
	// EventApiservers is how many apiservers the events are created through, the first ones (0, or
	// more than there are: all, as kubelets' event recorders reach them through a load balancer); a
	// profile sets it from the apiservers that created events in its window (a control plane whose
	// events come from one scheduler creates them through one apiserver, and grants a third of the
	// event leases).
	EventApiservers int `json:"event-apiservers,omitempty"`
	// LeaseReads is the leader elections' reads of leases per second, all apiservers together (0: each
	// standby of each elected component every 2 s; negative: none); a profile sets it from its cluster's
	// reads of leases, as a control plane without standbys reads far fewer.
	LeaseReads float64 `json:"lease-reads,omitempty"`
	// Events is the events that exist when the load begins, preloaded on leases of --event-ttl (0: none):
	// a profile sets it from the cluster's events less those created in its window, as a real cluster
	// keeps an hour of them.
	Events int `json:"events,omitempty"`
	// Secrets is the number of secrets, spread over the namespaces (0: two a namespace, the system
	// namespaces' included); a profile sets it from its cluster's secrets.
	Secrets int `json:"secrets,omitempty"`
	// Others are the objects of resources the workload does not model (apiservices, flowschemas,
	// priorityclasses, ...), preloaded and never written again; a profile sets them from a cluster's own.
	Others []Others `json:"others,omitempty"`
	// Label names where the options came from when no preset did (a profile at a scale), in
	// descriptions only.
	Label string `json:"label,omitempty"`
	// Actors selects the actors to run (empty: all); SkipActors turns some off.
	Actors     []string `json:"actors,omitempty"`
	SkipActors []string `json:"skip-actors,omitempty"`
}

// Others are Objects objects of Bytes bytes each under /registry/Prefix/ (e.g. "flowschemas",
// "apiregistration.k8s.io/apiservices").
type Others struct {
	Prefix  string `json:"prefix"`
	Objects int    `json:"objects"`
	Bytes   int    `json:"bytes"`
}

// check refuses an empty or modeled prefix and counts or sizes out of range.
func (x Others) check() error {
	switch {
	case x.Prefix == "" || strings.HasPrefix(x.Prefix, "/") || strings.HasSuffix(x.Prefix, "/"):
		return outcome.Usagef("other objects %q: a key prefix under /registry/, without slashes at its ends", x.Prefix)
	case slices.Contains(modeledResources, strings.SplitN(x.Prefix, "/", 2)[0]):
		return outcome.Usagef("other objects %q: the workload writes that resource itself", x.Prefix)
	case x.Objects < 0 || x.Objects > 1_000_000:
		return outcome.Usagef("other objects %q: %d objects, between 0 and 1000000", x.Prefix, x.Objects)
	case x.Bytes < 1 || x.Bytes > 1<<20:
		return outcome.Usagef("other objects %q: %d bytes each, between 1 and 1 MiB", x.Prefix, x.Bytes)
	}
	return nil
}

// presetNodes are the node counts of the presets.
var presetNodes = map[string]int{"small": 50, "medium": 250, "large": 1000, "xlarge": 3000}

// Config is Options resolved for one run: every value set, sizes parsed, actors chosen.
type Config struct {
	Options
	Sizes  Sizes
	Active map[string]bool
	// Share is the generator's part of a load split over several (chaosbench run --workers): it
	// simulates the apiservers a with Share.Owns(a), and everything that goes through them (their nodes'
	// kubelets, pods, lists, polls, caches and compactors). The zero Share simulates every apiserver.
	Share workloads.Share `json:"-"`
}

// checkKept refuses the profile's shapes out of range: a pod deletion's DELETE calls, the events kept
// and the objects of resources the workload does not model.
func (o Options) checkKept() error {
	switch {
	case o.DeleteCalls != 0 && (o.DeleteCalls < 1 || o.DeleteCalls > deleteCalls+1):
		return outcome.Usagef("delete calls per pod %g: between 1 and %g", o.DeleteCalls, deleteCalls+1)
	case o.DeleteConflicts < 0 || o.DeleteConflicts > 1:
		return outcome.Usagef("delete conflicts %g: a share of the pods, between 0 and 1", o.DeleteConflicts)
	case o.Events < 0 || o.Secrets < 0:
		return outcome.Usagef("events %d and secrets %d: must not be negative", o.Events, o.Secrets)
	case badCacheReads(o.CacheReads) != "":
		return outcome.Usagef("cache reads of %s: a resource the apiservers watch, at a rate from 0", badCacheReads(o.CacheReads))
	case o.EventApiservers < 0:
		return outcome.Usagef("event apiservers %d: must not be negative (0: all)", o.EventApiservers)
	}
	for _, x := range o.Others {
		if err := x.check(); err != nil {
			return err
		}
	}
	return nil
}

// Resolve fills derived values and checks the options for a run of the given length. Every problem is a
// usage error naming the flag.
func (o Options) Resolve(duration time.Duration) (Config, error) {
	if o.Preset != "" {
		n, ok := presetNodes[o.Preset]
		if !ok {
			return Config{}, outcome.Usagef("--preset %q: %s", o.Preset, strings.Join(Presets, ", "))
		}
		if o.Nodes == 0 {
			o.Nodes = n
		}
	}
	if o.Nodes == 0 {
		o.Nodes = 100
	}
	if o.PodsPerNode == 0 {
		o.PodsPerNode = 30
	}
	if o.Apiservers == 0 {
		o.Apiservers = 3
	}
	switch {
	case o.Nodes < 1:
		return Config{}, outcome.Usagef("--nodes %d: need at least one node", o.Nodes)
	case o.PodsPerNode < 1 || o.PodsPerNode > 1000:
		return Config{}, outcome.Usagef("--pods-per-node %d: between 1 and 1000", o.PodsPerNode)
	case o.Apiservers < 1 || o.Apiservers > 64:
		return Config{}, outcome.Usagef("--apiservers %d: between 1 and 64", o.Apiservers)
	case o.Namespaces < 0:
		return Config{}, outcome.Usagef("--namespaces %d: must not be negative", o.Namespaces)
	case o.Churn < 0:
		return Config{}, outcome.Usagef("--churn %v: must not be negative", o.Churn)
	case o.EventsPerPod < 0 || o.EventsPerPod > float64(len(eventsAfter)) || o.StatusPerPod < 0 || o.StatusPerPod > float64(len(statusAfter)):
		return Config{}, outcome.Usagef("events per pod %g and status updates per pod %g: between 0 and %d, and 0 and %d", o.EventsPerPod, o.StatusPerPod, len(eventsAfter), len(statusAfter))
	case o.EventTTL < 0 || o.CompactionInterval < 0:
		return Config{}, outcome.Usagef("--event-ttl and --compaction-interval must not be negative")
	case o.CompactionInterval > 0 && o.CompactionInterval < time.Second:
		return Config{}, outcome.Usagef("--compaction-interval %s: at least 1s", o.CompactionInterval)
	}
	if err := o.checkKept(); err != nil {
		return Config{}, err
	}
	if o.Namespaces == 0 {
		o.Namespaces = max(1, (o.Nodes+9)/10)
	}
	if o.Namespaces > o.Pods() {
		return Config{}, outcome.Usagef("--namespaces %d: more namespaces than pods (%d)", o.Namespaces, o.Pods())
	}
	if o.Churn == 0 {
		o.Churn = math.Min(20, math.Max(1, float64(o.Nodes)/20))
	}
	if o.ListRate == 0 {
		o.ListRate = float64(o.Nodes) / 200
	}
	if o.ListRate < 0 {
		o.ListRate = 0
	}
	if o.CacheListRate == 0 {
		o.CacheListRate = o.ListRate
	}
	if o.CacheListRate < 0 {
		o.CacheListRate = 0
	}
	if o.EventTTL == 0 {
		o.EventTTL = time.Hour
	}
	if o.EventTTL < 2*time.Second {
		return Config{}, outcome.Usagef("--event-ttl %s: at least 2s", o.EventTTL)
	}
	if o.CompactionInterval == 0 {
		o.CompactionInterval = 5 * time.Minute
		if duration > 0 && duration < 20*time.Minute {
			o.CompactionInterval = max(10*time.Second, (duration / 4).Round(time.Second))
		}
	}
	sizes, err := ParseSizes(o.ObjectSizes)
	if err != nil {
		return Config{}, err
	}
	active := map[string]bool{}
	for _, a := range Actors {
		active[a] = len(o.Actors) == 0
	}
	for _, a := range o.Actors {
		if !slices.Contains(Actors, a) {
			return Config{}, unknownActor("--actors", a)
		}
		active[a] = true
	}
	for _, a := range o.SkipActors {
		if !slices.Contains(Actors, a) {
			return Config{}, unknownActor("--skip-actors", a)
		}
		active[a] = false
	}
	return Config{Options: o, Sizes: sizes, Active: active}, nil
}

func unknownActor(flag, name string) error {
	if s := outcome.Suggest(name, Actors); s != "" {
		return outcome.Usagef("%s %s: no such actor (did you mean %s?)", flag, name, s)
	}
	return outcome.Usagef("%s %s: no such actor (have %s)", flag, name, strings.Join(Actors, ", "))
}

// Pods is the steady pod count.
func (o Options) Pods() int { return o.Nodes * o.PodsPerNode }

// String describes the emulated cluster in one line.
func (c Config) String() string {
	s := fmt.Sprintf("%d nodes, %d pods in %d namespaces, churn %g pods/s, %d apiservers", c.Nodes, c.Pods(), c.Namespaces, c.Churn, c.Apiservers)
	switch {
	case c.Preset != "":
		s = c.Preset + ": " + s
	case c.Label != "":
		s = c.Label + ": " + s
	}
	return s
}

// badCacheReads returns a resource of CacheReads the workload does not watch, or whose rate is out of
// range; "" when all are good.
func badCacheReads(reads map[string]float64) string {
	for res, rate := range reads {
		if _, ok := watchedIndex(res); !ok || rate < 0 || math.IsNaN(rate) || math.IsInf(rate, 0) {
			return res
		}
	}
	return ""
}

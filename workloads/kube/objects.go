package kube

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Resources, named as kube-apiserver names them in etcd keys (nodes are "minions").
const (
	ResNamespaces   = "namespaces"
	ResNodes        = "minions"
	ResPods         = "pods"
	ResLeases       = "leases"
	ResEvents       = "events"
	ResConfigMaps   = "configmaps"
	ResSecrets      = "secrets"
	ResMasterLeases = "masterleases"
	// ResPeerServerLeases are the peer endpoint leases of apiservers (mixed-version proxy: on by default
	// since Kubernetes 1.36), kept like the master leases but without a watch cache.
	ResPeerServerLeases = "peerserverleases"
	// resLargeConfigMaps is a size class, not a resource: the few configmaps of hundreds of KB (bundled
	// dashboards, CRD-sized payloads) that every cluster grows.
	resLargeConfigMaps = "large-configmaps"
)

// modeledResources are the resources the workload writes itself.
var modeledResources = []string{ResNamespaces, ResNodes, ResPods, ResLeases, ResEvents, ResConfigMaps, ResSecrets, ResMasterLeases, ResPeerServerLeases}

// cachedResources are the resources each simulated apiserver keeps a watch cache of. Events are not cached:
// kube-apiserver sends every watch and list of events to etcd.
var cachedResources = []string{ResNamespaces, ResNodes, ResPods, ResLeases, ResConfigMaps, ResSecrets, ResMasterLeases}

// countedResources are the resources whose object counts an apiserver reads from etcd (count-only
// ranges, --etcd-count-metric-poll-period): those without a watch cache. Kubernetes 1.37 takes the
// others' counts from their watch caches (a real control plane counts only events in etcd).
var countedResources = []string{ResEvents}

// watchedResources is the number of resources each apiserver watches: the cached ones and the idle ones.
var watchedResources = len(cachedResources) + len(idleResources)

// Well-known namespaces.
const (
	nsSystem    = "kube-system"
	nsNodeLease = "kube-node-lease"
)

// prefix returns the key prefix of a resource, with its trailing slash.
func prefix(res string) string { return "/registry/" + res + "/" }

// prefixEnd returns the end of the range holding every key with the prefix.
func prefixEnd(p string) string { return clientv3.GetPrefixRangeEnd(p) }

// key returns the key of a namespaced object; namespace "" is a cluster-scoped one.
func key(res, namespace, name string) string {
	if namespace == "" {
		return "/registry/" + res + "/" + name
	}
	return "/registry/" + res + "/" + namespace + "/" + name
}

// resourceOf returns the resource of a key under /registry.
func resourceOf(k string) string {
	rest, ok := strings.CutPrefix(k, "/registry/")
	if !ok {
		return ""
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return rest[:i]
	}
	return rest
}

func nodeName(i int) string      { return "node-" + strconv.Itoa(i) }
func namespaceName(i int) string { return "ns-" + strconv.Itoa(i) }

// SizeRange is a value size distribution: uniform between Min and Max bytes.
type SizeRange struct{ Min, Max int }

// pick draws a size.
func (s SizeRange) pick(r *rand.Rand) int {
	if s.Max <= s.Min {
		return s.Min
	}
	return s.Min + r.IntN(s.Max-s.Min+1)
}

// Mean is the distribution's mean size.
func (s SizeRange) Mean() float64 { return float64(s.Min+s.Max) / 2 }

// String formats the range as --object-sizes takes it: 2k-8k, or one size.
func (s SizeRange) String() string {
	if s.Max <= s.Min {
		return formatSize(s.Min)
	}
	return formatSize(s.Min) + "-" + formatSize(s.Max)
}

// Sizes maps each resource (and the large-configmaps class) to its value sizes.
type Sizes map[string]SizeRange

// DefaultSizes are sizes of protobuf-encoded objects of real clusters: a pod of a few KB, nodes of about 5 KB
// (images and conditions), events of about 0.7 KB, leases of about 400 B, and a few configmaps of hundreds
// of KB.
func DefaultSizes() Sizes {
	return Sizes{
		ResPods:             {2 << 10, 8 << 10},
		ResNodes:            {4500, 5500},
		ResEvents:           {500, 900},
		ResLeases:           {300, 500},
		ResNamespaces:       {300, 600},
		ResConfigMaps:       {1 << 10, 8 << 10},
		resLargeConfigMaps:  {100 << 10, 500 << 10},
		ResSecrets:          {1 << 10, 4 << 10},
		ResMasterLeases:     {56, 72},
		ResPeerServerLeases: {128, 160},
	}
}

// maxValue is etcd's default request size limit less room for the key and the request's framing.
const maxValue = 1536*1024 - 4096

// ParseSizes parses --object-sizes over the defaults: resource=size or resource=min-max, comma-separated,
// sizes in bytes with an optional k or m suffix (binary).
func ParseSizes(spec string) (Sizes, error) {
	sizes := DefaultSizes()
	if strings.TrimSpace(spec) == "" {
		return sizes, nil
	}
	names := make([]string, 0, len(sizes))
	for n := range sizes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		res, val, ok := strings.Cut(item, "=")
		if !ok {
			return nil, outcome.Usagef("--object-sizes %q: %q is not resource=size", spec, item)
		}
		if _, known := sizes[res]; !known {
			if s := outcome.Suggest(res, names); s != "" {
				return nil, outcome.Usagef("--object-sizes: no resource %q (did you mean %s?)", res, s)
			}
			return nil, outcome.Usagef("--object-sizes: no resource %q (have %s)", res, strings.Join(names, ", "))
		}
		lo, hi, isRange := strings.Cut(val, "-")
		var r SizeRange
		var err error
		if r.Min, err = parseSize(lo); err == nil {
			r.Max = r.Min
			if isRange {
				r.Max, err = parseSize(hi)
			}
		}
		switch {
		case err != nil:
			return nil, outcome.Usagef("--object-sizes %s: %v", item, err)
		case r.Min < 8 || r.Max < r.Min:
			return nil, outcome.Usagef("--object-sizes %s: sizes from 8 bytes (values carry a write id), min before max", item)
		case r.Max > maxValue:
			return nil, outcome.Usagef("--object-sizes %s: over etcd's 1.5 MiB request limit", item)
		}
		sizes[res] = r
	}
	return sizes, nil
}

func parseSize(s string) (int, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	mult := 1
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "m"):
		mult, s = 1<<20, s[:len(s)-1]
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return int(f * float64(mult)), nil
}

func formatSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "m"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "k"
	}
	return strconv.Itoa(n)
}

// String lists the sizes in --object-sizes syntax.
func (s Sizes) String() string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + s[n].String()
	}
	return strings.Join(parts, ",")
}

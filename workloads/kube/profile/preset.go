package profile

import (
	"fmt"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/workloads/kube"
)

// FromConfig writes the profile of a kube workload configuration (a preset) from its plan: the objects it
// preloads, its planned etcd requests per resource and operation, its watch events, its sizes' means. Its
// Options at 1x give the configuration back (but for the size distributions, which keep their means), so
// that a preset and its profile are one description of traffic. endpoints is the etcd endpoints the plan's
// status polls count.
func FromConfig(name string, cfg kube.Config, endpoints int) *Profile {
	p := &Profile{Format: Format, Version: Version, Shareable: Shareable, Name: name, Resources: map[string]*Resource{},
		Source: Source{Apiservers: cfg.Apiservers, Notes: []string{fmt.Sprintf("written from the kube workload's plan for %s, not from a cluster's metrics", cfg)}}}
	res := func(r string) *Resource {
		if x := p.Resources[r]; x != nil {
			return x
		}
		x := &Resource{}
		p.Resources[r] = x
		return x
	}
	res("nodes").Objects = float64(cfg.Nodes)
	res("pods").Objects = float64(cfg.Pods())
	res("namespaces").Objects = float64(cfg.Namespaces + systemNamespaces)
	res("pods").CacheLists = round(cfg.CacheListRate, 4)
	for _, op := range cfg.Plan(endpoints) {
		verb, kres, ok := strings.Cut(op.Op, "/")
		r, known := emulated[kres]
		if !ok || !known || verb == "cache-sync" {
			continue // cache-sync is a wait of the watch cache, not a request
		}
		if verb == "watch-event" {
			res(r).WatchEvents += round(op.Rate, 4)
			continue
		}
		if res(r).EtcdRequests == nil {
			res(r).EtcdRequests = map[string]float64{}
		}
		res(r).EtcdRequests[storageVerb(verb)] += round(op.Rate, 4)
	}
	for k, r := range emulated {
		if _, ok := cfg.Sizes[k]; ok && p.Resources[r] != nil {
			p.Resources[r].MeanBytes = round(cfg.MeanObjectBytes(k), 0)
		}
	}
	for _, op := range cfg.Plan(endpoints) {
		if op.Op == "get/health" {
			h := round(op.Rate, 4)
			p.HealthChecks = &h
		}
	}
	p.assume()
	return p
}

// storageVerb names a kube workload verb as the apiserver's etcd request metrics do.
func storageVerb(v string) string {
	switch v {
	case "count":
		return "listWithCount"
	case "current-rv":
		return "getCurrentResourceVersion"
	}
	return v
}

// Package profile describes a Kubernetes cluster's etcd traffic as a kube workload profile: objects,
// requests, lists, watches and sizes per resource, and what etcd holds and serves, read from the metrics a
// live cluster already exports (two or more scrapes of each kube-apiserver's and each etcd member's
// /metrics). A profile holds counts, rates and sizes only, never a key, a value or an object's name, so it
// can be shared; `chaosbench run --profile` drives the kube workload from one, scaled.
//
// The format is YAML, versioned (Format, Version), documented in docs/workloads.md; every figure a profile
// could not read is listed with what was assumed instead.
package profile

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// Format and Version identify the profile format this chaosbench writes and reads.
const (
	Format  = "chaosbench/kube-profile"
	Version = 1
)

// Shareable is the profile's own statement of what it holds.
const Shareable = "counts, rates and sizes per resource only: no key, value or object name left the cluster"

// Profile is a cluster's traffic. Rates are per second over the scrapes' window; object counts, watchers
// and etcd's sizes are at the last scrape.
type Profile struct {
	Format    string `yaml:"format"`
	Version   int    `yaml:"version"`
	Shareable string `yaml:"shareable"`
	// Name says what the profile describes (a cluster, a preset).
	Name   string `yaml:"name,omitempty"`
	Source Source `yaml:"source"`
	// Resources are per API resource, named as the apiserver's metrics name them (pods, nodes,
	// leases.coordination.k8s.io is leases: built-in groups keep the plural alone).
	Resources map[string]*Resource `yaml:"resources"`
	Etcd      *Etcd                `yaml:"etcd,omitempty"`
	// HealthChecks are the apiservers' etcd health checks per second: an apiserver reads etcd's health
	// when its /healthz, /livez or /readyz is probed (apiserver_request_duration_seconds), at most once a
	// second (its prober's rate limit). Absent when the scrapes do not count those requests.
	HealthChecks *float64 `yaml:"etcd_health_checks_per_second,omitempty"`
	// Assumptions are the figures the metrics did not give, each with what was assumed instead.
	Assumptions []Assumption `yaml:"assumptions,omitempty"`
}

// Source is where the figures come from.
type Source struct {
	// Apiservers and EtcdMembers are the processes scraped; Scrapes the scrapes of each.
	Apiservers  int `yaml:"apiservers"`
	EtcdMembers int `yaml:"etcd_members"`
	Scrapes     int `yaml:"scrapes"`
	// WindowSeconds is the time between the first and the last scrape.
	WindowSeconds float64 `yaml:"window_seconds"`
	// From and To are the first and last scrapes' times (RFC 3339).
	From string `yaml:"from,omitempty"`
	To   string `yaml:"to,omitempty"`
	// Notes are what the reading found (restarts, missing series).
	Notes []string `yaml:"notes,omitempty"`
}

// Resource is one API resource's traffic, as the apiservers saw it.
type Resource struct {
	// Objects stored (apiserver_storage_objects).
	Objects float64 `yaml:"objects,omitempty"`
	// MeanBytes is the mean size of an object: as stored (apiserver_resource_size_estimate_bytes over
	// the objects), else as watchers received it (apiserver_watch_events_sizes).
	MeanBytes float64 `yaml:"mean_bytes,omitempty"`
	// EtcdRequests are the apiservers' etcd requests per second by operation (etcd_requests_total, or
	// etcd_request_duration_seconds_count): create, update, delete, get, list (a page each),
	// listWithCount, getCurrentResourceVersion, ...
	EtcdRequests map[string]float64 `yaml:"etcd_requests_per_second,omitempty"`
	// Lists are the lists served from etcd (apiserver_storage_list_*).
	Lists *Lists `yaml:"storage_lists,omitempty"`
	// CacheLists per second are lists served by the watch cache (apiserver_cache_list_total).
	CacheLists float64 `yaml:"cache_lists_per_second,omitempty"`
	// CacheInitializations are the watch cache's (re)lists from etcd over the window
	// (apiserver_watch_cache_initializations_total).
	CacheInitializations float64 `yaml:"cache_initializations,omitempty"`
	// WatchEvents per second sent to watchers (apiserver_watch_events_total).
	WatchEvents float64 `yaml:"watch_events_per_second,omitempty"`
	// Bookmarks per second are the progress notifications etcd sent the watch cache
	// (etcd_bookmark_total).
	Bookmarks float64 `yaml:"bookmarks_per_second,omitempty"`
	// Watchers are the open watches of clients (apiserver_longrunning_requests{verb="WATCH"}).
	Watchers float64 `yaml:"watchers,omitempty"`
	// CreatedThrough, when fewer apiservers than all created objects of the resource in the window, is
	// how many did (a control plane whose events come from one scheduler creates them through one).
	CreatedThrough int `yaml:"created_through_apiservers,omitempty"`
}

// Lists are a resource's lists served from etcd.
type Lists struct {
	PerSecond float64 `yaml:"per_second"`
	// FetchedPerList, EvaluatedPerList and ReturnedPerList are objects per list: read from etcd,
	// evaluated by selectors, returned.
	FetchedPerList   float64 `yaml:"fetched_per_list"`
	EvaluatedPerList float64 `yaml:"evaluated_per_list,omitempty"`
	ReturnedPerList  float64 `yaml:"returned_per_list"`
}

// Etcd is what the etcd members held and served.
type Etcd struct {
	DBSizeBytes      float64 `yaml:"db_size_bytes"`
	DBSizeInUseBytes float64 `yaml:"db_size_in_use_bytes,omitempty"`
	Keys             float64 `yaml:"keys"`
	// GRPCRequests are requests per second by gRPC method, all members together.
	GRPCRequests map[string]float64 `yaml:"grpc_requests_per_second,omitempty"`
	WatchStreams float64            `yaml:"watch_streams"`
	Watchers     float64            `yaml:"watchers"`
	// LeasesGranted and LeasesRevoked are per second.
	LeasesGranted float64 `yaml:"leases_granted_per_second"`
	LeasesRevoked float64 `yaml:"leases_revoked_per_second"`
}

// Assumption is a figure a profile lacks and what stands in for it.
type Assumption struct {
	Figure  string  `yaml:"figure"`
	Assumed float64 `yaml:"assumed"`
	Why     string  `yaml:"why"`
}

// assumed returns the assumption made for a figure, if any.
func (p *Profile) assumed(figure string) (float64, bool) {
	for _, a := range p.Assumptions {
		if a.Figure == figure {
			return a.Assumed, true
		}
	}
	return 0, false
}

// Marshal encodes the profile as YAML, led by a comment saying what it is and that it is shareable.
func (p *Profile) Marshal() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# A kube workload profile: a Kubernetes cluster's etcd traffic, written by `chaosbench profile`.\n")
	fmt.Fprintf(&b, "# Shareable: %s.\n", Shareable)
	fmt.Fprintf(&b, "# Run it with `chaosbench run --profile FILE [--scale X]`; the format is in docs/workloads.md.\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	return b.Bytes(), nil
}

// Parse decodes a profile. A file that is not a profile, or one of a newer format version, is a usage
// error.
func Parse(source string, data []byte) (*Profile, error) {
	var p Profile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&p); err != nil {
		return nil, outcome.Usagef("--profile %s: not a kube workload profile: %v", source, firstLine(err.Error()))
	}
	switch {
	case p.Format != Format:
		return nil, outcome.Usagef("--profile %s: not a kube workload profile (format %q, want %q)", source, p.Format, Format)
	case p.Version > Version:
		return nil, outcome.Usagef("--profile %s: format version %d is newer than this chaosbench reads (%d): use a newer chaosbench", source, p.Version, Version)
	case p.Version < 1:
		return nil, outcome.Usagef("--profile %s: format version %d: want %d", source, p.Version, Version)
	case len(p.Resources) == 0:
		return nil, outcome.Usagef("--profile %s: no resources", source)
	}
	for name, r := range p.Resources {
		if r == nil {
			return nil, outcome.Usagef("--profile %s: resource %s is empty", source, name)
		}
		if r.Objects < 0 || r.MeanBytes < 0 || r.WatchEvents < 0 || r.Watchers < 0 {
			return nil, outcome.Usagef("--profile %s: resource %s: negative figures", source, name)
		}
		for op, v := range r.EtcdRequests {
			if v < 0 || math.IsNaN(v) {
				return nil, outcome.Usagef("--profile %s: resource %s: %s rate %v", source, name, op, v)
			}
		}
	}
	return &p, nil
}

// Load reads a profile file.
func Load(path string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, outcome.Usagef("--profile: %v", err)
	}
	return Parse(path, data)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// resourceNames returns the profile's resources, sorted.
func (p *Profile) resourceNames() []string {
	out := make([]string, 0, len(p.Resources))
	for n := range p.Resources {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

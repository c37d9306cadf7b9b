package chaosbench

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	"github.com/spf13/pflag"

	"github.com/etcd-chaosbench/chaosbench/workloads"
	"github.com/etcd-chaosbench/chaosbench/workloads/kube"
	"github.com/etcd-chaosbench/chaosbench/workloads/kube/profile"
	"github.com/etcd-chaosbench/chaosbench/workloads/kubeapi"
)

// WorkloadNames lists every workload: kube first (the default), then the micro workloads.
func WorkloadNames() []string {
	return append([]string{"kube", kubeapi.Name}, workloads.MicroNames...)
}

// bindKubeFlags defines the kube workload's flags.
func bindKubeFlags(fs *pflag.FlagSet, s *Scenario) {
	k := &s.Kube
	fs.StringVar(&k.Preset, "preset", k.Preset, "kube: cluster size class, "+strings.Join(kube.Presets, ", ")+" (about 50, 250, 1000 and 3000 nodes); other kube flags override it")
	fs.IntVar(&k.Nodes, "nodes", k.Nodes, "kube: nodes (kubelets); 0: 100, or the preset's")
	fs.IntVar(&k.PodsPerNode, "pods-per-node", k.PodsPerNode, "kube: pods per node, kept steady by the churn (0: 30)")
	fs.IntVar(&k.Namespaces, "namespaces", k.Namespaces, "kube: namespaces holding the pods (0: one per ten nodes)")
	fs.Float64Var(&k.Churn, "churn", k.Churn, "kube: pods created (and as many deleted) per second (0: nodes/20, at most 20)")
	fs.Float64Var(&k.ListRate, "list-rate", k.ListRate, "kube: clients' paged lists of a namespace's pods per second, and as many consistent lists from the watch cache (0: nodes/200; negative: none)")
	fs.IntVar(&k.Apiservers, "apiservers", k.Apiservers, "kube: simulated kube-apiservers, each with its own etcd client and watch caches (0: 3)")
	fs.DurationVar(&k.EventTTL, "event-ttl", k.EventTTL, "kube: lifetime of events (kube-apiserver --event-ttl; 0: 1h)")
	fs.DurationVar(&k.CompactionInterval, "compaction-interval", k.CompactionInterval, "kube: the apiservers' compaction interval (0: 5m, or a quarter of a run shorter than 20m)")
	fs.StringVar(&k.ObjectSizes, "object-sizes", k.ObjectSizes, "kube: value sizes, resource=size or resource=min-max, e.g. pods=4k-16k,events=1k")
	fs.StringSliceVar(&k.Actors, "actors", k.Actors, "kube: run only these actors ("+strings.Join(kube.Actors, ", ")+"; default all)")
	fs.StringSliceVar(&k.SkipActors, "skip-actors", k.SkipActors, "kube: turn these actors off")
	fs.StringVar(&s.Profile, "profile", s.Profile, "kube: drive the workload from a kube workload profile (chaosbench profile) instead of a preset")
	fs.Float64Var(&s.Scale, "scale", s.Scale, "kube: with --profile, grow the profile's objects, rates and watchers by this factor (0: 1)")
	fs.BoolVar(&s.ScaleRates, "scale-rates", s.ScaleRates, "kube: with --profile, --scale grows the request rates only, not the objects")
	fs.BoolVar(&s.DryRun, "dry-run", s.DryRun, "print the planned request rates per actor and operation (kube) and exit without starting anything")
}

// newWorkload returns the scenario's workload, and for kube its resolved configuration.
func (s *Scenario) newWorkload() (workloads.Workload, *kube.Config, error) {
	if !slices.Contains(WorkloadNames(), s.Workload) {
		if sug := outcome.Suggest(s.Workload, WorkloadNames()); sug != "" {
			return nil, nil, outcome.Usagef("--workload %s: no such workload (did you mean %s?)", s.Workload, sug)
		}
		return nil, nil, outcome.Usagef("--workload %s: no such workload (have %s)", s.Workload, strings.Join(WorkloadNames(), ", "))
	}
	if s.Workload != "kube" && s.Workload != kubeapi.Name {
		// A worker of a split load sends its share (scenario_workers.go).
		if err := s.applyShare(nil); err != nil {
			return nil, nil, err
		}
		wl, err := workloads.NewMicro(s.Workload, s.Micro)
		return wl, nil, err
	}
	if s.Total > 0 {
		return nil, nil, outcome.Usagef("--total: the %s workload runs for --duration", s.Workload)
	}
	opts, err := s.kubeOptions()
	if err != nil {
		return nil, nil, err
	}
	cfg, err := opts.Resolve(s.Duration)
	if err != nil {
		return nil, nil, err
	}
	if s.Workload == kubeapi.Name {
		if _, err := s.kubeRelease(); err != nil {
			return nil, nil, err
		}
		// The plan is the emulation's; the real control plane's traffic is measured, not planned.
		return kubeapi.New(cfg), nil, nil
	}
	if err := s.applyShare(&cfg); err != nil {
		return nil, nil, err
	}
	return kube.New(cfg), &cfg, nil
}

// endpointCount is the number of client endpoints the cluster will have, for the plan's status polls.
func (s *Scenario) endpointCount() int {
	if s.Cluster == "external" {
		return len(s.Endpoints)
	}
	return s.Members
}

// writeDryRun prints what a run of s would do, without starting anything.
func (s *Scenario) writeDryRun(w io.Writer, cfg *kube.Config) error {
	fmt.Fprintf(w, "dry run: workload %s on a %s cluster for %s\n", s.Workload, s.clusterDescription(), s.Duration)
	if cfg == nil {
		if s.Rate > 0 {
			fmt.Fprintf(w, "%s at %g operations/s (open loop), %d clients over %d connections\n", s.Workload, s.Rate, s.Clients, s.Conns)
		} else {
			fmt.Fprintf(w, "%s closed loop: %d clients over %d connections\n", s.Workload, s.Clients, s.Conns)
		}
		return nil
	}
	return kube.WritePlan(w, *cfg, cfg.Plan(s.endpointCount()))
}

// kubeOptions returns the kube options of the run: the scenario's, over its profile's (at its scale) when
// it has one.
func (s *Scenario) kubeOptions() (kube.Options, error) {
	if s.Profile == "" {
		if s.Scale != 0 || s.ScaleRates {
			return kube.Options{}, outcome.Usagef("--scale and --scale-rates grow a --profile: give one")
		}
		return s.Kube, nil
	}
	if s.Kube.Preset != "" {
		return kube.Options{}, outcome.Usagef("--profile %s and --preset %s: one or the other", s.Profile, s.Kube.Preset)
	}
	p, err := profile.Load(s.Profile)
	if err != nil {
		return kube.Options{}, err
	}
	sc := profile.Scale{Factor: s.Scale, RatesOnly: s.ScaleRates}
	from, err := p.Options(sc)
	if err != nil {
		return kube.Options{}, err
	}
	return mergeKubeOptions(from, s.Kube, fmt.Sprintf("profile %s at %s", profileLabel(s.Profile, p), sc)), nil
}

// profileLabel names a profile in reports: its name, else its file's.
func profileLabel(path string, p *profile.Profile) string {
	if p.Name != "" {
		return p.Name
	}
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

// mergeKubeOptions is the profile's options with every explicit (non-zero) setting of set over them.
func mergeKubeOptions(from, set kube.Options, label string) kube.Options {
	o := from
	o.Label = label
	pick := func(dst *int, v int) {
		if v != 0 {
			*dst = v
		}
	}
	pick(&o.Nodes, set.Nodes)
	pick(&o.PodsPerNode, set.PodsPerNode)
	pick(&o.Namespaces, set.Namespaces)
	pick(&o.Apiservers, set.Apiservers)
	if set.Churn != 0 {
		o.Churn = set.Churn
	}
	if set.ListRate != 0 {
		o.ListRate = set.ListRate
	}
	if set.EventTTL != 0 {
		o.EventTTL = set.EventTTL
	}
	if set.CompactionInterval != 0 {
		o.CompactionInterval = set.CompactionInterval
	}
	if set.ObjectSizes != "" {
		o.ObjectSizes = strings.Trim(o.ObjectSizes+","+set.ObjectSizes, ",")
	}
	o.Actors, o.SkipActors = set.Actors, set.SkipActors
	return o
}

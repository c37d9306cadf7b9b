package chaosbench

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/workloads"
	"github.com/etcd-chaosbench/chaosbench/workloads/kube"
)

// WorkerOptions split one scenario's load over several generators (issue: scale-out). With Workers > 1
// and no Worker, `chaosbench run` coordinates: it starts the cluster and the fault schedule, runs worker 0
// itself and the others as processes (or containers, WorkerContainers), starts them together and merges
// their results into one run directory (workers.go). With Worker set, it is one of the workers: it sends
// its share of the load to a cluster someone else started, from the common start time, and leaves the
// merge to `chaosbench merge`.
type WorkerOptions struct {
	// Workers is the number of generators the load is split over (1: no split).
	Workers int `json:"workers,omitempty"`
	// Worker is this generator's index, 0 to Workers-1; -1 when it is not one worker of a split load.
	Worker int `json:"worker"`
	// ClockRef is the coordinator's URL (http://host:port): a worker measures its clock against it and
	// takes the seed and the start time from it. Worker 0 of a Kubernetes Indexed Job serves it at that
	// port itself.
	ClockRef string `json:"clock-ref,omitempty"`
	// StartAt is the common start time (RFC 3339, on the reference clock) when no coordinator hands one out.
	StartAt string `json:"start-at,omitempty"`
	// WorkerContainers runs the workers of a docker cluster as containers on the cluster's network, each
	// limited to WorkerCPUs CPUs (0: no limit).
	WorkerContainers bool    `json:"worker-containers,omitempty"`
	WorkerCPUs       float64 `json:"worker-cpus,omitempty"`

	// ClockServed says the coordinator serves the reference clock (a split run here): worker 0 does not.
	// Not a flag: the coordinator writes it into the scenarios of the workers it starts.
	ClockServed bool `json:"clock-served,omitempty"`

	// coordinated marks the run in the coordinator's process (worker 0, or the observer): the cluster is
	// its own, and the coordinator serves the reference.
	coordinated bool
	// observer marks the coordinator's own run when every worker runs in a container: it holds the
	// cluster, the fault schedule and the metrics, and sends no load (see runSplit).
	observer bool
}

// JobIndexEnv is the variable Kubernetes sets to a pod's index in an Indexed Job: a worker's --worker.
const JobIndexEnv = "JOB_COMPLETION_INDEX"

// bindWorkerFlags defines the flags that split a load over several generators.
func bindWorkerFlags(fs *pflag.FlagSet, o *WorkerOptions) {
	fs.IntVar(&o.Workers, "workers", o.Workers, "split the load over this many generators, each with a disjoint share of the same plan; without --worker, run them here and merge their results")
	fs.IntVar(&o.Worker, "worker", o.Worker, "be worker I (0 to --workers minus 1) of a split load against an --cluster external (default $"+JobIndexEnv+" when --workers is set)")
	fs.StringVar(&o.ClockRef, "clock-ref", o.ClockRef, "worker: the coordinator's http://host:port, for the seed, the common start and the clock offset (worker 0 serves it at that port)")
	fs.StringVar(&o.StartAt, "start-at", o.StartAt, "worker: start the load at this time (RFC 3339) instead of the one the coordinator hands out")
	fs.BoolVar(&o.WorkerContainers, "worker-containers", o.WorkerContainers, "--cluster docker --workers N: run the workers as containers on the cluster's network")
	fs.Float64Var(&o.WorkerCPUs, "worker-cpus", o.WorkerCPUs, "CPU limit of each worker container (0: none)")
}

// UseWorkerIndex sets --worker from Kubernetes' JOB_COMPLETION_INDEX (read with lookup) when the load is
// split (--workers) and --worker was not given (given reports whether it was).
func (o *WorkerOptions) UseWorkerIndex(lookup func(string) (string, bool), given bool) error {
	if given || o.Workers <= 1 || lookup == nil {
		return nil
	}
	v, ok := lookup(JobIndexEnv)
	if !ok || v == "" {
		return nil
	}
	i, err := strconv.Atoi(v)
	if err != nil {
		return outcome.Usagef("%s=%q: not a worker index", JobIndexEnv, v)
	}
	o.Worker = i
	return nil
}

// IsWorker reports whether the run is one worker of a split load (or the coordinator's observer).
func (o *WorkerOptions) IsWorker() bool { return o.Worker >= 0 || o.observer }

// Coordinates reports whether the run splits its load over workers it starts itself.
// With --worker-containers a single worker is coordinated too: its load runs in a container of its own.
func (o *WorkerOptions) Coordinates() bool {
	return (o.Workers > 1 || o.WorkerContainers) && o.Worker < 0 && !o.observer
}

// share returns the worker's share of the load (the whole load when it is not a worker).
func (o *WorkerOptions) share() workloads.Share {
	if o.Worker < 0 {
		return workloads.Share{}
	}
	return workloads.Share{Index: o.Worker, Of: o.Workers}
}

// startTime parses --start-at.
func (o *WorkerOptions) startTime() (time.Time, error) {
	if o.StartAt == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, o.StartAt)
	if err != nil {
		return time.Time{}, outcome.Usagef("--start-at %q: a time such as 2026-11-24T03:00:00Z", o.StartAt)
	}
	return t, nil
}

// validateWorkers checks the split of the load before anything starts.
func (s *Scenario) validateWorkers() error {
	o := &s.WorkerOptions
	switch {
	case o.Workers < 1 || o.Workers > workloads.MaxShares:
		return outcome.Usagef("--workers %d: between 1 and %d", o.Workers, workloads.MaxShares)
	case o.observer:
		return nil
	case o.Worker >= o.Workers || o.Worker < -1:
		return outcome.Usagef("--worker %d: between 0 and --workers %d minus 1", o.Worker, o.Workers)
	case o.IsWorker() && o.Workers == 1 && !o.ClockServed && !o.observer:
		return outcome.Usagef("--worker %d: give --workers, the number of workers the load is split over", o.Worker)
	case o.IsWorker() && s.Cluster != "external" && !o.coordinated:
		return outcome.Usagef("--worker: a worker sends its share to a cluster another process started; give --cluster external and its --endpoints")
	case o.IsWorker() && o.ClockRef == "" && o.StartAt == "":
		return outcome.Usagef("--worker: give --clock-ref (or --start-at) so that the workers start together")
	case o.IsWorker() && o.ClockRef == "" && s.Seed == 0:
		return outcome.Usagef("--worker without --clock-ref: give --seed, the same for every worker")
	case !o.IsWorker() && (o.ClockRef != "" || o.StartAt != ""):
		return outcome.Usagef("--clock-ref and --start-at are for a worker (--worker)")
	case o.WorkerContainers && (s.Cluster != "docker" || !(o.Coordinates() || o.coordinated)):
		return outcome.Usagef("--worker-containers: run with --cluster docker and --workers N")
	case o.WorkerCPUs < 0 || (o.WorkerCPUs > 0 && !o.WorkerContainers):
		return outcome.Usagef("--worker-cpus %g: a limit of --worker-containers", o.WorkerCPUs)
	case o.Workers > 1 && s.Workload == "controlplane":
		return outcome.Usagef("--workers: the controlplane workload's load comes from a real control plane; split the kube workload instead")
	}
	if _, err := o.startTime(); err != nil {
		return err
	}
	if o.ClockRef != "" {
		u, err := url.Parse(o.ClockRef)
		if err != nil || u.Scheme != "http" || u.Host == "" || u.Port() == "" {
			return outcome.Usagef("--clock-ref %q: http://host:port", o.ClockRef)
		}
	}
	return nil
}

// applyShare cuts the scenario's load down to the worker's share: a micro workload's rate, clients,
// connections and key range; the kube workload's apiservers (see kube.Config.Share). A worker records its
// history for the merged check and leaves checks and thresholds to the merge; faults are injected by
// worker 0 only.
func (s *Scenario) applyShare(cfg *kube.Config) error {
	sh := s.share()
	if s.Coordinates() || sh.Whole() {
		return s.checkSplit(cfg)
	}
	if cfg != nil {
		if err := s.checkSplit(cfg); err != nil {
			return err
		}
		cfg.Share = sh
		return nil
	}
	s.Rate = sh.Rate(s.Rate)
	s.Clients, s.Conns = sh.Part(s.Clients), max(1, sh.Part(s.Conns))
	s.Conns = min(s.Conns, s.Clients)
	if s.Total > 0 {
		s.Total = int64(sh.Part(int(s.Total)))
	}
	if s.Workload == "watch-latency" {
		s.Micro.WatchStreams = sh.Part(s.Micro.WatchStreams)
	}
	s.Micro.Share = sh
	return nil
}

// checkSplit checks that the load can be split over the workers.
func (s *Scenario) checkSplit(cfg *kube.Config) error {
	n := s.Workers
	if n <= 1 {
		return nil
	}
	if cfg != nil && cfg.Apiservers < n {
		return outcome.Usagef("--workers %d: the kube workload is split by apiserver; --apiservers %d gives at most %d workers", n, cfg.Apiservers, cfg.Apiservers)
	}
	if cfg != nil {
		return nil
	}
	if s.Clients < n {
		return outcome.Usagef("--workers %d: more workers than --clients %d", n, s.Clients)
	}
	if s.Workload == "watch-latency" && s.Micro.WatchStreams < n {
		return outcome.Usagef("--workers %d: more workers than --watch-streams %d", n, s.Micro.WatchStreams)
	}
	if s.Micro.KeySpaceSize < n {
		return outcome.Usagef("--workers %d: more workers than --key-space-size %d", n, s.Micro.KeySpaceSize)
	}
	return nil
}

// writeSharesDryRun prints each worker's share of the load and their sum, which is the whole plan.
func (s *Scenario) writeSharesDryRun(w io.Writer, cfg *kube.Config) error {
	n := s.Workers
	fmt.Fprintf(w, "\nsplit over %d workers (seed %d): each worker's share, and their sum\n", n, s.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if cfg != nil {
		header := "operation\twhole\t"
		for i := range n {
			header += fmt.Sprintf("w%d\t", i)
		}
		fmt.Fprintln(tw, header+"sum\t")
		whole := cfg.Whole().Plan(s.endpointCount())
		shares := make([]map[string]float64, n)
		for i := range n {
			c := *cfg
			c.Share = workloads.Share{Index: i, Of: n}
			shares[i] = map[string]float64{}
			for _, p := range c.Plan(s.endpointCount()) {
				shares[i][p.Actor+" "+p.Op] += p.Rate
			}
		}
		for _, p := range whole {
			row, sum := fmt.Sprintf("%s %s\t%.4f\t", p.Actor, p.Op, p.Rate), 0.0
			for i := range n {
				r := shares[i][p.Actor+" "+p.Op]
				sum += r
				row += fmt.Sprintf("%.4f\t", r)
			}
			fmt.Fprintln(tw, row+fmt.Sprintf("%.4f\t", sum))
		}
		return tw.Flush()
	}
	fmt.Fprintln(tw, "worker\trate/s\tclients\tconns\tkeys\t")
	var rate float64
	var clients, conns, keys int
	for i := range n {
		ws := *s
		ws.Worker = i
		if err := ws.applyShare(nil); err != nil {
			return err
		}
		first, count := ws.Micro.Share.Range(s.Micro.KeySpaceSize)
		fmt.Fprintf(tw, "w%d\t%.4g\t%d\t%d\t%d-%d\t\n", i, ws.Rate, ws.Clients, ws.Conns, first, first+count-1)
		rate, clients, conns, keys = rate+ws.Rate, clients+ws.Clients, conns+ws.Conns, keys+count
	}
	fmt.Fprintf(tw, "sum\t%g\t%d\t%d\t%d\t\n", rate, clients, conns, keys)
	return tw.Flush()
}

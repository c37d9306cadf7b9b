package chaosbench

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/version"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/workloads/kube"
	"github.com/etcd-chaosbench/chaosbench/workloads/kubeapi"
)

// teardown stops everything execute started, in order: the faults (healed), the workload, the recording,
// the clients, then what needs the members still running (the control plane's and etcd's last metrics),
// then the cluster. It returns what went wrong, the run's harness errors. Stopping has a budget of its own
// (cleanupTimeout) on a context that survives the run's, so that an interrupted run still stops its
// members, and does so within seconds.
func (r *run) teardown(ctx context.Context, interrupted bool) []error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	r.faults.stop(ctx)
	var errs []error
	if c, ok := r.wl.(interface{ Close() }); ok {
		c.Close()
	}
	if r.collector != nil {
		errs = append(errs, r.collector.Close(r.loadEnd))
	}
	if r.records != nil {
		// Closed with the collector, so that both hold the same records.
		errs = append(errs, r.records.Close())
	}
	if r.runner != nil {
		if err := r.runner.Close(); err != nil && !interrupted {
			errs = append(errs, err)
		}
	}
	if r.history != nil {
		errs = append(errs, r.history.Close())
	}
	// The last scrape of etcd's metrics needs the members still running, and so does the control plane's.
	errs = append(errs, r.stopControlPlane(cctx))
	for _, p := range r.shapes {
		p.Close()
	}
	errs = append(errs, r.stopScraper(cctx))
	if r.cluster != nil {
		if err := r.cluster.Close(cctx); err != nil {
			errs = append(errs, fmt.Errorf("stop cluster: %w", err))
		}
	}
	if r.clientLog != nil {
		r.clientLog.Close()
	}
	var harnessErrs []error
	for _, err := range errs {
		if err != nil {
			harnessErrs = append(harnessErrs, err)
		}
	}
	return harnessErrs
}

// describeRun puts into the summary what ran: the versions, when, the settings (to replay it) and the
// cluster.
func (r *run) describeRun(s *results.Summary) {
	s.Schema = results.SummarySchema
	s.Name = r.s.DisplayName()
	s.Command = redactUser(r.env.Command)
	s.Seed = r.s.Seed
	s.Versions.Chaosbench = r.env.Version
	s.Versions.EtcdClient = version.Version
	s.Versions.Go = runtime.Version()
	s.Start = r.start
	s.End = time.Now()
	s.DurationSeconds = s.End.Sub(s.Start).Seconds()
	s.WarmupSeconds = r.s.Warmup.Seconds()
	if cfg, err := json.Marshal(r.s); err == nil {
		s.Config = cfg
	}
	s.Cluster = results.ClusterInfo{Backend: r.s.Cluster, EtcdFlags: r.s.EtcdFlags}
	if r.cluster != nil {
		s.Cluster.Members = len(r.cluster.Members())
		s.Cluster.Endpoints = r.cluster.Endpoints()
		r.describeMembers(&s.Cluster)
	}
}

// summarizeLoad puts the load's figures into the summary, over the measured span (after the warm-up, until
// the load ended): every operation's, the fault windows and phases, the generator's own load and a split
// worker's part. It writes the latency histograms too; not writing them is a harness error, returned.
func (r *run) summarizeLoad(s *results.Summary) error {
	var err error
	s.Operations = map[string]*results.Operation{}
	if r.collector != nil {
		from, ok := r.collector.MeasureFrom()
		if ok && r.loadEnd > from {
			s.MeasuredSeconds = (r.loadEnd - from).Seconds()
		}
		r.faults.summarize(s, from, r.loadEnd, ok && r.loadEnd > from)
		s.Operations = r.collector.Operations(time.Duration(s.MeasuredSeconds * float64(time.Second)))
		err = r.collector.WriteHGRM(r.dir)
	}
	s.Total = results.Totals(s.Operations)
	if begin, ok := r.beganAt(); ok && r.loadCPU > 0 {
		s.GeneratorLoad = results.NewGeneratorLoad(r.loadCPU, r.loadEnd-begin, results.Requests(s.Operations), r.liveHeap)
	}
	if r.split != nil {
		s.Split = r.split.summary()
		s.Split.Records = r.records != nil
		if r.collector != nil {
			if from, ok := r.collector.MeasureFrom(); ok && r.loadEnd > from {
				s.Split.MeasuredFromNs, s.Split.LoadEndNs = int64(from), int64(r.loadEnd)
			}
		}
	}
	if k, ok := r.wl.(*kube.Workload); ok && r.rec != nil {
		s.Kube = k.Summary(s.Operations, s.MeasuredSeconds, r.s.endpointCount())
	}
	return err
}

// summarizeSchedule puts into the summary how the load was paced and how much of it started late. The
// kube workloads pace themselves: their schedule is what they planned, not the runner's settings.
func (r *run) summarizeSchedule(s *results.Summary) {
	s.Schedule = results.Schedule{Mode: "closed", TargetRate: r.s.Rate, Clients: r.s.Clients, Conns: r.s.Conns}
	if r.s.Rate > 0 {
		s.Schedule.Mode = "open"
	}
	if k, ok := r.wl.(*kube.Workload); ok && r.rec != nil {
		cfg := k.Config()
		s.Schedule.Mode, s.Schedule.TargetRate = "open", kube.PlanTotal(cfg.Plan(r.s.endpointCount()))
		s.Schedule.Clients, s.Schedule.Conns = cfg.Apiservers, cfg.Apiservers
	}
	if k, ok := r.wl.(*kubeapi.Workload); ok {
		// Creates and deletes at the churn rate, and the lists: what the workload itself schedules.
		cfg := k.Config()
		s.Schedule.Mode, s.Schedule.TargetRate = "open", 2*cfg.Churn+cfg.ListRate
		s.Schedule.Clients, s.Schedule.Conns = cfg.Apiservers, cfg.Apiservers
	}
	for _, op := range s.Operations {
		s.Schedule.MissedBacklog += op.MissedBacklog
		s.Schedule.MissedLag += op.MissedLag
	}
	// Only requests are scheduled: watch events and cache waits never start late, so they do not dilute it.
	if n := results.Requests(s.Operations); n > 0 {
		s.Schedule.MissedPercent = 100 * float64(s.Schedule.MissedBacklog+s.Schedule.MissedLag) / float64(n)
	}
}

// decide completes the summary with what went wrong (member crashes, an interrupt, the load's error, the
// harness errors), judges it, decides the outcome and stores summary.json with it. A summary that cannot
// be stored is a harness error of the run.
func (r *run) decide(s *results.Summary, interrupted bool, loadErr error, harnessErrs []error) outcome.Outcome {
	r.mu.Lock()
	s.Crashes = append(s.Crashes, r.crashes...)
	r.mu.Unlock()
	switch {
	case interrupted:
		s.Interrupted = true
		s.Incomplete, s.IncompleteReason = true, "interrupted by signal; results cover the load up to that moment"
	case loadErr != nil:
		s.Incomplete, s.IncompleteReason = true, loadErr.Error()
	}
	for _, err := range harnessErrs {
		s.Errors = append(s.Errors, err.Error())
	}
	// Thresholds and diagnosis go into summary.json, then the outcome is decided from the summary alone.
	r.judge(s)
	o := s.SetOutcome()
	if err := results.WriteSummary(r.dir, s); err != nil {
		s.Errors = append(s.Errors, err.Error())
		o = s.SetOutcome()
	}
	return o
}

// writeOutputs prints the summary, the checks' verdicts and the errors, and writes the report files. Reports
// that cannot all be written are a harness error, which the stored summary must say too: the outcome o is
// decided again, and returned.
func (r *run) writeOutputs(s *results.Summary, o outcome.Outcome) outcome.Outcome {
	fmt.Fprintln(r.out)
	if err := results.WriteText(r.out, s); err != nil {
		fmt.Fprintln(r.out, "error:", err)
	}
	if s.Schedule.Mode == "open" && s.Schedule.MissedPercent > 1 {
		fmt.Fprintf(r.out, "WARNING: %.1f%% of requests started late: response times include the delay, service times do not.\n", s.Schedule.MissedPercent)
	}
	r.printChecks()
	for _, e := range s.Errors {
		fmt.Fprintln(r.out, "error:", e)
	}
	if err := r.writeReports(); err != nil {
		// The reports could not all be written: that is a harness error, and the summary must say so too.
		fmt.Fprintln(r.out, "error:", err)
		s.Errors = append(s.Errors, err.Error())
		o = s.SetOutcome()
		if err := results.WriteSummary(r.dir, s); err != nil {
			fmt.Fprintln(r.out, "error:", err)
		}
	}
	return o
}

// beganAt returns when the load began, if it did.
func (r *run) beganAt() (time.Duration, bool) {
	if r.rec == nil {
		return 0, false
	}
	return r.rec.Began()
}

// redactUser hides the password of a --user name:password in a command line, which the summary keeps to
// replay the run: a replay asks for the password again (--password-file).
func redactUser(args []string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		name, value, inline := strings.Cut(out[i], "=")
		if name != "--user" && name != "-user" {
			continue
		}
		if !inline {
			if i+1 >= len(out) {
				break
			}
			i++
			value = out[i]
		}
		if user, _, hasPassword := strings.Cut(value, ":"); hasPassword {
			value = user + ":REDACTED"
		}
		if inline {
			out[i] = name + "=" + value
		} else {
			out[i] = value
		}
	}
	return out
}

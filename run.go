package chaosbench

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	"go.etcd.io/etcd/api/v3/version"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/controlplane"
	"github.com/etcd-chaosbench/chaosbench/clusters/kubebuild"
	"github.com/etcd-chaosbench/chaosbench/clusters/shapes"
	lin "github.com/etcd-chaosbench/chaosbench/linearizability"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
	"github.com/etcd-chaosbench/chaosbench/results/live"
	"github.com/etcd-chaosbench/chaosbench/results/metrics"
	"github.com/etcd-chaosbench/chaosbench/results/report"
	"github.com/etcd-chaosbench/chaosbench/workloads"
	"github.com/etcd-chaosbench/chaosbench/workloads/kube"
	"github.com/etcd-chaosbench/chaosbench/workloads/kubeapi"
)

// ErrInterrupted is returned by Run when its context was cancelled (SIGINT): the run stopped early, healed
// and cleaned up, and wrote what it had, marked incomplete.
var ErrInterrupted = errors.New("run interrupted")

// cleanupTimeout bounds stopping the cluster and writing results once the load is over or interrupted,
// so that an interrupted run exits within seconds.
const cleanupTimeout = 8 * time.Second

// Env is what a run takes from its caller besides the scenario.
type Env struct {
	// Version is chaosbench's version, stored in the summary.
	Version string
	// Command is the command line, stored in the summary.
	Command []string
	// Out receives human output: the plan, progress, member events and the final summary.
	Out io.Writer
	// MemberCommand starts an embedded member; the default re-executes this binary in member mode.
	MemberCommand []string
	// ClusterReady, when set, is called once the cluster is up and before the workload starts, with the
	// cluster (qualify measures the client-to-member round trips there, while nothing else runs).
	ClusterReady func(ctx context.Context, c clusters.Cluster)
	// Progress, when set, receives the load's progress instead of Out (bars when it is a terminal, lines
	// otherwise): a job whose runs write their output to a log file (qualify) shows their progress on
	// its own terminal. ProgressLabel names the bar ("load" when empty).
	Progress      io.Writer
	ProgressLabel string
	// ProgressEvery is the period of plain progress lines (default 5 s).
	ProgressEvery time.Duration
	// APIServerArgs are extra flags for every kube-apiserver of the controlplane workload, and
	// APIServerReadyTimeout bounds the wait for them to be ready (default 2 minutes): tests break them.
	APIServerArgs         []string
	APIServerReadyTimeout time.Duration
	// LoadBegan and LoadEnded, when set, are called with the cluster right after the workload's set-up
	// (preloading) and right after its load: chaosbench fidelity reads etcd's counters there, so that they
	// cover the load alone.
	LoadBegan, LoadEnded func(ctx context.Context, c clusters.Cluster)
	// RequestShapes passes the clients' requests through counting proxies (clusters/shapes) and writes
	// the shapes of the load's requests to ShapesFile: chaosbench fidelity compares them. Plaintext
	// clusters only.
	RequestShapes bool
	// AfterLoad, when set, is called once the workload's load is over, however it ended, before the
	// faults are healed and the cluster stops: the coordinator of a split load waits there for the other
	// workers.
	AfterLoad func(ctx context.Context)
	// WorkerCommand starts a worker process of a split load (workers.go); the default re-executes this
	// binary's hidden split-worker command.
	WorkerCommand []string
}

// ExitCode maps the error of Run (and of every other command) to the process exit code (see outcome.Exit*).
// A run's error carries its outcome, whose code it is; the other cases are other commands' errors.
func ExitCode(err error) int {
	var oe *outcome.Error
	switch {
	case err == nil:
		return outcome.ExitOK
	case outcome.IsUsage(err):
		return outcome.ExitUsage
	case errors.As(err, &oe):
		return oe.Outcome.ExitCode()
	case errors.Is(err, ErrInterrupted):
		return outcome.ExitInterrupted
	case errors.Is(err, lin.ErrViolation):
		return outcome.ExitViolation
	}
	return outcome.ExitHarness
}

// run is the state of one Run, so that every exit path can clean up and write what it has.
type run struct {
	s       Scenario
	env     Env
	dir     string
	start   time.Time
	out     io.Writer
	summary results.Summary

	mu     sync.Mutex
	events []string // member crashes and other notes for the summary

	cluster clusters.Cluster
	images  []clusters.EtcdImage // the members' etcd builds; nil for the linked etcd (scenario_docker.go)
	// moreImages are the releases the fault schedule moves members to (upgrades, downgrades).
	moreImages []clusters.EtcdImage
	history    *history.Writer
	collector  *results.Collector
	rec        *workloads.Recorder
	runner     *workloads.Runner
	clientLog  *os.File
	loadEnd    time.Duration
	loadCPU    time.Duration // the generator's CPU time during the load
	liveHeap   int64         // the generator's live heap at the end of the load
	wl         workloads.Workload
	// live exports the run as Prometheus metrics while it runs (scenario_live.go); nil without --metrics-addr
	// or --prometheus-remote-write.
	live        *live.Exporter
	remoteWrite *live.RemoteWriter

	// Reports (run_report.go): etcd's metrics while the cluster runs, and the judged run.
	scraper     *metrics.Scraper
	report      *report.Run
	faults      *faultRun   // the fault schedule (run_faults.go)
	checkReport *lin.Report // consistency checks of the history (run_check.go)
	checkNote   string      // why they did not run

	members memberAgreement // whether the members hold the same data (run_memberagree.go)
	// split is the worker's part in a split load (split.go); nil for a whole load.
	split *splitRun
	// shapes are the counting proxies the clients go through (Env.RequestShapes).
	shapes []*shapes.Proxy
	// records logs a split load's measured records for the merge's phase tables (nil for a whole load).
	records *results.RecordLog

	// The controlplane workload's real control plane (scenario_controlplane.go), and its state when the
	// load began.
	cpBinaries   kubebuild.Binaries
	controlPlane *controlplane.ControlPlane
	cpBefore     *controlplane.Snapshot
}

// Run runs scenario s: it checks every setting before starting anything (usage errors start nothing),
// starts or connects to the cluster, runs the workload, and writes the run directory. An interrupted
// context stops the load, stops the cluster, writes partial results marked incomplete and returns
// ErrInterrupted.
func Run(ctx context.Context, s Scenario, env Env) (*results.Summary, error) {
	if env.Out == nil {
		env.Out = io.Discard
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	if s.Coordinates() && !s.DryRun {
		return runSplit(ctx, s, env)
	}
	// A worker of a split load takes the seed from its reference before anything else (split.go).
	split, err := s.joinSplit(ctx, env.Out)
	if err != nil {
		return nil, err
	}
	defer split.close()
	// Faults: the schedule is checked against the cluster it targets before anything starts or is built.
	faultPlan, err := planFaults(&s)
	if err != nil {
		return nil, err
	}
	wl, kubeCfg, err := s.newWorkload()
	if err != nil {
		return nil, err
	}
	if s.observer {
		// The coordinator of worker containers sends no load of its own (workers.go).
		wl, kubeCfg = workloads.Idle{}, nil
		s.History, s.Rate, s.Clients, s.Conns, s.Total = false, 0, 1, 1, 0
	}
	runOpts := workloads.RunOptions{
		Rate: s.Rate, Clients: s.Clients, Conns: s.Conns, Duration: s.Duration, Total: s.Total,
		RequestTimeout: s.RequestTimeout, ScheduleSlack: s.ScheduleSlack,
	}
	if err := runOpts.Validate(); err != nil {
		return nil, err
	}
	if cp, ok := wl.(*kubeapi.Workload); ok {
		// The workload paces itself; its runner's connections serve the status polls only. Its requests
		// go through the apiservers, so there is no etcd history of its own to check.
		n := cp.Config().Apiservers
		runOpts.Rate, runOpts.Clients, runOpts.Conns = 0, n, n
		s.History, s.Check = false, false
	}
	if kubeCfg != nil {
		// Every simulated apiserver has its own connection, and the kube actors pace themselves. Request
		// timeouts reach etcd as gRPC deadlines, as kube-apiserver's do.
		runOpts.Rate, runOpts.Clients, runOpts.Conns = 0, kubeCfg.Apiservers, kubeCfg.Apiservers
		runOpts.ServerDeadlines = true
	}
	if s.Seed == 0 {
		s.Seed = newSeed()
	}
	runOpts.Seed = s.Seed
	runOpts.IDBase = s.share().IDBase()

	if s.DryRun {
		// Nothing has started, and nothing is built: the plan is all there is. etcd settings are checked
		// against the linked etcd's.
		if _, err := clusters.ParseEtcdFlags(s.EtcdFlags); err != nil {
			return nil, err
		}
		if err := s.writeDryRun(env.Out, kubeCfg); err != nil {
			return nil, err
		}
		if s.Workers > 1 {
			if err := s.writeSharesDryRun(env.Out, kubeCfg); err != nil {
				return nil, err
			}
		}
		r := &run{s: s}
		r.faults = faultPlan
		r.faults.describe(env.Out)
		return nil, nil
	}

	var cpBinaries kubebuild.Binaries
	if _, ok := wl.(*kubeapi.Workload); ok {
		// Built (or found in the cache) before anything starts: a release the proxy does not serve is a
		// usage error that leaves nothing behind.
		if cpBinaries, err = s.buildControlPlane(ctx, env.Out); err != nil {
			return nil, err
		}
	}
	etcdFlags, images, err := s.resolveMembers(ctx, env.Out, faultPlan.versions()...)
	if err != nil {
		return nil, err
	}
	if s.Cluster == "external" && len(etcdFlags) > 0 {
		return nil, outcome.Usagef("--etcd-flag only applies to clusters chaosbench starts")
	}

	r := &run{s: s, env: env, out: env.Out, start: time.Now(), cpBinaries: cpBinaries, split: split}
	r.images, r.moreImages = memberImages(images, len(faultPlan.versions()))
	if s.Failpoints {
		if err := faultPlan.sched.CheckFailpoints(failpointNames(r.images)); err != nil {
			return nil, err
		}
	}
	r.faults = faultPlan
	if s.Cluster == "external" {
		// Contact the cluster before creating anything: an unreachable endpoint is a usage error.
		external, err := clusters.ConnectExternal(ctx, clusters.ExternalOptions{
			Endpoints: s.Endpoints, CACert: s.CACert, Cert: s.Cert, Key: s.Key,
		})
		if err != nil {
			return nil, err
		}
		r.cluster = external
	}
	r.dir = s.OutDir(r.start)
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, outcome.Usagef("--out %s: %v", r.dir, err)
	}
	fmt.Fprintf(r.out, "chaosbench %s: workload %s on %s cluster, seed %d\nresults: %s\n",
		env.Version, s.Workload, article(s.clusterLabel()), s.Seed, r.dir)
	r.faults.describe(r.out)
	if kubeCfg != nil {
		if err := kube.WritePlan(r.out, *kubeCfg, kubeCfg.Plan(s.endpointCount())); err != nil {
			return nil, err
		}
		fmt.Fprintln(r.out)
	}

	if err := r.startLive(); err != nil {
		return nil, err
	}
	loadErr := r.execute(ctx, wl, runOpts, etcdFlags)
	return r.finish(ctx, loadErr)
}

func (s *Scenario) clusterLabel() string {
	return s.clusterDescription()
}

// article puts "a" or "an" before a word.
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an " + word
	}
	return "a " + word
}

func newSeed() int64 {
	var b [8]byte
	if _, err := crand.Read(b[:]); err != nil {
		return time.Now().UnixNano()
	}
	return int64(binary.LittleEndian.Uint64(b[:]) >> 1)
}

// execute starts the cluster and runs the load. Whatever it leaves set up, finish tears down.
func (r *run) execute(ctx context.Context, wl workloads.Workload, runOpts workloads.RunOptions, etcdFlags []clusters.EtcdFlag) error {
	var err error
	if r.s.Cluster == "embed" {
		opts := clusters.EmbedOptions{
			Members: r.s.Members, Dir: r.dir, EtcdFlags: etcdFlags, TLS: r.s.TLS,
			Command: r.env.MemberCommand, MemberCommands: r.embedCommands(), Log: r.out, OnExit: r.memberExited,
			Failpoints: r.s.Failpoints,
		}
		r.faults.configure(&opts, r.s.Seed)
		embedded, err := clusters.StartEmbedded(ctx, opts)
		if err != nil {
			return err
		}
		r.cluster = embedded
	}
	if r.s.Cluster == "docker" {
		if err := r.startDocker(ctx, etcdFlags); err != nil {
			return err
		}
	}

	base := time.Now()
	if r.s.History {
		if r.history, err = history.NewWriter(r.dir); err != nil {
			return err
		}
	}
	if r.collector, err = results.NewCollector(results.CollectorOptions{Dir: r.dir, Start: base, Warmup: r.s.Warmup}); err != nil {
		return err
	}
	fill := make([]byte, 64<<10)
	rng := rand.New(rand.NewPCG(uint64(r.s.Seed), 0x76616c7565)) // "value"
	for i := range fill {
		fill[i] = byte(rng.Uint32())
	}
	// Faults start with the load (the runner waits for Begin) and are healed before the cluster stops,
	// on every way out of here, panics included.
	var onFault func(string, []string, bool)
	sinks := []results.Sink{r.collector}
	if r.live != nil {
		onFault = r.live.Fault
		sinks = append(sinks, r.live)
	}
	if r.split != nil && !r.split.observer {
		// The merge files every worker's requests under worker 0's fault phases (results/merge).
		if r.records, err = results.NewRecordLog(filepath.Join(r.dir, results.RecordsFile), r.s.Warmup); err != nil {
			return err
		}
		sinks = append(sinks, r.records)
	}
	faultSinks, err := r.faults.start(r.cluster, r.dir, base, r.s, r.out, onFault)
	if err != nil {
		return err
	}
	defer r.faults.stop(ctx)
	r.rec = workloads.NewRecorder(base, r.history, fill, append(sinks, faultSinks...)...)

	if err := r.startShapes(); err != nil {
		return err
	}
	cfg := clusters.ClientConfig(r.cluster)
	cfg.Endpoints = r.clientEndpoints()
	if r.clientLog, err = os.OpenFile(filepath.Join(r.dir, "client.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return fmt.Errorf("client log: %w", err)
	}
	cfg.Logger = fileLogger(r.clientLog)
	if r.runner, err = workloads.NewRunner(cfg, r.rec, runOpts); err != nil {
		return err
	}
	r.summary.Versions.EtcdServer = r.serverVersion(ctx)
	fmt.Fprintf(r.out, "cluster ready: %s, etcd %s\n", joinEndpoints(r.cluster.Endpoints()), r.summary.Versions.EtcdServer)
	if r.env.ClusterReady != nil {
		r.env.ClusterReady(ctx, r.cluster)
	}
	if err := r.startScraper(ctx); err != nil {
		return err
	}

	r.wl = wl
	cpw, isControlPlane := wl.(*kubeapi.Workload)
	if isControlPlane {
		if err := r.startControlPlane(ctx, cpw); err != nil {
			return err
		}
	}
	if err := wl.Setup(ctx, r.runner); err != nil {
		return fmt.Errorf("set up workload %s: %w", wl.Name(), err)
	}
	if isControlPlane {
		snap := r.controlPlane.Snapshot(ctx)
		r.cpBefore = &snap
	}
	tickCtx, stopTicks := context.WithCancel(context.Background())
	defer stopTicks()
	go r.collector.Run(tickCtx)
	progressOut := r.out
	if r.env.Progress != nil {
		progressOut = r.env.Progress
	}
	stopProgress := results.StartProgress(results.ProgressOptions{
		Out: progressOut, Mode: r.s.Progress, Label: r.env.ProgressLabel, LineInterval: r.env.ProgressEvery,
		Duration: r.s.Duration, Total: r.s.Total,
		Live: r.collector.Live,
		Elapsed: func() time.Duration {
			if begin, ok := r.rec.Began(); ok {
				return r.rec.Now() - begin
			}
			return 0
		},
	})
	if r.split != nil {
		if err := r.split.startTogether(ctx, r.out); err != nil {
			stopProgress()
			return err
		}
	}
	for _, p := range r.shapes {
		p.Reset() // the set-up's requests are not the load's
	}
	if r.env.LoadBegan != nil {
		r.env.LoadBegan(ctx, r.cluster)
	}
	cpuBefore := results.CPUTime()
	err = wl.Run(ctx, r.runner)
	if r.env.LoadEnded != nil && err == nil {
		r.env.LoadEnded(ctx, r.cluster)
	}
	if werr := r.writeShapes(); werr != nil && err == nil {
		err = werr
	}
	if r.env.AfterLoad != nil {
		r.env.AfterLoad(ctx)
	}
	r.loadEnd = r.rec.Now()
	r.loadCPU = results.CPUTime() - cpuBefore
	r.liveHeap = results.LiveHeap()
	stopProgress()
	r.faults.stop(ctx)
	if err != nil {
		return fmt.Errorf("workload %s: %w", wl.Name(), err)
	}
	return nil
}

// serverVersion asks the first reachable endpoint for etcd's version.
func (r *run) serverVersion(ctx context.Context) string {
	for _, ep := range r.cluster.Endpoints() {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := r.runner.Conns()[0].Status(sctx, ep)
		cancel()
		if err == nil {
			return st.Version
		}
	}
	return ""
}

func (r *run) memberExited(ev clusters.ExitEvent) {
	if ev.Expected {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("member %s (pid %d) exited unexpectedly at %s: %s",
		ev.Member, ev.PID, ev.Time.Format(time.RFC3339Nano), ev.Status))
}

// finish stops everything execute started, in order (load, clients, cluster), and writes the results.
func (r *run) finish(ctx context.Context, loadErr error) (*results.Summary, error) {
	r.compareMembers(ctx, ctx.Err() != nil)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	interrupted := ctx.Err() != nil
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

	s := &r.summary
	s.Schema = results.SummarySchema
	s.Name = r.s.DisplayName()
	s.Command = r.env.Command
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
	s.Schedule = results.Schedule{Mode: "closed", TargetRate: r.s.Rate, Clients: r.s.Clients, Conns: r.s.Conns}
	if r.s.Rate > 0 {
		s.Schedule.Mode = "open"
	}
	s.Operations = map[string]*results.Operation{}
	if r.collector != nil {
		from, ok := r.collector.MeasureFrom()
		if ok && r.loadEnd > from {
			s.MeasuredSeconds = (r.loadEnd - from).Seconds()
		}
		r.faults.summarize(s, from, r.loadEnd, ok && r.loadEnd > from)
		s.Operations = r.collector.Operations(time.Duration(s.MeasuredSeconds * float64(time.Second)))
		if err := r.collector.WriteHGRM(r.dir); err != nil {
			harnessErrs = append(harnessErrs, err)
		}
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

	// Consistency checks of the recorded history (run_check.go).
	r.checkHistory(ctx, interrupted)
	r.addMembersCheck()

	r.mu.Lock()
	s.Errors = append(s.Errors, r.events...)
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
	if o.Passed() && r.s.Cluster != "external" && !r.s.KeepData {
		r.removeData()
	}
	r.stopLive(ctx, s)
	fmt.Fprintf(r.out, "results written to %s\n", r.dir)
	results.WriteVerdict(r.out, s)
	var cause error
	switch {
	case interrupted:
		cause = ErrInterrupted
	case loadErr != nil:
		cause = loadErr
	}
	return s, o.ErrWith(cause)
}

// beganAt returns when the load began, if it did.
func (r *run) beganAt() (time.Duration, bool) {
	if r.rec == nil {
		return 0, false
	}
	return r.rec.Began()
}

// removeData deletes the members' data directories of a successful run; their logs stay.
func (r *run) removeData() {
	for _, p := range clusters.Processes(r.cluster) {
		os.RemoveAll(p.DataDir())
	}
}

func joinEndpoints(eps []string) string {
	if len(eps) <= 3 {
		return fmt.Sprint(eps)
	}
	return fmt.Sprintf("%v and %d more", eps[:3], len(eps)-3)
}

// fileLogger returns a zap logger that writes the etcd client's warnings to f, so that retries during
// faults do not flood the terminal.
func fileLogger(f *os.File) *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(f), zap.WarnLevel))
}

// ShapesFile holds the shapes of a run's requests (Env.RequestShapes): shape -> count over the load.
const ShapesFile = "shapes.json"

// startShapes puts a counting proxy in front of every endpoint when the run counts request shapes.
func (r *run) startShapes() error {
	if !r.env.RequestShapes {
		return nil
	}
	if r.cluster.TLS() != nil {
		return outcome.Usagef("request shapes are counted on plaintext clusters only")
	}
	for _, ep := range r.cluster.Endpoints() {
		p, err := shapes.Start(ep, nil, nil)
		if err != nil {
			return err
		}
		r.shapes = append(r.shapes, p)
	}
	return nil
}

// clientEndpoints are the endpoints the load's clients use: the cluster's, or the counting proxies'.
func (r *run) clientEndpoints() []string {
	if len(r.shapes) == 0 {
		return r.cluster.Endpoints()
	}
	eps := make([]string, len(r.shapes))
	for i, p := range r.shapes {
		eps[i] = p.Endpoint()
	}
	return eps
}

// writeShapes writes the request shapes counted over the load.
func (r *run) writeShapes() error {
	if len(r.shapes) == 0 {
		return nil
	}
	counts := map[string]int64{}
	for _, p := range r.shapes {
		for k, v := range p.Counts() {
			counts[k] += v
		}
	}
	data, err := json.MarshalIndent(counts, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.dir, ShapesFile), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("request shapes: %w", err)
	}
	return nil
}

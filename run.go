package chaosbench

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/controlplane"
	"github.com/etcd-chaosbench/chaosbench/clusters/kubebuild"
	"github.com/etcd-chaosbench/chaosbench/clusters/shapes"
	lin "github.com/etcd-chaosbench/chaosbench/linearizability"
	"github.com/etcd-chaosbench/chaosbench/outcome"
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
	// EndLoad, when set, is asked every EndLoadEvery (default 5 s) while the load runs whether it may end
	// before its duration, with what the load measured so far; it says why when it may (qualify ends a step
	// whose verdict is decided). The load then ends as an interrupt would end it, but the run is complete:
	// its figures cover the time it measured, and its summary says why it ended early (ended_early).
	EndLoad      func(v LoadView) (bool, string)
	EndLoadEvery time.Duration
}

// LoadView is what a running load measured so far, for Env.EndLoad.
type LoadView struct {
	// Measured is the time since the measured window began (0 during the warm-up).
	Measured time.Duration
	// Responses are each operation's response times over the measured window so far; Requests how many
	// requests it holds, Lagged how many of them started late with clients free.
	Responses        map[string]*hdr.Histogram
	Requests, Lagged int64
	// Server is etcd's own metrics over the measured window so far (nil when they are not scraped).
	Server *results.ServerMetrics
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
	out     io.Writer // the console: above the progress bars while they are drawn
	console *live.Console
	summary results.Summary

	mu      sync.Mutex
	crashes []results.Crash // members that exited when nobody asked them to

	// The cluster (run_cluster.go) and the members' settings, parsed against their builds.
	cluster   clusters.Cluster
	etcdFlags []clusters.EtcdFlag
	images    []clusters.EtcdImage // the members' etcd builds; nil for the linked etcd (scenario_docker.go)
	// moreImages are the releases the fault schedule moves members to (upgrades, downgrades).
	moreImages []clusters.EtcdImage
	// The load (run_load.go).
	history   *history.Writer
	collector *results.Collector
	rec       *workloads.Recorder
	runner    *workloads.Runner
	clientLog *os.File
	loadEnd   time.Duration
	// endedEarly says why Env.EndLoad ended the load before its duration ("": it did not).
	endedEarly string
	// during checks the history while the load runs (run_check.go); loadEnded is the wall time the load
	// ended, from which the summary counts the wait for the verdict.
	during    *lin.DuringLoad
	loadEnded time.Time
	// follower reads the history for the check while the run writes it (run_check.go).
	follower *lin.Follower
	loadCPU  time.Duration // the generator's CPU time during the load
	liveHeap int64         // the generator's live heap at the end of the load
	wl       workloads.Workload
	// live exports the run as Prometheus metrics while it runs (run_live.go); nil without --metrics-addr
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

	// The controlplane workload's real control plane (run_controlplane.go), and its state when the
	// load began.
	cpBinaries   kubebuild.Binaries
	controlPlane *controlplane.ControlPlane
	cpBefore     *controlplane.Snapshot
}

// Run runs scenario s: it checks every setting before starting anything (usage errors start nothing),
// starts or connects to the cluster, runs the workload, and writes the run directory. An interrupted
// context stops the load, stops the cluster, writes partial results marked incomplete and returns
// ErrInterrupted.
//
// Its stages, in order: plan (settings, workload, load, fault schedule) and prepare (builds, the run
// directory) find bad input before anything starts; execute (cluster, recording, clients, the workload's
// set-up and its load) keeps what it starts on the run, so that finish (stop everything, summarize, check,
// decide, report) tears it down however execute ended.
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
	p, err := planRun(s)
	if err != nil {
		return nil, err
	}
	if p.s.DryRun {
		return nil, p.dryRun(env.Out)
	}
	r, err := p.prepare(ctx, env, split)
	if err != nil {
		return nil, err
	}
	if err := r.startLive(); err != nil {
		return nil, err
	}
	loadErr := r.execute(ctx, p.wl, p.load)
	return r.finish(ctx, loadErr)
}

// runPlan is what Run decides before anything is built or started: the scenario as it will run (its seed
// picked, the settings its workload overrides), the workload, the load's options and the fault schedule.
// Every problem found while planning is a usage error.
type runPlan struct {
	s       Scenario
	wl      workloads.Workload
	kubeCfg *kube.Config // the kube workload's configuration; nil for the other workloads
	load    workloads.RunOptions
	faults  *faultRun
}

// planRun plans scenario s.
func planRun(s Scenario) (*runPlan, error) {
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
	if _, ok := wl.(*kubeapi.Workload); ok {
		// Its requests go through the apiservers, so there is no etcd history of its own to check.
		s.History, s.Check = false, false
	}
	if s.Seed == 0 {
		s.Seed = newSeed()
	}
	load, err := loadOptions(s, wl, kubeCfg)
	if err != nil {
		return nil, err
	}
	return &runPlan{s: s, wl: wl, kubeCfg: kubeCfg, load: load, faults: faultPlan}, nil
}

// loadOptions are the options of the runner that sends the load. The settings given are checked as given,
// before the workloads that pace themselves replace them.
func loadOptions(s Scenario, wl workloads.Workload, kubeCfg *kube.Config) (workloads.RunOptions, error) {
	o := workloads.RunOptions{
		Rate: s.Rate, Clients: s.Clients, Conns: s.Conns, Duration: s.Duration, Total: s.Total,
		RequestTimeout: s.RequestTimeout, ScheduleSlack: s.ScheduleSlack,
	}
	if err := o.Validate(); err != nil {
		return o, err
	}
	if cp, ok := wl.(*kubeapi.Workload); ok {
		// The workload paces itself; its runner's connections serve the status polls only.
		n := cp.Config().Apiservers
		o.Rate, o.Clients, o.Conns = 0, n, n
	}
	if kubeCfg != nil {
		// Every simulated apiserver has its own connection, and the kube actors pace themselves. Request
		// timeouts reach etcd as gRPC deadlines, as kube-apiserver's do.
		o.Rate, o.Clients, o.Conns = 0, kubeCfg.Apiservers, kubeCfg.Apiservers
		o.ServerDeadlines = true
		o.ProbeBandwidth = true
	}
	o.Seed = s.Seed
	o.IDBase = s.share().IDBase()
	return o, nil
}

// dryRun prints the plan. Nothing has started, and nothing is built: etcd settings are checked against
// the linked etcd's.
func (p *runPlan) dryRun(out io.Writer) error {
	if _, err := clusters.ParseEtcdFlags(p.s.EtcdFlags); err != nil {
		return err
	}
	if err := p.s.writeDryRun(out, p.kubeCfg); err != nil {
		return err
	}
	if p.s.Workers > 1 {
		if err := p.s.writeSharesDryRun(out, p.kubeCfg); err != nil {
			return err
		}
	}
	p.faults.describe(out)
	return nil
}

// prepare builds what the run needs, checks what only the builds and the cluster can tell, creates the
// run directory and prints the plan. Everything it finds wrong is found before anything starts: a release
// the proxy does not serve, a flag a build does not take or an unreachable endpoint leaves nothing behind
// but the build cache.
func (p *runPlan) prepare(ctx context.Context, env Env, split *splitRun) (*run, error) {
	s := p.s
	var cpBinaries kubebuild.Binaries
	if _, ok := p.wl.(*kubeapi.Workload); ok {
		// Built (or found in the cache) before anything starts: a release the proxy does not serve is a
		// usage error that leaves nothing behind.
		var err error
		if cpBinaries, err = s.buildControlPlane(ctx, env.Out); err != nil {
			return nil, err
		}
	}
	etcdFlags, images, err := s.resolveMembers(ctx, env.Out, p.faults.versions()...)
	if err != nil {
		return nil, err
	}
	if s.Cluster == "external" && len(etcdFlags) > 0 {
		return nil, outcome.Usagef("--etcd-flag only applies to clusters chaosbench starts")
	}

	console := live.NewConsole(env.Out)
	r := &run{s: s, env: env, out: console, console: console, start: time.Now(), cpBinaries: cpBinaries, split: split, etcdFlags: etcdFlags}
	r.images, r.moreImages = memberImages(images, len(p.faults.versions()))
	if s.Failpoints {
		if err := p.faults.sched.CheckFailpoints(failpointNames(r.images)); err != nil {
			return nil, err
		}
	}
	r.faults = p.faults
	if s.Cluster == "external" {
		// Contact the cluster before creating anything: an unreachable endpoint is a usage error.
		if err := r.connectExternal(ctx); err != nil {
			return nil, err
		}
	}
	r.dir = s.OutDir(r.start)
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, outcome.Usagef("--out %s: %v", r.dir, err)
	}
	if err := r.describePlan(p.kubeCfg); err != nil {
		return nil, err
	}
	return r, nil
}

// describePlan prints what the run is about to do, and where its results go.
func (r *run) describePlan(kubeCfg *kube.Config) error {
	fmt.Fprintf(r.out, "chaosbench %s: workload %s on %s cluster, seed %d\nresults: %s\n",
		r.env.Version, r.s.Workload, article(r.s.clusterLabel()), r.s.Seed, r.dir)
	r.faults.describe(r.out)
	if kubeCfg != nil {
		if err := kube.WritePlan(r.out, *kubeCfg, kubeCfg.Plan(r.s.endpointCount())); err != nil {
			return err
		}
		fmt.Fprintln(r.out)
	}
	return nil
}

// execute starts the cluster and runs the load. Whatever it leaves set up, finish tears down.
func (r *run) execute(ctx context.Context, wl workloads.Workload, runOpts workloads.RunOptions) error {
	if err := r.startCluster(ctx); err != nil {
		return err
	}
	// Faults start with the load (the runner waits for Begin) and are healed before the cluster stops,
	// on every way out of here, panics included.
	defer r.faults.stop(ctx)
	if err := r.startRecording(); err != nil {
		return err
	}
	if err := r.startClients(runOpts); err != nil {
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
	if err := r.setUpWorkload(ctx, wl); err != nil {
		return err
	}
	return r.runLoad(ctx, wl)
}

// finish stops everything execute started, in order (load, clients, cluster), and writes the results: the
// summary, the checks, the outcome decided from them, and the reports (run_finish.go).
func (r *run) finish(ctx context.Context, loadErr error) (*results.Summary, error) {
	r.compareMembers(ctx, ctx.Err() != nil)
	interrupted := ctx.Err() != nil
	harnessErrs := r.teardown(ctx, interrupted)

	s := &r.summary
	r.describeRun(s)
	if err := r.summarizeLoad(s); err != nil {
		harnessErrs = append(harnessErrs, err)
	}
	r.summarizeSchedule(s)
	s.EndedEarly = r.endedEarly
	// Consistency checks of the recorded history (run_check.go).
	r.checkHistory(ctx, interrupted)
	if r.during != nil {
		r.during.Proofs().Close() // the checks during the load proved them for this check alone
	}
	if r.follower != nil {
		r.follower.Close() // what it read was for the check alone
	}
	r.addMembersCheck()
	if !r.loadEnded.IsZero() && s.CheckSeconds > 0 {
		s.CheckAfterLoadSeconds = time.Since(r.loadEnded).Seconds()
	}

	o := r.decide(s, interrupted, loadErr, harnessErrs)
	o = r.writeOutputs(s, o)
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

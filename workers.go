package chaosbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/live"
	"github.com/etcd-chaosbench/chaosbench/workloads/coord"
)

// WorkersDir is the folder of a split run's directory that holds each worker's run directory (0, 1, ...).
const WorkersDir = "workers"

// runSplit runs a load split over s.Workers generators on this machine, through the same shares, start
// line and merge as a split over a Kubernetes Job: worker 0 runs in this process, starts the cluster and
// injects the faults; once its cluster is ready the others start as processes against it; this process's
// reference clock starts them together; and once all are done their results are merged into the run
// directory, which is judged as any run is.
func runSplit(ctx context.Context, s Scenario, env Env) (*results.Summary, error) {
	if s.Seed == 0 {
		s.Seed = newSeed()
	}
	// Everything the workers will be told is checked here, before anything starts.
	probe := s
	if _, _, err := probe.newWorkload(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(s.OutDir(time.Now()))
	if err != nil {
		return nil, outcome.Usagef("--out: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, WorkersDir), 0o755); err != nil {
		return nil, outcome.Usagef("--out %s: %v", dir, err)
	}
	// Worker containers reach the reference on the host's address on the cluster network, known once the
	// cluster is up: it listens on every address then.
	listen := "127.0.0.1:0"
	if s.WorkerContainers {
		listen = "0.0.0.0:0"
	}
	ref, err := coord.Serve(listen, s.Seed, s.Workers)
	if err != nil {
		return nil, err
	}
	defer ref.Close()
	port := ref.Addr().(*net.TCPAddr).Port
	refURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	how := "worker 0 here, the others as processes"
	if s.WorkerContainers {
		how = fmt.Sprintf("containers on the cluster's network, %g CPUs each; this process holds the cluster and the faults", s.WorkerCPUs)
	}
	fmt.Fprintf(env.Out, "split load: %d workers (%s), seed %d, reference clock on port %d; results: %s\n", s.Workers, how, s.Seed, port, dir)

	// This process holds the cluster, the faults and etcd's metrics: as worker 0, or, when every worker
	// runs in a container (so that each has the same CPU), as an observer that sends no load.
	w0 := s
	w0.Worker, w0.coordinated, w0.ClockRef = 0, true, refURL
	w0.Out = filepath.Join(dir, WorkersDir, "0")
	first := 1
	if s.WorkerContainers {
		w0.Worker, w0.observer, first = -1, true, 0
		w0.Out = filepath.Join(dir, WorkersDir, ObserverDir)
	}
	procs := &workerProcs{s: s, dir: dir, ref: ref, refURL: refURL, port: port, first: first, command: env.WorkerCommand, out: env.Out}
	env0 := env
	env0.ClusterReady = func(ctx context.Context, c clusters.Cluster) {
		if env.ClusterReady != nil {
			env.ClusterReady(ctx, c)
		}
		procs.start(ctx, c)
	}
	env0.AfterLoad = func(ctx context.Context) {
		if env.AfterLoad != nil {
			env.AfterLoad(ctx)
		}
		procs.wait(ctx)
	}
	_, runErr := Run(ctx, w0, env0)
	procs.wait(ctx)
	dirs := make([]string, s.Workers)
	for i := range dirs {
		dirs[i] = filepath.Join(dir, WorkersDir, strconv.Itoa(i))
	}
	observer := ""
	if s.WorkerContainers {
		observer = w0.Out
	}
	// This process's own run (worker 0's, or the observer's) holds the cluster and the timeline: without
	// it there is nothing to merge onto, and its error (a usage error starts nothing) or the workers' say
	// why. Another worker that wrote no results is a missing share, which the merged run's outcome names.
	if _, err := os.Stat(filepath.Join(w0.Out, results.SummaryFile)); err != nil {
		if runErr != nil {
			return nil, runErr
		}
		return nil, fmt.Errorf("split load: %s wrote no results: %v", w0.Out, procs.problems())
	}
	if ctx.Err() != nil {
		// Interrupted: every worker wrote what it had, marked incomplete; the merge writes what they have
		// (its checks are skipped, as an interrupted run's are) and says so.
		fmt.Fprintf(env.Out, "\ninterrupted: merging the workers' partial results into %s\n", dir)
		ctx = context.WithoutCancel(ctx)
	} else {
		fmt.Fprintf(env.Out, "\nmerging the %d workers' results into %s\n", s.Workers, dir)
	}
	return Merge(ctx, MergeOptions{Dirs: dirs, Out: dir, Observer: observer, Problems: procs.problems()}, env.Out)
}

// ObserverDir is the run directory, among a split run's workers', of the coordinator's own run when every
// worker ran in a container: the cluster, the fault windows and etcd's metrics, and no load.
const ObserverDir = "observer"

// workerProcs are the workers 1 to N-1 of a split load run here, as processes or as containers.
type workerProcs struct {
	s       Scenario
	dir     string
	ref     *coord.Server
	refURL  string
	port    int
	first   int // the first worker started here: 1, or 0 when this process only observes
	command []string
	out     io.Writer

	mu      sync.Mutex
	running []workerHandle
	errs    []string
	started bool
	done    sync.WaitGroup
}

// workerHandle is a started worker: a process or a container.
type workerHandle interface {
	// wait waits for it to exit and returns its exit code.
	wait(ctx context.Context) (int, error)
	// interrupt asks it to stop its load and write what it has; kill stops it at once.
	interrupt()
	kill()
}

type workerProcess struct {
	cmd *exec.Cmd
	log *os.File
}

func (p *workerProcess) wait(context.Context) (int, error) {
	err := p.cmd.Wait()
	p.log.Close()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}

func (p *workerProcess) interrupt() { p.cmd.Process.Signal(syscall.SIGINT) }
func (p *workerProcess) kill()      { p.cmd.Process.Kill() }

type workerContainer struct{ c *clusters.WorkerContainer }

func (w workerContainer) wait(ctx context.Context) (int, error) {
	status, err := w.c.Wait(context.WithoutCancel(ctx))
	return int(status), err
}

func (w workerContainer) interrupt() { w.c.Signal(context.Background(), "SIGINT") }
func (w workerContainer) kill()      { w.c.Signal(context.Background(), "SIGKILL") }

// start starts workers 1 to N-1 against cluster c. A worker that cannot start, or exits before the load
// begins, fails the start line so that no worker waits for it.
func (p *workerProcs) start(ctx context.Context, c clusters.Cluster) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started = true
	for i := p.first; i < p.s.Workers; i++ {
		if err := p.startOne(ctx, c, i); err != nil {
			p.errs = append(p.errs, err.Error())
			p.ref.Fail(err)
			return
		}
	}
}

func (p *workerProcs) startOne(ctx context.Context, c clusters.Cluster, i int) error {
	ws, err := p.workerScenario(c, i)
	if err != nil {
		return err
	}
	file := filepath.Join(p.dir, WorkersDir, strconv.Itoa(i)+".json")
	b, err := json.MarshalIndent(ws, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return fmt.Errorf("worker %d: %w", i, err)
	}
	logPath := filepath.Join(p.dir, WorkersDir, strconv.Itoa(i)+".log")
	var h workerHandle
	if p.s.WorkerContainers {
		h, err = p.startContainer(ctx, c, i, file, logPath)
	} else {
		h, err = p.startProcess(i, file, logPath)
	}
	if err != nil {
		return err
	}
	p.running = append(p.running, h)
	p.done.Go(func() {
		code, err := h.wait(ctx)
		if code == 0 && err == nil {
			return
		}
		if _, began := p.ref.Start(); !began {
			p.ref.Fail(fmt.Errorf("worker %d exited before the load began (exit code %d, %v); see %s", i, code, err, logPath))
		}
		// A worker's outcome is read from its summary by the merge; an exit without one is a harness error.
		if _, serr := os.Stat(filepath.Join(ws.Out, results.SummaryFile)); serr != nil {
			p.mu.Lock()
			p.errs = append(p.errs, fmt.Sprintf("worker %d exited with code %d and wrote no summary; see %s", i, code, logPath))
			p.mu.Unlock()
		}
	})
	return nil
}

// startProcess starts worker i as a process of this binary.
func (p *workerProcs) startProcess(i int, file, logPath string) (workerHandle, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("worker %d: %w", i, err)
	}
	args := p.command
	if len(args) == 0 {
		self, err := os.Executable()
		if err != nil {
			log.Close()
			return nil, fmt.Errorf("worker %d: %w", i, err)
		}
		args = []string{self}
	}
	cmd := exec.Command(args[0], append(append(args[1:len(args):len(args)], SplitWorkerCommand), file)...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group: a Ctrl-C reaches the coordinator, which stops the workers itself (SIGINT, so
	// that each writes what it has).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("worker %d: %w", i, err)
	}
	return &workerProcess{cmd: cmd, log: log}, nil
}

// startContainer starts worker i as a container of the builtin image on the docker cluster's network,
// with the split run's workers folder mounted at the same path, so that every path of its scenario holds.
func (p *workerProcs) startContainer(ctx context.Context, c clusters.Cluster, i int, file, logPath string) (workerHandle, error) {
	d, ok := c.(*clusters.Docker)
	if !ok {
		return nil, fmt.Errorf("worker %d: --worker-containers needs a docker cluster", i)
	}
	folder := filepath.Join(p.dir, WorkersDir)
	w, err := d.StartWorker(ctx, clusters.WorkerSpec{
		Name: "worker-" + strconv.Itoa(i), Args: []string{SplitWorkerCommand, file},
		Binds: []string{folder + ":" + folder}, CPUs: p.s.WorkerCPUs, Log: logPath,
	})
	if err != nil {
		return nil, err
	}
	return workerContainer{w}, nil
}

// workerScenario is worker i's scenario: the same scenario and seed, its index, the running cluster as
// an external one, and the coordinator's reference.
func (p *workerProcs) workerScenario(c clusters.Cluster, i int) (Scenario, error) {
	ws := p.s
	ws.Worker, ws.ClockRef, ws.ClockServed = i, p.refURL, true
	if d, ok := c.(*clusters.Docker); ok && p.s.WorkerContainers {
		// The host, where the reference runs, as the containers see it.
		ws.ClockRef = fmt.Sprintf("http://%s", net.JoinHostPort(d.Gateway().String(), strconv.Itoa(p.port)))
		ws.WorkerContainers, ws.WorkerCPUs = false, 0
	}
	ws.Out = filepath.Join(p.dir, WorkersDir, strconv.Itoa(i))
	ws.Cluster, ws.Endpoints = "external", c.Endpoints()
	ws.Members, ws.EtcdFlags, ws.TLS, ws.KeepData = 0, nil, false, false
	ws.EtcdVersion, ws.Failpoints, ws.MemberCPUs, ws.MemberMemory = "", false, 0, ""
	ws.Faults.Schedule, ws.ScrapeInterval = []string{"none"}, 0
	ws.Progress = live.ProgressNone
	ws.LiveOptions = LiveOptions{}
	ws.CACert, ws.Cert, ws.Key = "", "", ""
	if t, ok := c.(interface {
		ClientTLSFiles() (clusters.TLSFiles, bool)
	}); ok {
		if files, on := t.ClientTLSFiles(); on {
			ws.CACert, ws.Cert, ws.Key = files.CA, files.Cert, files.Key
		}
	}
	return ws, nil
}

// wait waits for the worker processes; when ctx ends first it interrupts them, so that each heals
// nothing (only worker 0 injects faults), writes what it has and exits.
func (p *workerProcs) wait(ctx context.Context) {
	finished := make(chan struct{})
	go func() {
		p.done.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		return
	case <-ctx.Done():
	}
	p.mu.Lock()
	for _, h := range p.running {
		h.interrupt()
	}
	p.mu.Unlock()
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		p.mu.Lock()
		for _, h := range p.running {
			h.kill()
		}
		p.mu.Unlock()
		<-finished
	}
}

// problems are the harness errors of starting and running the workers.
func (p *workerProcs) problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started {
		return []string{"the workers never started: worker 0's cluster did not become ready"}
	}
	return append([]string(nil), p.errs...)
}

// SplitWorkerCommand is the hidden command a coordinator starts a worker process with: the argument is
// the worker's scenario as JSON (see RunScenarioFile).
const SplitWorkerCommand = "split-worker"

// RunScenarioFile runs the scenario stored as JSON in path (a split load's worker, written by its
// coordinator).
func RunScenarioFile(ctx context.Context, path string, env Env) (*results.Summary, error) {
	s := DefaultScenario()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, outcome.Usagef("%v", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, outcome.Usagef("%s: %v", path, err)
	}
	return Run(ctx, s, env)
}

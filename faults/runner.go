package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// ErrNotRecovered is returned by Runner.Stop when the cluster did not become healthy again within the
// recovery bound after some fault was healed: an availability failure of the cluster, not of chaosbench.
var ErrNotRecovered = errors.New("the cluster did not recover from a fault in time")

// ErrInjectFailed is returned by Runner.Stop when a fault could not be injected: the run did not test
// what its schedule said.
var ErrInjectFailed = errors.New("a fault could not be injected")

// Outcomes of a fault window (FaultWindow.Outcome starts with one of these).
const (
	OutcomeRecovered    = "recovered"
	OutcomeNotRecovered = "not recovered"
	OutcomeInterrupted  = "healed, run interrupted"
	OutcomeLoadEnded    = "healed at the end of the load"
	OutcomeInjectFailed = "inject failed"
	OutcomeSkipped      = "skipped"
)

// Options configures a Runner.
type Options struct {
	// Base is the run's time base (the recorder's): window offsets count from it.
	Base time.Time
	// Seed drives every random choice: jitter, random targets, nemesis picks.
	Seed int64
	// Dir receives faults.jsonl (empty: no file).
	Dir string
	// Log receives a line as each fault is injected and healed; nil discards them.
	Log io.Writer
	// Phases, when set, is told about every window, to split records into phases and measure availability.
	Phases *results.Phases
	// Duration is the load's length (0: unknown); occurrences due at or after it do not start.
	Duration time.Duration
	// HealthTimeout bounds the health check before each fault (default 20 s); an unhealthy cluster skips
	// the fault.
	HealthTimeout time.Duration
	// RecoveryTimeout bounds the wait for the cluster to be healthy after each heal (default 30 s).
	RecoveryTimeout time.Duration
	// Settle is how long a window is still observed (its recovery phase) once the cluster is healthy
	// again (default 5 s).
	Settle time.Duration
	// MonitorInterval is how often the members' leader is polled (default 100 ms).
	MonitorInterval time.Duration
	// Grace is how long a window still counts the requests that were in flight when its observation
	// ended, before it is recorded: the request timeout (default 10 s). Stop cuts it short.
	Grace time.Duration
	// AfterRecovery, when set, runs as soon as the cluster is healthy again after a window, with the load
	// still running, and its verdict is stored in the window (FaultWindow.Members): a run compares the
	// members' data there. Its time counts into the window's recovery phase, and it delays the entry's next
	// occurrence by as long as it takes; Stop cancels its context.
	AfterRecovery func(ctx context.Context) results.Check
	// SnapshotCatchUpEntries is the members' --snapshot-catchup-entries (0: etcd's default), for
	// partitions held until a snapshot.
	SnapshotCatchUpEntries int
	// OnFault, when set, is told as each fault takes effect on its targets (active) and once it is healed,
	// so that live metrics can show the window while it lasts.
	OnFault func(kind string, targets []string, active bool)
}

// Runner plays a schedule against a cluster while the load runs. Create it with Start before the load,
// call Begin when the load starts (schedule times count from then), and Stop when it ends or is
// interrupted: Stop heals whatever is in effect and returns once every fault is healed.
type Runner struct {
	opts  Options
	sched Schedule
	env   *Env
	mon   *monitor
	file  *os.File

	ctx    context.Context
	cancel context.CancelFunc

	beginOnce sync.Once
	begun     chan struct{}
	begin     time.Duration

	wg       sync.WaitGroup // entries and occurrences
	settleWg sync.WaitGroup // windows still observed

	mu           sync.Mutex
	settling     map[*settling]struct{} // windows in their recovery phase
	inEffect     map[*Lifecycle]string  // faults injected (or being injected) and not yet healed: their specs
	windows      []results.FaultWindow
	problems     []Problem
	notRecovered int
	injectFailed int
	stopOnce     sync.Once
	stopErr      error
	stopReason   StopReason
	stopCtx      context.Context
}

// StopReason says why a Runner stops, which decides how the windows it cuts short end.
type StopReason int

// Reasons to stop: the load ended (faults still in effect are healed and the cluster's recovery is
// checked within Stop's context), or the run was interrupted (faults are healed, nothing is waited for).
const (
	LoadEnded StopReason = iota
	Interrupted
)

// Start creates a runner for sched on c and starts watching the leader; faults wait for Begin.
func Start(c clusters.Cluster, sched Schedule, opts Options) (*Runner, error) {
	if opts.Base.IsZero() {
		opts.Base = time.Now()
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.HealthTimeout <= 0 {
		opts.HealthTimeout = 20 * time.Second
	}
	if opts.RecoveryTimeout <= 0 {
		opts.RecoveryTimeout = 30 * time.Second
	}
	if opts.Settle <= 0 {
		opts.Settle = 5 * time.Second
	}
	if opts.MonitorInterval <= 0 {
		opts.MonitorInterval = 100 * time.Millisecond
	}
	if opts.Grace <= 0 {
		opts.Grace = 10 * time.Second
	}
	r := &Runner{opts: opts, sched: sched, env: NewEnv(c, opts.Dir, opts.Seed, opts.Log), begun: make(chan struct{}),
		settling: map[*settling]struct{}{}, inEffect: map[*Lifecycle]string{}}
	r.env.SnapshotCatchUpEntries = opts.SnapshotCatchUpEntries
	if opts.Dir != "" {
		f, err := os.OpenFile(filepath.Join(opts.Dir, results.FaultsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("faults: %w", err)
		}
		r.file = f
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.mon = startMonitor(c, opts.Base, opts.MonitorInterval)
	for i, e := range sched.Entries {
		r.wg.Go(func() { r.runEntry(i, e) })
	}
	return r, nil
}

// Begin tells the runner that the load started at offset at. Only the first call counts.
func (r *Runner) Begin(at time.Duration) {
	r.beginOnce.Do(func() {
		r.begin = at
		close(r.begun)
	})
}

func (r *Runner) now() time.Duration { return time.Since(r.opts.Base) }

func (r *Runner) logf(format string, args ...any) {
	fmt.Fprintf(r.opts.Log, format+"\n", args...)
}

// guard turns a panic in a runner goroutine into a problem (its stack goes to the log); the faults it
// injected are healed by Lifecycle.Recover's own guard or by Stop's last-resort heal.
func (r *Runner) guard(spec string) {
	if p := recover(); p != nil {
		r.logf("fault %s: panic: %v\n%s", spec, p, debug.Stack())
		r.problem(ProblemRunner, spec, fmt.Sprintf("panic: %v", p))
	}
}

// problem records a problem (text is made one line) and logs it.
func (r *Runner) problem(kind ProblemKind, spec, text string) {
	p := Problem{Kind: kind, Fault: spec, Text: oneLine(text)}
	r.mu.Lock()
	r.problems = append(r.problems, p)
	r.mu.Unlock()
	r.logf("%s", p)
}

// rel returns offset t in seconds since the start of the load.
func (r *Runner) rel(t time.Duration) float64 { return (t - r.begin).Seconds() }

// Stop ends the schedule: nothing new is injected, faults in effect are healed at once (on a fresh
// context if need be), windows are recorded, and the leader monitor stops. When the load ended, the
// cluster's recovery from faults cut short is still checked within ctx; when the run was interrupted it
// is not. It waits for the heals up to
// ctx's deadline, then heals whatever is left directly (proxies, paused members, disks). It returns
// ErrNotRecovered or ErrInjectFailed (wrapped with details) when a fault did not go as scheduled. Stop is
// safe to call more than once.
func (r *Runner) Stop(ctx context.Context, reason StopReason) error {
	r.stopOnce.Do(func() {
		r.mu.Lock()
		r.stopReason, r.stopCtx = reason, ctx
		r.mu.Unlock()
		r.cancel()
		done := make(chan struct{})
		go func() {
			r.wg.Wait()
			r.settleWg.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			r.problem(ProblemRunner, r.healing(), "still healing when the cleanup time ran out; healing directly")
		}
		r.healAll(ctx)
		r.mon.close()
		if r.file != nil {
			r.file.Close()
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		slices.SortFunc(r.windows, func(a, b results.FaultWindow) int { return int(a.StartNs - b.StartNs) })
		var errs []error
		if r.notRecovered > 0 {
			errs = append(errs, fmt.Errorf("%w: %d of %d windows", ErrNotRecovered, r.notRecovered, len(r.windows)))
		}
		if r.injectFailed > 0 {
			errs = append(errs, fmt.Errorf("%w: %d of %d windows", ErrInjectFailed, r.injectFailed, len(r.windows)))
		}
		r.stopErr = errors.Join(errs...)
	})
	return r.stopErr
}

// Problems returns every way the schedule fell short so far, in the order they were found: skipped
// occurrences, faults that injected nothing, failed injections and compactions, windows not recovered,
// heals left to the final sweep, and failures of the runner itself. A run whose runner reports none did
// what its schedule asked.
func (r *Runner) Problems() []Problem {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.problems)
}

// Errors returns the problems as lines (Problem.String).
func (r *Runner) Errors() []string {
	ps := r.Problems()
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

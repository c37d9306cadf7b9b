package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
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

// sleepUntil waits until offset t, or returns false when the runner stops first.
func (r *Runner) sleepUntil(t time.Duration) bool {
	d := t - r.now()
	if d <= 0 {
		return r.ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-r.ctx.Done():
		return false
	}
}

// runEntry plays one schedule entry: its occurrences in turn, each starting at its time (plus seeded
// jitter) or, when the previous one ran late, as soon as that one is healed.
func (r *Runner) runEntry(i int, e Entry) {
	defer r.guard(e.Spec)
	select {
	case <-r.begun:
	case <-r.ctx.Done():
		select {
		case <-r.begun: // the load began, then ended: its occurrences were due
		default:
			return // the load never began: nothing was due
		}
	}
	rng := seeded(r.opts.Seed, "entry", i)
	for k := 0; ; k++ {
		at := e.At + time.Duration(k)*e.Every
		if e.Jitter > 0 {
			at += time.Duration(rng.Int64N(int64(e.Jitter)))
		}
		if r.opts.Duration > 0 && at >= r.opts.Duration {
			if k == 0 {
				// Validate keeps At within the load; its jitter may still push the first occurrence out.
				r.problem(ProblemNothingInjected, e.Spec, fmt.Sprintf("never ran: with its jitter it was due at %s, after the load's end at %s",
					at.Round(time.Millisecond), r.opts.Duration))
			}
			return
		}
		if r.ctx.Err() != nil {
			r.lost(e, k, at, "before its time")
			return
		}
		if why := r.occurrence(e, r.begin+at, rng); why != "" {
			r.lost(e, k, at, why)
			return
		}
		if e.Every == 0 {
			return
		}
	}
}

// lost reports an occurrence that did not start because the runner stopped first (why says at which step).
// Only the end of the load makes that a problem, and only for an occurrence the schedule counted on: one due
// before the load's planned end, or the first of an entry when the load's length was not known. An
// interrupted run is incomplete anyway, and says so.
func (r *Runner) lost(e Entry, k int, at time.Duration, why string) {
	r.mu.Lock()
	reason := r.stopReason
	r.mu.Unlock()
	if reason != LoadEnded || (r.opts.Duration == 0 && k > 0) {
		return
	}
	r.problem(ProblemNothingInjected, e.Spec, fmt.Sprintf("did not start: the load ended %s (due at %.2fs)", why, at.Seconds()))
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

// healthLead is how long before its time a fault's health check starts, so that the fault itself starts
// on time.
const healthLead = time.Second

// occurrence runs one fault: health check, inject at offset due, hold, recover, health check; its window
// is recorded once its observation ends. It returns "" once the occurrence is settled (run, skipped or
// reported), or, when the runner stopped before it could inject, at which step.
func (r *Runner) occurrence(e Entry, due time.Duration, rng *rand.Rand) (notStarted string) {
	entry := e
	if e.Kind == KindNemesis {
		var err error
		if entry, err = r.pickNemesis(e, rng); err != nil {
			r.problem(ProblemNothingInjected, e.Spec, err.Error())
			return ""
		}
	}
	f, err := New(entry, r.env)
	if err != nil {
		r.problem(ProblemInjectFailed, entry.Spec, err.Error())
		return ""
	}
	if !r.sleepUntil(due - healthLead) {
		return "before its time"
	}
	if err := f.Available(r.env.Cluster); err != nil {
		r.skip(entry, fmt.Sprintf("unavailable: %v", err))
		return ""
	}
	hctx, cancel := context.WithTimeout(r.ctx, r.opts.HealthTimeout)
	err = r.env.Cluster.WaitHealthy(hctx)
	cancel()
	if r.ctx.Err() != nil {
		return "while the health check before it ran"
	}
	if err != nil {
		r.skip(entry, fmt.Sprintf("cluster not healthy before the fault: %v", err))
		return ""
	}
	if !r.sleepUntil(due) {
		return "before its time"
	}

	lc := NewLifecycle(f)
	start := r.now()
	// A new fault ends the recovery phase of the windows before it: what happens from now on is its doing.
	r.cutSettling(start)
	var win *results.Window
	if r.opts.Phases != nil {
		win = r.opts.Phases.Open(start)
	}
	if entry.For == 0 {
		// An operation's window is the operation itself, which may take a while (a replacement).
		r.logf("fault %s: injecting at %.2fs", entry.Spec, r.rel(start))
	}
	r.mu.Lock()
	r.inEffect[lc] = entry.Spec
	r.mu.Unlock()
	injectErr := lc.Inject(r.ctx)
	targets, leader := describe(f)
	if injectErr != nil {
		r.logf("fault %s: inject failed at %.2fs: %v", entry.Spec, r.rel(start), injectErr)
	} else {
		r.logf("fault %s: injected at %.2fs on %s (leader %s)", entry.Spec, r.rel(start), strings.Join(targets, ","), dash(leader))
		if r.opts.OnFault != nil {
			r.opts.OnFault(entry.Kind, targets, true)
		}
		if p, ok := f.(*Partition); ok && p.p.untilSnapshot {
			p.holdUntilSnapshot(r.ctx, start+entry.For-r.now())
		} else if entry.For > 0 {
			r.sleepUntil(start + entry.For)
		}
	}
	cutShort := r.ctx.Err() != nil
	recoverErr := lc.Recover(r.ctx)
	end := r.now()
	r.mu.Lock()
	delete(r.inEffect, lc)
	r.mu.Unlock()
	if c, ok := f.(*Compact); ok {
		if msg := c.failures(); msg != "" {
			r.problem(ProblemCompactionFailed, entry.Spec, msg)
		}
	}
	if nf, ok := f.(interface{ NotFired() string }); ok && injectErr == nil {
		if msg := nf.NotFired(); msg != "" {
			r.problem(ProblemNothingInjected, entry.Spec, msg)
		}
	}
	var effect *results.Effect
	if ef, ok := f.(interface{ Effect() *results.Effect }); ok && injectErr == nil {
		effect = ef.Effect()
	}
	if win != nil {
		win.Heal(end)
	}
	if r.opts.OnFault != nil && injectErr == nil {
		r.opts.OnFault(entry.Kind, targets, false)
	}

	w := results.FaultWindow{Fault: entry.Kind, Spec: entry.Spec, Targets: targets, Leader: leader,
		Start: r.opts.Base.Add(start), End: r.opts.Base.Add(end), StartNs: int64(start), EndNs: int64(end), Effect: effect}
	switch {
	case injectErr != nil:
		w.Outcome = fmt.Sprintf("%s: %v", OutcomeInjectFailed, injectErr)
		if recoverErr != nil {
			w.Outcome += fmt.Sprintf("; recover failed: %v", recoverErr)
		}
		r.mu.Lock()
		r.injectFailed++
		r.mu.Unlock()
		r.problem(ProblemInjectFailed, entry.Spec, w.Outcome)
	case recoverErr != nil:
		w.Outcome = fmt.Sprintf("%s: recover failed: %v", OutcomeNotRecovered, recoverErr)
		r.notRecover(entry, w.Outcome)
	case !cutShort:
		rctx, cancel := context.WithTimeout(r.ctx, r.opts.RecoveryTimeout)
		err := r.env.Cluster.WaitHealthy(rctx)
		cancel()
		switch {
		case err == nil:
			w.Outcome, w.RecoveredNs = OutcomeRecovered, int64(r.now())
			w.Members = r.afterRecovery(entry)
		case r.ctx.Err() != nil:
			r.stopped(entry, &w) // the run stopped while the cluster recovered
		default:
			w.Outcome = fmt.Sprintf("%s within %s: %v", OutcomeNotRecovered, r.opts.RecoveryTimeout, err)
			r.notRecover(entry, w.Outcome)
		}
	default:
		r.stopped(entry, &w)
	}
	r.logf("fault %s: healed at %.2fs: %s", entry.Spec, r.rel(end), w.Outcome)

	// The window is observed a while longer (its recovery phase) without holding up the next occurrence.
	// Without load there is nothing to observe: observations end with the load at the latest.
	limit := time.Duration(math.MaxInt64)
	if r.opts.Duration > 0 {
		limit = max(r.begin+r.opts.Duration, end)
	}
	st := &settling{win: win, cut: make(chan struct{}), limit: limit}
	r.mu.Lock()
	r.settling[st] = struct{}{}
	r.mu.Unlock()
	r.settleWg.Go(func() {
		if w.Outcome == OutcomeRecovered && r.ctx.Err() == nil {
			t := time.NewTimer(min(time.Duration(w.RecoveredNs)+r.opts.Settle, st.limit) - r.now())
			select {
			case <-t.C:
			case <-st.cut:
			case <-r.ctx.Done():
			}
			t.Stop()
		}
		r.mu.Lock()
		delete(r.settling, st)
		r.mu.Unlock()
		at := st.end(r.now())
		if win != nil {
			r.sleepUntil(at + r.opts.Grace) // requests in flight at the end still count
		}
		r.record(w, st, at)
	})
	return ""
}

// afterRecovery runs Options.AfterRecovery, if set, for a window the cluster recovered from.
func (r *Runner) afterRecovery(e Entry) *results.Check {
	if r.opts.AfterRecovery == nil {
		return nil
	}
	c := r.opts.AfterRecovery(r.ctx)
	if c.Verdict != results.VerdictOK {
		r.logf("fault %s: %s after recovery: %s: %s", e.Spec, c.Name, c.Verdict, c.Detail)
	}
	return &c
}

// settling is a window in its recovery phase; its observation ends when the phase does, or when the next
// fault starts.
type settling struct {
	win   *results.Window
	cut   chan struct{}
	limit time.Duration // the observation ends by then
	once  sync.Once
	at    time.Duration
}

// end ends the observation (the first call decides when) and returns when it ended.
func (s *settling) end(now time.Duration) time.Duration {
	s.once.Do(func() {
		s.at = min(now, s.limit)
		if s.win != nil {
			s.win.Close(now)
		}
		close(s.cut)
	})
	return s.at
}

// cutSettling ends the recovery phase of every window still in one, at offset at.
func (r *Runner) cutSettling(at time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for st := range r.settling {
		st.end(at)
	}
}

// stopped ends a window that Stop cut short: after an interrupt it is only healed; at the end of the
// load the cluster's recovery is checked within what is left of Stop's context, and a cluster that is not
// healthy again is a window not recovered.
func (r *Runner) stopped(e Entry, w *results.FaultWindow) {
	r.mu.Lock()
	reason, ctx := r.stopReason, r.stopCtx
	r.mu.Unlock()
	if reason == Interrupted || ctx == nil {
		w.Outcome = OutcomeInterrupted
		return
	}
	rctx, cancel := context.WithTimeout(ctx, r.opts.RecoveryTimeout)
	defer cancel()
	if err := r.env.Cluster.WaitHealthy(rctx); err != nil {
		w.Outcome = fmt.Sprintf("%s; not healthy again before the run ended: %v", OutcomeLoadEnded, err)
		r.notRecover(e, w.Outcome)
		return
	}
	w.Outcome, w.RecoveredNs = OutcomeRecovered, int64(r.now())
}

// rel returns offset t in seconds since the start of the load.
func (r *Runner) rel(t time.Duration) float64 { return (t - r.begin).Seconds() }

func (r *Runner) notRecover(e Entry, outcome string) {
	r.mu.Lock()
	r.notRecovered++
	r.mu.Unlock()
	r.problem(ProblemNotRecovered, e.Spec, outcome)
}

// skip records a fault that did not run.
func (r *Runner) skip(e Entry, why string) {
	now := r.now()
	w := results.FaultWindow{Fault: e.Kind, Spec: e.Spec, Start: r.opts.Base.Add(now), End: r.opts.Base.Add(now),
		StartNs: int64(now), EndNs: int64(now), Outcome: OutcomeSkipped + ": " + why}
	r.problem(ProblemSkipped, e.Spec, w.Outcome)
	r.record(w, nil, now)
}

// record adds the availability figures of a window whose observation ended at offset at, and appends it to
// faults.jsonl.
func (r *Runner) record(w results.FaultWindow, st *settling, at time.Duration) {
	if st != nil && st.win != nil {
		a := st.win.Finalize(at)
		first, leader, changes := r.mon.elections(time.Duration(w.StartNs), at)
		a.LeaderChanges = changes
		if first >= 0 {
			ms := float64(first) / 1e6
			a.TimeToLeaderMs, a.NewLeader = &ms, leader
		}
		w.Availability = &a
	}
	w.Outcome = oneLine(w.Outcome) // errors.Join and panics spread over lines; the log has them in full
	r.mu.Lock()
	r.windows = append(r.windows, w)
	var werr error
	if r.file != nil {
		if b, err := json.Marshal(w); err == nil {
			_, werr = r.file.Write(append(b, '\n'))
		}
	}
	r.mu.Unlock()
	if werr != nil {
		r.problem(ProblemRunner, "", fmt.Sprintf("write %s: %v", results.FaultsFile, werr))
	}
}

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

// healing returns the specs of the faults injected and not healed yet, sorted and comma-separated ("" when
// none): those a leftover found by the final sweep belongs to.
func (r *Runner) healing() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var specs []string
	for _, spec := range r.inEffect {
		if !slices.Contains(specs, spec) {
			specs = append(specs, spec)
		}
	}
	slices.Sort(specs)
	return strings.Join(specs, ",")
}

// healAll is the last line of defence after the schedule's own heals: it lifts every proxy policy,
// resumes paused members and restores disk speed, whatever a lost goroutine may have left behind. Each
// thing it had to heal is a problem (ProblemSweepHealed) naming the faults still being healed then.
func (r *Runner) healAll(ctx context.Context) {
	c := r.env.Cluster
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	spec := r.healing()
	swept := func(format string, args ...any) {
		r.problem(ProblemSweepHealed, spec, fmt.Sprintf(format, args...))
	}
	for _, m := range c.Members() {
		if pc, ok := c.(proxied); ok {
			if p := pc.Proxy(m.Name()); p != nil && p.Heal() {
				swept("peer proxy of %s was still shaped at the end; healed by the final sweep", m.Name())
			}
		}
		if pc, ok := c.(clientProxied); ok {
			if p := pc.ClientProxy(m.Name()); p != nil && p.Heal() {
				swept("client proxy of %s was still shaped at the end; healed by the final sweep", m.Name())
			}
		}
		if d, ok := c.(disked); ok {
			if fs := d.Disk(m.Name()); fs != nil && fs.Delays() != (slowfs.Delays{}) {
				if err := fs.Set(hctx, slowfs.Delays{}); err != nil {
					swept("disk of %s was still slow at the end; the final sweep could not restore it: %v", m.Name(), err)
					continue
				}
				swept("disk of %s was still slow at the end; restored by the final sweep", m.Name())
			}
		}
		if p, ok := m.(clusters.Process); ok && p.Paused() {
			if err := p.Resume(hctx); err != nil {
				swept("%s was still paused at the end; the final sweep could not resume it: %v", m.Name(), err)
				continue
			}
			swept("%s was still paused at the end; resumed by the final sweep", m.Name())
		}
	}
}

// Windows returns the fault windows recorded so far, in start order after Stop.
func (r *Runner) Windows() []results.FaultWindow {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.windows)
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

func describe(f Fault) (targets []string, leader string) {
	if t, ok := f.(Targeted); ok {
		return t.Targets(), t.Leader()
	}
	return nil, ""
}

func dash(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// seeded returns a random source derived from seed and a name, as workloads.Runner.Rand does.
func seeded(seed int64, name string, i int) *rand.Rand {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", name, i)
	return rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
}

// nemesisTargets lists, per kind, the targets a nemesis picks among, with the value it gives.
var nemesisChoices = map[string]struct {
	targets []string
	values  []string
}{
	KindKill:      {[]string{"leader", "follower", "random"}, []string{""}},
	KindRestart:   {[]string{"leader", "follower"}, []string{""}},
	KindPause:     {[]string{"leader", "follower", "random"}, []string{""}},
	KindPartition: {[]string{"leader", "follower", "minority"}, []string{"", "in", "out", "refuse"}},
	KindDelay:     {[]string{"leader", "random", "all"}, []string{"50ms~10ms", "100ms~20ms", "200ms~50ms"}},
	KindBandwidth: {[]string{"leader", "random"}, []string{"256KiB", "1MiB"}},
	KindReset:     {[]string{"leader", "random"}, []string{"", "500ms"}},
	KindSlowDisk:  {[]string{"leader", "follower", "all"}, []string{"20ms", "50ms", "100ms"}},
	KindDefrag:    {[]string{"random", "all"}, []string{""}},
	KindCompact:   {nil, []string{"", "1s"}},
	KindSnapshot:  {[]string{"leader", "random"}, []string{""}},
	KindReplace:   {[]string{"follower"}, []string{""}},
	// Points reached under any write load: the WAL save, the backend commit, the apply of an entry.
	KindFailpoint: {[]string{"leader", "follower"}, []string{"raftBeforeSave:1*panic", "raftAfterSave:1*panic",
		"beforeCommit:1*panic", "beforeApplyOneEntryNormal:1*panic", "raftBeforeSave:sleep(100ms)", "beforeCommit:sleep(200ms)"}},
}

// nemesisDefault is what a nemesis picks among when its entry names no kinds: every fault but member
// replacement, which reshapes the cluster for minutes.
var nemesisDefault = []string{KindKill, KindRestart, KindPause, KindPartition, KindDelay, KindBandwidth, KindReset,
	KindSlowDisk, KindDefrag, KindCompact, KindSnapshot}

// pickNemesis turns a nemesis entry into a concrete entry: a kind available on the cluster, a target and
// a value, all from the entry's seeded source. Strace-backed disks take no jitter; values are chosen to
// fit. When no kind is available it returns an error saying why for each.
func (r *Runner) pickNemesis(e Entry, rng *rand.Rand) (Entry, error) {
	allowed := e.params.nemesis
	if len(allowed) == 0 {
		allowed = nemesisDefault
		if (&Failpoint{}).Available(r.env.Cluster) == nil {
			// Members with failpoints: the nemesis may crash or stall them at the points where bugs hid.
			allowed = append(slices.Clone(nemesisDefault), KindFailpoint)
		}
	}
	var candidates []Entry
	var why []string
	n := len(r.env.Cluster.Members())
	for _, kind := range allowed {
		ch := nemesisChoices[kind]
		targets := ch.targets
		if targets == nil {
			targets = []string{""}
		}
		t := targets[rng.IntN(len(targets))]
		if (t == "minority" && n < 3) || ((t == "follower" || t == "leader") && n < 2 && kind != KindKill && kind != KindPause && kind != KindRestart) {
			t = "random"
		}
		v := ch.values[rng.IntN(len(ch.values))]
		spec := kind
		if t != "" {
			spec += ":" + t
		}
		if v != "" {
			spec += "=" + v
		}
		spec += fmt.Sprintf("@0s+%s", e.For)
		c, err := parseEntry(spec)
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", kind, err))
			continue
		}
		if kinds[kind].defaultFor == 0 && c.params.interval == 0 {
			c.For = 0 // an operation: its window is the operation itself
			spec = strings.Replace(spec, "+"+e.For.String(), "", 1)
		}
		f, err := New(c, r.env)
		if err == nil {
			err = f.Available(r.env.Cluster)
		}
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", kind, err))
			continue
		}
		c.Spec = strings.Replace(spec, "@0s", "", 1) + " (nemesis)"
		candidates = append(candidates, c)
	}
	if len(candidates) == 0 {
		return Entry{}, fmt.Errorf("nothing injected: no fault of the nemesis is available on this cluster (%s)", strings.Join(why, "; "))
	}
	return candidates[rng.IntN(len(candidates))], nil
}

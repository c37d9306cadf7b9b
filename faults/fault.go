// Package faults injects faults into an etcd cluster while a workload runs, on a schedule, and always heals
// them: process faults (SIGKILL, graceful restart, SIGSTOP), network faults through the per-member peer
// proxies (partitions, one-way partitions, refused connections, delay with jitter, bandwidth limits,
// connection resets), disk faults (slow fsync and writes through a FUSE filesystem, or strace where FUSE
// is missing; lost unsynced writes on a kill), and operations under load (defragmentation, compaction,
// member replacement, snapshots).
//
// A Fault is small: Name, Available, Inject, Recover. A Lifecycle guards each one with a state machine
// that refuses illegal calls (no Recover before Inject, no second Inject), always lets Recover run after
// an Inject (even a failed or panicking one) and gives it a fresh context when the run's is cancelled. A
// Runner plays a Schedule against a cluster while the load runs: it checks the cluster's health before
// each fault and after each heal (a cluster that does not recover within a bound is a reported failure,
// never a hang), records every window to faults.jsonl, and measures what each window did to clients
// (write unavailability, time to a new leader, leader changes, errors by class). Whatever kept the schedule
// from doing what it asked (a fault skipped, a nemesis with nothing to inject, a failed inject or
// compaction, a window not recovered, a heal left to the final sweep) is a typed Problem of the Runner:
// the caller decides what each costs the run, nothing is only logged.
package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/proxy"
	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
)

// Fault is one fault against one cluster. Inject applies it to targets chosen at that moment; Recover
// undoes whatever Inject did, including a partial Inject, and may be called only once, after Inject. Use
// them through a Lifecycle.
type Fault interface {
	// Name names the fault as the schedule did ("kill:leader").
	Name() string
	// Available returns nil when the fault can run against c now, or an error saying why not.
	Available(c clusters.Cluster) error
	// Inject applies the fault.
	Inject(ctx context.Context) error
	// Recover heals it.
	Recover(ctx context.Context) error
}

// Targeted is a fault that reports what it acted on (after Inject).
type Targeted interface {
	// Targets are the names of the members the fault was applied to.
	Targets() []string
	// Leader is the name of the leader when the fault was injected ("" if there was none).
	Leader() string
}

// Optional abilities of a cluster that faults look for by type assertion.
type (
	proxied interface {
		Proxy(member string) *proxy.Proxy
	}
	clientProxied interface {
		ClientProxy(member string) *proxy.Proxy
	}
	disked interface {
		Disk(member string) *slowfs.FS
	}
	replacer interface {
		Replace(ctx context.Context, member string) error
	}
	imager interface {
		SetImage(ctx context.Context, member, version string) error
		MemberVersion(member string) string
	}
)

// Env is what faults act on.
type Env struct {
	Cluster clusters.Cluster
	// Dir is the run directory (snapshots are written there, then removed).
	Dir string
	// Log receives one line per notable action; nil discards them.
	Log io.Writer
	// SnapshotCatchUpEntries is how many raft entries the members keep after a snapshot (etcd's
	// --snapshot-catchup-entries; 0: etcd's default, 5000): a partition held until a snapshot waits for
	// the leader to compact its log this far past the partitioned members.
	SnapshotCatchUpEntries int

	rngMu sync.Mutex
	rng   *rand.Rand
}

// NewEnv returns an environment whose random choices derive from seed.
func NewEnv(c clusters.Cluster, dir string, seed int64, log io.Writer) *Env {
	if log == nil {
		log = io.Discard
	}
	return &Env{Cluster: c, Dir: dir, Log: log, rng: rand.New(rand.NewPCG(uint64(seed), 0x6661756c74))} // "fault"
}

func (e *Env) logf(format string, args ...any) { fmt.Fprintf(e.Log, format+"\n", args...) }

// New builds the fault an entry describes. Nemesis entries are resolved by the Runner, not here.
func New(e Entry, env *Env) (Fault, error) {
	b := base{name: e.Kind, target: e.Target, env: env, p: e.params, hold: e.For}
	if e.Target.Kind != "" {
		b.name += ":" + e.Target.String()
	}
	switch e.Kind {
	case KindKill:
		return &Kill{base: b}, nil
	case KindRestart:
		return &Restart{base: b}, nil
	case KindPause:
		return &Pause{base: b}, nil
	case KindPartition:
		return &Partition{base: b}, nil
	case KindDelay, KindBandwidth:
		return &Shape{base: b}, nil
	case KindReset:
		return &Reset{base: b}, nil
	case KindSlowDisk:
		return &SlowDisk{base: b}, nil
	case KindDefrag:
		return &Defrag{base: b}, nil
	case KindCompact:
		return &Compact{base: b}, nil
	case KindReplace:
		return &Replace{base: b}, nil
	case KindSnapshot:
		return &Snapshot{base: b}, nil
	case KindUpgrade, KindDowngrade:
		return &Upgrade{base: b, down: e.Kind == KindDowngrade}, nil
	case KindFailpoint:
		return &Failpoint{base: b}, nil
	}
	return nil, fmt.Errorf("no fault %q", e.Kind)
}

// base holds what every fault has: its target, its resolved targets, and the leader at injection.
type base struct {
	name    string
	target  Target
	env     *Env
	p       params
	hold    time.Duration
	targets []clusters.Member
	leader  string
}

func (b *base) Name() string      { return b.name }
func (b *base) Targets() []string { return names(b.targets) }
func (b *base) Leader() string    { return b.leader }

// resolve picks the targets among pool.
func (b *base) resolve(ctx context.Context, pool []clusters.Member) error {
	targets, leader, err := b.env.resolve(ctx, b.target, pool)
	if leader != nil {
		b.leader = leader.Name()
	}
	b.targets = targets
	return err
}

// State is where a fault is in its lifecycle.
type State int

// Lifecycle states: Ready -> Injecting -> Injected -> Recovering -> Recovered.
const (
	Ready State = iota
	Injecting
	Injected
	Recovering
	Recovered
)

func (s State) String() string {
	return [...]string{"ready", "injecting", "injected", "recovering", "recovered"}[s]
}

// ErrIllegal is returned for a lifecycle call the fault's state does not allow.
var ErrIllegal = errors.New("illegal fault lifecycle transition")

// recoverTimeout bounds a Recover that runs on a fresh context because the run's was cancelled.
const recoverTimeout = 20 * time.Second

// Lifecycle guards a Fault: Inject only once and only first; Recover only after Inject, once. Panics in
// Inject or Recover become errors, and an Inject that failed or panicked still counts as injected, so
// that Recover undoes what it got done.
type Lifecycle struct {
	f     Fault
	mu    sync.Mutex
	state State
}

// NewLifecycle wraps f.
func NewLifecycle(f Fault) *Lifecycle { return &Lifecycle{f: f} }

// Fault returns the wrapped fault.
func (l *Lifecycle) Fault() Fault { return l.f }

// State returns the current state.
func (l *Lifecycle) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

func (l *Lifecycle) move(from, to State, op string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != from {
		return fmt.Errorf("%s %s: fault is %s: %w", op, l.f.Name(), l.state, ErrIllegal)
	}
	l.state = to
	return nil
}

// Inject injects the fault.
func (l *Lifecycle) Inject(ctx context.Context) error {
	if err := l.move(Ready, Injecting, "inject"); err != nil {
		return err
	}
	defer l.move(Injecting, Injected, "inject")
	return guard("inject "+l.f.Name(), func() error { return l.f.Inject(ctx) })
}

// Recover heals the fault. When ctx is already done (the run was interrupted) it runs on a fresh context
// bounded by recoverTimeout: healing is never skipped.
func (l *Lifecycle) Recover(ctx context.Context) error {
	if err := l.move(Injected, Recovering, "recover"); err != nil {
		return err
	}
	defer l.move(Recovering, Recovered, "recover")
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), recoverTimeout)
		defer cancel()
	}
	return guard("recover "+l.f.Name(), func() error { return l.f.Recover(ctx) })
}

// guard runs fn, turning a panic into an error.
func guard(what string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: panic: %v\n%s", what, r, debug.Stack())
		}
	}()
	return fn()
}

// processes returns the members of c that are processes (for faults that need one).
func processes(c clusters.Cluster) ([]clusters.Process, error) {
	ps := clusters.Processes(c)
	if len(ps) == 0 || len(ps) != len(c.Members()) {
		return nil, fmt.Errorf("needs control of member processes, which a %s cluster does not offer", c.Backend())
	}
	return ps, nil
}

// running returns the members whose process runs and is not paused: those a process fault can act on.
func running(c clusters.Cluster) []clusters.Member {
	var out []clusters.Member
	for _, m := range c.Members() {
		if p, ok := m.(clusters.Process); ok && (!p.Running() || p.Paused()) {
			continue
		}
		out = append(out, m)
	}
	return out
}

// forEach runs fn for every target concurrently, so that a fault on several members hits them at once.
func forEach[T any](items []T, fn func(T) error) error {
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Go(func() { errs[i] = fn(it) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

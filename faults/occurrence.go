package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// healthLead is how long before its time a fault's health check starts, so that the fault itself starts
// on time.
const healthLead = time.Second

// occurrence runs one fault: health check, inject at offset due, hold, recover, health check; its window
// is recorded once its observation ends. It returns "" once the occurrence is settled (run, skipped or
// reported), or, when the runner stopped before it could inject, at which step.
func (r *Runner) occurrence(e Entry, due time.Duration, rng *rand.Rand) (notStarted string) {
	entry, f, ok := r.prepare(e, rng)
	if !ok {
		return ""
	}
	if ready, why := r.preflight(entry, f, due); !ready {
		return why
	}
	start := r.now()
	// A new fault ends the recovery phase of the windows before it: what happens from now on is its doing.
	r.cutSettling(start)
	var win *results.Window
	if r.opts.Phases != nil {
		win = r.opts.Phases.Open(start)
	}
	p := r.play(entry, f, start)
	if win != nil {
		win.Heal(p.end)
	}
	if r.opts.OnFault != nil && p.injectErr == nil {
		r.opts.OnFault(entry.Kind, p.targets, false)
	}
	w := r.verdict(entry, p)
	r.logf("fault %s: healed at %.2fs: %s", entry.Spec, r.rel(p.end), w.Outcome)
	r.observe(w, win, p.end)
	return ""
}

// prepare makes the fault this occurrence injects; a nemesis first picks the concrete entry it plays this
// time. A fault that cannot be made is reported as a problem and settles the occurrence without a window
// (ok false): there is nothing to inject, so nothing to observe.
func (r *Runner) prepare(e Entry, rng *rand.Rand) (entry Entry, f Fault, ok bool) {
	entry = e
	var err error
	if e.Kind == KindNemesis {
		if entry, err = r.pickNemesis(e, rng); err != nil {
			r.problem(ProblemNothingInjected, e.Spec, err.Error())
			return Entry{}, nil, false
		}
	}
	if f, err = New(entry, r.env); err != nil {
		r.problem(ProblemInjectFailed, entry.Spec, err.Error())
		return Entry{}, nil, false
	}
	return entry, f, true
}

// preflight waits until offset due, checking just before it (healthLead) that the fault can run here and
// that the cluster is healthy: a fault on a cluster already down would measure the earlier trouble, so it
// is skipped and recorded as such (ready false, why ""). When the runner stops first, why says at which
// step.
func (r *Runner) preflight(entry Entry, f Fault, due time.Duration) (ready bool, why string) {
	if !r.sleepUntil(due - healthLead) {
		return false, "before its time"
	}
	if err := f.Available(r.env.Cluster); err != nil {
		r.skip(entry, fmt.Sprintf("unavailable: %v", err))
		return false, ""
	}
	hctx, cancel := context.WithTimeout(r.ctx, r.opts.HealthTimeout)
	err := r.env.Cluster.WaitHealthy(hctx)
	cancel()
	if r.ctx.Err() != nil {
		return false, "while the health check before it ran"
	}
	if err != nil {
		r.skip(entry, fmt.Sprintf("cluster not healthy before the fault: %v", err))
		return false, ""
	}
	if !r.sleepUntil(due) {
		return false, "before its time"
	}
	return true, ""
}

// played is what a fault did between its inject and its recover: what its window and verdict are made of.
type played struct {
	start, end time.Duration
	targets    []string
	leader     string
	injectErr  error
	recoverErr error
	// cutShort: Stop came before the window ended, so the cluster's recovery is judged by Stop's reason.
	cutShort bool
	effect   *results.Effect
}

// play runs the fault's lifecycle from offset start: inject, hold for the window, recover. Recover runs
// whatever came before it (a failed inject, Stop): Lifecycle.Recover undoes what an inject got done, on a
// fresh context when the run's is cancelled. Until then the fault counts as in effect, so that Stop's
// final sweep names it.
func (r *Runner) play(entry Entry, f Fault, start time.Duration) played {
	lc := NewLifecycle(f)
	if entry.For == 0 {
		// An operation's window is the operation itself, which may take a while (a replacement).
		r.logf("fault %s: injecting at %.2fs", entry.Spec, r.rel(start))
	}
	r.mu.Lock()
	r.inEffect[lc] = entry.Spec
	r.mu.Unlock()
	p := played{start: start}
	p.injectErr = lc.Inject(r.ctx)
	p.targets, p.leader = describe(f)
	if p.injectErr != nil {
		r.logf("fault %s: inject failed at %.2fs: %v", entry.Spec, r.rel(start), p.injectErr)
	} else {
		r.logf("fault %s: injected at %.2fs on %s (leader %s)", entry.Spec, r.rel(start), strings.Join(p.targets, ","), dash(p.leader))
		if r.opts.OnFault != nil {
			r.opts.OnFault(entry.Kind, p.targets, true)
		}
		r.hold(entry, f, start)
	}
	p.cutShort = r.ctx.Err() != nil
	p.recoverErr = lc.Recover(r.ctx)
	p.end = r.now()
	r.mu.Lock()
	delete(r.inEffect, lc)
	r.mu.Unlock()
	p.effect = r.aftermath(entry, f, p.injectErr == nil)
	return p
}

// hold keeps an injected fault in effect until its window ends, or Stop. A partition held until a snapshot
// ends as soon as the leader has compacted its log past the targets; its window is then only the longest
// it may last.
func (r *Runner) hold(entry Entry, f Fault, start time.Duration) {
	if p, ok := f.(*Partition); ok && p.p.untilSnapshot {
		p.holdUntilSnapshot(r.ctx, start+entry.For-r.now())
	} else if entry.For > 0 {
		r.sleepUntil(start + entry.For)
	}
}

// aftermath reports what a recovered fault found about itself, which only it can tell: compactions that
// failed, and an injected fault that took effect on nothing (a failpoint never reached). It returns the
// effect the fault measured, when it was injected and measures one.
func (r *Runner) aftermath(entry Entry, f Fault, injected bool) *results.Effect {
	if c, ok := f.(*Compact); ok {
		if msg := c.failures(); msg != "" {
			r.problem(ProblemCompactionFailed, entry.Spec, msg)
		}
	}
	if nf, ok := f.(interface{ NotFired() string }); ok && injected {
		if msg := nf.NotFired(); msg != "" {
			r.problem(ProblemNothingInjected, entry.Spec, msg)
		}
	}
	if ef, ok := f.(interface{ Effect() *results.Effect }); ok && injected {
		return ef.Effect()
	}
	return nil
}

// verdict makes the occurrence's window and decides its outcome. A failed inject means the run did not
// test what its schedule said, a failed recover that the cluster was left broken; otherwise the cluster
// must be healthy again within the recovery bound, unless Stop cut the window short and its reason decides.
func (r *Runner) verdict(entry Entry, p played) results.FaultWindow {
	w := results.FaultWindow{Fault: entry.Kind, Spec: entry.Spec, Targets: p.targets, Leader: p.leader,
		Start: r.opts.Base.Add(p.start), End: r.opts.Base.Add(p.end), StartNs: int64(p.start), EndNs: int64(p.end), Effect: p.effect}
	switch {
	case p.injectErr != nil:
		w.Outcome = fmt.Sprintf("%s: %v", OutcomeInjectFailed, p.injectErr)
		if p.recoverErr != nil {
			w.Outcome += fmt.Sprintf("; recover failed: %v", p.recoverErr)
		}
		r.mu.Lock()
		r.injectFailed++
		r.mu.Unlock()
		r.problem(ProblemInjectFailed, entry.Spec, w.Outcome)
	case p.recoverErr != nil:
		w.Outcome = fmt.Sprintf("%s: recover failed: %v", OutcomeNotRecovered, p.recoverErr)
		r.notRecover(entry, w.Outcome)
	case !p.cutShort:
		r.verifyRecovery(entry, &w)
	default:
		r.stopped(entry, &w)
	}
	return w
}

// verifyRecovery waits, within the recovery bound, for the cluster to be healthy again after a window
// that ran its full length, then runs the after-recovery check. A cluster that is not healthy in time is
// the availability failure a run exists to find; when the run stops meanwhile, stopped judges the window.
func (r *Runner) verifyRecovery(entry Entry, w *results.FaultWindow) {
	rctx, cancel := context.WithTimeout(r.ctx, r.opts.RecoveryTimeout)
	err := r.env.Cluster.WaitHealthy(rctx)
	cancel()
	switch {
	case err == nil:
		w.Outcome, w.RecoveredNs = OutcomeRecovered, int64(r.now())
		w.Members = r.afterRecovery(entry)
	case r.ctx.Err() != nil:
		r.stopped(entry, w) // the run stopped while the cluster recovered
	default:
		w.Outcome = fmt.Sprintf("%s within %s: %v", OutcomeNotRecovered, r.opts.RecoveryTimeout, err)
		r.notRecover(entry, w.Outcome)
	}
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

// notRecover reports a window the cluster did not recover from, and counts it for Stop's ErrNotRecovered.
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

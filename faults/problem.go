package faults

import (
	"fmt"
	"strings"
)

// ProblemKind says how a schedule fell short of what it asked for. Every kind means the run did not test
// what its schedule said; which of them a run may tolerate (a skip, a fault with nothing to inject) is the
// caller's decision, not the runner's.
type ProblemKind string

// The kinds of problem a Runner reports.
const (
	// ProblemSkipped: an occurrence did not run because the fault was not available on the cluster at its
	// time, or the cluster was not healthy before it.
	ProblemSkipped ProblemKind = "skipped"
	// ProblemNothingInjected: an occurrence injected nothing without being skipped: a nemesis found no
	// fault among its kinds available on the cluster, or an occurrence due before the load's end did not
	// start because the load ended first (or its jitter pushed the entry's only chance past the end).
	ProblemNothingInjected ProblemKind = "nothing-injected"
	// ProblemInjectFailed: Inject returned an error; whatever it did was undone.
	ProblemInjectFailed ProblemKind = "inject-failed"
	// ProblemNotRecovered: the heal failed, or the cluster was not healthy again within the recovery bound
	// after it (also when the load had ended and the run was waiting for the cluster).
	ProblemNotRecovered ProblemKind = "not-recovered"
	// ProblemCompactionFailed: compactions of a compaction burst failed after the first one succeeded.
	ProblemCompactionFailed ProblemKind = "compaction-failed"
	// ProblemSweepHealed: the final sweep in Stop found a fault still in effect (a shaped or refusing
	// proxy, a slow disk, a paused member) that the schedule's own heal had not undone.
	ProblemSweepHealed ProblemKind = "sweep-healed"
	// ProblemRunner: the runner itself failed: a panic, faults.jsonl not written, heals still running when
	// Stop's time ran out.
	ProblemRunner ProblemKind = "runner-failed"
)

// Problem is one way in which a schedule did not do what it asked for.
type Problem struct {
	Kind ProblemKind `json:"kind"`
	// Fault is the schedule entry as written ("kill:leader@20s+5s"); for a nemesis occurrence the fault it
	// picked ("pause:follower+5s (nemesis)") once it picked one. Empty when the problem belongs to no fault
	// in particular (a file the runner could not write).
	Fault string `json:"fault,omitempty"`
	// Text says what happened, in one line.
	Text string `json:"text"`
}

// String returns the problem in one line, naming the fault first.
func (p Problem) String() string {
	if p.Fault == "" {
		return "faults: " + p.Text
	}
	return fmt.Sprintf("fault %s: %s", p.Fault, p.Text)
}

// oneLine joins the lines of s with "; " and drops a goroutine stack (logged in full where it arises), so
// that a problem fits on one line whatever error it quotes (errors.Join separates with newlines).
func oneLine(s string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.HasPrefix(l, "goroutine ") {
			break
		}
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}

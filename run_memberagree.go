package chaosbench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	lin "github.com/etcd-chaosbench/chaosbench/linearizability"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// CheckMembersAgree names the check that the members hold the same data: every member's HashKV at one
// common revision, after the load and after every fault window the cluster recovered from.
const CheckMembersAgree = "members-agree"

// Bounds of the comparisons. After the load, writes have stopped: followers get a few seconds to reach
// the leader's revision, so that the members are compared at their common head. After a window the load
// still runs: the members are compared at the lowest revision they all have applied, without waiting.
const (
	membersTimeout       = 30 * time.Second
	membersConverge      = 5 * time.Second
	membersWindowTimeout = 15 * time.Second
)

// memberAgreement is the members-agree check of a run, or why it did not run.
type memberAgreement struct {
	check *results.Check
	note  string
}

// compareMembers compares the members' data once the load is over and every fault is healed (execute
// heals them on its way out), before anything stops, and folds in what the comparisons after the fault
// windows found. It has a bound of its own, and runs before finish's cleanup budget starts to count.
func (r *run) compareMembers(ctx context.Context, interrupted bool) {
	switch {
	case r.cluster == nil:
		return // the cluster never started
	case interrupted:
		r.members.note = CheckMembersAgree + " skipped: the run was interrupted"
		return
	case len(r.cluster.Members()) < 2:
		r.members.note = CheckMembersAgree + " skipped: a single member has no peer to agree with"
		return
	}
	fmt.Fprintln(r.out, "comparing the members' data (HashKV at one revision)...")
	start := time.Now()
	mctx, cancel := context.WithTimeout(ctx, membersTimeout)
	defer cancel()
	final := membersCheck(clusters.CompareHashes(mctx, r.cluster, clusters.HashOptions{Converge: membersConverge}), time.Since(start))
	if ctx.Err() != nil {
		r.members.note = CheckMembersAgree + " skipped: the run was interrupted while comparing"
		return
	}
	var windows []results.FaultWindow
	if r.faults != nil && r.faults.runner != nil {
		windows = r.faults.runner.Windows()
	}
	c := membersVerdict(final, windows)
	r.members.check = &c
}

// addMembersCheck appends the members-agree check to the summary's checks (after the history's, which
// replace the list), where the outcome reads it: a disagreement is a violation.
func (r *run) addMembersCheck() {
	if c := r.members.check; c != nil {
		r.summary.Checks = append(r.summary.Checks, *c)
	}
}

// print writes the check's verdict as linearizability.WriteVerdicts writes the history's, or why it did not
// run.
func (m memberAgreement) print(w io.Writer) {
	if m.note != "" {
		fmt.Fprintln(w, m.note)
	}
	if m.check == nil {
		return
	}
	lin.WriteCheck(w, *m.check)
}

// membersAfterWindow returns what the fault runner calls once the cluster recovered from a window (see
// faults.Options.AfterRecovery): a comparison with the load still running. It returns nil for a single
// member.
func membersAfterWindow(c clusters.Cluster) func(context.Context) results.Check {
	if len(c.Members()) < 2 {
		return nil
	}
	return func(ctx context.Context) results.Check {
		start := time.Now()
		ctx, cancel := context.WithTimeout(ctx, membersWindowTimeout)
		defer cancel()
		return membersCheck(clusters.CompareHashes(ctx, c, clusters.HashOptions{Attempts: 3}), time.Since(start))
	}
}

// membersCheck turns a comparison into a check: agree is ok, disagree a violation, not compared unknown.
func membersCheck(cmp clusters.HashComparison, took time.Duration) results.Check {
	c := results.Check{Name: CheckMembersAgree, Verdict: results.VerdictUnknown, Detail: cmp.Detail, Seconds: took.Seconds()}
	switch cmp.Agreement {
	case clusters.Agree:
		c.Verdict = results.VerdictOK
	case clusters.Disagree:
		c.Verdict = results.VerdictViolation
	case clusters.NotCompared:
		c.Detail = "members not compared: " + cmp.Detail
	}
	return c
}

// membersVerdict combines the comparison after the load with those after the fault windows. A
// disagreement at any of them is a violation. A window after which the members could not be compared (the
// load ended during the comparison, say) is named but does not make the verdict unknown when the final
// comparison agreed: a hash at the final revision covers every revision since the last compaction, the
// ones written before that window included.
func membersVerdict(final results.Check, windows []results.FaultWindow) results.Check {
	out := final
	var disagreed, notCompared []string
	compared, agreed := 0, 0
	for _, w := range windows {
		if w.Members == nil {
			continue
		}
		compared++
		out.Seconds += w.Members.Seconds
		switch w.Members.Verdict {
		case results.VerdictOK:
			agreed++
		case results.VerdictViolation:
			disagreed = append(disagreed, fmt.Sprintf("after fault %s: %s", w.Spec, w.Members.Detail))
		default:
			notCompared = append(notCompared, fmt.Sprintf("after fault %s: %s", w.Spec, w.Members.Detail))
		}
	}
	if len(disagreed) > 0 {
		out.Verdict = results.VerdictViolation
	}
	lines := append(disagreed, "after the load: "+final.Detail)
	lines = append(lines, notCompared...)
	switch {
	case compared == 0:
	case agreed == 1 && compared == 1:
		lines = append(lines, "after the fault window too (under load)")
	case agreed == compared:
		lines = append(lines, fmt.Sprintf("after each of the %d fault windows too (under load)", compared))
	case agreed == 1:
		lines = append(lines, "after 1 other fault window: agree (under load)")
	case agreed > 0:
		lines = append(lines, fmt.Sprintf("after %d other fault windows: agree (under load)", agreed))
	}
	out.Detail = strings.Join(lines, "\n")
	return out
}

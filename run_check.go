package chaosbench

import (
	"context"
	"fmt"
	"time"

	lin "github.com/etcd-chaosbench/chaosbench/linearizability"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// checkHistory runs the consistency checks on the run's own history at the end of a run and stores the
// verdicts in the summary, where the outcome reads them. It says why when it does not run them.
func (r *run) checkHistory(ctx context.Context, interrupted bool) {
	policy, _ := outcome.ParseKnownIssuePolicy(r.s.KnownIssues) // validated with the scenario
	r.summary.KnownIssuePolicy = string(policy)
	switch {
	case !r.s.History:
		r.checkNote = "consistency checks skipped: no history was recorded (--history=false)"
		return
	case r.history == nil:
		return // the run failed before its load started
	case interrupted:
		r.checkNote = fmt.Sprintf("consistency checks skipped: the run was interrupted; check the partial history with `chaosbench check %s`", r.dir)
		return
	case r.split != nil:
		r.checkNote = "consistency checks: on the merged history of every worker (chaosbench merge)"
		return
	case !r.s.Check:
		r.checkNote = fmt.Sprintf("consistency checks skipped (--check=false); run them with `chaosbench check %s`", r.dir)
		return
	}
	fmt.Fprintf(r.out, "checking the history (linearizability, watches, serializable reads)...\n")
	defer checkMemory()()
	opts := lin.Options{Timeout: r.s.CheckTimeout, Versions: r.summary.Versions}
	if r.during != nil {
		opts.Proofs = r.during.Proofs()
	}
	start := time.Now()
	if r.follower != nil {
		// The history writer is closed (teardown): the follower reads what it wrote last, and the check
		// takes what it read. What it could not read the check reads from the files, as it would have.
		if err := r.follower.Finish(); err != nil {
			fmt.Fprintf(r.out, "reading the history during the load: %v: the check reads it again\n", err)
		} else {
			r.summary.CheckReadDuringLoad = true
		}
		opts.Followed = r.follower
	}
	rep, err := lin.CheckDir(ctx, r.dir, opts)
	r.summary.CheckSeconds = time.Since(start).Seconds()
	if d := r.summary.CheckDuringLoad; d != nil && rep != nil {
		d.ReusedPartitions, d.Partitions = rep.Stats.ProvedBefore, rep.Stats.Partitions
		fmt.Fprintf(r.out, "checked in %.1fs after the load: %d of its %d per-key segments were proved during the load (%d checks of the history so far, the last of %d operations)\n",
			r.summary.CheckSeconds, d.ReusedPartitions, d.Partitions, d.Checks, d.Operations)
	}
	if rep == nil {
		// The checks could not even start (an unreadable history): undecided, never a pass.
		r.summary.Checks = []results.Check{{Name: lin.CheckLinearizability, Verdict: results.VerdictUnknown,
			Detail: fmt.Sprintf("check history: %v", err)}}
		return
	}
	r.summary.Checks = rep.Checks
	r.summary.KnownIssues = rep.KnownIssues
	r.checkReport = rep
}

// printChecks prints the verdict lines after the summary.
func (r *run) printChecks() {
	if r.checkNote != "" {
		fmt.Fprintln(r.out, r.checkNote)
	}
	if r.checkReport != nil {
		lin.WriteVerdicts(r.out, r.checkReport)
	}
	r.members.print(r.out)
}

// startCheckDuringLoad starts checking the history while the load runs, when the run will check it after
// the load (--check-during-load): the check after the load then searches only the per-key segments the
// checks during the load did not prove. A split run's worker checks nothing (the merge does).
func (r *run) startCheckDuringLoad(ctx context.Context) {
	if !r.s.History || !r.s.Check || !r.s.CheckDuringLoad || r.split != nil || r.history == nil {
		return
	}
	r.during = lin.StartDuringLoad(ctx, r.dir, lin.Options{Timeout: r.s.CheckTimeout, Versions: r.summary.Versions}, r.history.Flush)
}

// startReadDuringLoad starts reading the history while the run writes it (--read-during-load), when the
// run will check it after the load: the operations into the check's store, the watch records through the
// check's first pass over them.
func (r *run) startReadDuringLoad() {
	if !r.s.History || !r.s.Check || !r.s.ReadDuringLoad || r.split != nil || r.history == nil || r.follower != nil {
		return
	}
	r.follower = lin.Follow(r.dir)
}

// stopCheckDuringLoad ends the checks during the load, at the load's end (and on every way out of it),
// and keeps what they did for the summary. Their proofs stay for the check after the load.
func (r *run) stopCheckDuringLoad() {
	if r.during == nil || r.summary.CheckDuringLoad != nil {
		return
	}
	st := r.during.Stop()
	r.summary.CheckDuringLoad = &st
}

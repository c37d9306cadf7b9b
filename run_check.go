package chaosbench

import (
	"context"
	"fmt"

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
	rep, err := lin.CheckDir(ctx, r.dir, lin.Options{Timeout: r.s.CheckTimeout, Versions: r.summary.Versions})
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

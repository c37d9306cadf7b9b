package chaosbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	lin "github.com/etcd-chaosbench/chaosbench/linearizability"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/merge"
	"github.com/etcd-chaosbench/chaosbench/results/report"
	"github.com/etcd-chaosbench/chaosbench/workloads/kube"
)

// MergeOptions are the settings of `chaosbench merge`.
type MergeOptions struct {
	// Dirs are the run directories of every worker of one split load, in any order.
	Dirs []string
	// Out is the merged run directory.
	Out string
	// AssumeUncertainty widens the operations of workers whose clock was not measured (--start-at runs).
	AssumeUncertainty time.Duration
	// Problems are harness errors of running the workers (from a coordinator), added to the outcome.
	Problems []string
	// Wait, when set, waits up to this long for every directory to hold its worker's summary (a merge
	// Job started with the workers' Job).
	Wait time.Duration
	// Observer is the coordinator's own run when every worker ran in a container (runSplit): the cluster,
	// fault windows, etcd's metrics and the members-agree check come from it, and its time base is the
	// merged run's.
	Observer string
}

// Merge merges the run directories of a split load's workers into one run directory and judges it as a
// run, by the one judge (results.Decide on the merged summary): the consistency checks on the merged
// history, the scenario's thresholds on the merged figures, what each worker recorded (its errors, an
// interrupt, a member that crashed), one outcome, and the usual reports. A worker's share that left no
// results (it failed, or never ran; after --wait, it did not come) is a harness error of the merged run,
// whose history is then partial and is not checked (a read of a value the missing share wrote would look
// like a violation); what the other shares found still counts. The error carries the outcome, so the exit
// code is the merged run's.
func Merge(ctx context.Context, o MergeOptions, out io.Writer) (*results.Summary, error) {
	if o.Out == "" {
		return nil, outcome.Usagef("merge: give --out, the merged run directory")
	}
	if _, err := os.Stat(filepath.Join(o.Out, results.SummaryFile)); err == nil {
		return nil, outcome.Usagef("--out %s: already holds a run; choose another directory", o.Out)
	}
	if err := waitForWorkers(ctx, o.Dirs, o.Wait, out); err != nil {
		return nil, err
	}
	set, err := merge.Load(o.Dirs, o.Observer, o.AssumeUncertainty)
	if err != nil {
		return nil, err
	}
	ws, warnings := set.Workers, set.Warnings
	o.Problems = append(o.Problems, set.Missing...)
	s := DefaultScenario()
	if err := json.Unmarshal(ws[0].Summary.Config, &s); err != nil {
		return nil, outcome.Usagef("merge: %s: its settings cannot be read: %v", ws[0].Dir, err)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, outcome.Usagef("--out %s: %v", o.Out, err)
	}
	for _, w := range warnings {
		fmt.Fprintln(out, "warning:", w)
	}
	sum, err := mergeSummary(ctx, o, set, s, out)
	if err != nil {
		return nil, err
	}
	return sum, judgeMerged(o.Out, s, sum, out)
}

// mergeSummary writes the merged files and returns the merged summary, checks included.
func mergeSummary(ctx context.Context, o MergeOptions, set merge.Set, s Scenario, out io.Writer) (*results.Summary, error) {
	ws, base := set.Workers, set.Base
	w0 := base.Summary
	sum := *w0 // what only worker 0 (or the observer) knows: the cluster, its metrics and the fault windows
	sum.Outcome, sum.Reasons, sum.Thresholds, sum.Diagnosis = "", nil, nil, nil
	sum.Name = w0.Name
	sum.Command = os.Args
	sum.Errors = append([]string(nil), o.Problems...)
	sum.GeneratorLoad = nil
	mergeStates(&sum, ws, w0, o.Observer != "")
	if err := mergeFigures(&sum, o.Out, ws, base.Dir); err != nil {
		return nil, err
	}
	if err := mergeSchedule(&sum, ws, len(ws)+len(set.Missing), s, o.Observer != ""); err != nil {
		return nil, err
	}
	// The phase tables file every worker's requests under the base run's fault windows.
	phases, why, err := merge.Phases(ws, sum.Faults)
	switch {
	case err != nil:
		return nil, err
	case why != "":
		fmt.Fprintf(out, "phase tables: the base run's own requests only (%s)\n", why)
	default:
		sum.Phases = phases
	}
	// The merged run is the whole scenario, coordinated: its settings replay as a split run.
	s.Worker, s.ClockRef, s.StartAt, s.Out = -1, "", "", ""
	if cfg, err := json.Marshal(s); err == nil {
		sum.Config = cfg
	}
	// Worker 0's own checks are of the cluster (members-agree); the history checks run on the merged history.
	var checks []results.Check
	for _, c := range w0.Checks {
		if c.Name == CheckMembersAgree {
			checks = append(checks, c)
		}
	}
	sum.Checks = checks
	if len(set.Missing) > 0 {
		// A partial history is neither merged nor checked: see Merge.
		fmt.Fprintf(out, "consistency checks skipped: %d worker shares are missing, and a partial history can fake a violation\n", len(set.Missing))
	} else if err := checkMergedHistory(ctx, &sum, o.Out, ws, s, out); err != nil {
		return nil, err
	}
	// Known-issue findings stand only for checks that still attribute their findings to one.
	replaceChecks(&sum, sum.Checks, sum.KnownIssues)
	return &sum, nil
}

// mergeStates folds every worker's state into the merged run's: its span, what it measured, whether it
// was incomplete or interrupted, and its errors, named by worker; then the coordinator's own, when it
// observed worker containers.
func mergeStates(sum *results.Summary, ws []merge.Worker, w0 *results.Summary, observer bool) {
	for _, w := range ws {
		sum.Start = minTime(sum.Start, w.Summary.Start)
		if w.Summary.End.After(sum.End) {
			sum.End = w.Summary.End
		}
		sum.MeasuredSeconds = max(sum.MeasuredSeconds, w.Summary.MeasuredSeconds)
		if w.Summary.Incomplete && !sum.Incomplete {
			sum.Incomplete, sum.IncompleteReason = true, fmt.Sprintf("worker %d: %s", w.Summary.Split.Worker, w.Summary.IncompleteReason)
		}
		sum.Interrupted = sum.Interrupted || w.Summary.Interrupted
		for _, e := range w.Summary.Errors {
			sum.Errors = append(sum.Errors, fmt.Sprintf("worker %d: %s", w.Summary.Split.Worker, e))
		}
		if w.Summary != w0 {
			// The base run's crashes came with its summary; another worker's (a worker whose container
			// held members) are etcd failing all the same.
			sum.Crashes = append(sum.Crashes, w.Summary.Crashes...)
		}
	}
	if observer {
		for _, e := range w0.Errors {
			sum.Errors = append(sum.Errors, "coordinator: "+e)
		}
		if w0.Incomplete && !sum.Incomplete {
			sum.Incomplete, sum.IncompleteReason = true, "coordinator: "+w0.IncompleteReason
		}
	}
	sum.DurationSeconds = sum.End.Sub(sum.Start).Seconds()
}

// mergeFigures merges the workers' time series and histograms into the merged run's operations and files
// in dir, and copies what only the base run has (the fault windows, etcd's metrics) from baseDir.
func mergeFigures(sum *results.Summary, dir string, ws []merge.Worker, baseDir string) error {
	series, err := merge.Series(ws)
	if err != nil {
		return err
	}
	if sum.Operations, err = merge.Operations(ws, sum.MeasuredSeconds, series); err != nil {
		return err
	}
	sum.Total = results.Totals(sum.Operations)
	if err := merge.WriteFiles(dir, ws, series); err != nil {
		return err
	}
	if err := merge.WriteHGRM(dir, ws); err != nil {
		return err
	}
	for _, name := range []string{results.FaultsFile, results.ServerMetricsFile} {
		if err := merge.CopyFile(dir, baseDir, name); err != nil {
			return err
		}
	}
	return nil
}

// mergeSchedule sums the workers' schedules (rates, clients, late starts), lists each worker's part of the
// split (of workers planned), and merges the kube workload's figures against the whole scenario's plan.
func mergeSchedule(sum *results.Summary, ws []merge.Worker, workers int, s Scenario, observer bool) error {
	sum.Schedule = results.Schedule{Mode: ws[0].Summary.Schedule.Mode}
	// The split replaces the base run's own (sum began as a copy of its summary), keeping its start time.
	sum.Split = &results.Split{Workers: workers, Worker: -1, StartAt: sum.Split.StartAt, Observer: observer}
	var kubes []*results.Kube
	for _, w := range ws {
		ws := w.Summary
		sum.Schedule.TargetRate += ws.Schedule.TargetRate
		sum.Schedule.Clients += ws.Schedule.Clients
		sum.Schedule.Conns += ws.Schedule.Conns
		sum.Schedule.MissedBacklog += ws.Schedule.MissedBacklog
		sum.Schedule.MissedLag += ws.Schedule.MissedLag
		kubes = append(kubes, ws.Kube)
		dir, _ := filepath.Abs(w.Dir)
		sum.Split.Members = append(sum.Split.Members, results.SplitWorker{
			Worker: ws.Split.Worker, Dir: dir, Outcome: ws.Outcome, Clock: ws.Split.Clock,
			Requests: results.Requests(ws.Operations), Throughput: ws.Total.Throughput, GeneratorLoad: ws.GeneratorLoad,
		})
	}
	if n := results.Requests(sum.Operations); n > 0 {
		sum.Schedule.MissedPercent = 100 * float64(sum.Schedule.MissedBacklog+sum.Schedule.MissedLag) / float64(n)
	}
	if ws[0].Summary.Kube != nil {
		cfg, err := s.Kube.Resolve(s.Duration)
		if err != nil {
			return outcome.Usagef("merge: worker 0's kube settings: %v", err)
		}
		sum.Kube = kube.MergeSummaries(cfg, kubes, sum.Operations, sum.MeasuredSeconds, s.endpointCount())
	}
	return nil
}

// checkMergedHistory merges the workers' histories into dir, measures again what each fault did to
// clients, now over every worker's requests, and runs the consistency checks on the merged history,
// adding their verdicts to the summary's checks. It says why when it does not run them.
func checkMergedHistory(ctx context.Context, sum *results.Summary, dir string, ws []merge.Worker, s Scenario, out io.Writer) error {
	if !s.History {
		fmt.Fprintln(out, "consistency checks skipped: the workers recorded no history (--history=false)")
		return nil
	}
	ops, watches, err := merge.Histories(dir, ws)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "merged history: %d operations and %d watch records from %d workers\n", ops, watches, len(ws))
	sum.Faults = append([]results.FaultWindow(nil), sum.Faults...)
	if err := merge.Availability(dir, sum.Faults); err != nil {
		return err
	}
	if err := merge.WriteFaults(dir, sum.Faults); err != nil {
		return err
	}
	if !s.Check || sum.Interrupted {
		fmt.Fprintf(out, "consistency checks skipped; run them with `chaosbench check %s`\n", dir)
		return nil
	}
	fmt.Fprintln(out, "checking the merged history (linearizability, watches, serializable reads)...")
	defer checkMemory()()
	policy, _ := outcome.ParseKnownIssuePolicy(s.KnownIssues) // validated with the scenario
	sum.KnownIssuePolicy = string(policy)
	rep, err := lin.CheckDir(ctx, dir, lin.Options{Timeout: s.CheckTimeout, Versions: sum.Versions})
	if rep == nil {
		sum.Checks = append(sum.Checks, results.Check{Name: lin.CheckLinearizability, Verdict: results.VerdictUnknown, Detail: fmt.Sprintf("check history: %v", err)})
		return nil
	}
	sum.Checks = append(sum.Checks, rep.Checks...)
	sum.KnownIssues = append(sum.KnownIssues, rep.KnownIssues...)
	lin.WriteVerdicts(out, rep)
	return nil
}

// judgeMerged evaluates the scenario's thresholds on the merged run, decides its outcome, writes
// summary.json and the reports, and prints the verdict.
func judgeMerged(dir string, s Scenario, sum *results.Summary, out io.Writer) error {
	ts, err := results.RunThresholds(s.Thresholds)
	if err != nil {
		sum.Errors = append(sum.Errors, err.Error())
	}
	rep, err := report.FromSummary(dir, sum)
	if err != nil {
		sum.Errors = append(sum.Errors, err.Error())
	} else {
		report.Prepare(rep, ts)
	}
	o := sum.SetOutcome()
	if err := results.WriteSummary(dir, sum); err != nil {
		return err
	}
	fmt.Fprintln(out)
	results.WriteText(out, sum)
	writeSplitTable(out, sum.Split)
	if rep != nil {
		printVerdicts(out, rep)
		if err := report.Write(rep); err != nil {
			sum.Errors = append(sum.Errors, err.Error())
			o = sum.SetOutcome()
			if err := results.WriteSummary(dir, sum); err != nil {
				return err
			}
		}
	}
	for _, e := range sum.Errors {
		fmt.Fprintln(out, "error:", e)
	}
	fmt.Fprintf(out, "merged results written to %s\n", dir)
	results.WriteVerdict(out, sum)
	return o.ErrWith(nil)
}

// writeSplitTable prints each worker's part: requests, throughput, clock and generator load.
func writeSplitTable(out io.Writer, sp *results.Split) {
	if sp == nil {
		return
	}
	fmt.Fprintf(out, "\n%d workers:\n", sp.Workers)
	for _, m := range sp.Members {
		line := fmt.Sprintf("  worker %d: %s, %d requests, %.0f/s", m.Worker, m.Outcome, m.Requests, m.Throughput)
		if c := m.Clock; c != nil && c.UncertaintyNs >= 0 {
			line += fmt.Sprintf(", clock %s ± %s, started %s late", time.Duration(c.OffsetNs), time.Duration(c.UncertaintyNs), time.Duration(c.StartLateNs))
		}
		if g := m.GeneratorLoad; g != nil {
			line += fmt.Sprintf(", generator %.2f cores", g.Cores)
		}
		fmt.Fprintln(out, line)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// waitForWorkers waits up to d for every directory to hold a summary: the workers of a Kubernetes Job
// write theirs as they finish. A share that has not come by then is left to Merge as missing.
func waitForWorkers(ctx context.Context, dirs []string, d time.Duration, out io.Writer) error {
	if d <= 0 {
		return nil
	}
	deadline := time.Now().Add(d)
	said := false
	for {
		var missing []string
		for _, dir := range dirs {
			if _, err := os.Stat(filepath.Join(dir, results.SummaryFile)); err != nil {
				missing = append(missing, dir)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			// What came is merged; each share that did not is a harness error of the merged run.
			fmt.Fprintf(out, "after %s, no results yet in %v: merging the others\n", d, missing)
			return nil
		}
		if !said {
			fmt.Fprintf(out, "waiting for the results of %d of %d workers\n", len(missing), len(dirs))
			said = true
		}
		select {
		case <-ctx.Done():
			return ErrInterrupted
		case <-time.After(2 * time.Second):
		}
	}
}

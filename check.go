package chaosbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	lin "github.com/etcd-chaosbench/chaosbench/linearizability"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
	"github.com/etcd-chaosbench/chaosbench/results/report"
)

// CheckOptions are the settings of `chaosbench check`.
type CheckOptions struct {
	// Dir is a run directory holding history.bin (and watch.bin, faults.jsonl when the run had them), or a
	// legacy run's history.jsonl and watch.jsonl.
	Dir string
	// Timeout bounds the check (0: linearizability.DefaultTimeout).
	Timeout time.Duration
	// Out receives the verdicts and the figures.
	Out io.Writer
}

// Check re-checks the history recorded in a run directory, offline: linearizability, watch guarantees and
// serializable reads. It writes check.json (and linearizability.html for a linearizability violation)
// into the directory and prints one verdict per check with the time and memory the check took.
//
// Then the run is decided again by the one judge (results.Decide) with what the checks found now: the
// summary's checks are replaced by these (the members-agree check, which a history cannot redo, stays),
// summary.json is rewritten with the outcome, the report files are re-rendered from it when the run has
// them, and the error carries the outcome, so that the exit code, summary.json and the reports agree. A
// directory with a history but no summary is decided from the checks alone, and only check.json is
// written. An interrupted check changes nothing in the directory and exits as interrupted.
func Check(ctx context.Context, o CheckOptions) (*lin.Report, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Timeout < 0 {
		return nil, outcome.Usagef("--timeout %s: must not be negative", o.Timeout)
	}
	if _, err := history.HistoryPath(o.Dir); err != nil {
		return nil, outcome.Usagef("%s: not a run directory with a recorded history (%s, or a legacy run's %s)", o.Dir, history.HistoryFile, history.LegacyHistoryFile)
	}
	start := time.Now()
	defer checkMemory()()
	rep, err := lin.CheckDir(ctx, o.Dir, lin.Options{Timeout: o.Timeout})
	if ctx.Err() != nil {
		return rep, outcome.Decide(outcome.New(outcome.Incomplete, "the check of %s was interrupted; nothing in it was changed", o.Dir)).Err()
	}
	var checks []results.Check
	var known []results.KnownIssueFinding
	var problems []string
	switch {
	case rep == nil:
		// The checks could not even start (an unreadable history): undecided, never a pass.
		checks = []results.Check{{Name: lin.CheckLinearizability, Verdict: results.VerdictUnknown, Detail: fmt.Sprintf("check history: %v", err)}}
	default:
		checks, known = rep.Checks, rep.KnownIssues
		lin.WriteVerdicts(o.Out, rep)
		fmt.Fprintf(o.Out, "checked %d operations and %d watch events in %.1fs (CPU %.1fs), peak memory %d MB; report: %s\n",
			rep.Stats.Operations, rep.Stats.WatchEvents, time.Since(start).Seconds(), cpuSeconds(), peakRSS()>>20, filepath.Join(o.Dir, lin.ReportFile))
		if err != nil && !errors.Is(err, lin.ErrViolation) && !errors.Is(err, lin.ErrUndecided) {
			problems = append(problems, err.Error()) // check.json could not be written
		}
	}
	return rep, redecide(o.Dir, checks, known, problems, o.Out)
}

// redecide decides the run in dir again with checks in place of the ones it ran, and known, the findings
// they attributed to known issues, in place of theirs; writes what it decided into summary.json (and the
// report files the run has), prints the verdict, and returns the error carrying the outcome. problems are
// harness errors of the check itself.
func redecide(dir string, checks []results.Check, known []results.KnownIssueFinding, problems []string, out io.Writer) error {
	sum, err := results.ReadSummary(dir)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(out, "no %s in %s: decided from the checks alone\n", results.SummaryFile, dir)
		s := &results.Summary{Checks: checks, KnownIssues: known, Errors: problems}
		results.WriteVerdict(out, s)
		return results.Decide(s).Err()
	}
	if err != nil {
		// A summary that cannot be read is not rewritten: the checks decide, with that harness error.
		s := &results.Summary{Checks: checks, KnownIssues: known, Errors: append(problems, err.Error())}
		results.WriteVerdict(out, s)
		return results.Decide(s).Err()
	}
	replaceChecks(sum, checks, known)
	sum.Errors = append(sum.Errors, problems...)
	o := sum.SetOutcome()
	if err := results.WriteSummary(dir, sum); err != nil {
		s := *sum
		s.Errors = append(s.Errors, fmt.Sprintf("rewrite %s: %v", results.SummaryFile, err))
		results.WriteVerdict(out, &s)
		return results.Decide(&s).Err()
	}
	if err := rerenderReports(dir, sum); err != nil {
		sum.Errors = append(sum.Errors, err.Error())
		o = sum.SetOutcome()
		if err := results.WriteSummary(dir, sum); err != nil {
			return o.ErrWith(err)
		}
	}
	fmt.Fprintf(out, "%s rewritten with the outcome decided from these checks\n", filepath.Join(dir, results.SummaryFile))
	results.WriteVerdict(out, sum)
	return o.Err()
}

// replaceChecks puts checks in place of the summary's checks of the same names (the members-agree check,
// which compares the members' data during the run, stays), and known, what those checks attributed to
// known issues, in place of those checks' known-issue findings. It keeps only the findings of checks that
// still attribute what they found to a known issue (the verdict "known issue", or a violation of which
// they are a part): a finding of a check that now says something else would be evidence for a verdict no
// longer given.
func replaceChecks(s *results.Summary, checks []results.Check, known []results.KnownIssueFinding) {
	kept := slices.Clone(checks)
	for _, c := range s.Checks {
		if !slices.ContainsFunc(checks, func(n results.Check) bool { return n.Name == c.Name }) {
			kept = append(kept, c)
		}
	}
	s.Checks = kept
	findings := slices.DeleteFunc(slices.Clone(s.KnownIssues), func(k results.KnownIssueFinding) bool {
		return slices.ContainsFunc(checks, func(c results.Check) bool { return c.Name == k.Check })
	})
	s.KnownIssues = slices.DeleteFunc(append(findings, known...), func(k results.KnownIssueFinding) bool {
		return !slices.ContainsFunc(kept, func(c results.Check) bool {
			return c.Name == k.Check && (c.Verdict == results.VerdictKnownIssue || c.Verdict == results.VerdictViolation)
		})
	})
}

// rerenderReports writes the report files of a run that has them again from its summary, as it now
// stands: a report must not contradict summary.json.
func rerenderReports(dir string, sum *results.Summary) error {
	if _, err := os.Stat(filepath.Join(dir, report.HTMLFile)); err != nil {
		return nil
	}
	r, err := report.FromSummary(dir, sum)
	if err != nil {
		return fmt.Errorf("re-render the report: %w", err)
	}
	if err := report.Write(r); err != nil {
		return fmt.Errorf("re-render the report: %w", err)
	}
	return nil
}

// peakRSS returns the process's peak resident set size in bytes.
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // kilobytes on Linux
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

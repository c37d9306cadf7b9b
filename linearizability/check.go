package linearizability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// Files a check writes into the run directory.
const (
	ReportFile        = "check.json"
	VisualizationFile = "linearizability.html"
)

// DefaultTimeout bounds a check. The global checks take seconds even for long runs; the budget is for
// porcupine on keys whose histories are hard (many concurrent writes that may or may not have happened).
const DefaultTimeout = 5 * time.Minute

// Options tunes a check.
type Options struct {
	// Timeout bounds the whole check (0: DefaultTimeout). What did not finish in time is unknown.
	Timeout time.Duration
	// Faults are annotated on the visualization of a violation.
	Faults []results.FaultWindow
	// VisualizationPath, when set, receives porcupine's HTML visualization of the failing key.
	VisualizationPath string
	// Catalog holds the known upstream issues findings are attributed to, by the evidence the history
	// recorded (nil: DefaultCatalog). Versions are the releases the run used, which say whether an issue
	// is one they have or a regression of a fixed one (zero: read from the run directory's summary.json
	// by CheckDir, when there is one).
	Catalog  *Catalog
	Versions results.Versions

	// Proofs, when set, holds per-key segments an earlier check of the same run's history proved
	// linearizable: they are not searched again (Stats.ProvedBefore counts them), and the segments this
	// check proves are added to it. See Proofs for why that is as good as searching them.
	Proofs *Proofs

	// Followed, when set, read the run's history while it was written, and has finished (Follower):
	// CheckDir takes what it read instead of reading the files again. It is what CheckDir would have built
	// from the finished files, so the report is the same. One check takes it; Close it after.
	Followed *Follower

	// stop, when set, is asked now and then during the passes (every few thousand records read): true
	// ends the check, with context.Canceled. The passes before porcupine do not watch the context.
	stop func() bool
	// workers bounds porcupine's goroutines (0: one per CPU); the checks during the load take one, to
	// leave the load its CPUs.
	workers int
	// paging puts the check's large arrays in files in pageDir ("": the temporary directory), with at most
	// pageBudget bytes of each in memory (0: pageBudget), in pages of about pageBytes (0: pageBytes).
	// CheckDir pages, next to the history; the tests take tiny pages, to read them back all the time.
	paging     bool
	pageDir    string
	pageBudget int
	pageBytes  int
	// grouped is the watch records folded while they were written (Followed), or nil; folded the
	// operations, in a checker of their own whose paged arrays the check takes over.
	grouped *watcherGroups
	folded  *checker
	// phaseDone, when set, is called as each phase of the check ends, and ten times during the replay
	// (the benchmarks measure the live heap there).
	phaseDone func(phase string)
}

// Report is the result of checking one history.
type Report struct {
	// Checks holds one verdict per check: linearizability, watch, serializable-reads.
	Checks []results.Check `json:"checks"`
	// Violations lists what the checks found, per check in time order (at most 100 per check are kept).
	Violations []Violation `json:"violations,omitempty"`
	// ViolationCount counts every violation found, per check.
	ViolationCount map[string]int `json:"violation_count,omitempty"`
	// KnownIssues are the findings attributed, by the evidence the history recorded, to an entry of the
	// catalog of known upstream issues; the violations they stand for are in Violations, marked Known, and
	// not in ViolationCount.
	KnownIssues []results.KnownIssueFinding `json:"known_issues,omitempty"`
	// Visualization is the path of the HTML visualization written for a linearizability violation.
	Visualization string  `json:"visualization,omitempty"`
	Stats         Stats   `json:"stats"`
	Seconds       float64 `json:"seconds"`
}

// Violated reports whether any check found a violation.
func (r *Report) Violated() bool {
	for _, c := range r.Checks {
		if c.Verdict == results.VerdictViolation {
			return true
		}
	}
	return false
}

// ErrViolation is returned (wrapped) by CheckDir when a check found a violation.
var ErrViolation = errors.New("consistency violation")

// ErrUndecided is returned (wrapped) by CheckDir when no check found a violation but one could not decide
// in time: that is not a pass.
var ErrUndecided = errors.New("consistency check undecided")

// CheckDir checks the history recorded in run directory dir, writes check.json and, for a violation, the
// visualization, and returns the report. The error wraps ErrViolation when a check failed.
func CheckDir(ctx context.Context, dir string, opts Options) (*Report, error) {
	var ops *history.OperationStore
	if opts.Followed != nil {
		ops, opts.grouped, opts.folded = opts.Followed.take()
	}
	if opts.folded != nil {
		defer func() {
			if opts.folded.paged != nil { // the check did not take them
				for _, close := range opts.folded.paged {
					close()
				}
			}
		}()
	}
	if ops == nil {
		var err error
		if ops, err = history.LoadOperationStore(dir); err != nil {
			return nil, err
		}
		defer ops.Close()
	}
	var err error
	wl := watchLog{}
	if path, err := history.WatchPath(dir); err == nil {
		wl.path = path // a run without watches has no watch file
	}
	if wl.path != filepath.Join(dir, history.WatchFile) {
		opts.grouped = nil // the follower read watch.bin; the check reads another file
	}
	if opts.Faults == nil {
		if opts.Faults, err = results.ReadFaults(dir); err != nil {
			return nil, err
		}
	}
	if opts.VisualizationPath == "" {
		opts.VisualizationPath = filepath.Join(dir, VisualizationFile)
	}
	if opts.Versions == (results.Versions{}) {
		if s, err := results.ReadSummary(dir); err == nil {
			opts.Versions = s.Versions
		}
	}
	opts.paging, opts.pageDir = true, dir
	rep, err := check(ctx, ops, wl, opts)
	if err != nil {
		return nil, err
	}
	data, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, ReportFile), append(data, '\n'), 0o644); err != nil {
		return rep, fmt.Errorf("write check report: %w", err)
	}
	if rep.Violated() {
		return rep, fmt.Errorf("%w: %s", ErrViolation, firstViolation(rep))
	}
	for _, c := range rep.Checks {
		if c.Verdict == results.VerdictUnknown {
			return rep, fmt.Errorf("%w: %s: %s", ErrUndecided, c.Name, firstLine(c.Detail))
		}
	}
	return rep, nil
}

func firstViolation(r *Report) string {
	for _, c := range r.Checks {
		if c.Verdict == results.VerdictViolation {
			return c.Name + ": " + firstLine(c.Detail)
		}
	}
	return ""
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Check checks history h: linearizability of every key (porcupine, per key) and of the whole store (the
// replay in revision order and real-time order of revisions), etcd's watch guarantees, and serializable
// reads. See the package documentation for what each check covers and why checking them apart is sound.
func Check(ctx context.Context, h *history.History, opts Options) (*Report, error) {
	return check(ctx, inMemory(h.Operations), watchLog{records: h.Watches}, opts)
}

// check checks operations ops and the watch records of wl. An operation that could not be read back from
// disk ends the check with that error: it decided nothing.
func check(ctx context.Context, ops operations, wl watchLog, opts Options) (rep *Report, err error) {
	defer func() {
		if r := recover(); r != nil {
			if r == errStopped {
				rep, err = nil, context.Canceled
				return
			}
			rb, ok := r.(*history.ReadBackError) // an operation, or a page of the checker's arrays
			if !ok {
				panic(r)
			}
			rep, err = nil, rb
		}
	}()
	start := time.Now()
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if opts.Catalog == nil {
		if opts.Catalog, err = DefaultCatalog(); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	if opts.stop != nil {
		ops = &stoppable{operations: ops, stop: opts.stop}
	}
	c := &checker{hist: ops, wl: wl, paging: opts.paging, pageDir: opts.pageDir, pageBudget: opts.pageBudget, pageBytes: opts.pageBytes, phaseDone: opts.phaseDone,
		proofs: opts.Proofs, workers: opts.workers, stop: opts.stop, grouped: opts.grouped}
	defer func() {
		for _, close := range c.paged {
			close()
		}
	}()
	if f := opts.folded; f != nil && f.fold != nil && f.ops != nil {
		c.fold, c.ops, c.leases, c.revokes, c.compactions, c.refused = f.fold, f.ops, f.leases, f.revokes, f.compactions, f.refused
		c.stats.FailedWrites = f.stats.FailedWrites
		c.paged, f.paged = append(c.paged, f.paged...), nil
	}
	if err := c.prepare(); err != nil {
		return nil, err
	}
	if c.readErr != nil {
		return nil, c.readErr
	}
	c.phase("prepare")
	c.addFaultCompactions(opts.Faults)
	t0 := time.Now()
	s := c.replay()
	c.observed.Close() // the replay was the last reader of what watchers saw
	c.obsAt.Close()
	c.observed, c.obsAt = nil, nil
	c.phase("replay")
	c.checkRealTime()
	c.phase("real-time")
	globalSecs := time.Since(t0).Seconds()
	t1 := time.Now()
	c.checkWatches(s)
	watchSecs := time.Since(t1).Seconds()
	c.phase("watches")
	t2 := time.Now()
	pk := c.checkPerKey(ctx, s)
	perKeySecs := time.Since(t2).Seconds()
	c.phase("per-key")

	rep = &Report{Stats: c.stats}
	f := c.collectFindings(ctx, pk, s)
	c.attribute(opts.Catalog, opts.Versions, &f)
	rep.ViolationCount = map[string]int{CheckLinearizability: len(f.lin), CheckWatch: len(f.watch), CheckSerializable: len(f.ser)}
	linCheck, visualization := c.linearizabilityVerdict(ctx, opts, f, s, timeout)
	linCheck.Seconds = globalSecs + perKeySecs
	rep.Visualization = visualization
	watchCheck := c.watchVerdict(f.watch)
	watchCheck.Seconds = watchSecs
	serCheck := c.serializableVerdict(f.ser)
	serCheck.Seconds = globalSecs
	rep.Checks = []results.Check{linCheck, watchCheck, serCheck}
	rep.KnownIssues = f.known.findings
	for i := range rep.Checks {
		knownVerdict(&rep.Checks[i], f.known)
	}
	for _, list := range [][]Violation{f.lin, f.watch, f.ser, f.known.violations} {
		rep.Violations = append(rep.Violations, list[:min(len(list), 100)]...)
	}
	rep.Seconds = time.Since(start).Seconds()
	if c.readErr != nil {
		return nil, c.readErr
	}
	return rep, nil
}

// errStopped is what a check stopped by Options.stop panics with, to leave every pass at once; check
// recovers it.
var errStopped = errors.New("check stopped")

// stoppable asks stop every few thousand operations read.
type stoppable struct {
	operations
	stop  func() bool
	reads int
}

func (s *stoppable) poll() {
	if s.reads++; s.reads&4095 == 0 && s.stop() {
		panic(errStopped)
	}
}

func (s *stoppable) At(i int) *history.Operation {
	s.poll()
	return s.operations.At(i)
}

func (s *stoppable) Scan(fn func(i int, op *history.Operation)) {
	s.operations.Scan(func(i int, op *history.Operation) {
		s.poll()
		fn(i, op)
	})
}

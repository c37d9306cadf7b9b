package linearizability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

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
}

// Report is the result of checking one history.
type Report struct {
	// Checks holds one verdict per check: linearizability, watch, serializable-reads.
	Checks []results.Check `json:"checks"`
	// Violations lists what the checks found, per check in time order (at most 100 per check are kept).
	Violations []Violation `json:"violations,omitempty"`
	// ViolationCount counts every violation found, per check.
	ViolationCount map[string]int `json:"violation_count,omitempty"`
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
	h, err := history.Load(dir)
	if err != nil {
		return nil, err
	}
	if opts.Faults == nil {
		if opts.Faults, err = results.ReadFaults(dir); err != nil {
			return nil, err
		}
	}
	if opts.VisualizationPath == "" {
		opts.VisualizationPath = filepath.Join(dir, VisualizationFile)
	}
	rep, err := Check(ctx, h, opts)
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
	start := time.Now()
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	c := &checker{h: h}
	if err := c.prepare(); err != nil {
		return nil, err
	}
	c.addFaultCompactions(opts.Faults)
	t0 := time.Now()
	s := c.replay()
	c.checkRealTime()
	globalSecs := time.Since(t0).Seconds()
	t1 := time.Now()
	c.checkWatches(s)
	watchSecs := time.Since(t1).Seconds()
	t2 := time.Now()
	pk := c.checkPerKey(ctx, s)
	perKeySecs := time.Since(t2).Seconds()

	rep := &Report{Stats: c.stats, ViolationCount: map[string]int{}}
	// Per-key failures become violations, smallest first.
	var keyViolations []Violation
	var smallest *segment
	if len(pk.failures) > 0 {
		slices.SortFunc(pk.failures, func(a, b keyFailure) int {
			if d := len(a.seg.ops) - len(b.seg.ops); d != 0 {
				return d
			}
			return int(a.seg.rank - b.seg.rank)
		})
		for i, f := range pk.failures {
			sg := f.seg
			if i < 3 {
				sg = c.shrink(ctx, f, s)
			}
			if smallest == nil || len(sg.ops) < len(smallest.ops) {
				smallest = &sg
			}
			ops := make([]int, len(sg.ops))
			for j, ko := range sg.ops {
				ops[j] = int(ko.op)
			}
			keyViolations = append(keyViolations, Violation{Check: CheckLinearizability, Kind: "not linearizable", Key: c.key(sg.rank),
				Ops: ops, Time: c.h.Operations[sg.ops[0].op].Call,
				Message: fmt.Sprintf("no order of these %d operations on %q is consistent with their real-time order and etcd's semantics:%s",
					len(sg.ops), c.key(sg.rank), c.describeSegment(sg, 12))})
		}
		slices.SortStableFunc(keyViolations, func(a, b Violation) int { return len(a.Ops) - len(b.Ops) })
	}

	lin := c.vs.of(CheckLinearizability)
	watch := c.vs.of(CheckWatch)
	ser := c.vs.of(CheckSerializable)
	rep.ViolationCount[CheckLinearizability] = len(lin) + len(keyViolations)
	rep.ViolationCount[CheckWatch] = len(watch)
	rep.ViolationCount[CheckSerializable] = len(ser)

	// The linearizability verdict names the earliest global violation (the most precise message) or the
	// smallest failing key, and shows that key's operations in the visualization.
	linAll := append(slices.Clone(lin), keyViolations...)
	linCheck := results.Check{Name: CheckLinearizability, Seconds: globalSecs + perKeySecs}
	switch {
	case len(linAll) > 0:
		linCheck.Verdict = results.VerdictViolation
		first := linAll[0]
		linCheck.Detail = first.String() + moreViolations(len(linAll))
		if opts.VisualizationPath != "" {
			if err := c.visualize(ctx, opts, first, smallest, s); err == nil {
				rep.Visualization = opts.VisualizationPath
				linCheck.Detail += "\nvisualization: " + opts.VisualizationPath
			} else {
				linCheck.Detail += "\nvisualization not written: " + err.Error()
			}
		}
	case pk.unknown > 0:
		linCheck.Verdict = results.VerdictUnknown
		linCheck.Detail = fmt.Sprintf("%d of %d key segments not decided within %s; the global checks passed", pk.unknown, c.stats.Partitions, timeout)
	case len(c.h.Operations) == 0:
		linCheck.Verdict = results.VerdictNothing
		linCheck.Detail = "no operations recorded"
	default:
		linCheck.Verdict = results.VerdictOK
		linCheck.Detail = c.okDetail()
	}
	watchCheck := results.Check{Name: CheckWatch, Seconds: watchSecs}
	switch {
	case len(watch) > 0:
		watchCheck.Verdict = results.VerdictViolation
		watchCheck.Detail = watch[0].String() + moreViolations(len(watch))
	case len(c.watchers) == 0:
		watchCheck.Verdict = results.VerdictNothing
		watchCheck.Detail = "no watches recorded"
	case c.stats.WatchEvents == 0 && !c.anyProgress():
		// What a watcher must have received is checked up to the last event or progress notification it
		// got: without either, no delivery was checked.
		watchCheck.Verdict = results.VerdictNothing
		watchCheck.Detail = fmt.Sprintf("no watch event or progress notification recorded (%d watchers)", len(c.watchers))
	default:
		watchCheck.Verdict = results.VerdictOK
		watchCheck.Detail = fmt.Sprintf("%d watchers, %d events: ordered, unique, atomic, reliable, resumable, bookmarkable; prevKV, IsCreate and filters correct", len(c.watchers), c.stats.WatchEvents)
	}
	serCheck := results.Check{Name: CheckSerializable, Seconds: globalSecs}
	nser := c.countSerializable()
	switch {
	case len(ser) > 0:
		serCheck.Verdict = results.VerdictViolation
		serCheck.Detail = ser[0].String() + moreViolations(len(ser))
	case nser == 0:
		serCheck.Verdict = results.VerdictNothing
		serCheck.Detail = "no serializable reads recorded"
	default:
		serCheck.Verdict = results.VerdictOK
		serCheck.Detail = fmt.Sprintf("%d serializable reads: each a state of the store at its revision, none from the future", nser)
	}
	rep.Checks = []results.Check{linCheck, watchCheck, serCheck}
	for _, list := range [][]Violation{linAll, watch, ser} {
		rep.Violations = append(rep.Violations, list[:min(len(list), 100)]...)
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

func moreViolations(n int) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf(" (and %d more)", n-1)
}

func (c *checker) okDetail() string {
	s := fmt.Sprintf("%d operations on %d keys, revisions %d-%d", c.stats.Operations, c.stats.Keys, c.base+1, c.maxRev)
	if c.stats.FailedWrites > 0 {
		s += fmt.Sprintf("; %d failed writes: %d took effect (seen later), %d did not, %d undecided", c.stats.FailedWrites, c.stats.ResolvedWrites, c.stats.DroppedWrites, c.stats.UnresolvedWrites)
	}
	if c.stats.Uncertain > 0 {
		s += fmt.Sprintf("; %d answers about keys an undecided write or lease expiry may have changed were checked per key only", c.stats.Uncertain)
	}
	return s
}

// anyProgress reports whether a watcher received a progress notification.
func (c *checker) anyProgress() bool {
	return slices.ContainsFunc(c.h.Watches, func(r history.WatchResponse) bool { return r.Progress })
}

func (c *checker) countSerializable() int {
	n := 0
	for i := range c.h.Operations {
		op := &c.h.Operations[i]
		if op.Response != nil && op.Request.Kind == history.KindRange && op.Request.Range != nil && op.Request.Range.Serializable {
			n++
		}
	}
	return n
}

// visualize writes porcupine's visualization of the key a violation is about: the failing segment for a
// per-key failure, otherwise the key's operations around the violating ones, with the violation and the
// fault windows annotated.
func (c *checker) visualize(ctx context.Context, opts Options, v Violation, smallest *segment, s *sweep) error {
	var sg segment
	if smallest != nil && v.Kind == "not linearizable" {
		sg = *smallest
	} else {
		k := c.rank(v.Key)
		if k < 0 && len(v.Ops) > 0 {
			k = c.rank(opKey(&c.h.Operations[v.Ops[0]]))
		}
		if k < 0 {
			return errors.New("the violation concerns no single key")
		}
		sg = c.window(k, v)
	}
	if len(sg.ops) == 0 {
		return errors.New("no operations on the key")
	}
	m := (&keyModel{mayExpire: c.mayExpire}).porcupine(sg.init)
	vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	timeout := time.Until(deadlineOf(vctx))
	_, info := porcupine.CheckOperationsVerbose(m, porcupineOps(sg.ops, c.h, true), max(timeout, time.Second))
	var notes []porcupine.Annotation
	for _, f := range opts.Faults {
		notes = append(notes, porcupine.Annotation{Tag: "faults", Start: f.StartNs, End: f.EndNs, Description: f.Fault,
			Details: fmt.Sprintf("%s %s on %s: %s", f.Fault, f.Spec, strings.Join(f.Targets, ","), f.Outcome), BackgroundColor: "#ffd8b0"})
	}
	for _, i := range v.Ops {
		op := &c.h.Operations[i]
		notes = append(notes, porcupine.Annotation{Tag: "violation", Start: op.Call, End: min(c.ops[i].ret, lastTime(c.h)), Description: v.Kind,
			Details: v.Message, BackgroundColor: "#ffb0b0"})
	}
	info.AddAnnotations(notes)
	f, err := os.Create(opts.VisualizationPath)
	if err != nil {
		return err
	}
	if err := porcupine.Visualize(m, info, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func deadlineOf(ctx context.Context) time.Time {
	dl, _ := ctx.Deadline()
	return dl
}

func lastTime(h *history.History) int64 {
	var t int64
	for i := range h.Operations {
		t = max(t, h.Operations[i].Return)
	}
	return t
}

// window returns key k's operations around a violation's operations, starting from an unknown state.
func (c *checker) window(k int32, v Violation) segment {
	index, leaseKeys := c.keyIndex()
	ops := c.buildKeyOps(index, leaseKeys, k, k+1)[0]
	var from, to int64 = infinity, -infinity
	for _, i := range v.Ops {
		from = min(from, c.h.Operations[i].Call)
		to = max(to, c.h.Operations[i].Return)
	}
	if from == infinity {
		from, to = v.Time, v.Time
	}
	// Up to 20 operations on either side of the violating ones.
	lo := sort.Search(len(ops), func(j int) bool { return c.h.Operations[ops[j].op].Call >= from })
	hi := sort.Search(len(ops), func(j int) bool { return c.h.Operations[ops[j].op].Call > to })
	lo, hi = max(lo-20, 0), min(hi+20, len(ops))
	return segment{rank: k, ops: ops[lo:hi], init: []kstate{{any: true}}}
}

// WriteVerdicts prints one line per check, verdict in capitals ("OK", "VIOLATION", "NOTHING TO CHECK"),
// then its detail (a violation's further lines follow, indented).
func WriteVerdicts(w io.Writer, r *Report) {
	fmt.Fprintf(w, "consistency checks: %d operations, %d watch events, %d keys, %.1fs\n", r.Stats.Operations, r.Stats.WatchEvents, r.Stats.Keys, r.Seconds)
	for _, c := range r.Checks {
		WriteCheck(w, c)
	}
}

// WriteCheck prints one check as WriteVerdicts does, so that checks made elsewhere (the members'
// agreement) line up with the history's: the verdict in a column as wide as the widest verdict.
func WriteCheck(w io.Writer, c results.Check) {
	width := len(results.VerdictNothing)
	lines := strings.Split(c.Detail, "\n")
	fmt.Fprintf(w, "  %-20s %-*s %s\n", c.Name, width, strings.ToUpper(c.Verdict), lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(w, "  %-20s %-*s %s\n", "", width, "", l)
	}
}

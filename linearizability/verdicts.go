package linearizability

// From findings to verdicts: one per check (ok, violation, unknown, or nothing to check), its detail
// leading with what a reader needs first, and the verdicts printed in columns.

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// findings is what the checks found, per check, for the verdicts.
type findings struct {
	lin        []Violation // the global violations in time order, then the failing key segments, smallest first
	watch, ser []Violation
	smallest   *segment // the smallest failing key segment, for the visualization
	undecided  int      // key segments porcupine did not decide in time
	known      known    // what the attribution to known issues moved out of lin, watch and ser (attribute.go)
}

// collectFindings gathers every check's violations. The failing key segments come after the global
// violations: a global violation names the revision and the operations that contradict each other, which
// says more than "no order of these operations works".
func (c *checker) collectFindings(ctx context.Context, pk perKeyResult, s *sweep) findings {
	keyViolations, smallest := c.keyViolations(ctx, pk, s)
	return findings{
		lin:       append(slices.Clone(c.vs.of(CheckLinearizability)), keyViolations...),
		watch:     c.vs.of(CheckWatch),
		ser:       c.vs.of(CheckSerializable),
		smallest:  smallest,
		undecided: pk.unknown,
	}
}

// keyViolations turns the key segments porcupine found not linearizable into violations, smallest first,
// and returns the smallest segment. The three smallest are shrunk to the fewest operations that still fail
// before they are described: shrinking checks a segment again and again, so it is spent only on the
// segments a reader looks at first.
func (c *checker) keyViolations(ctx context.Context, pk perKeyResult, s *sweep) ([]Violation, *segment) {
	if len(pk.failures) == 0 {
		return nil, nil
	}
	slices.SortFunc(pk.failures, func(a, b keyFailure) int {
		if d := len(a.seg.ops) - len(b.seg.ops); d != 0 {
			return d
		}
		return int(a.seg.rank - b.seg.rank)
	})
	var out []Violation
	var smallest *segment
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
		out = append(out, Violation{Check: CheckLinearizability, Kind: "not linearizable", Key: c.key(sg.rank),
			Ops: ops, Time: sg.ops[0].call,
			Message: fmt.Sprintf("no order of these %d operations on %q is consistent with their real-time order and etcd's semantics:%s",
				len(sg.ops), c.key(sg.rank), c.describeSegment(sg, 12))})
	}
	slices.SortStableFunc(out, func(a, b Violation) int { return len(a.Ops) - len(b.Ops) })
	return out, smallest
}

// linearizabilityVerdict names the earliest global violation (the most precise message) or the smallest
// failing key, and writes the visualization of that key's operations, whose path it returns ("" when none
// was written). Key segments not decided in time make the verdict unknown: never a pass.
func (c *checker) linearizabilityVerdict(ctx context.Context, opts Options, f findings, s *sweep, timeout time.Duration) (results.Check, string) {
	check := results.Check{Name: CheckLinearizability}
	var visualization string
	switch {
	case len(f.lin) > 0:
		check.Verdict = results.VerdictViolation
		first := f.lin[0]
		check.Detail = first.String() + moreViolations(len(f.lin))
		if opts.VisualizationPath != "" {
			if err := c.visualize(ctx, opts, first, f.smallest, s); err == nil {
				visualization = opts.VisualizationPath
				check.Detail += "\nvisualization: " + opts.VisualizationPath
			} else {
				check.Detail += "\nvisualization not written: " + err.Error()
			}
		}
	case f.undecided > 0:
		check.Verdict = results.VerdictUnknown
		check.Detail = fmt.Sprintf("%d of %d key segments not decided within %s; the global checks passed", f.undecided, c.stats.Partitions, timeout)
	case c.hist.Len() == 0:
		check.Verdict = results.VerdictNothing
		check.Detail = "no operations recorded"
	default:
		check.Verdict = results.VerdictOK
		check.Detail = c.okDetail()
	}
	return check, visualization
}

// watchVerdict decides the watch check from its violations.
func (c *checker) watchVerdict(watch []Violation) results.Check {
	check := results.Check{Name: CheckWatch}
	switch {
	case len(watch) > 0:
		check.Verdict = results.VerdictViolation
		check.Detail = watch[0].String() + moreViolations(len(watch))
	case len(c.watchers) == 0:
		check.Verdict = results.VerdictNothing
		check.Detail = "no watches recorded"
	case c.stats.WatchEvents == 0 && !c.anyProgress():
		// What a watcher must have received is checked up to the last event or progress notification it
		// got: without either, no delivery was checked.
		check.Verdict = results.VerdictNothing
		check.Detail = fmt.Sprintf("no watch event or progress notification recorded (%d watchers)", len(c.watchers))
	default:
		check.Verdict = results.VerdictOK
		check.Detail = fmt.Sprintf("%d watchers, %d events: ordered, unique, atomic, reliable, resumable, bookmarkable; prevKV, IsCreate and filters correct", len(c.watchers), c.stats.WatchEvents)
	}
	return check
}

// serializableVerdict decides the serializable-reads check from its violations.
func (c *checker) serializableVerdict(ser []Violation) results.Check {
	check := results.Check{Name: CheckSerializable}
	nser := c.countSerializable()
	switch {
	case len(ser) > 0:
		check.Verdict = results.VerdictViolation
		check.Detail = ser[0].String() + moreViolations(len(ser))
	case nser == 0:
		check.Verdict = results.VerdictNothing
		check.Detail = "no serializable reads recorded"
	default:
		check.Verdict = results.VerdictOK
		check.Detail = fmt.Sprintf("%d serializable reads: each a state of the store at its revision, none from the future", nser)
	}
	return check
}

// moreViolations says how many violations a detail leaves out after its first.
func moreViolations(n int) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf(" (and %d more)", n-1)
}

// okDetail says what a passing linearizability check covered, and what it could check in part only.
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
	return c.progress
}

// countSerializable counts the answered serializable reads: none means nothing to check.
func (c *checker) countSerializable() int {
	n := 0
	for i := range c.ops.Len() {
		if c.ops.Get(i).answered && c.ops.Get(i).kind == kindSerializable {
			n++
		}
	}
	return n
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

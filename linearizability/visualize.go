package linearizability

// Porcupine's visualization of the key a linearizability violation is about, so that a reader sees the
// operations on a timeline with the violation and the fault windows marked.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

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
			k = c.rank(opKey(c.op(v.Ops[0])))
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
	_, info := porcupine.CheckOperationsVerbose(m, porcupineOps(sg.ops, c.hist), max(timeout, time.Second))
	var notes []porcupine.Annotation
	for _, f := range opts.Faults {
		notes = append(notes, porcupine.Annotation{Tag: "faults", Start: f.StartNs, End: f.EndNs, Description: f.Fault,
			Details: fmt.Sprintf("%s %s on %s: %s", f.Fault, f.Spec, strings.Join(f.Targets, ","), f.Outcome), BackgroundColor: "#ffd8b0"})
	}
	last := lastTime(c.hist)
	for _, i := range v.Ops {
		notes = append(notes, porcupine.Annotation{Tag: "violation", Start: c.ops.Get(i).call, End: min(c.ops.Get(i).ret, last), Description: v.Kind,
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

// deadlineOf is ctx's deadline; visualize always sets one.
func deadlineOf(ctx context.Context) time.Time {
	dl, _ := ctx.Deadline()
	return dl
}

// lastTime is when the history's last operation returned: the end of a failed operation's bar.
func lastTime(ops operations) int64 {
	var t int64
	for i := range ops.Len() {
		t = max(t, ops.At(i).Return)
	}
	return t
}

// window returns key k's operations around a violation's operations, starting from an unknown state.
func (c *checker) window(k int32, v Violation) segment {
	index, leaseKeys := c.keyIndex()
	ops := c.buildKeyOps(index, leaseKeys, k, k+1)[0]
	var from, to int64 = infinity, -infinity
	for _, i := range v.Ops {
		from = min(from, c.ops.Get(i).call)
		to = max(to, c.op(i).Return)
	}
	if from == infinity {
		from, to = v.Time, v.Time
	}
	// Up to 20 operations on either side of the violating ones.
	lo := sort.Search(len(ops), func(j int) bool { return ops[j].call >= from })
	hi := sort.Search(len(ops), func(j int) bool { return ops[j].call > to })
	lo, hi = max(lo-20, 0), min(hi+20, len(ops))
	return segment{rank: k, ops: ops[lo:hi], init: []kstate{{any: true}}}
}

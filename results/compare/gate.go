package compare

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// ParseGate parses the figures a --fail-on-regression gate watches: "" or "all" for every figure, else a
// comma-separated list of figure IDs ("create/pods:p99,put:p99") or operations ("put": all its figures).
// It returns nil for all.
func ParseGate(spec string) ([]string, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == "all" {
		return nil, nil
	}
	var out []string
	for _, f := range strings.Split(spec, ",") {
		f = strings.TrimSpace(f)
		if f == "" || strings.HasPrefix(f, ":") || strings.HasSuffix(f, ":") {
			return nil, outcome.Usagef("--fail-on-regression %q: give figures as op:stat (put:p99), operations (put), or nothing for all", spec)
		}
		out = append(out, f)
	}
	return out, nil
}

// Watched says whether the gate's figures (nil: all) include metric id.
func Watched(figures []string, id string) bool {
	if figures == nil {
		return true
	}
	for _, f := range figures {
		if f == id || (!strings.Contains(f, ":") && strings.HasPrefix(id, f+":")) {
			return true
		}
	}
	return false
}

// Gate is the part of a comparison's figures that decides its outcome (--fail-on-regression): Figures are
// figure IDs or operations, nil for every figure. A comparison without a gate (a nil *Gate) decides on its
// runs' outcomes alone, and every effect it shows is informational.
//
// Like porcupine's Unknown, an undecided figure is never a pass: a gated figure that a variant made worse
// beyond the practical threshold fails a threshold (exit 3), and a gated figure the comparison could not
// decide leaves it undecided (exit 1), with what would decide it.
type Gate struct {
	Figures []string `json:"figures,omitempty"`
}

// NewGate returns the gate of a --fail-on-regression flag: nil when it is off.
func NewGate(on bool, figures []string) *Gate {
	if !on {
		return nil
	}
	return &Gate{Figures: figures}
}

// Watches says whether the gate decides on metric id; a nil gate decides on none.
func (g *Gate) Watches(id string) bool { return g != nil && Watched(g.Figures, id) }

// String names the gate's figures as the flag takes them: "all", "put:p99,put:throughput", or "" (no gate).
func (g *Gate) String() string {
	switch {
	case g == nil:
		return ""
	case g.Figures == nil:
		return "all"
	}
	return strings.Join(g.Figures, ",")
}

// Check returns a usage error when the gate names a figure none of metrics has ("in this comparison":
// where says where it looked): a typo must not pass silently. With no metrics at all (every run of a
// variant failed) nothing can be checked.
func (g *Gate) Check(metrics [][]Metric, where string) error {
	if g == nil {
		return nil
	}
	any := false
	for _, ms := range metrics {
		any = any || len(ms) > 0
	}
	if !any {
		return nil
	}
	for _, f := range g.Figures {
		found := false
		for _, ms := range metrics {
			for _, m := range ms {
				found = found || Watched([]string{f}, m.ID)
			}
		}
		if !found {
			return outcome.Usagef("--fail-on-regression: no figure %q %s (figures are named like put:p99, create/pods:p99, etcd:wal_fsync_p99)", f, where)
		}
	}
	return nil
}

// mark marks every effect of r the gate watches.
func (g *Gate) mark(r *Result) {
	r.Gate = g
	for i := range r.Variants {
		for j := range r.Variants[i].Effects {
			e := &r.Variants[i].Effects[j]
			e.Gated = g.Watches(e.Metric.ID)
		}
	}
}

// metrics returns the metrics r compares (those of its first variant; every variant has the same).
func (r Result) metrics() []Metric {
	var out []Metric
	if len(r.Variants) > 0 {
		for _, e := range r.Variants[0].Effects {
			out = append(out, e.Metric)
		}
	}
	return out
}

// GateReasons are the reasons the gate adds to the outcome of a comparison, prefixed by what (a
// scenario's name in a trend; "" for none). The gate is one three-valued decision over the figures it
// watches, as a conjunction: any gated figure a variant made worse fails it (threshold-failed, one reason
// per figure), whatever the others are; otherwise any gated figure that is undecided leaves it undecided
// (one reason per variant, naming each figure with what would decide it); otherwise it passes. Figures the
// gate does not watch add nothing: they are informational.
func (r Result) GateReasons(what string) []outcome.Reason {
	return DecideGate(r.gateReasons(what))
}

// DecideGate decides a gate from the reasons of the figures it watches (of one comparison, or of every
// scenario of a trend): a regression anywhere decides it, so the undecided ones are dropped then (more
// rounds could not turn a regression into a pass); otherwise they stand.
func DecideGate(rs []outcome.Reason) []outcome.Reason {
	if slices.ContainsFunc(rs, func(x outcome.Reason) bool { return x.Kind == outcome.ThresholdFailed }) {
		rs = slices.DeleteFunc(slices.Clone(rs), func(x outcome.Reason) bool { return x.Kind == outcome.Undecided })
	}
	return rs
}

// FigureReasons are the reasons of every gated figure of r, undecided ones included, prefixed by what:
// DecideGate decides a gate from them.
func (r Result) FigureReasons(what string) []outcome.Reason { return r.gateReasons(what) }

func (r Result) gateReasons(what string) []outcome.Reason {
	var out []outcome.Reason
	for _, v := range r.Variants {
		// A comparison names the variant ("slow put:p99"); a trend the scenario, then the night
		// ("kill put:p99 ... on 11-05 02:00").
		name, on := v.Label+" ", ""
		if what != "" {
			name, on = what+" ", " on "+v.Label
		}
		var undecided []string
		for _, e := range v.Effects {
			if !e.Gated {
				continue
			}
			switch e.Verdict {
			case Worse:
				why := fmt.Sprintf("Holm-adjusted p %.2g", e.PAdjusted)
				if e.Method == MethodSequential {
					why = e.Note
				}
				out = append(out, outcome.New(outcome.ThresholdFailed, "regression: %s%s %s%s against %s (%s, beyond --min-effect %s)",
					name, e.Metric.ID, e.ChangeText(), on, r.Baseline, why, percent(r.MinEffect)))
			case Undecided:
				undecided = append(undecided, e.Metric.ID+" "+undecidedWhy(e))
			}
		}
		if len(undecided) > 0 {
			out = append(out, outcome.New(outcome.Undecided, "gated figures undecided: %s%sagainst %s: %s",
				name, strings.TrimPrefix(on+" ", " "), r.Baseline, strings.Join(undecided, "; ")))
		}
	}
	return out
}

// undecidedWhy says, in parentheses, what would decide an undecided figure.
func undecidedWhy(e Effect) string {
	why := e.Note
	if i := strings.LastIndex(why, "; "); i >= 0 {
		why = why[i+2:] // the last note is the one about deciding; the first says how it was measured
	}
	if why == "" {
		why = "no interval"
	}
	return "(" + why + ")"
}

// GateRole is a figure's part in the verdict, as the tables show it: "informational" for a figure the
// gate does not watch (it never says pass or fail), else "FAIL" (worse), "UNDECIDED" or "pass".
func (e Effect) GateRole() string {
	switch {
	case !e.Gated:
		return "informational"
	case e.Verdict == Worse:
		return "FAIL"
	case e.Verdict == Undecided:
		return "UNDECIDED"
	}
	return "pass"
}

// Decide decides a comparison of variants whose effects are r: the outcome of every run, labelled by its
// variant (and its round when a variant has several), combined with the gate's reasons by the one
// precedence (outcome.Combine): a violation or a crashed member in any run is the comparison's outcome,
// whatever the gate says and in whatever order the runs ran. A gate naming a figure r lacks is a usage
// error.
func Decide(variants []Variant, r Result) (outcome.Outcome, error) {
	if err := r.Gate.Check([][]Metric{r.metrics()}, "in this comparison"); err != nil {
		return outcome.Outcome{}, err
	}
	return outcome.Combine(Parts(variants), r.GateReasons("")...), nil
}

// Parts returns the outcome of every run of the variants, labelled "label" or, with several rounds,
// "label, round N".
func Parts(variants []Variant) []outcome.Part {
	var out []outcome.Part
	for _, v := range variants {
		for i, run := range v.Runs {
			label := v.Label
			if len(v.Runs) > 1 {
				label = fmt.Sprintf("%s, round %d", v.Label, i+1)
			}
			out = append(out, outcome.Part{Label: label, Outcome: run.Outcome()})
		}
	}
	return out
}

// Outcome is the run's outcome: the one its summary holds (decided now for a summary written before
// outcomes were); for a run that wrote no summary, the outcome its error carries, or else a harness error
// saying why. Nothing is decided here that the summary did not.
func (r Run) Outcome() outcome.Outcome {
	if r.Summary != nil {
		return r.Summary.Verdict()
	}
	var oe *outcome.Error
	switch {
	case errors.As(r.Err, &oe):
		return oe.Outcome
	case r.Err != nil:
		return outcome.Decide(outcome.New(outcome.HarnessError, "no results: %s", oneLine(r.Err.Error())))
	}
	return outcome.Decide(outcome.New(outcome.HarnessError, "no results (no summary)"))
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

func percent(f float64) string { return fmt.Sprintf("%.3g%%", 100*f) }

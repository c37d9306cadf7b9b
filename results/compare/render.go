package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// finite is x for JSON, or nil (null) when it is unknown (NaN) or infinite: JSON has neither.
func finite(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// MarshalJSON writes unknown figures (NaN) as null: JSON has no NaN.
func (e Effect) MarshalJSON() ([]byte, error) {
	type plain Effect
	num := finite
	return json.Marshal(struct {
		plain
		Baseline  *float64 `json:"baseline"`
		Value     *float64 `json:"value"`
		Change    *float64 `json:"change"`
		Low       *float64 `json:"low"`
		High      *float64 `json:"high"`
		P         *float64 `json:"p"`
		PAdjusted *float64 `json:"p_adjusted"`
	}{plain(e), num(e.Baseline), num(e.Value), num(e.Change), num(e.Low), num(e.High), num(e.P), num(e.PAdjusted)})
}

// FormatValue formats a figure in its unit, with a precision that suits its size.
func FormatValue(v float64, unit string) string {
	if math.IsNaN(v) {
		return "-"
	}
	switch unit {
	case "ms":
		switch {
		case v < 1:
			return fmt.Sprintf("%.3f", v)
		case v < 100:
			return fmt.Sprintf("%.2f", v)
		}
		return fmt.Sprintf("%.0f", v)
	case "ops/s":
		return fmt.Sprintf("%.1f", v)
	case "%":
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// ChangeText is the change and its 95% interval: "+21.3% [+12.0%, +30.5%]" for ratios, "+120 ms [+50,
// +190]" for differences; "-" when unknown.
func (e Effect) ChangeText() string {
	if math.IsNaN(e.Change) {
		return "-"
	}
	if e.Metric.Scale == Ratio {
		return fmt.Sprintf("%+.1f%% [%+.1f%%, %+.1f%%]", 100*e.Change, 100*e.Low, 100*e.High)
	}
	f := func(x float64) string {
		s := FormatValue(math.Abs(x), e.Metric.Unit)
		if x < 0 {
			return "-" + s
		}
		return "+" + s
	}
	if e.Metric.Unit == "" {
		return fmt.Sprintf("%s [%s, %s]", f(e.Change), f(e.Low), f(e.High))
	}
	return fmt.Sprintf("%s %s [%s, %s]", f(e.Change), e.Metric.Unit, f(e.Low), f(e.High))
}

// VerdictText is the verdict as a table shows it: undecided figures say how many rounds would decide.
func (e Effect) VerdictText() string {
	if e.Verdict == Undecided && e.RoundsNeeded > 0 {
		return fmt.Sprintf("undecided (≈%d rounds)", e.RoundsNeeded)
	}
	return string(e.Verdict)
}

// name is the figure's name in tables.
func (m Metric) name() string {
	if m.Label != "" {
		return m.ID + " (" + m.Label + ")"
	}
	return m.ID
}

// Block is one variant's effects laid out as a table: a title, a header and one row of cells per figure.
type Block struct {
	Title  string
	Header []string
	Rows   []BlockRow
}

// BlockRow is one figure's cells (figure, baseline, variant, change [interval], verdict, method, gate),
// its verdict, and whether the gate watches it: only a gated figure's verdict may be shown as passing or
// failing; the others are informational.
type BlockRow struct {
	Cells   []string
	Verdict Verdict
	Gated   bool
}

// Blocks lays out the result as tables, one per variant; every renderer (text, Markdown, HTML) shows
// these cells and nothing else, so that they cannot disagree.
func (r Result) Blocks() []Block {
	var out []Block
	for _, v := range r.Variants {
		b := Block{Title: fmt.Sprintf("%s against %s (baseline)", v.Label, r.Baseline),
			Header: []string{"figure", r.Baseline, v.Label, "change [95% interval]", "verdict", "method", "gate"}}
		for _, e := range v.Effects {
			value := func(x float64) string {
				s := FormatValue(x, e.Metric.Unit)
				if s != "-" && e.Metric.Unit != "" {
					s += " " + e.Metric.Unit
				}
				return s
			}
			b.Rows = append(b.Rows, BlockRow{Verdict: e.Verdict, Gated: e.Gated,
				Cells: []string{e.Metric.name(), value(e.Baseline), value(e.Value), e.ChangeText(), e.VerdictText(), methodShort(e), e.GateRole()}})
		}
		out = append(out, b)
	}
	return out
}

// table lays out the result as rows of cells: one block per variant, a heading row first.
func (r Result) table(row func(cells ...string), heading func(title string)) {
	for _, b := range r.Blocks() {
		heading(b.Title)
		row(b.Header...)
		for _, br := range b.Rows {
			row(br.Cells...)
		}
	}
}

func methodShort(e Effect) string {
	switch e.Method {
	case MethodRounds:
		return fmt.Sprintf("%d rounds", e.N)
	case MethodIntervals:
		return fmt.Sprintf("%d intervals, 1 run", e.N)
	case MethodSequential:
		return fmt.Sprintf("sequential, %d rounds", e.N)
	}
	return "-"
}

// Legend explains the verdicts in one paragraph.
func (r Result) Legend() string {
	return fmt.Sprintf("Effects against the baseline with 95%% intervals: from paired rounds (t interval of the per-round log ratio, "+
		"or difference for figures that can be zero) or, with one run per variant, from the runs' per-interval samples "+
		"(Hodges-Lehmann with the Mann-Whitney interval; within-run noise only). Intervals are per figure; verdicts use Holm-adjusted p-values over each "+
		"variant's figures (family-wise false-alarm rate 5%%); a change smaller than %.3g%% is no difference; undecided means "+
		"the interval is wider than that, with the rounds that would decide it. %s", 100*r.MinEffect, r.GateLegend())
}

// GateLegend says which figures decide the outcome: those the gate watches; without a gate, none.
func (r Result) GateLegend() string {
	if r.Gate == nil {
		return "No figure is gated (--fail-on-regression): every effect is informational, and the outcome is the runs' own."
	}
	return fmt.Sprintf("Gated figures (--fail-on-regression=%s) decide the outcome with the runs' own: worse fails it, undecided leaves it undecided; "+
		"the other figures are informational.", r.Gate)
}

// WriteText writes the result as aligned columns, one block per variant.
func (r Result) WriteText(w io.Writer) error {
	for _, m := range r.Machines {
		fmt.Fprintln(w, m)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	r.table(func(cells ...string) {
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}, func(title string) {
		fmt.Fprintf(tw, "%s\n", title)
	})
	if err := tw.Flush(); err != nil {
		return err
	}
	return r.writeNotes(w, func(s string) string { return s })
}

// WriteMarkdown writes the result as one Markdown table per variant.
func (r Result) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	for _, m := range r.Machines {
		fmt.Fprintf(&b, "> %s\n", mdEscape(strings.TrimSpace(m)))
	}
	if len(r.Machines) > 0 {
		b.WriteString("\n")
	}
	b.WriteString(r.Legend() + "\n")
	first := false
	r.table(func(cells ...string) {
		for i, c := range cells {
			cells[i] = mdEscape(c)
		}
		fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
		if first {
			fmt.Fprintf(&b, "| --- |%s\n", strings.Repeat(" ---: |", len(cells)-1))
			first = false
		}
	}, func(title string) {
		fmt.Fprintf(&b, "\n#### %s\n\n", mdEscape(title))
		first = true
	})
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	return r.writeNotes(w, mdEscape)
}

// Notes are the notes of figures that are not plainly decided: "v3.6.16, put:p99.9: too noisy: ...".
// That figures come from one run per variant is said once, not on every figure.
func (r Result) Notes() []string {
	var out []string
	oneRun := false
	for _, v := range r.Variants {
		for _, e := range v.Effects {
			note := e.Note
			if rest, ok := strings.CutPrefix(note, oneRunNote); ok {
				oneRun = true
				note = strings.TrimPrefix(rest, "; ")
			}
			if note != "" && e.Verdict != Better && e.Verdict != Worse {
				out = append(out, fmt.Sprintf("%s, %s: %s", v.Label, e.Metric.ID, note))
			}
		}
	}
	if oneRun {
		out = append([]string{"figures marked \"1 run\": " + oneRunNote}, out...)
	}
	return out
}

// writeNotes lists the notes, one line each.
func (r Result) writeNotes(w io.Writer, esc func(string) string) error {
	var b strings.Builder
	for _, n := range r.Notes() {
		fmt.Fprintf(&b, "- %s\n", esc(n))
	}
	if b.Len() == 0 {
		return nil
	}
	_, err := io.WriteString(w, "\n"+b.String())
	return err
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

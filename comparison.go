package chaosbench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	lin "github.com/etcd-chaosbench/chaosbench/linearizability"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/report"
)

// Files a comparison writes into its directory.
const (
	ComparisonMarkdown = "compare.md"
	ComparisonJSON     = "compare.json"
)

// Comparison sets runs of one scenario side by side: one column per variant (an etcd version, a set of etcd
// flags), one row per figure, and each variant's difference to the first in percent. With several rounds
// per variant a cell shows the median and the range of the rounds, and differences compare medians. It is
// data; the renderers (WriteMarkdown, WriteText) only lay it out, so that a shared report renderer can take
// it over.
type Comparison struct {
	Variants []ComparedVariant `json:"variants"`
	Sections []CompareSection  `json:"sections"`
}

// ComparedVariant is one column: a variant and its runs (one per round).
type ComparedVariant struct {
	Label string        `json:"label"`
	Runs  []ComparedRun `json:"runs"`
}

// ComparedRun is one run of a variant.
type ComparedRun struct {
	Dir string `json:"dir"`
	// Error says why the run has no results, or what went wrong in it.
	Error   string           `json:"error,omitempty"`
	Summary *results.Summary `json:"-"`
}

// VariantDirs names a variant's run directories (one per round) and how each run ended.
type VariantDirs struct {
	Label string
	Dirs  []string
	Errs  []error
}

// CompareSection is a titled group of rows.
type CompareSection struct {
	Title string `json:"title"`
	// Note says how the section's figures are measured.
	Note string       `json:"note,omitempty"`
	Rows []CompareRow `json:"rows"`
}

// CompareRow is one figure across the variants.
type CompareRow struct {
	Metric string `json:"metric"`
	// Cells are the figures as shown, one per variant ("-" when a variant has none).
	Cells []string `json:"cells"`
	// Values are the figures as numbers, medians over rounds (null when not numeric or absent).
	Values []*float64 `json:"values,omitempty"`
	// Diffs compare each variant with the first: "+12.3%" for numbers, "same"/"differs" for text; the
	// first variant's is empty.
	Diffs []string `json:"diffs"`
}

// CompareRuns builds the comparison of the variants' run directories. A directory without a summary (a run
// that failed to start) contributes nothing but its error.
func CompareRuns(variants []VariantDirs) *Comparison {
	c := &Comparison{}
	for _, vd := range variants {
		v := ComparedVariant{Label: vd.Label}
		for i, dir := range vd.Dirs {
			r := ComparedRun{Dir: dir}
			if i < len(vd.Errs) && vd.Errs[i] != nil {
				r.Error = vd.Errs[i].Error()
			}
			if s, err := results.ReadSummary(dir); err == nil {
				r.Summary = s
			} else if r.Error == "" {
				r.Error = err.Error()
			}
			v.Runs = append(v.Runs, r)
		}
		c.Variants = append(c.Variants, v)
	}
	c.Sections = []CompareSection{
		c.runSection(),
		c.throughputSection(),
		c.latencySection(),
		c.faultSection(),
		c.checkSection(),
	}
	return c
}

// summaries returns the variant's summaries, one per run that wrote one.
func (v ComparedVariant) summaries() []*results.Summary {
	var out []*results.Summary
	for _, r := range v.Runs {
		if r.Summary != nil {
			out = append(out, r.Summary)
		}
	}
	return out
}

// num builds a numeric row; get returns ok=false when a run has no such figure.
func (c *Comparison) num(metric string, format func(float64) string, get func(*results.Summary) (float64, bool)) CompareRow {
	perVariant := make([][]float64, len(c.Variants))
	for i, v := range c.Variants {
		for _, s := range v.summaries() {
			if x, ok := get(s); ok {
				perVariant[i] = append(perVariant[i], x)
			}
		}
	}
	return numRow(metric, format, perVariant)
}

// numRow lays out per-variant samples (one per round): the median, and the range when there are several.
func numRow(metric string, format func(float64) string, perVariant [][]float64) CompareRow {
	row := CompareRow{Metric: metric}
	for _, xs := range perVariant {
		if len(xs) == 0 {
			row.Values, row.Cells = append(row.Values, nil), append(row.Cells, "-")
			continue
		}
		sort.Float64s(xs)
		med := median(xs)
		cell := format(med)
		if lo, hi := format(xs[0]), format(xs[len(xs)-1]); lo != hi {
			cell += fmt.Sprintf(" (%s–%s)", lo, hi)
		}
		row.Values, row.Cells = append(row.Values, &med), append(row.Cells, cell)
	}
	row.Diffs = numericDiffs(row.Values)
	return row
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// text builds a row of text values; rounds that disagree show every value.
func (c *Comparison) text(metric string, get func(*results.Summary) string) CompareRow {
	row := CompareRow{Metric: metric}
	for _, v := range c.Variants {
		var seen []string
		for _, s := range v.summaries() {
			if x := get(s); x != "" && !slices.Contains(seen, x) {
				seen = append(seen, x)
			}
		}
		cell := "-"
		if len(seen) > 0 {
			cell = strings.Join(seen, " / ")
		}
		row.Cells = append(row.Cells, cell)
	}
	for i, cell := range row.Cells {
		switch {
		case i == 0:
			row.Diffs = append(row.Diffs, "")
		case cell == row.Cells[0]:
			row.Diffs = append(row.Diffs, "same")
		default:
			row.Diffs = append(row.Diffs, "differs")
		}
	}
	return row
}

// numericDiffs returns each value's difference to the first, in percent.
func numericDiffs(vals []*float64) []string {
	out := make([]string, len(vals))
	for i := 1; i < len(vals); i++ {
		base, v := vals[0], vals[i]
		switch {
		case base == nil || v == nil:
			out[i] = "n/a"
		case *base == 0 && *v == 0:
			out[i] = "0%"
		case *base == 0:
			out[i] = "n/a"
		default:
			out[i] = fmt.Sprintf("%+.1f%%", 100*(*v-*base)/math.Abs(*base))
		}
	}
	return out
}

func (c *Comparison) runSection() CompareSection {
	sec := CompareSection{Title: "Run"}
	sec.Rows = append(sec.Rows,
		c.text("etcd", func(s *results.Summary) string {
			if len(s.Cluster.EtcdVersions) > 0 {
				return strings.Join(dedupe(s.Cluster.EtcdVersions), " + ")
			}
			return s.Versions.EtcdServer
		}),
		c.text("etcd flags", func(s *results.Summary) string { return strings.Join(s.Cluster.EtcdFlags, " ") }),
		c.text("cluster", func(s *results.Summary) string {
			desc := fmt.Sprintf("%s, %d members", s.Cluster.Backend, s.Cluster.Members)
			if s.Cluster.MemberCPUs > 0 {
				desc += fmt.Sprintf(", %g CPUs", s.Cluster.MemberCPUs)
			}
			if s.Cluster.MemberMemoryBytes > 0 {
				desc += fmt.Sprintf(", %d MiB", s.Cluster.MemberMemoryBytes>>20)
			}
			return desc
		}),
		c.text("seed", func(s *results.Summary) string { return fmt.Sprint(s.Seed) }),
		c.num("measured (s)", fmtFixed(1), func(s *results.Summary) (float64, bool) { return s.MeasuredSeconds, true }),
		c.text("complete", func(s *results.Summary) string {
			if s.Incomplete {
				return "no: " + s.IncompleteReason
			}
			return "yes"
		}),
	)
	return sec
}

func (c *Comparison) throughputSection() CompareSection {
	sec := CompareSection{Title: "Throughput (ops/s)"}
	sec.Rows = append(sec.Rows, c.num("total", fmtFixed(1), func(s *results.Summary) (float64, bool) {
		return s.Total.Throughput, true
	}))
	for _, op := range c.operations() {
		sec.Rows = append(sec.Rows, c.num(op, fmtFixed(1), func(s *results.Summary) (float64, bool) {
			o, ok := s.Operations[op]
			if !ok {
				return 0, false
			}
			return o.Throughput, true
		}))
	}
	sec.Rows = append(sec.Rows,
		c.num("errors", fmtFixed(0), func(s *results.Summary) (float64, bool) { return float64(s.Total.Errors), true }),
		c.num("late starts (%)", fmtFixed(2), func(s *results.Summary) (float64, bool) {
			return s.Schedule.MissedPercent, s.Schedule.Mode == "open"
		}),
	)
	return sec
}

func (c *Comparison) latencySection() CompareSection {
	sec := CompareSection{Title: "Response time (ms)",
		Note: "From the time the schedule intended each request to start: includes any wait for a free client, as users of the cluster would see it."}
	quantiles := []struct {
		name string
		get  func(results.Latency) float64
	}{
		{"p50", func(l results.Latency) float64 { return l.P50 }},
		{"p90", func(l results.Latency) float64 { return l.P90 }},
		{"p99", func(l results.Latency) float64 { return l.P99 }},
		{"p99.9", func(l results.Latency) float64 { return l.P999 }},
		{"max", func(l results.Latency) float64 { return l.Max }},
	}
	for _, op := range c.operations() {
		for _, q := range quantiles {
			sec.Rows = append(sec.Rows, c.num(op+" "+q.name, fmtMillis, func(s *results.Summary) (float64, bool) {
				o, ok := s.Operations[op]
				if !ok || o.Count == 0 {
					return 0, false
				}
				return q.get(o.Response), true
			}))
		}
	}
	return sec
}

// faultSection compares, fault by fault (matched by position: the same seed injects the same schedule),
// the write and the read gap of the fault, and how it ended.
func (c *Comparison) faultSection() CompareSection {
	sec := CompareSection{Title: "Availability per fault (ms)",
		Note: "The longest stretch without a successful write (and, in rows of their own, read) from the last success before the fault to the first after it, as long as the fault was observed (recovery included); faults are matched by position (the same seed injects the same schedule)."}
	type faultRun struct {
		window results.FaultWindow
		gaps   [2]*float64 // writes, reads, in ms
	}
	perVariant := make([][][]faultRun, len(c.Variants)) // variant, run, fault
	n := 0
	reads := false
	for i, v := range c.Variants {
		for _, r := range v.Runs {
			if r.Summary == nil || len(r.Summary.Faults) == 0 {
				continue
			}
			n = max(n, len(r.Summary.Faults))
			frs := make([]faultRun, len(r.Summary.Faults))
			gaps := faultGaps(r.Dir, r.Summary.Faults)
			for f, w := range r.Summary.Faults {
				frs[f] = faultRun{window: w, gaps: gaps[f]}
				reads = reads || gaps[f][1] != nil
			}
			perVariant[i] = append(perVariant[i], frs)
		}
	}
	for f := range n {
		name := ""
		var samples [2][][]float64
		for k := range samples {
			samples[k] = make([][]float64, len(c.Variants))
		}
		notes := make([][]string, len(c.Variants))
		for i, runs := range perVariant {
			for _, frs := range runs {
				if f >= len(frs) {
					continue
				}
				w := frs[f].window
				if name == "" {
					name = fmt.Sprintf("%d. %s", f+1, w.Fault)
					if len(w.Targets) > 0 {
						name += " " + strings.Join(w.Targets, ",")
					}
				}
				for k, g := range frs[f].gaps {
					if g != nil {
						samples[k][i] = append(samples[k][i], *g)
					}
				}
				if w.Outcome != "" && w.Outcome != "recovered" && !slices.Contains(notes[i], w.Outcome) {
					notes[i] = append(notes[i], w.Outcome)
				}
			}
		}
		row := numRow(name, fmtMillis, samples[0])
		for i := range row.Cells {
			if len(notes[i]) > 0 {
				row.Cells[i] += " (" + strings.Join(notes[i], "; ") + ")"
			}
		}
		sec.Rows = append(sec.Rows, row)
		if reads {
			sec.Rows = append(sec.Rows, numRow(name+" (reads)", fmtMillis, samples[1]))
		}
	}
	return sec
}

// faultGaps returns the write and read gap (ms) of each fault window of the run in dir, measured by
// results.LongestGap from its history; without one, the figures the fault runner measured with it while the
// run went on. A nil gap is one the run has no figure for (no request of the class, or nothing to measure from).
func faultGaps(dir string, faults []results.FaultWindow) [][2]*float64 {
	out := make([][2]*float64, len(faults))
	ms := func(g results.Gap, ok bool) *float64 {
		if !ok {
			return nil
		}
		v := float64(g.Length()) / 1e6
		return &v
	}
	act, loadEnd, err := report.HistoryActivity(filepath.Join(dir, lin.HistoryFile))
	if err == nil {
		for i, span := range results.FaultSpans(faults, loadEnd) {
			out[i] = [2]*float64{ms(results.LongestGap(&act.Writes, span[0], span[1])), ms(results.LongestGap(&act.Reads, span[0], span[1]))}
		}
		return out
	}
	for i, f := range faults {
		if a := f.Availability; a != nil {
			if a.Writes > 0 || a.WriteGapOpen {
				out[i][0] = &a.WriteGapMs
			}
			if a.Reads > 0 || a.ReadGapOpen {
				out[i][1] = &a.ReadGapMs
			}
		}
	}
	return out
}

func (c *Comparison) checkSection() CompareSection {
	sec := CompareSection{Title: "Consistency"}
	var names []string
	seen := map[string]bool{}
	for _, v := range c.Variants {
		for _, s := range v.summaries() {
			for _, ch := range s.Checks {
				if !seen[ch.Name] {
					seen[ch.Name] = true
					names = append(names, ch.Name)
				}
			}
		}
	}
	for _, name := range names {
		sec.Rows = append(sec.Rows, c.text(name, func(s *results.Summary) string {
			for _, ch := range s.Checks {
				if ch.Name == name {
					return ch.Verdict
				}
			}
			return ""
		}))
	}
	sec.Rows = append(sec.Rows, c.num("harness errors", fmtFixed(0), func(s *results.Summary) (float64, bool) {
		return float64(len(s.Errors)), true
	}))
	return sec
}

// operations returns the union of the variants' operation names, sorted.
func (c *Comparison) operations() []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range c.Variants {
		for _, s := range v.summaries() {
			for op := range s.Operations {
				if !seen[op] {
					seen[op] = true
					out = append(out, op)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// WriteMarkdown writes the comparison as one markdown table per section.
func (c *Comparison) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	head := []string{""}
	align := []string{"---"}
	for i, v := range c.Variants {
		head = append(head, mdEscape(v.Label))
		align = append(align, "---:")
		if i > 0 {
			head = append(head, "Δ "+mdEscape(v.Label))
			align = append(align, "---:")
		}
	}
	for _, v := range c.Variants {
		for i, r := range v.Runs {
			if r.Error != "" {
				fmt.Fprintf(&b, "> **%s**%s: %s\n\n", mdEscape(v.Label), roundName(i, len(v.Runs)), mdEscape(r.Error))
			}
		}
	}
	for _, sec := range c.Sections {
		if len(sec.Rows) == 0 {
			continue
		}
		fmt.Fprintf(&b, "### %s\n\n", sec.Title)
		if sec.Note != "" {
			fmt.Fprintf(&b, "%s\n\n", sec.Note)
		}
		fmt.Fprintf(&b, "| %s |\n| %s |\n", strings.Join(head, " | "), strings.Join(align, " | "))
		for _, row := range sec.Rows {
			cells := []string{mdEscape(row.Metric)}
			for i, cell := range row.Cells {
				cells = append(cells, mdEscape(cell))
				if i > 0 {
					cells = append(cells, row.Diffs[i])
				}
			}
			fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteText writes the comparison as aligned plain-text columns, for terminals.
func (c *Comparison) WriteText(w io.Writer) error {
	for _, v := range c.Variants {
		for i, r := range v.Runs {
			if r.Error != "" {
				fmt.Fprintf(w, "%s%s: %s\n", v.Label, roundName(i, len(v.Runs)), r.Error)
			}
		}
	}
	// tabwriter aligns every column right; the metric column is padded to one width so it reads
	// left-aligned.
	width := 0
	for _, sec := range c.Sections {
		width = max(width, len(sec.Title))
		for _, row := range sec.Rows {
			width = max(width, len(row.Metric)+2)
		}
	}
	empty := strings.Repeat("\t", 2*len(c.Variants)-1)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := fmt.Sprintf("%-*s\t", width, "")
	for i, v := range c.Variants {
		head += v.Label + "\t"
		if i > 0 {
			head += "vs first\t"
		}
	}
	fmt.Fprintln(tw, head)
	for _, sec := range c.Sections {
		if len(sec.Rows) == 0 {
			continue
		}
		fmt.Fprintf(tw, "%-*s\t%s\n", width, sec.Title, empty)
		for _, row := range sec.Rows {
			line := fmt.Sprintf("%-*s\t", width, "  "+row.Metric)
			for i, cell := range row.Cells {
				line += cell + "\t"
				if i > 0 {
					line += row.Diffs[i] + "\t"
				}
			}
			fmt.Fprintln(tw, line)
		}
	}
	return tw.Flush()
}

// WriteFiles writes compare.md and compare.json into dir.
func (c *Comparison) WriteFiles(dir string) error {
	var md strings.Builder
	fmt.Fprintf(&md, "# Comparison\n\n")
	for _, v := range c.Variants {
		fmt.Fprintf(&md, "- %s:", mdEscape(v.Label))
		for _, r := range v.Runs {
			rel, err := filepath.Rel(dir, r.Dir)
			if err != nil {
				rel = r.Dir
			}
			fmt.Fprintf(&md, " [%s](%s)", rel, rel)
		}
		md.WriteString("\n")
	}
	md.WriteString("\nΔ columns compare each variant with the first")
	if len(c.Variants) > 0 && len(c.Variants[0].Runs) > 1 {
		md.WriteString("; cells show the median of the rounds and their range")
	}
	md.WriteString(".\n\n")
	if err := c.WriteMarkdown(&md); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ComparisonMarkdown), []byte(md.String()), 0o644); err != nil {
		return fmt.Errorf("write comparison: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode comparison: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ComparisonJSON), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write comparison: %w", err)
	}
	return nil
}

// roundName is " (round 2)" when a variant has several runs.
func roundName(i, n int) string {
	if n < 2 {
		return ""
	}
	return fmt.Sprintf(" (round %d)", i+1)
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

func fmtFixed(decimals int) func(float64) string {
	return func(v float64) string { return fmt.Sprintf("%.*f", decimals, v) }
}

// fmtMillis formats a latency in milliseconds with a precision that suits its size.
func fmtMillis(v float64) string {
	switch {
	case v < 1:
		return fmt.Sprintf("%.3f", v)
	case v < 100:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func dedupe(ss []string) []string {
	var out []string
	count := map[string]int{}
	for _, s := range ss {
		if count[s] == 0 {
			out = append(out, s)
		}
		count[s]++
	}
	for i, s := range out {
		if count[s] > 1 {
			out[i] = fmt.Sprintf("%d× %s", count[s], s)
		}
	}
	return out
}

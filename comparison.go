package chaosbench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/compare"
	"github.com/etcd-chaosbench/chaosbench/results/report"
)

// Files a comparison writes into its directory.
const (
	ComparisonMarkdown = "compare.md"
	ComparisonJSON     = "compare.json"
)

// Comparison sets runs of one scenario side by side: one column per variant (an etcd version, a set of etcd
// flags) for what describes the runs (versions, flags, seeds, fault outcomes, consistency verdicts), and the
// effects of each variant against the first from the one comparison engine (results/compare), with 95%
// intervals and verdicts. It is data; the renderers (WriteMarkdown, WriteText) only lay it out.
type Comparison struct {
	// Outcome and Reasons are the comparison's verdict (compare.Decide): every run's own outcome, labelled
	// by its variant and round, with the gate's; the exit code of `chaosbench compare` is this outcome's.
	Outcome  outcome.Kind      `json:"outcome"`
	Reasons  []outcome.Reason  `json:"reasons,omitempty"`
	Variants []ComparedVariant `json:"variants"`
	Sections []CompareSection  `json:"sections"`
	// Effects are each variant's effects against the first, per figure.
	Effects compare.Result `json:"effects"`
	// Rounds says how the runs were made, one entry per round: its seed and the order of the variants.
	Rounds []CompareRound `json:"rounds,omitempty"`
	// Stopped says, for --rounds auto, how many rounds ran and why the comparison stopped there.
	Stopped string `json:"rounds_stopped,omitempty"`
}

// CompareRound is one round of a comparison: every variant ran once, in Order, with Seed.
type CompareRound struct {
	Seed  int64    `json:"seed"`
	Order []string `json:"order"`
}

// ComparedVariant is one column: a variant and its runs (one per round).
type ComparedVariant struct {
	Label string        `json:"label"`
	Runs  []ComparedRun `json:"runs"`
}

// ComparedRun is one run of a variant.
type ComparedRun struct {
	Dir string `json:"dir"`
	// Outcome is the run's own verdict (its summary's; a run without one is a harness error).
	Outcome outcome.Kind `json:"outcome"`
	// Error says why the run has no results, or what went wrong in it.
	Error   string           `json:"error,omitempty"`
	Summary *results.Summary `json:"-"`
	series  []results.TimeSeriesRow
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
	// Diffs compare each variant with the first: "same" or "differs"; the first variant's is empty.
	Diffs []string `json:"diffs"`
}

// CompareRuns builds the comparison of the variants' run directories and decides it (compare.Decide): each
// run's own outcome, and the gate's reasons when opts has a gate. A directory without a summary (a run that
// failed to start) contributes nothing but its error, which is a harness error of the comparison. A gate
// naming a figure the runs lack is a usage error; the comparison is complete then, decided on its runs
// alone.
func CompareRuns(variants []VariantDirs, opts compare.Options) (*Comparison, error) {
	c := &Comparison{}
	var cv []compare.Variant
	for _, vd := range variants {
		v := ComparedVariant{Label: vd.Label}
		runs := compare.Variant{Label: vd.Label}
		for i, dir := range vd.Dirs {
			r := ComparedRun{Dir: dir}
			var runErr error
			if i < len(vd.Errs) && vd.Errs[i] != nil {
				r.Error, runErr = vd.Errs[i].Error(), vd.Errs[i]
			}
			run, err := compare.ReadRun(dir)
			if run.Summary != nil {
				r.Summary, r.series = run.Summary, run.Series
			} else {
				if r.Error == "" {
					r.Error = err.Error()
				}
				if runErr == nil {
					runErr = err
				}
			}
			run.Err = runErr
			r.Outcome = run.Outcome().Kind
			v.Runs = append(v.Runs, r)
			runs.Runs = append(runs.Runs, run)
		}
		c.Variants = append(c.Variants, v)
		cv = append(cv, runs)
	}
	c.Effects = compare.Runs(cv, opts)
	c.Sections = []CompareSection{
		c.runSection(),
		c.faultSection(),
		c.checkSection(),
	}
	o, err := compare.Decide(cv, c.Effects)
	if err != nil {
		o = outcome.Combine(compare.Parts(cv))
	}
	c.Outcome, c.Reasons = o.Kind, o.Reasons
	return c, err
}

// Verdict returns the comparison's outcome.
func (c *Comparison) Verdict() outcome.Outcome {
	return outcome.Outcome{Kind: c.Outcome, Reasons: c.Reasons}
}

// addReasons adds reasons of the comparison's own (an interrupt, a page that could not be written) to its
// outcome, by the same precedence.
func (c *Comparison) addReasons(rs ...outcome.Reason) {
	o := outcome.Decide(append(c.Reasons, rs...)...)
	c.Outcome, c.Reasons = o.Kind, o.Reasons
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
		c.text("measured (s)", func(s *results.Summary) string { return fmt.Sprintf("%.1f", s.MeasuredSeconds) }),
		c.text("complete", func(s *results.Summary) string {
			if s.Incomplete {
				return "no: " + s.IncompleteReason
			}
			return "yes"
		}),
		c.text("outcome", func(s *results.Summary) string { return string(s.Verdict().Kind) }),
	)
	return sec
}

// faultSection shows, fault by fault (matched by position: the same seed injects the same schedule), how
// each fault ended; the write gaps are figures of the effects.
func (c *Comparison) faultSection() CompareSection {
	sec := CompareSection{Title: "Faults",
		Note: "How each fault ended, matched by position (the same seed injects the same schedule); their write gaps are among the effects."}
	n := 0
	for _, v := range c.Variants {
		for _, s := range v.summaries() {
			n = max(n, len(s.Faults))
		}
	}
	for f := range n {
		name := ""
		for _, v := range c.Variants {
			for _, s := range v.summaries() {
				if f < len(s.Faults) && name == "" {
					w := s.Faults[f]
					name = fmt.Sprintf("%d. %s", f+1, w.Fault)
					if len(w.Targets) > 0 {
						name += " " + strings.Join(w.Targets, ",")
					}
				}
			}
		}
		sec.Rows = append(sec.Rows, c.text(name, func(s *results.Summary) string {
			if f < len(s.Faults) {
				return s.Faults[f].Outcome
			}
			return ""
		}))
	}
	return sec
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
	sec.Rows = append(sec.Rows, c.text("harness errors", func(s *results.Summary) string { return fmt.Sprint(len(s.Errors)) }))
	return sec
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
	if len(c.Effects.Variants) > 0 {
		b.WriteString("### Effects\n\n")
		if err := c.Effects.WriteMarkdown(&b); err != nil {
			return err
		}
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
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(c.Effects.Variants) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	return c.Effects.WriteText(w)
}

// WriteFiles writes compare.md and compare.json into dir; both lead with the comparison's outcome.
func (c *Comparison) WriteFiles(dir string) error {
	var md strings.Builder
	o := c.Verdict()
	fmt.Fprintf(&md, "# Comparison: **%s** — outcome: %s (exit code %d)\n\n", o.Headline(), o.Kind, o.ExitCode())
	for _, r := range o.Reasons {
		fmt.Fprintf(&md, "- %s: %s\n", r.Kind, mdEscape(r.Text))
	}
	if len(o.Reasons) > 0 {
		md.WriteString("\n")
	}
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
	for i, r := range c.Rounds {
		fmt.Fprintf(&md, "\nRound %d: seed %d, order %s", i+1, r.Seed, mdEscape(strings.Join(r.Order, ", ")))
	}
	if c.Stopped != "" {
		fmt.Fprintf(&md, "\n\nRounds: %s", mdEscape(c.Stopped))
	}
	md.WriteString("\n\nΔ columns say whether each variant's runs were described alike; the effects compare every figure with the first variant.\n\n")
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

// ComparisonHTML is the comparison's page: the effects, each operation's percentile distributions
// overlaid and throughput over time (report.WriteComparisonHTML, as `chaosbench report A B` writes it).
const ComparisonHTML = "compare.html"

// WriteHTML writes compare.html into dir from the runs that wrote a summary, headed by the comparison's
// outcome (which also counts the runs that wrote none); a variant without any run has no page (nothing to
// draw), and nothing is written.
func (c *Comparison) WriteHTML(dir string, opts compare.Options) error {
	var variants [][]*report.Run
	for _, v := range c.Variants {
		var rounds []*report.Run
		for _, r := range v.Runs {
			if r.Summary == nil {
				continue
			}
			run, err := report.Load(r.Dir)
			if err != nil {
				return fmt.Errorf("comparison page: %w", err)
			}
			run.Label = v.Label
			rounds = append(rounds, run)
		}
		if len(rounds) == 0 {
			return nil
		}
		variants = append(variants, rounds)
	}
	rc, _ := report.Compare(variants, opts) // the gate was checked when the comparison was decided
	rc.Outcome = c.Verdict()
	var buf bytes.Buffer
	if err := report.WriteComparisonHTML(&buf, rc); err != nil {
		return fmt.Errorf("comparison page: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ComparisonHTML), buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("comparison page: %w", err)
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

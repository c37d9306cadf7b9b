package report

import (
	"bufio"
	"errors"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/compare"
)

// Files a comparison writes.
const (
	ComparisonMarkdownFile = "comparison.md"
	ComparisonHTMLFile     = "comparison.html"
)

// Labelled names a run directory in a comparison; Rounds are the variant's further rounds (run
// directories of the same variant, paired by position with the other variants' rounds).
type Labelled struct {
	Dir    string
	Label  string
	Rounds []string
}

// Comparison compares variants against the first (the baseline). Its figures (Effects) come from the one
// comparison engine, results/compare, that `chaosbench compare` uses too, and so does its outcome: every
// run's own, with the gate's (compare.Decide).
type Comparison struct {
	// Outcome is the comparison's verdict: its headline, and the exit code of `chaosbench report A B`.
	Outcome outcome.Outcome
	// Runs holds each variant's first run (charts, whole-run rows); Rounds every run of each variant.
	Runs   []*Run
	Rounds [][]*Run
	// Effects are each variant's effects against the baseline, with intervals and verdicts.
	Effects compare.Result
	// Rows shows whole-run facts side by side: etcd, flags, late starts, consistency and threshold
	// verdicts (of the first round).
	Rows []Row
}

// Row is a whole-run figure shown side by side, already formatted.
type Row struct {
	Name   string
	Values []string
}

// RenderComparison loads the run directories, compares and decides them, and writes comparison.md and
// comparison.html into outDir. It is the renderer behind `chaosbench report A B`. A gate naming a figure
// the runs lack is a usage error, and nothing is written.
func RenderComparison(outDir string, runs []Labelled, opts compare.Options) (*Comparison, error) {
	var variants [][]*Run
	for _, l := range runs {
		if l.Label == "" && len(l.Rounds) > 0 {
			// Rounds are usually round-1, round-2, ... of one variant's directory: name them by it.
			if parent := filepath.Dir(filepath.Clean(l.Dir)); parent == filepath.Dir(filepath.Clean(l.Rounds[0])) {
				l.Label = filepath.Base(parent)
			}
		}
		var rounds []*Run
		for _, dir := range append([]string{l.Dir}, l.Rounds...) {
			r, err := Load(dir)
			if err != nil {
				return nil, err
			}
			if l.Label != "" {
				r.Label = l.Label
			}
			rounds = append(rounds, r)
		}
		variants = append(variants, rounds)
	}
	c, err := Compare(variants, opts)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("comparison: %w", err)
	}
	err = errors.Join(
		writeFile(filepath.Join(outDir, ComparisonMarkdownFile), func(w io.Writer) error { return WriteComparisonMarkdown(w, c) }),
		writeFile(filepath.Join(outDir, ComparisonHTMLFile), func(w io.Writer) error { return WriteComparisonHTML(w, c) }),
	)
	return c, err
}

// Compare compares variants, each given as its runs (one per round), the first variant being the baseline,
// and decides the comparison (compare.Decide): a gate naming a figure the runs lack is a usage error.
func Compare(variants [][]*Run, opts compare.Options) (*Comparison, error) {
	c := &Comparison{Rounds: variants}
	var cv []compare.Variant
	seen := map[string]bool{}
	for _, rounds := range variants {
		// Labels name the variants in every table: two runs of the same name become "x" and "x (2)".
		label := rounds[0].Label
		for i := 2; seen[label]; i++ {
			label = fmt.Sprintf("%s (%d)", rounds[0].Label, i)
		}
		seen[label] = true
		for _, r := range rounds {
			r.Label = label
		}
		v := compare.Variant{Label: label}
		for _, r := range rounds {
			v.Runs = append(v.Runs, compare.Run{Summary: r.Summary, Series: r.Series})
		}
		cv = append(cv, v)
		c.Runs = append(c.Runs, rounds[0])
	}
	c.Effects = compare.Runs(cv, opts)
	c.Rows = wholeRunRows(c.Runs)
	o, err := compare.Decide(cv, c.Effects)
	c.Outcome = o
	return c, err
}

func wholeRunRows(runs []*Run) []Row {
	row := func(name string, f func(*Run) string) Row {
		r := Row{Name: name}
		for _, run := range runs {
			r.Values = append(r.Values, f(run))
		}
		return r
	}
	rows := []Row{
		row("etcd server", func(r *Run) string { return r.Summary.Versions.EtcdServer }),
		row("etcd flags", func(r *Run) string { return strings.Join(r.Summary.Cluster.EtcdFlags, " ") }),
		row("seed", func(r *Run) string { return fmt.Sprint(r.Summary.Seed) }),
		row("late starts", func(r *Run) string { return fmt.Sprintf("%.2f%%", r.Summary.Schedule.MissedPercent) }),
	}
	rows = append(rows,
		row("outcome", func(r *Run) string { return string(r.Summary.Verdict().Kind) }),
		row("consistency", func(r *Run) string {
			if len(r.Summary.Checks) == 0 {
				return "not checked"
			}
			var parts []string
			for _, c := range r.Summary.Checks {
				parts = append(parts, c.Name+" "+c.Verdict)
			}
			return strings.Join(parts, ", ")
		}),
		row("thresholds", func(r *Run) string {
			if len(r.Thresholds) == 0 {
				return "none"
			}
			return fmt.Sprintf("%d of %d failed", results.FailedThresholds(r.Thresholds), len(r.Thresholds))
		}),
	)
	return rows
}

// WriteComparisonMarkdown writes the comparison as Markdown tables.
func WriteComparisonMarkdown(w io.Writer, c *Comparison) error {
	b := bufio.NewWriter(w)
	labels := make([]string, len(c.Runs))
	for i, r := range c.Runs {
		labels[i] = r.Label
	}
	o := c.Outcome
	fmt.Fprintf(b, "# chaosbench comparison: **%s** — outcome: %s (exit code %d)\n\n%s\n\n", o.Headline(), o.Kind, o.ExitCode(), strings.Join(labels, " vs "))
	for _, r := range o.Reasons {
		fmt.Fprintf(b, "- %s: %s\n", r.Kind, mdEscape(r.Text))
	}
	if len(o.Reasons) > 0 {
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "## Effects\n\n")
	if err := c.Effects.WriteMarkdown(b); err != nil {
		return err
	}
	fmt.Fprintf(b, "\n## Whole run\n\n")
	table(b, append([]string{""}, labels...), func(row func(...string)) {
		for _, r := range c.Rows {
			row(append([]string{r.Name}, r.Values...)...)
		}
	})
	fmt.Fprintf(b, "\nRun directories:\n\n")
	for _, rounds := range c.Rounds {
		for _, r := range rounds {
			fmt.Fprintf(b, "- %s: `%s`\n", r.Label, r.Dir)
		}
	}
	return b.Flush()
}

type comparisonPage struct {
	Title    string
	Headline string
	Class    string
	Kind     string
	Code     int
	Reasons  []outcome.Reason
	Legend   string
	Labels   []string
	Effects  []compareBlockView
	Notes    []string
	Machines []string
	Rows     []Row
	Charts   []template.HTML
	Dirs     []kv
}

type compareBlockView struct {
	Title  string
	Header []string
	Rows   []compareRowView
}

type compareRowView struct {
	Cells []string
	Class string
}

// WriteComparisonHTML writes the comparison as a self-contained page: the effects, each operation's
// percentile distributions overlaid, and throughput over time.
func WriteComparisonHTML(w io.Writer, c *Comparison) error {
	o := c.Outcome
	pg := comparisonPage{Rows: c.Rows, Legend: c.Effects.Legend(), Notes: c.Effects.Notes(), Machines: c.Effects.Machines,
		Headline: o.Headline(), Class: o.Class(), Kind: string(o.Kind), Code: o.ExitCode(), Reasons: o.Reasons}
	for _, rounds := range c.Rounds {
		for _, r := range rounds {
			pg.Dirs = append(pg.Dirs, kv{r.Label, r.Dir})
		}
	}
	for _, r := range c.Runs {
		pg.Labels = append(pg.Labels, r.Label)
	}
	pg.Title = strings.Join(pg.Labels, " vs ")
	for _, b := range c.Effects.Blocks() {
		bv := compareBlockView{Title: b.Title, Header: b.Header}
		for _, row := range b.Rows {
			rv := compareRowView{Cells: row.Cells, Class: gateClass(row)}
			bv.Rows = append(bv.Rows, rv)
		}
		pg.Effects = append(pg.Effects, bv)
	}
	seen := map[string]bool{}
	for _, r := range c.Runs {
		for _, op := range r.OperationNames() {
			if seen[op] || len(pg.Charts) >= 2*maxLatencyCharts {
				continue
			}
			seen[op] = true
			ch := newChart(op+": percentile distribution of response time", "percentile", "latency (log)", true)
			ch.p.X.Scale = plot.LogScale{}
			ch.p.X.Tick.Marker = percentileTicks{}
			for i, r := range c.Runs {
				if h := r.response(op); h != nil {
					ch.line(r.Label, distribution(h), 1.5, nil, paletteColor(i))
				}
			}
			ch.p.X.Min = 1
			if svg := ch.svg(chartWidth, chartHeight); svg != "" {
				pg.Charts = append(pg.Charts, svg)
			}
		}
	}
	tp := newChart("Total throughput per second", timeAxis, "operations per second", false)
	for i, r := range c.Runs {
		byT := map[float64]float64{}
		for _, row := range withFullIntervals(r).Series {
			byT[row.T] += row.Throughput
		}
		tp.line(r.Label, sortedPoints(byT), 1.3, nil, paletteColor(i))
	}
	if svg := tp.svg(chartWidth, chartHeight); svg != "" {
		pg.Charts = append(pg.Charts, svg)
	}
	return comparisonTemplate().Execute(w, pg)
}

// gateClass colours a figure's verdict only when the gate watches it: a gated regression fails, a gated
// undecided figure warns, a gated pass is ok; an informational figure is never shown as passing or failing.
func gateClass(row compare.BlockRow) string {
	if !row.Gated {
		return ""
	}
	switch row.Verdict {
	case compare.Worse:
		return "fail"
	case compare.Undecided:
		return "warn"
	}
	return "ok"
}

// comparisonTemplate returns the comparison page.
func comparisonTemplate() *template.Template {
	return template.Must(template.New("comparison").Parse(comparisonHTML + headTemplate + cssTemplate + scriptTemplate))
}

// comparisonHTML is the comparison's page; it leads with the outcome, as every page does.
const comparisonHTML = `<!DOCTYPE html>
<html lang="en">
<head>
{{template "meta"}}<title>chaosbench comparison: {{.Headline}} ({{.Kind}}): {{.Title}}</title>
{{template "errors"}}<style>
{{template "css"}}</style>
</head>
<body>
<header>
<h1><span class="badge {{.Class}}">{{.Headline}}</span>chaosbench comparison: {{.Title}}</h1>
<div class="headline">outcome: {{.Kind}} (exit code {{.Code}}).{{if .Reasons}}<ul class="findings">{{range .Reasons}}<li>{{.Kind}}: {{.Text}}</li>{{end}}</ul>{{end}}</div>
<div class="headline">Baseline: {{index .Labels 0}}. {{.Legend}}</div>
</header>
<main>
{{- if .Machines}}
<div class="wrap fail">{{range .Machines}}{{.}}<br>{{end}}</div>
{{- end}}
<h2>Effects</h2>
{{- range .Effects}}
<h3>{{.Title}}</h3>
<table><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{- range .Rows}}{{$cls := .Class}}
<tr>{{range $i, $c := .Cells}}{{if eq $i 0}}<td class="l">{{$c}}</td>{{else if or (eq $i 4) (eq $i 6)}}<td class="{{$cls}}">{{$c}}</td>{{else}}<td>{{$c}}</td>{{end}}{{end}}</tr>
{{- end}}
</table>
{{- end}}
{{- if .Notes}}
<ul>{{range .Notes}}<li>{{.}}</li>{{end}}</ul>
{{- end}}
<h2>Whole run</h2>
<table><tr><th></th>{{range .Labels}}<th>{{.}}</th>{{end}}</tr>
{{- range .Rows}}
<tr><td>{{.Name}}</td>{{range .Values}}<td class="wrap">{{.}}</td>{{end}}</tr>
{{- end}}
</table>
<h2>Charts</h2>
<div class="charts">
{{- range .Charts}}<figure>{{.}}</figure>{{end}}
</div>
<h2>Runs</h2>
<table>{{range .Dirs}}<tr><td>{{.Key}}</td><td class="l"><code>{{.Value}}</code></td></tr>{{end}}</table>
</main>
{{template "script"}}
</body>
</html>
`

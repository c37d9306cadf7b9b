package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results/compare"
	"github.com/etcd-chaosbench/chaosbench/results/trend"
)

// Files a trend writes into its output directory.
const (
	TrendMarkdownFile = "trend.md"
	TrendHTMLFile     = "trend.html"
)

// WriteTrend writes trend.json, trend.md and trend.html into dir.
func WriteTrend(dir string, t *trend.Trend) error {
	return errors.Join(
		writeFile(filepath.Join(dir, trend.File), func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(t)
		}),
		writeFile(filepath.Join(dir, TrendMarkdownFile), func(w io.Writer) error { return WriteTrendMarkdown(w, t) }),
		writeFile(filepath.Join(dir, TrendHTMLFile), func(w io.Writer) error { return WriteTrendHTML(w, t) }),
	)
}

// trendTable is one scenario's nights laid out as rows of cells: what ran (versions, seed), the verdicts,
// then every figure, one column per night and the latest night's call against the previous ones. The
// Markdown and HTML pages both show these cells and nothing else.
type trendTable struct {
	Name     string
	Header   []string
	Rows     []trendRow
	Badge    string // the scenario's part of the outcome: PASS, FAIL, UNDECIDED, ...
	Headline string // the scenario's line: its regressions, or that there are none
	Failing  string // "failing since ..." or ""
	Class    string // ok, fail or warn
	Charts   []template.HTML
}

// trendRow is one row of a trend table; Class marks the latest call (fail: worse, ok: better) and Changed
// marks, per night, a value that differs from the night before (a new version).
type trendRow struct {
	Cells   []string
	Class   string
	Changed []bool
}

// trendTables lays out every scenario of t.
func trendTables(t *trend.Trend) []trendTable {
	var out []trendTable
	for _, sc := range t.Scenarios {
		out = append(out, scenarioTable(t, sc))
	}
	return out
}

func scenarioTable(t *trend.Trend, sc *trend.Scenario) trendTable {
	tt := trendTable{Name: sc.Name, Header: []string{"figure"}}
	for _, n := range t.Nights {
		tt.Header = append(tt.Header, n.Label)
	}
	tt.Header = append(tt.Header, "latest against "+sc.Latest.Baseline, "verdict", "gate")
	text := func(name string, get func(trend.Run) string) {
		row := trendRow{Cells: []string{name}}
		prev := ""
		for i, r := range sc.Runs {
			v := "-"
			if !r.Missing {
				v = get(r)
			}
			row.Cells = append(row.Cells, v)
			row.Changed = append(row.Changed, i > 0 && v != "-" && prev != "" && v != prev)
			if v != "-" {
				prev = v
			}
		}
		row.Cells = append(row.Cells, "", "", "")
		row.Changed = append([]bool{false}, append(row.Changed, false, false, false)...)
		tt.Rows = append(tt.Rows, row)
	}
	text("chaosbench", func(r trend.Run) string { return r.Chaosbench })
	text("etcd", func(r trend.Run) string { return r.Etcd })
	text("seed", func(r trend.Run) string { return fmt.Sprint(r.Seed) })
	text("outcome", func(r trend.Run) string { return string(r.Outcome) })
	var checks []string
	for _, r := range sc.Runs {
		for name := range r.Checks {
			if !slices.Contains(checks, name) {
				checks = append(checks, name)
			}
		}
	}
	sort.Strings(checks)
	for _, name := range checks {
		text("check: "+name, func(r trend.Run) string {
			if v, ok := r.Checks[name]; ok {
				return v
			}
			return "-"
		})
	}
	effects := map[string]compare.Effect{}
	for _, v := range sc.Latest.Variants {
		for _, e := range v.Effects {
			effects[e.Metric.ID] = e
		}
	}
	for _, m := range sc.Metrics {
		name := m.ID
		if m.Label != "" {
			name += " (" + m.Label + ")"
		}
		if m.Unit != "" {
			name += ", " + m.Unit
		}
		row := trendRow{Cells: []string{name}}
		for _, r := range sc.Runs {
			v, ok := r.Figures[m.ID]
			if !ok {
				v = math.NaN()
			}
			row.Cells = append(row.Cells, compare.FormatValue(v, m.Unit))
		}
		e := effects[m.ID]
		row.Cells = append(row.Cells, e.ChangeText(), e.VerdictText(), e.GateRole())
		// Only a gated figure is coloured as passing or failing: the others are informational.
		if e.Gated {
			switch e.Verdict {
			case compare.Worse:
				row.Class = "fail"
			case compare.Undecided:
				row.Class = "warn"
			default:
				row.Class = "ok"
			}
		}
		tt.Rows = append(tt.Rows, row)
	}
	o := scenarioOutcome(t, sc)
	tt.Badge, tt.Class = o.Headline(), o.Class()
	tt.Headline = "no regression beyond the previous nights' noise"
	if rs := regressions(sc); len(rs) > 0 {
		tt.Headline = "regression: " + strings.Join(rs, "; ")
	}
	if len(o.Reasons) > 0 {
		tt.Headline += "; outcome " + string(o.Kind) + ": " + strings.Join(o.Texts(), "; ")
	}
	if sc.FailingSince != "" {
		tt.Failing = "not ok since " + sc.FailingSince
	}
	return tt
}

// regressions are the figures the latest night is worse on, each marked informational unless the gate
// watches it: only a gated regression is part of the outcome.
func regressions(sc *trend.Scenario) []string {
	var out []string
	for _, v := range sc.Latest.Variants {
		for _, e := range v.Effects {
			if e.Verdict != compare.Worse {
				continue
			}
			r := e.Metric.ID + " " + e.ChangeText()
			if !e.Gated {
				r += " (informational)"
			}
			out = append(out, r)
		}
	}
	return out
}

// scenarioOutcome is the scenario's part of the trend's outcome: its run in the latest night and the
// gate's call on its figures, decided as Trend.Decide decides the whole.
func scenarioOutcome(t *trend.Trend, sc *trend.Scenario) outcome.Outcome {
	var parts []outcome.Part
	if latest := len(t.Nights) - 1; latest >= 0 && latest < len(sc.Runs) && !sc.Runs[latest].Missing {
		r := sc.Runs[latest]
		parts = append(parts, outcome.Part{Outcome: outcome.Outcome{Kind: r.Outcome, Reasons: r.Reasons}})
	}
	return outcome.Combine(parts, sc.Latest.GateReasons("")...)
}

// nightCounts is a night's outcomes counted by kind, most severe first ("1 violation, 4 ok"), and the known
// issues it met ("etcd-io/etcd#18424 ×2").
func nightCounts(n trend.Night) (outcomes, known string) {
	kinds := outcome.Kinds()
	slices.Reverse(kinds)
	var parts []string
	for _, k := range kinds {
		if c := n.Outcomes[k]; c > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c, k))
		}
	}
	var ks []string
	for _, issue := range slices.Sorted(maps.Keys(n.KnownIssues)) {
		ks = append(ks, fmt.Sprintf("%s ×%d", issue, n.KnownIssues[issue]))
	}
	if len(parts) == 0 {
		parts = []string{"-"}
	}
	if len(ks) == 0 {
		ks = []string{"-"}
	}
	return strings.Join(parts, ", "), strings.Join(ks, ", ")
}

// trendVerdict is the trend's headline: its outcome (the one word and its kind, as every report leads
// with), then how many scenarios regressed or are not ok, and whether the regressions are gated.
func trendVerdict(t *trend.Trend) (word, headline, class string) {
	o := t.Verdict()
	var regressed, failing []string
	for _, sc := range t.Scenarios {
		if rs := regressions(sc); len(rs) > 0 {
			name := sc.Name
			if !slices.ContainsFunc(rs, func(r string) bool { return !strings.HasSuffix(r, " (informational)") }) {
				name += " (informational)"
			}
			regressed = append(regressed, name)
		}
		if sc.FailingSince != "" {
			failing = append(failing, sc.Name)
		}
	}
	parts := []string{fmt.Sprintf("outcome %s (exit code %d)", o.Kind, o.ExitCode())}
	if len(regressed) > 0 {
		parts = append(parts, fmt.Sprintf("regression in %s", strings.Join(regressed, ", ")))
	}
	if len(failing) > 0 {
		parts = append(parts, fmt.Sprintf("not ok: %s", strings.Join(failing, ", ")))
	}
	if len(regressed)+len(failing) == 0 {
		parts = append(parts, fmt.Sprintf("no regression: %s over %s", plural(int64(len(t.Scenarios)), "scenario"), plural(int64(len(t.Nights)), "night")))
	}
	return o.Headline(), strings.Join(parts, "; "), o.Class()
}

// WriteTrendMarkdown writes trend.md: the verdict, then per scenario its table of nights.
func WriteTrendMarkdown(w io.Writer, t *trend.Trend) error {
	var b strings.Builder
	word, headline, _ := trendVerdict(t)
	fmt.Fprintf(&b, "# chaosbench trend: **%s** — %s\n\n", word, headline)
	for _, r := range t.Reasons {
		fmt.Fprintf(&b, "- %s: %s\n", r.Kind, mdEscape(r.Text))
	}
	if len(t.Reasons) > 0 {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "%d nights from %s to %s. The outcome is the latest night's runs' own and the gate's. The latest night of each scenario is judged against the nights before it: "+
		"worse or better when it lies beyond their 95%% prediction interval (Student's t, Holm-adjusted over the scenario's figures) "+
		"by more than %.3g%%. %s A value in **bold** differs from the night before.\n",
		len(t.Nights), t.Nights[0].Label, t.Nights[len(t.Nights)-1].Label, 100*t.MinEffect, gateText(t))
	b.WriteString("\n| night | outcome | scenarios by outcome | known issues |\n| --- | --- | --- | --- |\n")
	for _, n := range t.Nights {
		outcomes, known := nightCounts(n)
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", n.Label, n.Outcome, outcomes, known)
	}
	for _, tt := range trendTables(t) {
		fmt.Fprintf(&b, "\n## %s: %s\n\n%s", tt.Name, tt.Badge, tt.Headline)
		if tt.Failing != "" {
			fmt.Fprintf(&b, "; %s", tt.Failing)
		}
		b.WriteString("\n\n| " + strings.Join(tt.Header, " | ") + " |\n|")
		for range tt.Header {
			b.WriteString(" --- |")
		}
		b.WriteString("\n")
		for _, r := range tt.Rows {
			cells := make([]string, len(r.Cells))
			for i, c := range r.Cells {
				cells[i] = mdEscape(c)
				if i < len(r.Changed) && r.Changed[i] {
					cells[i] = "**" + cells[i] + "**"
				}
			}
			if r.Class == "fail" {
				cells[len(cells)-1] = "**" + cells[len(cells)-1] + "**"
			}
			b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteTrendHTML writes trend.html: the Markdown's tables, and per scenario a chart of each operation's
// p99 night by night.
func WriteTrendHTML(w io.Writer, t *trend.Trend) error {
	word, headline, class := trendVerdict(t)
	tables := trendTables(t)
	for i, sc := range t.Scenarios {
		tables[i].Charts = trendCharts(t, sc)
	}
	var nights [][]string
	for _, n := range t.Nights {
		outcomes, known := nightCounts(n)
		nights = append(nights, []string{n.Label, string(n.Outcome), outcomes, known})
	}
	return trendTemplate.Execute(w, struct {
		Word, Headline, Class, Gate string
		Reasons                     []outcome.Reason
		Nights                      [][]string
		Tables                      []trendTable
	}{word, headline, class, gateText(t), t.Reasons, nights, tables})
}

// gateText says which figures decide the outcome.
func gateText(t *trend.Trend) string {
	if t.Gate == nil {
		return "No figure is gated (--fail-on-regression): the calls on figures are informational."
	}
	return fmt.Sprintf("Gated figures (--fail-on-regression=%s) decide the outcome with the runs': worse fails it, undecided leaves it undecided; the other figures are informational.", t.Gate)
}

// trendCharts draws, for a scenario, the p50 and p99 of every operation night by night (log scale).
func trendCharts(t *trend.Trend, sc *trend.Scenario) []template.HTML {
	ops := map[string]bool{}
	var names []string
	for _, m := range sc.Metrics {
		op, stat, ok := strings.Cut(m.ID, ":")
		if !ok || (stat != "p99" && stat != "p50") || strings.HasPrefix(op, "etcd") || strings.HasPrefix(op, "fault") {
			continue
		}
		if !ops[op] {
			ops[op] = true
			names = append(names, op)
		}
	}
	var out []template.HTML
	for _, stat := range []string{"p50", "p99"} {
		c := newChart(fmt.Sprintf("%s of %s per night", stat, sc.Name), "night", "ms", true)
		for _, op := range names {
			var pts []point
			for i, r := range sc.Runs {
				v, ok := r.Figures[op+":"+stat]
				if !ok {
					v = math.NaN()
				}
				pts = append(pts, point{float64(i + 1), v})
			}
			c.line(op, pts, 1.2, nil, nil)
		}
		if svg := c.svg(560, 260); svg != "" {
			out = append(out, svg)
		}
	}
	return out
}

var trendTemplate = template.Must(template.New("trend").Funcs(template.FuncMap{
	"changed": func(r trendRow, i int) bool { return i < len(r.Changed) && r.Changed[i] },
	"last":    func(r trendRow, i int) bool { return i == len(r.Cells)-1 },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
{{template "meta"}}<title>chaosbench trend: {{.Word}}: {{.Headline}}</title>
{{template "errors"}}<style>
{{template "css"}}
td.changed { font-weight: 700; background: #fff8c5; }
</style>
</head>
<body>
<header><h1><span class="badge {{.Class}}">{{.Word}}</span>chaosbench trend</h1>
<div class="headline">{{.Headline}} ({{len .Nights}} nights).{{if .Reasons}}<ul class="findings">{{range .Reasons}}<li>{{.Kind}}: {{.Text}}</li>{{end}}</ul>{{end}}
The latest night of each scenario is judged against the nights before it with the comparison engine's prediction interval; highlighted values differ from the night before. {{.Gate}}</div></header>
<nav>{{range .Tables}}<a href="#{{.Name}}">{{.Name}}</a>{{end}}</nav>
<main>
<h2>Nights</h2>
<table><tr><th>night</th><th>outcome</th><th>scenarios by outcome</th><th>known issues</th></tr>
{{range .Nights}}<tr>{{range .}}<td class="l">{{.}}</td>{{end}}</tr>
{{end}}</table>
{{range .Tables}}
<h2 id="{{.Name}}"><span class="badge {{.Class}}">{{.Badge}}</span>{{.Name}}</h2>
<p>{{.Headline}}{{if .Failing}}; {{.Failing}}{{end}}</p>
<table>
<tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range $r := .Rows}}<tr>{{range $i, $c := $r.Cells}}<td class="{{if changed $r $i}}changed{{end}}{{if and (last $r $i) $r.Class}} {{$r.Class}}{{end}}">{{$c}}</td>{{end}}</tr>
{{end}}</table>
{{if .Charts}}<div class="charts">{{range .Charts}}<figure>{{.}}</figure>{{end}}</div>{{end}}
{{end}}
</main>
{{template "script"}}
</body>
</html>
` + headTemplate + cssTemplate + scriptTemplate))

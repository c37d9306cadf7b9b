package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"

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
	tt.Header = append(tt.Header, "latest against "+sc.Latest.Baseline, "verdict")
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
		row.Cells = append(row.Cells, "", "")
		row.Changed = append([]bool{false}, append(row.Changed, false, false)...)
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
		row.Cells = append(row.Cells, e.ChangeText(), e.VerdictText())
		switch e.Verdict {
		case compare.Worse:
			row.Class = "fail"
		case compare.Better:
			row.Class = "ok"
		}
		tt.Rows = append(tt.Rows, row)
	}
	tt.Class, tt.Headline = "ok", "no regression beyond the previous nights' noise"
	if len(sc.Regressions) > 0 {
		tt.Class = "fail"
		tt.Headline = "regression: " + strings.Join(sc.Regressions, "; ")
	}
	if sc.FailingSince != "" {
		tt.Class = "fail"
		tt.Failing = "not ok since " + sc.FailingSince
	}
	return tt
}

// trendVerdict is the trend's headline: how many scenarios regressed or are failing.
func trendVerdict(t *trend.Trend) (headline, class string) {
	var regressed, failing []string
	for _, sc := range t.Scenarios {
		if len(sc.Regressions) > 0 {
			regressed = append(regressed, sc.Name)
		}
		if sc.FailingSince != "" {
			failing = append(failing, sc.Name)
		}
	}
	var parts []string
	if len(regressed) > 0 {
		parts = append(parts, fmt.Sprintf("regression in %s", strings.Join(regressed, ", ")))
	}
	if len(failing) > 0 {
		parts = append(parts, fmt.Sprintf("not ok: %s", strings.Join(failing, ", ")))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("no regression: %s over %s", plural(int64(len(t.Scenarios)), "scenario"), plural(int64(len(t.Nights)), "night")), "ok"
	}
	return strings.Join(parts, "; "), "fail"
}

// WriteTrendMarkdown writes trend.md: the verdict, then per scenario its table of nights.
func WriteTrendMarkdown(w io.Writer, t *trend.Trend) error {
	var b strings.Builder
	headline, _ := trendVerdict(t)
	fmt.Fprintf(&b, "# chaosbench trend: %s\n\n", headline)
	fmt.Fprintf(&b, "%d nights from %s to %s. The latest night of each scenario is judged against the nights before it: "+
		"worse or better when it lies beyond their 95%% prediction interval (Student's t, Holm-adjusted over the scenario's figures) "+
		"by more than %.3g%%. A value in **bold** differs from the night before.\n",
		len(t.Nights), t.Nights[0].Label, t.Nights[len(t.Nights)-1].Label, 100*t.MinEffect)
	for _, tt := range trendTables(t) {
		fmt.Fprintf(&b, "\n## %s\n\n%s", tt.Name, tt.Headline)
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
	headline, class := trendVerdict(t)
	tables := trendTables(t)
	for i, sc := range t.Scenarios {
		tables[i].Charts = trendCharts(t, sc)
	}
	return trendTemplate.Execute(w, struct {
		Headline, Class string
		Nights          int
		Tables          []trendTable
	}{headline, class, len(t.Nights), tables})
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
{{template "meta"}}<title>chaosbench trend: {{.Headline}}</title>
{{template "errors"}}<style>
{{template "css"}}
td.changed { font-weight: 700; background: #fff8c5; }
</style>
</head>
<body>
<header><h1><span class="badge {{.Class}}">{{if eq .Class "ok"}}OK{{else}}REGRESSION{{end}}</span>chaosbench trend</h1>
<div class="headline">{{.Headline}} ({{.Nights}} nights). The latest night of each scenario is judged against the nights before it with the comparison engine's prediction interval; highlighted values differ from the night before.</div></header>
<nav>{{range .Tables}}<a href="#{{.Name}}">{{.Name}}</a>{{end}}</nav>
<main>
{{range .Tables}}
<h2 id="{{.Name}}"><span class="badge {{.Class}}">{{if eq .Class "ok"}}OK{{else}}FAIL{{end}}</span>{{.Name}}</h2>
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

package report

import (
	"bufio"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// Files a comparison writes.
const (
	ComparisonMarkdownFile = "comparison.md"
	ComparisonHTMLFile     = "comparison.html"
)

// How noise is estimated. A run's figure (say put p99) comes from one run of one length; run it again and it
// moves. The per-second interval histograms of latency.hlog let us see how much without running again:
// split the measured intervals into consecutive batches, take the figure of each batch (its merged
// histogram's percentile, or its throughput), and the spread of the batch figures, divided by the square root
// of the batch count, estimates the standard error of the whole run's figure (the method of batch means;
// batches of several seconds absorb most of the correlation between neighbouring seconds). A difference
// between two runs is significant when it exceeds twice the combined standard error (about 95% confidence
// for roughly normal batch figures). With fewer than minBatches batches the noise is unknown and no
// difference is called significant; maxima have no such estimate and are never called significant.
const (
	minBatches = 4
	maxBatches = 10
)

// Labelled names a run directory in a comparison.
type Labelled struct {
	Dir   string
	Label string
}

// Comparison compares runs against the first (the baseline).
type Comparison struct {
	Runs []*Run
	// Ops lists the operations of the baseline, then those only other runs have.
	Ops []OpComparison
	// Rows compares whole-run figures: total throughput, errors, etcd's own metrics, availability,
	// consistency and threshold verdicts.
	Rows []Row
}

// OpComparison compares one operation's figures.
type OpComparison struct {
	Op    string
	Stats []StatComparison
}

// StatComparison is one figure across the runs. Values, Noise (standard errors, NaN when unknown) and
// Change (relative to the baseline, in percent) have one entry per run; Verdict says, per run, "better",
// "worse", "same" (within noise) or "" (baseline, no data, or noise unknown).
type StatComparison struct {
	Stat    string
	Unit    string
	Values  []float64
	Noise   []float64
	Change  []float64
	Verdict []string
}

// Row is a whole-run figure shown side by side, already formatted.
type Row struct {
	Name   string
	Values []string
}

// RenderComparison loads the run directories, compares them and writes comparison.md and comparison.html
// into outDir. It is the renderer behind `chaosbench report A B` and `chaosbench compare`.
func RenderComparison(outDir string, runs []Labelled) (*Comparison, error) {
	var loaded []*Run
	for _, l := range runs {
		r, err := Load(l.Dir)
		if err != nil {
			return nil, err
		}
		if l.Label != "" {
			r.Label = l.Label
		}
		loaded = append(loaded, r)
	}
	c := Compare(loaded)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("comparison: %w", err)
	}
	err := errors.Join(
		writeFile(filepath.Join(outDir, ComparisonMarkdownFile), func(w io.Writer) error { return WriteComparisonMarkdown(w, c) }),
		writeFile(filepath.Join(outDir, ComparisonHTMLFile), func(w io.Writer) error { return WriteComparisonHTML(w, c) }),
	)
	return c, err
}

// Compare compares runs, the first being the baseline.
func Compare(runs []*Run) *Comparison {
	c := &Comparison{Runs: runs}
	seen := map[string]bool{}
	var ops []string
	for _, r := range runs {
		for _, name := range r.OperationNames() {
			if !seen[name] {
				seen[name] = true
				ops = append(ops, name)
			}
		}
	}
	for _, op := range ops {
		oc := OpComparison{Op: op}
		oc.Stats = append(oc.Stats, compareStat(runs, "throughput", unitOps, true, func(r *Run) (float64, float64) {
			o := r.Summary.Operations[op]
			if o == nil {
				return math.NaN(), math.NaN()
			}
			return o.Throughput, throughputNoise(r.Latencies[op])
		}))
		for _, p := range []struct {
			name string
			q    float64
			get  func(results.Latency) float64
		}{
			{"p50", 50, func(l results.Latency) float64 { return l.P50 }},
			{"p90", 90, func(l results.Latency) float64 { return l.P90 }},
			{"p99", 99, func(l results.Latency) float64 { return l.P99 }},
			{"p99.9", 99.9, func(l results.Latency) float64 { return l.P999 }},
			{"max", -1, func(l results.Latency) float64 { return l.Max }},
		} {
			oc.Stats = append(oc.Stats, compareStat(runs, p.name, unitMs, false, func(r *Run) (float64, float64) {
				o := r.Summary.Operations[op]
				if o == nil {
					return math.NaN(), math.NaN()
				}
				if p.q < 0 {
					return p.get(o.Response), math.NaN()
				}
				return p.get(o.Response), percentileNoise(r.Latencies[op], p.q)
			}))
		}
		c.Ops = append(c.Ops, oc)
	}
	c.Rows = wholeRunRows(runs)
	return c
}

func compareStat(runs []*Run, stat, unit string, higherIsBetter bool, get func(*Run) (value, noise float64)) StatComparison {
	sc := StatComparison{Stat: stat, Unit: unit}
	for _, r := range runs {
		v, n := get(r)
		sc.Values = append(sc.Values, v)
		sc.Noise = append(sc.Noise, n)
	}
	base, baseNoise := sc.Values[0], sc.Noise[0]
	for i, v := range sc.Values {
		change, verdict := math.NaN(), ""
		if i > 0 && !math.IsNaN(v) && !math.IsNaN(base) && base != 0 {
			change = 100 * (v - base) / base
			if n := math.Hypot(sc.Noise[i], baseNoise); !math.IsNaN(n) {
				switch {
				case math.Abs(v-base) <= 2*n:
					verdict = "same"
				case (v > base) == higherIsBetter:
					verdict = "better"
				default:
					verdict = "worse"
				}
			}
		}
		sc.Change = append(sc.Change, change)
		sc.Verdict = append(sc.Verdict, verdict)
	}
	return sc
}

// standardError is the standard deviation of the batch figures over the square root of their count.
func standardError(values []float64) float64 {
	n := float64(len(values))
	if n < minBatches {
		return math.NaN()
	}
	var mean, m2 float64
	for _, v := range values {
		mean += v / n
	}
	for _, v := range values {
		m2 += (v - mean) * (v - mean)
	}
	return math.Sqrt(m2/(n-1)) / math.Sqrt(n)
}

// percentileNoise estimates the standard error of an operation's q-th percentile (milliseconds).
func percentileNoise(l *Latencies, q float64) float64 {
	if l == nil {
		return math.NaN()
	}
	values := make([]float64, len(l.Batches))
	for i, b := range l.Batches {
		values[i] = float64(b.Response.ValueAtQuantile(q)) / 1e6
	}
	return standardError(values)
}

// throughputNoise estimates the standard error of an operation's throughput (operations per second).
func throughputNoise(l *Latencies) float64 {
	if l == nil {
		return math.NaN()
	}
	values := make([]float64, len(l.Batches))
	for i, b := range l.Batches {
		if b.Seconds > 0 {
			values[i] = float64(b.Response.TotalCount()) / b.Seconds
		}
	}
	return standardError(values)
}

func wholeRunRows(runs []*Run) []Row {
	row := func(name string, f func(*Run) string) Row {
		r := Row{Name: name}
		for _, run := range runs {
			r.Values = append(r.Values, f(run))
		}
		return r
	}
	server := func(f func(*results.ServerMetrics) string) func(*Run) string {
		return func(r *Run) string {
			if r.Summary.Server == nil || len(r.Summary.Server.Members) == 0 {
				return "-"
			}
			return f(r.Summary.Server)
		}
	}
	rows := []Row{
		row("etcd server", func(r *Run) string { return r.Summary.Versions.EtcdServer }),
		row("etcd flags", func(r *Run) string { return strings.Join(r.Summary.Cluster.EtcdFlags, " ") }),
		row("total throughput", func(r *Run) string { return fmt.Sprintf("%.1f ops/s", r.Summary.Total.Throughput) }),
		row("errors", func(r *Run) string {
			t := r.Summary.Total
			if t.Count == 0 {
				return "-"
			}
			return fmt.Sprintf("%d (%.3g%%)", t.Errors, 100*float64(t.Errors)/float64(t.Count))
		}),
		row("late starts", func(r *Run) string { return fmt.Sprintf("%.2f%%", r.Summary.Schedule.MissedPercent) }),
		row("WAL fsync p99 (worst member)", server(func(s *results.ServerMetrics) string { return fmtMs(s.Cluster.WALFsync.P99) })),
		row("backend commit p99 (worst member)", server(func(s *results.ServerMetrics) string { return fmtMs(s.Cluster.BackendCommit.P99) })),
		row("leader changes", server(func(s *results.ServerMetrics) string { return fmt.Sprint(s.Cluster.LeaderChanges) })),
		row("longest availability gap", func(r *Run) string {
			g, ok := r.LongestGap()
			if !ok {
				return "-"
			}
			return fmt.Sprintf("%s (%s)", fmtSeconds(g.Seconds), g.Label())
		}),
	}
	// One row per fault, matched by position: a seeded schedule injects the same faults in the same order.
	most := 0
	for _, r := range runs {
		most = max(most, len(r.Faults))
	}
	for i := range most {
		rows = append(rows, row(fmt.Sprintf("fault %d gap", i+1), func(r *Run) string {
			for _, g := range r.Gaps {
				if g.Index == i {
					return fmt.Sprintf("%s: %s", g.Fault, fmtSeconds(g.Seconds))
				}
			}
			return "-"
		}))
	}
	rows = append(rows,
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
			return fmt.Sprintf("%d of %d failed", Failed(r.Thresholds), len(r.Thresholds))
		}),
	)
	return rows
}

func formatStat(v float64, unit string) string {
	if math.IsNaN(v) {
		return "-"
	}
	if unit == unitOps {
		return fmt.Sprintf("%.1f", v)
	}
	return fmtMs(v)
}

func formatChange(sc StatComparison, i int) string {
	if i == 0 || math.IsNaN(sc.Change[i]) {
		return ""
	}
	s := fmt.Sprintf("%+.1f%%", sc.Change[i])
	if n := math.Hypot(sc.Noise[i], sc.Noise[0]); !math.IsNaN(n) && sc.Values[0] != 0 {
		s += fmt.Sprintf(" (noise ±%.1f%%)", 100*2*n/math.Abs(sc.Values[0]))
	}
	return s
}

func verdictMark(v string) string {
	switch v {
	case "worse":
		return "**worse**"
	case "better":
		return "**better**"
	case "same":
		return "within noise"
	}
	return ""
}

// WriteComparisonMarkdown writes the comparison as Markdown tables.
func WriteComparisonMarkdown(w io.Writer, c *Comparison) error {
	b := bufio.NewWriter(w)
	labels := make([]string, len(c.Runs))
	for i, r := range c.Runs {
		labels[i] = r.Label
	}
	fmt.Fprintf(b, "# chaosbench comparison: %s\n\n", strings.Join(labels, " vs "))
	fmt.Fprintf(b, "Baseline: **%s**. A change is called better or worse only when it exceeds twice the combined standard error of the two runs, estimated by batch means over each run's per-second interval histograms (latency.hlog); maxima have no noise estimate.\n\n", labels[0])
	cols := []string{"operation", "figure"}
	for i, l := range labels {
		cols = append(cols, l)
		if i > 0 {
			cols = append(cols, "change", "verdict")
		}
	}
	table(b, cols, func(row func(...string)) {
		for _, oc := range c.Ops {
			for _, sc := range oc.Stats {
				cells := []string{oc.Op, sc.Stat}
				for i := range c.Runs {
					cells = append(cells, formatStat(sc.Values[i], sc.Unit))
					if i > 0 {
						cells = append(cells, formatChange(sc, i), verdictMark(sc.Verdict[i]))
					}
				}
				row(cells...)
			}
		}
	})
	fmt.Fprintf(b, "\n## Whole run\n\n")
	table(b, append([]string{""}, labels...), func(row func(...string)) {
		for _, r := range c.Rows {
			row(append([]string{r.Name}, r.Values...)...)
		}
	})
	fmt.Fprintf(b, "\nRun directories:\n\n")
	for _, r := range c.Runs {
		fmt.Fprintf(b, "- %s: `%s`\n", r.Label, r.Dir)
	}
	return b.Flush()
}

type comparisonPage struct {
	Title  string
	Labels []string
	Ops    []compareOpView
	Rows   []Row
	Charts []template.HTML
	Dirs   []kv
}

type compareOpView struct {
	Op    string
	Stats []compareStatView
}

type compareStatView struct {
	Stat  string
	Cells []compareCell
}

type compareCell struct {
	Value, Change, Verdict, Class string
	Baseline                      bool
}

// WriteComparisonHTML writes the comparison as a self-contained page: the tables, each operation's
// percentile distributions overlaid, and throughput over time.
func WriteComparisonHTML(w io.Writer, c *Comparison) error {
	pg := comparisonPage{Rows: c.Rows}
	for _, r := range c.Runs {
		pg.Labels = append(pg.Labels, r.Label)
		pg.Dirs = append(pg.Dirs, kv{r.Label, r.Dir})
	}
	pg.Title = strings.Join(pg.Labels, " vs ")
	for _, oc := range c.Ops {
		ov := compareOpView{Op: oc.Op}
		for _, sc := range oc.Stats {
			sv := compareStatView{Stat: sc.Stat}
			for i := range c.Runs {
				cell := compareCell{Value: formatStat(sc.Values[i], sc.Unit), Baseline: i == 0}
				if i > 0 {
					cell.Change, cell.Verdict = formatChange(sc, i), verdictMark(sc.Verdict[i])
					cell.Verdict = strings.Trim(cell.Verdict, "*")
					switch sc.Verdict[i] {
					case "worse":
						cell.Class = "fail"
					case "better":
						cell.Class = "ok"
					}
				}
				sv.Cells = append(sv.Cells, cell)
			}
			ov.Stats = append(ov.Stats, sv)
		}
		pg.Ops = append(pg.Ops, ov)
		if len(pg.Charts) < 2*maxLatencyCharts {
			ch := newChart(oc.Op+": percentile distribution of response time", "percentile", "latency (log)", true)
			ch.p.X.Scale = plot.LogScale{}
			ch.p.X.Tick.Marker = percentileTicks{}
			for i, r := range c.Runs {
				if h := r.response(oc.Op); h != nil {
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

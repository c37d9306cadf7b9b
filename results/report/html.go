package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg/draw"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// maxLatencyCharts bounds the per-operation latency charts; the tables still list every operation.
const maxLatencyCharts = 8

type htmlPage struct {
	*view
	LatencyCharts []template.HTML
	MoreOps       int
	Distribution  template.HTML
	Throughput    template.HTML
	ErrorsChart   template.HTML
	ServerCharts  []template.HTML
}

// WriteHTML writes the report as one self-contained HTML page: no script, style or font is fetched from
// anywhere, so it opens offline and can be attached to a ticket or published as is.
func WriteHTML(w io.Writer, r *Run) error {
	pg := &htmlPage{view: buildView(r)}
	r = withFullIntervals(r)
	spans := faultSpans(r)
	ops := opsByCount(r)
	for i, op := range ops {
		if i == maxLatencyCharts {
			pg.MoreOps = len(ops) - i
			break
		}
		if svg := latencyChart(r, op, spans); svg != "" {
			pg.LatencyCharts = append(pg.LatencyCharts, svg)
		}
	}
	pg.Distribution = distributionChart(r, ops)
	pg.Throughput, pg.ErrorsChart = throughputCharts(r, ops, spans)
	pg.ServerCharts = serverCharts(r, spans)
	return pageTemplate().Execute(w, pg)
}

// withFullIntervals returns r without the partial interval each operation's time series ends with: a rate
// over a fraction of a second, whose noise would draw a spike at the end of every chart.
func withFullIntervals(r *Run) *Run {
	last := map[string]int{} // op -> index of its last row
	prev := map[string]float64{}
	partial := map[int]bool{}
	for i, row := range r.Series {
		if t, ok := prev[row.Op]; ok && row.T-t < 0.9 {
			partial[i] = true
		}
		prev[row.Op], last[row.Op] = row.T, i
	}
	cp := *r
	cp.Series = nil
	for i, row := range r.Series {
		if !(partial[i] && last[row.Op] == i) {
			cp.Series = append(cp.Series, row)
		}
	}
	return &cp
}

// opsByCount returns the operations, busiest first.
func opsByCount(r *Run) []string {
	ops := r.OperationNames()
	sort.SliceStable(ops, func(i, j int) bool {
		return r.Summary.Operations[ops[i]].Count > r.Summary.Operations[ops[j]].Count
	})
	return ops
}

func faultSpans(r *Run) []span {
	end := 0.0
	for _, row := range r.Series {
		end = math.Max(end, row.T)
	}
	var out []span
	for _, f := range r.Faults {
		from, to := float64(f.StartNs)/1e9, float64(f.EndNs)/1e9
		if to < from {
			to = math.Max(end, from)
		}
		out = append(out, span{from, to})
	}
	return out
}

const timeAxis = "seconds since the cluster was up"

func latencyChart(r *Run, op string, spans []span) template.HTML {
	var p50, p99, mx, svc []point
	for _, row := range r.Series {
		if row.Op != op {
			continue
		}
		p50 = append(p50, point{row.T, row.P50})
		p99 = append(p99, point{row.T, row.P99})
		mx = append(mx, point{row.T, row.Max})
		svc = append(svc, point{row.T, row.ServiceP99})
	}
	if len(p99) == 0 {
		return ""
	}
	c := newChart(op+": response time per second", timeAxis, "latency (log)", true)
	c.shade(spans)
	c.line("max", mx, 1, nil, paletteColor(7))
	c.line("p99", p99, 1.4, nil, paletteColor(3))
	c.line("p50", p50, 1.4, nil, paletteColor(0))
	if r.Summary.Schedule.Mode == "open" {
		c.line("service p99", svc, 1, []vgLen{3, 2}, paletteColor(1))
	}
	for _, t := range r.Thresholds {
		if t.Unit == "ms" && t.Subject == op && t.Verdict != results.ThresholdNotApplicable {
			if th, err := results.ParseThresholds([]string{t.Expr}); err == nil && len(th) == 1 && th[0].Stat == "p99" {
				c.guide(t.Expr, th[0].Value)
			}
		}
	}
	return c.svg(chartWidth, chartHeight)
}

func distributionChart(r *Run, ops []string) template.HTML {
	c := newChart("Percentile distribution of response time (HdrHistogram style)", "percentile", "latency (log)", true)
	c.p.X.Scale = plot.LogScale{}
	c.p.X.Tick.Marker = percentileTicks{}
	showService := r.Summary.Schedule.Mode == "open" && len(ops) <= 3
	for i, op := range ops {
		if i == 10 {
			break
		}
		col := paletteColor(i)
		if h := r.response(op); h != nil {
			c.line(op, distribution(h), 1.5, nil, col)
		}
		if showService {
			if h := r.service(op); h != nil {
				c.line(op+" service", distribution(h), 1, []vgLen{3, 2}, col)
			}
		}
	}
	if !c.hasY {
		return ""
	}
	c.p.X.Min = 1
	return c.svg(chartWidth, chartHeight)
}

func throughputCharts(r *Run, ops []string, spans []span) (tput, errs template.HTML) {
	byT := map[float64]float64{}
	errT := map[float64]float64{}
	c := newChart("Throughput per second", timeAxis, "operations per second", false)
	c.shade(spans)
	anyErrors := false
	for i, op := range ops {
		if i == 10 {
			break
		}
		var pts []point
		for _, row := range r.Series {
			if row.Op == op {
				pts = append(pts, point{row.T, row.Throughput})
			}
		}
		c.line(op, pts, 1.2, nil, paletteColor(i))
	}
	for _, row := range r.Series {
		if results.IsRequest(row.Op) { // the line the target guide is for: watch events are not requests
			byT[row.T] += row.Throughput
		}
		if row.Errors > 0 {
			errT[row.T] += float64(row.Errors)
			anyErrors = true
		}
	}
	if len(ops) > 1 {
		c.line("all requests", sortedPoints(byT), 1.8, nil, paletteColor(7))
	}
	if s := r.Summary.Schedule; s.Mode == "open" && s.TargetRate > 0 {
		c.guide(fmt.Sprintf("target %.0f requests/s", s.TargetRate), s.TargetRate)
	}
	tput = c.svg(chartWidth, chartHeight)
	if anyErrors {
		e := newChart("Errors per second", timeAxis, "errors", false)
		e.shade(spans)
		e.points("errors", sortedPoints(errT), draw.CrossGlyph{}, guideColor())
		errs = e.svg(chartWidth, smallHeight)
	}
	return tput, errs
}

func sortedPoints(m map[float64]float64) []point {
	pts := make([]point, 0, len(m))
	for t, v := range m {
		pts = append(pts, point{t, v})
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].x < pts[j].x })
	return pts
}

// memberSeries groups server samples by member; names are sorted, the generator left out.
func memberSeries(samples []results.ServerSample) (names []string, by map[string][]results.ServerSample) {
	by = map[string][]results.ServerSample{}
	for _, s := range samples {
		if _, ok := by[s.Member]; !ok && s.Member != results.Generator {
			names = append(names, s.Member)
		}
		by[s.Member] = append(by[s.Member], s)
	}
	sort.Strings(names)
	return names, by
}

func serverCharts(r *Run, spans []span) []template.HTML {
	if len(r.Samples) == 0 {
		return nil
	}
	names, by := memberSeries(r.Samples)
	var out []template.HTML
	add := func(svg template.HTML) {
		if svg != "" {
			out = append(out, svg)
		}
	}
	perMember := func(title, ylabel string, logY bool, value func(results.ServerSample) (float64, bool), guide string, limit float64) template.HTML {
		c := newChart(title, timeAxis, ylabel, logY)
		c.shade(spans)
		most := 0 // values of the member with the most
		for i, m := range names {
			var pts []point
			values := 0
			for _, s := range by[m] {
				v, ok := value(s)
				if !s.Up || !ok {
					v = math.NaN()
				} else {
					values++
				}
				pts = append(pts, point{s.T, v})
			}
			most = max(most, values)
			c.line(m, pts, 1.2, nil, paletteColor(i))
		}
		if most < 3 {
			return "" // a handful of points is not a time series (peer round trips are measured every few seconds)
		}
		if guide != "" && c.hasY {
			c.guide(guide, limit)
		}
		return c.svg(smallWidth, smallHeight)
	}
	add(perMember("WAL fsync p99 per second", "latency (log)", true,
		func(s results.ServerSample) (float64, bool) { return s.WALFsyncP99, s.WALFsyncCount > 0 }, "guidance 10ms", fsyncLimitMs))
	add(perMember("Backend commit p99 per second", "latency (log)", true,
		func(s results.ServerSample) (float64, bool) { return s.BackendCommitP99, s.BackendCommitCount > 0 }, "guidance 25ms", commitLimitMs))
	add(leaderChart(names, by, spans))
	add(perMember("Leader changes seen (cumulative)", "changes", false,
		func(s results.ServerSample) (float64, bool) { return float64(s.LeaderChanges), true }, "", 0))
	add(perMember("Apply p99 per second", "latency (log)", true,
		func(s results.ServerSample) (float64, bool) { return s.ApplyP99, s.ApplyCount > 0 }, "", 0))
	add(perMember("Peer round-trip p99", "latency (log)", true,
		func(s results.ServerSample) (float64, bool) { return s.PeerRTTP99, s.PeerRTTP99 > 0 }, "", 0))
	add(perMember("Proposals pending", "proposals", false,
		func(s results.ServerSample) (float64, bool) { return s.ProposalsPending, true }, "", 0))
	add(cpuChart(names, by, spans, r))
	add(perMember("Resident memory", "MiB", false,
		func(s results.ServerSample) (float64, bool) { return s.RSSBytes / (1 << 20), s.RSSBytes > 0 }, "", 0))
	add(perMember("Database size", "MiB", false,
		func(s results.ServerSample) (float64, bool) { return s.DBSizeBytes / (1 << 20), s.DBSizeBytes > 0 }, "", 0))
	slow := false
	for _, s := range r.Samples {
		slow = slow || s.SlowWatchers > 0
	}
	if slow {
		add(perMember("Slow watchers", "watchers", false,
			func(s results.ServerSample) (float64, bool) { return s.SlowWatchers, true }, "", 0))
	}
	return out
}

// leaderChart shows, per member, when it was leader, up, or not answering its metrics.
func leaderChart(names []string, by map[string][]results.ServerSample, spans []span) template.HTML {
	c := newChart("Leadership and member availability", timeAxis, "", false)
	c.shade(spans)
	var ticks []plot.Tick
	var leader, follower, down []point
	for i, m := range names {
		y := float64(len(names) - i)
		ticks = append(ticks, plot.Tick{Value: y, Label: m})
		for _, s := range by[m] {
			switch {
			case !s.Up:
				down = append(down, point{s.T, y})
			case s.IsLeader:
				leader = append(leader, point{s.T, y})
			default:
				follower = append(follower, point{s.T, y})
			}
		}
	}
	c.points("leader", leader, draw.CircleGlyph{}, paletteColor(2))
	c.points("follower", follower, draw.RingGlyph{}, paletteColor(7))
	c.points("no answer", down, draw.CrossGlyph{}, guideColor())
	c.p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	if !c.hasY {
		return ""
	}
	return c.svgFixed(smallWidth, smallHeight, 0.4, float64(len(names))+1.2)
}

func cpuChart(names []string, by map[string][]results.ServerSample, spans []span, r *Run) template.HTML {
	c := newChart("CPU", timeAxis, "cores", false)
	c.shade(spans)
	for i, m := range names {
		var pts []point
		for _, s := range by[m] {
			v := s.CPUPercent / 100
			if !s.Up {
				v = math.NaN()
			}
			pts = append(pts, point{s.T, v})
		}
		c.line(m, pts, 1.2, nil, paletteColor(i))
	}
	cores := 0
	if sv := r.Summary.Server; sv != nil && sv.Generator != nil {
		cores = sv.Generator.HostCPUs
	}
	var gen, host []point
	for _, s := range by[results.Generator] {
		gen = append(gen, point{s.T, s.CPUPercent / 100})
		if cores > 0 {
			host = append(host, point{s.T, s.HostCPUBusyPercent / 100 * float64(cores)})
		}
	}
	c.line("chaosbench", gen, 1.2, []vgLen{3, 2}, paletteColor(len(names)))
	if len(host) > 0 {
		c.line("machine busy", host, 1.6, nil, paletteColor(7))
		c.guide(fmt.Sprintf("%d cores", cores), float64(cores))
	}
	return c.svg(smallWidth, smallHeight)
}

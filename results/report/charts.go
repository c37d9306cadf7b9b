package report

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"regexp"
	"strconv"
	"strings"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Charts are drawn with gonum/plot into SVG that the page inlines: the report needs no script library, no
// network and no fonts beyond the browser's own, renders the same in every browser and in print, and its
// charts can be diffed. Fault windows are shaded behind the data of every chart over time.

const (
	chartWidth  = 7.2 * vg.Inch
	chartHeight = 2.9 * vg.Inch
	smallWidth  = 4.7 * vg.Inch
	smallHeight = 2.5 * vg.Inch
	maxPoints   = 1200 // per series; longer series are reduced keeping each bucket's extreme
)

// palette holds distinguishable colours (Tableau 10), used in series order.
func paletteColor(i int) color.Color {
	p := []color.RGBA{
		{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255},
		{148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
		{188, 189, 34, 255}, {23, 190, 207, 255},
	}
	return p[i%len(p)]
}

// Colours of guides and fault windows (non-premultiplied: the windows are translucent).
func guideColor() color.Color { return color.NRGBA{200, 30, 30, 255} }
func faultFill() color.Color  { return color.NRGBA{230, 80, 60, 38} }
func faultLine() color.Color  { return color.NRGBA{230, 80, 60, 150} }

// vgLen shortens dash patterns.
type vgLen = vg.Length

// chart is a plot under construction.
type chart struct {
	p      *plot.Plot
	logY   bool
	series int
	yMin   float64
	yMax   float64
	hasY   bool
}

func newChart(title, xLabel, yLabel string, logY bool) *chart {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = font.From(font.Font{Typeface: "Liberation", Variant: "Sans", Weight: xfont.WeightBold}, 11)
	p.Title.Padding = 4
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(font.Font{Typeface: "Liberation", Variant: "Sans"}, 9)
		a.Tick.Label.Font = font.From(font.Font{Typeface: "Liberation", Variant: "Sans"}, 8)
		a.Padding = 2
	}
	p.X.Label.Text, p.Y.Label.Text = xLabel, yLabel
	p.Legend.TextStyle.Font = font.From(font.Font{Typeface: "Liberation", Variant: "Sans"}, 8)
	p.Legend.Top = true
	p.Legend.ThumbnailWidth = 14
	p.Legend.Padding = 1
	c := &chart{p: p, logY: logY}
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = latencyTicks{}
	}
	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{Y: 230}
	grid.Horizontal.Color = color.Gray{Y: 230}
	p.Add(grid)
	return c
}

// point is one value of a series; NaN breaks the line.
type point struct{ x, y float64 }

// line adds a named series. Values <= 0 are dropped on a log axis.
func (c *chart) line(name string, pts []point, width vg.Length, dashes []vg.Length, col color.Color) {
	if col == nil {
		col = paletteColor(c.series)
	}
	c.series++
	pts = reduce(pts)
	style := draw.LineStyle{Color: col, Width: width, Dashes: dashes}
	var seg plotter.XYs
	flush := func() {
		if len(seg) == 0 {
			return
		}
		if len(seg) == 1 {
			sc, err := plotter.NewScatter(seg)
			if err == nil {
				sc.GlyphStyle = draw.GlyphStyle{Color: col, Radius: 1.5, Shape: draw.CircleGlyph{}}
				c.p.Add(sc)
			}
		} else if l, err := plotter.NewLine(seg); err == nil {
			l.LineStyle = style
			c.p.Add(l)
		}
		seg = nil
	}
	for _, pt := range pts {
		if math.IsNaN(pt.y) || math.IsInf(pt.y, 0) || (c.logY && pt.y <= 0) {
			flush()
			continue
		}
		seg = append(seg, plotter.XY{X: pt.x, Y: pt.y})
		c.see(pt.y)
	}
	flush()
	if name != "" {
		c.p.Legend.Add(name, thumb{style})
	}
}

// points adds a named series of markers.
func (c *chart) points(name string, pts []point, shape draw.GlyphDrawer, col color.Color) {
	var xys plotter.XYs
	for _, pt := range pts {
		if !math.IsNaN(pt.y) && !(c.logY && pt.y <= 0) {
			xys = append(xys, plotter.XY{X: pt.x, Y: pt.y})
			c.see(pt.y)
		}
	}
	if len(xys) == 0 {
		return
	}
	sc, err := plotter.NewScatter(xys)
	if err != nil {
		return
	}
	sc.GlyphStyle = draw.GlyphStyle{Color: col, Radius: 2.2, Shape: shape}
	c.p.Add(sc)
	if name != "" {
		c.p.Legend.Add(name, sc)
	}
}

func (c *chart) see(y float64) {
	if !c.hasY {
		c.yMin, c.yMax, c.hasY = y, y, true
		return
	}
	c.yMin, c.yMax = math.Min(c.yMin, y), math.Max(c.yMax, y)
}

// guide draws a horizontal reference line (a limit from etcd's guidance or a threshold).
func (c *chart) guide(name string, y float64) {
	c.p.Add(hline{y: y, style: draw.LineStyle{Color: guideColor(), Width: 1, Dashes: []vg.Length{4, 3}}})
	c.p.Legend.Add(name, thumb{draw.LineStyle{Color: guideColor(), Width: 1, Dashes: []vg.Length{4, 3}}})
	c.see(y)
}

// shade marks fault windows behind the data.
func (c *chart) shade(windows []span) {
	if len(windows) == 0 {
		return
	}
	c.p.Add(shading{spans: windows})
	c.p.Legend.Add("fault window", shading{})
}

// span is a fault window in seconds from the time base.
type span struct{ from, to float64 }

// svgFixed renders the chart with a fixed y range.
func (c *chart) svgFixed(w, h vg.Length, yMin, yMax float64) template.HTML {
	c.p.Y.Min, c.p.Y.Max = yMin, yMax
	return c.render(w, h)
}

// svg renders the chart at w x h into inline SVG, its y range fitted to the data with room for the
// legend. It returns "" when there is nothing to show.
func (c *chart) svg(w, h vg.Length) template.HTML {
	if !c.hasY {
		return ""
	}
	// Leave room at the top for the legend.
	if c.logY {
		c.yMin = math.Max(c.yMin, 1e-3)
		c.p.Y.Min, c.p.Y.Max = c.yMin/1.3, c.yMax*math.Pow(c.yMax/c.yMin*1.3, 0.3)*1.2
	} else {
		lo := math.Min(0, c.yMin)
		c.p.Y.Min, c.p.Y.Max = lo, c.yMax+(c.yMax-lo)*0.25
		if c.p.Y.Max == c.p.Y.Min {
			c.p.Y.Max = c.p.Y.Min + 1
		}
	}
	return c.render(w, h)
}

func (c *chart) render(w, h vg.Length) (out template.HTML) {
	defer func() {
		// A chart that cannot be drawn is left out rather than taking the report down with it.
		if recover() != nil {
			out = ""
		}
	}()
	canvas := vgsvg.New(w, h)
	c.p.Draw(draw.New(canvas))
	var buf bytes.Buffer
	if _, err := canvas.WriteTo(&buf); err != nil {
		return ""
	}
	return template.HTML(inlineSVG(buf.String()))
}

var (
	xmlHeader = regexp.MustCompile(`^<\?xml[^>]*>\s*(<!--[^>]*-->\s*)?`)
	svgSize   = regexp.MustCompile(`<svg width="[^"]*" height="[^"]*"`)
)

// inlineSVG makes gonum's standalone SVG fit an HTML page: no XML prologue, scaled to its container, and
// fonts that fall back to the metric-compatible ones a browser has.
func inlineSVG(s string) string {
	s = xmlHeader.ReplaceAllString(s, "")
	s = svgSize.ReplaceAllString(s, `<svg class="chart" preserveAspectRatio="xMidYMid meet"`)
	s = strings.ReplaceAll(s, "font-family:Liberation Sans", "font-family:'Liberation Sans',Arial,Helvetica,sans-serif")
	return s
}

// reduce keeps at most maxPoints of a long series: per bucket the point farthest from the bucket's mean,
// so that spikes survive.
func reduce(pts []point) []point {
	if len(pts) <= maxPoints {
		return pts
	}
	per := int(math.Ceil(float64(len(pts)) / maxPoints))
	out := make([]point, 0, maxPoints+1)
	for i := 0; i < len(pts); i += per {
		end := min(i+per, len(pts))
		best := pts[i]
		for _, p := range pts[i:end] {
			if math.IsNaN(p.y) {
				best = p
				break
			}
			if p.y > best.y {
				best = p
			}
		}
		out = append(out, best)
	}
	return out
}

// thumb is a legend thumbnail of a line style.
type thumb struct{ style draw.LineStyle }

func (t thumb) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(t.style, c.Min.X, y, c.Max.X, y)
}

// hline is a horizontal line across the whole plot that does not stretch the axes.
type hline struct {
	y     float64
	style draw.LineStyle
}

func (h hline) Plot(c draw.Canvas, p *plot.Plot) {
	_, trY := p.Transforms(&c)
	y := trY(h.y)
	if y < c.Min.Y || y > c.Max.Y {
		return
	}
	c.StrokeLine2(h.style, c.Min.X, y, c.Max.X, y)
}

// shading fills the fault windows over the full height of the plot.
type shading struct{ spans []span }

func (s shading) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, w := range s.spans {
		x0, x1 := trX(math.Max(w.from, p.X.Min)), trX(math.Min(w.to, p.X.Max))
		if x1 < x0 || w.to < p.X.Min || w.from > p.X.Max {
			continue
		}
		if x1-x0 < 1.5 {
			x1 = x0 + 1.5
		}
		rect := vg.Path{}
		rect.Move(vg.Point{X: x0, Y: c.Min.Y})
		rect.Line(vg.Point{X: x1, Y: c.Min.Y})
		rect.Line(vg.Point{X: x1, Y: c.Max.Y})
		rect.Line(vg.Point{X: x0, Y: c.Max.Y})
		rect.Close()
		c.SetColor(faultFill())
		c.Fill(rect)
		c.StrokeLine2(draw.LineStyle{Color: faultLine(), Width: 0.6}, x0, c.Min.Y, x0, c.Max.Y)
	}
}

func (shading) Thumbnail(c *draw.Canvas) {
	c.SetColor(faultFill())
	c.Fill(c.Rectangle.Path())
}

// latencyTicks labels a logarithmic milliseconds axis with units: 100µs, 1ms, 10ms, 1s.
type latencyTicks struct{}

func (latencyTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 {
		lo = 1e-3
	}
	var ticks []plot.Tick
	decades := 0
	for e := math.Ceil(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		decades++
	}
	dense := decades < 3
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		base := math.Pow(10, e)
		for _, m := range []float64{1, 2, 3, 4, 5, 6, 7, 8, 9} {
			v := base * m
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || (dense && (m == 2 || m == 5)) {
				t.Label = tickMs(v)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// tickMs formats a round number of milliseconds for an axis: 500µs, 2ms, 50ms, 1s.
func tickMs(v float64) string {
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', 3, 64) }
	switch {
	case v < 1:
		return g(v*1000) + "µs"
	case v < 1000:
		return g(v) + "ms"
	}
	return g(v/1000) + "s"
}

// percentileTicks labels the x axis of a percentile distribution, whose values are 1/(1-p).
type percentileTicks struct{}

func (percentileTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := 0.0; math.Pow(10, e) <= hi*1.0001; e++ {
		v := math.Pow(10, e)
		if v < lo {
			continue
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: percentileLabel(1 - 1/v)})
	}
	return ticks
}

func percentileLabel(q float64) string {
	p := q * 100
	switch {
	case p == 0:
		return "0%"
	case p < 99.99:
		return trimFloat(p) + "%"
	}
	return trimFloat(math.Round(p*1e4)/1e4) + "%"
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.4f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

// distribution returns the points of an HdrHistogram percentile plot of h: x = 1/(1-p) on a log axis, so
// that 90%, 99%, 99.9% ... are equally spaced, and y the latency at p in milliseconds; the last point is
// the maximum.
func distribution(h *hdr.Histogram) []point {
	n := h.TotalCount()
	if n == 0 {
		return nil
	}
	var pts []point
	// Ten points per decade of 1/(1-p), up to the resolution the sample count allows.
	for k := 0; ; k++ {
		x := math.Pow(10, float64(k)/10)
		if x > float64(n) {
			break
		}
		q := 1 - 1/x
		pts = append(pts, point{x, float64(h.ValueAtQuantile(q*100)) / 1e6})
	}
	pts = append(pts, point{float64(n), float64(h.Max()) / 1e6})
	return pts
}

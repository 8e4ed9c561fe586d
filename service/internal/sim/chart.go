package sim

import (
	"cmp"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/redlimit/redlimit"
)

// maxBuckets bounds the points of a chart's series, so that a day of
// traffic still makes an SVG of a few hundred kilobytes.
const maxBuckets = 1000

// Chart size: two panels on the left, the legend on the right.
const (
	chartWidth   = 10 * vg.Inch
	chartHeight  = 6.5 * vg.Inch
	legendWidth  = 2.1 * vg.Inch
	chartPadding = 6
)

// seriesStyle gives each algorithm a color and a dash pattern, so that
// series drawn over each other stay apart.
var seriesStyle = map[redlimit.Algorithm]draw.LineStyle{
	redlimit.FixedWindow:   {Color: color.RGBA{0xd6, 0x27, 0x28, 0xff}, Width: vg.Points(1.6)},
	redlimit.SlidingLog:    {Color: color.RGBA{0x1f, 0x77, 0xb4, 0xff}, Width: vg.Points(2.6)},
	redlimit.SlidingWindow: {Color: color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, Width: vg.Points(1.6), Dashes: []vg.Length{vg.Points(6), vg.Points(3)}},
	redlimit.TokenBucket:   {Color: color.RGBA{0xff, 0x7f, 0x0e, 0xff}, Width: vg.Points(1.6), Dashes: []vg.Length{vg.Points(2), vg.Points(2)}},
}

var limitStyle = draw.LineStyle{Color: color.Black, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(8), vg.Points(4)}}

// WriteSVG draws the report as an SVG chart, which a browser opens, with
// [gonum.org/v1/plot]. The upper panel shows, for each algorithm, how many
// requests it had admitted in the last Period. It plots the most within
// each tenth of a period, so no peak is missed. The limit is drawn as a
// dashed line. The fixed window's climb to twice the limit at a boundary
// shows there. The lower panel shows the requests each algorithm denied
// per tenth of a period. Long simulations use wider buckets, at most 1000
// per series.
//
// Only a report made by [Run] can be drawn: one decoded from JSON holds no
// decisions.
func (r *Report) WriteSVG(w io.Writer) error {
	if len(r.offsets) == 0 || len(r.Algorithms) == 0 || r.Algorithms[0].allowed == nil {
		return errors.New("sim: the report holds no decisions to draw (only a report from Run can be drawn)")
	}
	period := r.Period.Microseconds()
	span := max(r.Duration.Microseconds(), r.offsets[len(r.offsets)-1]+1)
	// The upper panel samples finely; the lower counts denials per tenth of
	// a period, or per a whole number of tenths for long simulations.
	fine := max((span+maxBuckets-1)/maxBuckets, 1)
	nf := int((span + fine - 1) / fine)
	bucket := max(period/10, 1)
	if n := (span + bucket - 1) / bucket; n > maxBuckets {
		bucket *= (n + maxBuckets - 1) / maxBuckets
	}
	nb := int((span + bucket - 1) / bucket)
	unit, unitName := timeUnit(span)
	x := func(us int64) float64 { return float64(us) / unit }

	top := plot.New()
	top.Title.Text = fmt.Sprintf("%s — limit %d per %s", r.Pattern, r.Count, shortDuration(r.Period))
	top.Y.Label.Text = fmt.Sprintf("admitted in the last %s", shortDuration(r.Period))
	bottom := plot.New()
	bottom.X.Label.Text = fmt.Sprintf("time since start (%s)", unitName)
	bottom.Y.Label.Text = fmt.Sprintf("denied per %s", time.Duration(bucket)*time.Microsecond)
	for _, p := range []*plot.Plot{top, bottom} {
		p.X.Min, p.X.Max = 0, x(span)
		p.Y.Min = 0
		if span <= 12*period {
			p.X.Tick.Marker = windowTicks{step: x(period)}
			bottom.X.Label.Text = fmt.Sprintf("time since start (%s), grid lines at window boundaries", unitName)
		}
		p.Add(plotter.NewGrid())
	}

	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.ThumbnailWidth = vg.Points(28)
	legend.Padding = vg.Points(4)

	peak, peakDenied := r.Count, 0
	var ups, downs []*plotter.Line
	for _, a := range r.Algorithms {
		admitted := make([]int64, 0, a.Admitted)
		denied := make([]int, nb)
		for i, ok := range a.allowed {
			if ok {
				admitted = append(admitted, r.offsets[i])
			} else {
				denied[r.offsets[i]/bucket]++
			}
		}
		rows := rolling(admitted, period)
		up := make(plotter.XYs, 0, nf+1)
		for k := range nf {
			s, e := int64(k)*fine, int64(k+1)*fine
			// The most in the last period within [s, e): just after s, or
			// just after an admission in [s, e).
			v := upper(admitted, s) - upper(admitted, s-period)
			for i := lower(admitted, s); i < lower(admitted, e); i++ {
				v = max(v, rows[i])
			}
			up = step(up, x(s), v)
			peak = max(peak, int64(v))
		}
		down := make(plotter.XYs, 0, nb+1)
		for k, n := range denied {
			down = step(down, x(int64(k)*bucket), n)
			peakDenied = max(peakDenied, n)
		}
		// Hold the last values to the end.
		up = append(up, plotter.XY{X: x(span), Y: up[len(up)-1].Y})
		down = append(down, plotter.XY{X: x(span), Y: down[len(down)-1].Y})

		style := seriesStyle[a.Algorithm]
		upLine, err := stepLine(up, style)
		if err != nil {
			return err
		}
		downLine, err := stepLine(down, style)
		if err != nil {
			return err
		}
		ups, downs = append(ups, upLine), append(downs, downLine)
		legend.Add(a.Algorithm.String(), upLine)
	}
	// The widest lines first, so that narrower ones on the same values
	// stay visible over them.
	byWidth := func(a, b *plotter.Line) int { return cmp.Compare(b.Width, a.Width) }
	slices.SortStableFunc(ups, byWidth)
	slices.SortStableFunc(downs, byWidth)
	for i := range ups {
		top.Add(ups[i])
		bottom.Add(downs[i])
	}

	limitLine, err := stepLine(plotter.XYs{{X: 0, Y: float64(r.Count)}, {X: x(span), Y: float64(r.Count)}}, limitStyle)
	if err != nil {
		return err
	}
	top.Add(limitLine)
	legend.Add(fmt.Sprintf("limit: %d per %s", r.Count, shortDuration(r.Period)), limitLine)
	top.Y.Max = float64(peak) * 1.08
	bottom.Y.Max = max(float64(peakDenied)*1.08, 1)

	c := vgsvg.New(chartWidth, chartHeight)
	dc := draw.New(c)
	panels := draw.Crop(dc, 0, -legendWidth, 0, 0)
	tiles := draw.Tiles{
		Rows: 2, Cols: 1,
		PadTop: chartPadding, PadBottom: chartPadding, PadLeft: chartPadding, PadRight: chartPadding,
		PadY: 3 * chartPadding,
	}
	canvases := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, panels)
	top.Draw(canvases[0][0])
	bottom.Draw(canvases[1][0])
	legend.Draw(draw.Crop(dc, chartWidth-legendWidth+2*chartPadding, 0, 0, -6*chartPadding))

	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("sim: writing svg: %w", err)
	}
	return nil
}

// step appends the point (x, v) to a step series, unless the series
// already holds v: drawn as steps, the point would change nothing.
func step(xys plotter.XYs, x float64, v int) plotter.XYs {
	if n := len(xys); n > 0 && xys[n-1].Y == float64(v) {
		return xys
	}
	return append(xys, plotter.XY{X: x, Y: float64(v)})
}

// stepLine returns a line holding each point's value until the next.
func stepLine(xys plotter.XYs, style draw.LineStyle) (*plotter.Line, error) {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return nil, fmt.Errorf("sim: chart: %w", err)
	}
	l.StepStyle = plotter.PostStep
	l.LineStyle = style
	return l, nil
}

// timeUnit picks the x axis unit for a span in µs: seconds, minutes or
// hours, whichever keeps the numbers readable.
func timeUnit(span int64) (us float64, name string) {
	switch {
	case span <= 3*time.Minute.Microseconds():
		return 1e6, "s"
	case span <= 3*time.Hour.Microseconds():
		return 60e6, "min"
	default:
		return 3600e6, "h"
	}
}

// windowTicks marks every window boundary, step apart, with a label.
type windowTicks struct{ step float64 }

// Ticks implements [plot.Ticker].
func (t windowTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for k := math.Ceil(lo / t.step); k*t.step <= hi; k++ {
		ticks = append(ticks, plot.Tick{Value: k * t.step, Label: strconv.FormatFloat(k*t.step, 'g', 6, 64)})
	}
	return ticks
}

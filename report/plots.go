package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Figure size.
const (
	figW = 7 * vg.Inch
	figH = 3.6 * vg.Inch
)

// Series is one named line of (x, y) points.
type Series struct {
	Name string
	X, Y []float64
}

// linePlot renders series as lines with points, one style per series, as a PNG.
func linePlot(title, xlabel, ylabel string, series []Series) ([]byte, error) {
	return linePlotY(title, xlabel, ylabel, series, math.NaN(), math.NaN())
}

// linePlotY is linePlot with a fixed Y range (NaN: from the data).
func linePlotY(title, xlabel, ylabel string, series []Series, ymin, ymax float64) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.X.Tick.Marker = integerTicks{}
	for i, s := range series {
		xys := make(plotter.XYs, 0, len(s.X))
		for j := range s.X {
			if !math.IsNaN(s.Y[j]) && !math.IsInf(s.Y[j], 0) {
				xys = append(xys, plotter.XY{X: s.X[j], Y: s.Y[j]})
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", title, err)
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / 7)
		l.Width = vg.Points(1.5)
		pts.Color = plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(s.Name, l, pts)
	}
	if !math.IsNaN(ymin) {
		p.Y.Min, p.Y.Max = ymin, ymax
	}
	padY(p)
	// Room for the legend above the data, and half an iteration either side.
	p.Y.Max += (p.Y.Max - p.Y.Min) * math.Min(0.6, 0.05+0.08*float64(len(series)))
	p.X.Min -= 0.25
	p.X.Max += 0.25
	return render(p)
}

// histPlot renders the distribution of values as a histogram PNG.
func histPlot(title, xlabel string, values []float64) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = "rows"
	p.Add(plotter.NewGrid())
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range values {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if len(values) == 0 {
		lo, hi = 0, 1
	}
	lo, hi = widen(lo, hi)
	n := int(math.Ceil(math.Sqrt(float64(len(values)))))
	n = min(max(n, 5), 40)
	width := (hi - lo) / float64(n)
	bins := make([]plotter.HistogramBin, n)
	for i := range bins {
		bins[i].Min = lo + float64(i)*width
		bins[i].Max = lo + float64(i+1)*width
	}
	for _, v := range values {
		i := int((v - lo) / width)
		i = min(max(i, 0), n-1)
		bins[i].Weight++
	}
	h := &plotter.Histogram{Bins: bins, Width: width, FillColor: color.RGBA{R: 70, G: 130, B: 180, A: 255}, LineStyle: plotter.DefaultLineStyle}
	p.Add(h)
	return render(p)
}

func render(p *plot.Plot) ([]byte, error) {
	w, err := p.WriterTo(figW, figH, "png")
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", p.Title.Text, err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("render %s: %w", p.Title.Text, err)
	}
	return buf.Bytes(), nil
}

// padY widens a flat Y range so that a constant series is drawn mid-plot.
func padY(p *plot.Plot) {
	if math.IsInf(p.Y.Min, 0) || math.IsInf(p.Y.Max, 0) {
		return // no data: gonum picks a range
	}
	p.Y.Min, p.Y.Max = widen(p.Y.Min, p.Y.Max)
}

// widen returns a flat range [lo, hi] (hi − lo < 1e-12) widened by 0.5, or by 5% of its
// magnitude when that is more: ±0.5 is lost to rounding from about 4.5e15 on, and gonum
// refuses an empty range (it panics). Other ranges are returned as they are.
func widen(lo, hi float64) (float64, float64) {
	if hi-lo >= 1e-12 {
		return lo, hi
	}
	d := math.Max(0.5, 0.05*math.Max(math.Abs(lo), math.Abs(hi)))
	return lo - d, hi + d
}

// integerTicks puts ticks on whole numbers (iterations and steps) only.
type integerTicks struct{}

func (integerTicks) Ticks(lo, hi float64) []plot.Tick {
	span := hi - lo
	step := math.Max(1, math.Ceil(span/10))
	var out []plot.Tick
	for v := math.Ceil(lo); v <= hi; v += step {
		if v == 0 {
			v = 0 // not -0
		}
		out = append(out, plot.Tick{Value: v, Label: fmt.Sprintf("%g", v)})
	}
	if len(out) == 0 {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	return out
}

var _ plot.Ticker = integerTicks{}

// sortedKeys returns m's keys sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

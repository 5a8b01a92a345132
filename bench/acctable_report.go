package main

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// accTable is section 6's results.
type accTable struct {
	rows    []accTableRow
	setup   string
	plot    string
	proxyN  int
	libN    int
	queries []tpchQuery
}

func nanZero(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// pctSE is a median error with its standard error.
func pctSE(v, se float64) string {
	if math.IsNaN(v) || math.IsNaN(se) {
		return pct(v)
	}
	return pct(v) + " ± " + pct(se)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	if v < 0.0001 {
		return fmt.Sprintf("%.2g%%", 100*v)
	}
	return fmt.Sprintf("%.2f%%", 100*v)
}

func share(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", 100*v)
}

// accTableGoal: dpproxy's error at most the library's and its release share
// at least the library's. The errors are medians over a few groups and
// runs, so "at most" allows two standard errors of their difference (the
// bootstrap's): a gap within it is not a measured difference. Where the
// library released nothing there is no error to compare.
func accTableGoal(r accTableRow) string {
	if r.ProxyRefused != "" {
		return "**not met** (refused)"
	}
	errOK := math.IsNaN(r.LibErr) || r.ProxyErr <= r.LibErr+2*math.Hypot(nanZero(r.ProxySE), nanZero(r.LibSE))
	shareOK := r.ProxyShare >= r.LibShare-1e-9
	switch {
	case errOK && shareOK:
		return "met"
	case !errOK && shareOK:
		return "**not met** (error)"
	case errOK:
		return "**not met** (release share)"
	}
	return "**not met**"
}

func (r *report) writeAccuracyTable(p func(string, ...any), t *accTable) {
	p("")
	p("## 6. Accuracy table: dpproxy and Google's DP library on the same rows")
	p("")
	p("- %s.", t.setup)
	p("- Bounds, the same for both (internal/testconf/dpproxy.yaml, entry bench_tpch): lineitem L0 = 4 groups, L∞ = 32 rows per customer, quantity in [1, 50], extended price in [0, 105000], discount in [0, 0.1]; orders L0 = 4, L∞ = 8, total price in [0, 600000]; customer one row per unit. Laplace noise, δ = 1e-7 for partition selection.")
	p("- dpproxy: each release through the wire (a fresh analyst per run, so no answer comes from the answer cache), %d runs per query and ε. The library (github.com/google/differential-privacy/go/v3 dpagg, in-process): %d runs, contribution bounding as its Beam front end does it (random choice of a unit's groups and rows), ε split evenly among the query's aggregates, the same public groups, partition selection by its Count's thresholding (`ThresholdedResult`) at the same δ.", t.proxyN, t.libN)
	p("- Error: median relative error against the true answer (no bounding, no noise) over every released true group of every run. Released: share of true groups released. Bias: the same error with no noise at all (dpproxy: one release at ε = 10⁶; the library: its bounded aggregates), i.e. what contribution bounding alone costs. Errors are given ± their bootstrap standard error. Goal: dpproxy's error ≤ the library's (within two standard errors of their difference: the medians of a few groups and runs move that much between runs of one mechanism) and its release share ≥ the library's.")
	p("")
	p("| query | column | ε | true groups | dpproxy error | library error | dpproxy released | library released | dpproxy bias | library bias | goal |")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, x := range t.rows {
		p("| %s %s | %s | %g | %d | %s | %s | %s | %s | %s | %s | %s |", x.Query, x.Title, x.Column, x.Epsilon, x.Groups,
			pctSE(x.ProxyErr, x.ProxySE), pctSE(x.LibErr, x.LibSE), share(x.ProxyShare), share(x.LibShare), pct(x.ProxyBias), pct(x.LibBias), accTableGoal(x))
	}
	for _, x := range t.rows {
		if x.ProxyRefused != "" {
			p("")
			p("dpproxy refused %s: `%s`", x.Query, x.ProxyRefused)
		}
	}
	p("")
	p("The queries, as sent to both (the library's rows are the same rows, read by unit):")
	p("")
	for _, q := range t.queries {
		p("- %s: `%s`", q.name, oneLine(q.sql))
	}
	if t.plot != "" {
		p("")
		p("![median relative error per query, dpproxy and the library](%s)", filepath.Base(t.plot))
	}
}

func oneLine(s string) string {
	out := make([]rune, 0, len(s))
	space := false
	for _, r := range s {
		if r == '\n' || r == '\t' || r == ' ' {
			if !space {
				out = append(out, ' ')
			}
			space = true
			continue
		}
		space = false
		out = append(out, r)
	}
	return string(out)
}

// plotAccuracyTable draws, per ε, the median relative error of each query
// column for dpproxy (circles) and the library (squares) on a log scale,
// with dpproxy's bias of bounding as a triangle.
func plotAccuracyTable(rows []accTableRow, path string) error {
	eps := []float64{0.1, 1}
	const w, h = 7 * vg.Inch, 4 * vg.Inch
	img := vgimgNew(2*w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(20), PadLeft: vg.Points(10), PadRight: vg.Points(10), PadTop: vg.Points(10), PadBottom: vg.Points(10)}
	for i, e := range eps {
		var labels []string
		var prox, lib, bias plotter.Values
		for _, r := range rows {
			if r.Epsilon != e {
				continue
			}
			labels = append(labels, r.Query+" "+r.Column)
			prox = append(prox, floor(r.ProxyErr))
			lib = append(lib, floor(r.LibErr))
			bias = append(bias, floor(r.ProxyBias))
		}
		p := plot.New()
		p.Title.Text = fmt.Sprintf("median relative error, ε = %g (lower is better)", e)
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = percentTicks{}
		p.Y.Label.Text = "median relative error"
		p.Legend.Top, p.Legend.Left = false, true
		mk := func(vals plotter.Values, dx float64, c color.Color, g draw.GlyphDrawer) (*plotter.Scatter, error) {
			var pts plotter.XYs
			for j, v := range vals {
				if !math.IsNaN(v) { // not released or not measured: no point
					pts = append(pts, plotter.XY{X: float64(j) + dx, Y: v})
				}
			}
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, err
			}
			sc.Color, sc.Shape, sc.Radius = c, g, vg.Points(5)
			return sc, nil
		}
		a, err := mk(prox, -0.12, color.RGBA{R: 40, G: 90, B: 200, A: 255}, draw.CircleGlyph{})
		if err != nil {
			return err
		}
		b, err := mk(lib, 0.12, color.RGBA{R: 200, G: 120, B: 40, A: 255}, draw.BoxGlyph{})
		if err != nil {
			return err
		}
		s, err := mk(bias, 0, color.Gray{Y: 90}, draw.PyramidGlyph{})
		if err != nil {
			return err
		}
		s.Radius = vg.Points(3)
		p.Add(a, b, s)
		p.Legend.Add("dpproxy", a)
		p.Legend.Add("Google DP library", b)
		p.Legend.Add("dpproxy bias of bounding", s)
		p.NominalX(labels...)
		p.X.Tick.Label.Rotation = 0.6
		p.X.Tick.Label.XAlign = draw.XRight
		p.Draw(tiles.At(dc, i, 0))
	}
	return savePNG(img, path)
}

// floor keeps the log scale readable: an error below 10⁻⁵ (0.001%) is
// drawn at 10⁻⁵; NaN (nothing released) is not drawn.
func floor(v float64) float64 {
	if math.IsNaN(v) {
		return v
	}
	return math.Max(v, 1e-5)
}

// percentTicks labels the powers of ten of a log axis as percentages.
type percentTicks struct{}

func (percentTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		v := math.Pow(10, e)
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(100*v, 'f', -1, 64) + "%"})
	}
	return ts
}

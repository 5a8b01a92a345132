package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plotAccuracy draws measured RMSE (points) against the theoretical
// standard deviation (lines) over ε, one panel per aggregate, log-log.
func plotAccuracy(rows []accRow, path string) error {
	aggs := []string{"count", "sum", "avg"}
	const w, h = 5 * vg.Inch, 4 * vg.Inch
	img := vgimgNew(3*w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 3, PadX: vg.Points(20), PadLeft: vg.Points(10), PadRight: vg.Points(10), PadTop: vg.Points(10), PadBottom: vg.Points(10)}
	colors := map[string]color.Color{"laplace": color.RGBA{R: 200, G: 60, B: 40, A: 255}, "gaussian": color.RGBA{R: 40, G: 90, B: 200, A: 255}}
	for i, agg := range aggs {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: RMSE vs ε", upper(agg))
		p.X.Label.Text = "ε (total per query)"
		p.Y.Label.Text = "error"
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
		p.Legend.Top = true
		for _, mech := range []string{"laplace", "gaussian"} {
			var th, me plotter.XYs
			for _, r := range rows {
				if r.Agg == agg && r.Mechanism == mech && r.RMSE > 0 && r.Theory > 0 {
					th = append(th, plotter.XY{X: r.Epsilon, Y: r.Theory})
					me = append(me, plotter.XY{X: r.Epsilon, Y: r.RMSE})
				}
			}
			if len(th) == 0 {
				continue
			}
			l, err := plotter.NewLine(th)
			if err != nil {
				return err
			}
			l.Color = colors[mech]
			l.Width = vg.Points(1.5)
			s, err := plotter.NewScatter(me)
			if err != nil {
				return err
			}
			s.Color = colors[mech]
			s.Shape = draw.CircleGlyph{}
			s.Radius = vg.Points(4)
			p.Add(l, s)
			p.Legend.Add(mech+" theory σ", l)
			p.Legend.Add(mech+" measured RMSE", s)
		}
		p.Draw(tiles.At(dc, i, 0)) // column i of row 0
	}
	return savePNG(img, path)
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

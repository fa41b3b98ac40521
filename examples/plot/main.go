// Command plot draws the charts of shard compare (cmd/shard) and benchmarks/peers: the load
// of every shard under each strategy, the consistent-hash homework's [002] curve of the
// Murmur ring's deviation against its vnode count (the README's Sources name it), the named
// pools' balance with mixed weights and the keys their membership changes move, each next to
// the ideal, and the time of one lookup against the shard count. It reads the data as JSON
// on standard input, draws a panel for each part present, and writes an .svg or .png:
//
//	go run . -o chart.png < data.json
//
// It is a module of its own so that the plotting library (gonum.org/v1/plot) stays out of
// the shard module's dependencies; shard compare and benchmarks/peers run it when given
// -plot (see measure.DrawChart).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// data is what shard compare and benchmarks/peers write; each part is optional.
type data struct {
	Title  string `json:"title"`
	Shards int    `json:"shards"`
	Keys   int    `json:"keys"`
	Loads  []struct {
		Strategy string `json:"strategy"`
		Counts   []int  `json:"counts"`
	} `json:"loads"`
	Vnodes *struct {
		Shards int `json:"shards"`
		Keys   int `json:"keys"`
		Seeds  int `json:"seeds"`
		Points []struct {
			Vnodes    int     `json:"vnodes"`
			Stddev    float64 `json:"stddev"`
			StddevPct float64 `json:"stddev_pct"`
		} `json:"points"`
	} `json:"vnodes"`
	Scaling *scaling `json:"scaling"`
	Pools   *pools   `json:"pools"`
}

// pools is shard compare's section of named pools with mixed weights: for each strategy,
// the worst node's deviation from its fair share, and the keys moved by membership changes
// as a multiple of the ideal.
type pools struct {
	Title      string   `json:"title"`
	Strategies []string `json:"strategies"`
	// Balance has one series per pool size: the worst deviation in % for each strategy, and
	// the keys' own noise at that size as the ideal.
	Balance []poolSeries `json:"balance"`
	// Moved has one series per change: keys moved over the ideal for each strategy (1 is
	// ideal).
	Moved []poolSeries `json:"moved"`
}

type poolSeries struct {
	Name   string    `json:"name"`
	Values []float64 `json:"values"` // one per strategy, in the order of Strategies
	Ideal  float64   `json:"ideal"`
}

// scaling is the time of one lookup of each implementation at several shard counts.
type scaling struct {
	Title  string `json:"title"`
	Series []struct {
		Name   string `json:"name"`
		Points []struct {
			Shards int     `json:"shards"`
			Ns     float64 `json:"ns"`
		} `json:"points"`
	} `json:"series"`
}

func main() {
	out := flag.String("o", "", "output file, .svg or .png")
	flag.Parse()
	if err := run(os.Stdin, *out); err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out string) error {
	ext := strings.ToLower(filepath.Ext(out))
	if ext != ".svg" && ext != ".png" {
		return fmt.Errorf("-o %q: want a file name ending in .svg or .png", out)
	}
	var d data
	if err := json.NewDecoder(in).Decode(&d); err != nil {
		return fmt.Errorf("reading the data: %w", err)
	}
	plots := []*plot.Plot{}
	if len(d.Loads) > 0 {
		lp, err := loadPlot(d)
		if err != nil {
			return err
		}
		plots = append(plots, lp)
	}
	if d.Vnodes != nil && len(d.Vnodes.Points) > 0 {
		vp, err := vnodesPlot(d)
		if err != nil {
			return err
		}
		plots = append(plots, vp)
	}
	// The scaling panel has too many lines to lay a legend over them: it goes beside it.
	scaleAt, scaleLegend := -1, plot.NewLegend()
	if d.Scaling != nil && len(d.Scaling.Series) > 0 {
		sp, err := scalingPlot(*d.Scaling, &scaleLegend)
		if err != nil {
			return err
		}
		scaleAt = len(plots)
		plots = append(plots, sp)
	}
	if d.Pools != nil && len(d.Pools.Strategies) > 0 {
		for _, part := range []struct {
			series      []poolSeries
			title, axis string
			idealLines  bool
		}{
			{d.Pools.Balance, "Pools: worst node's deviation from weight/total", "worst |share/fair - 1|, % (log; dashed: the keys' noise)", true},
			{d.Pools.Moved, "Pools: keys moved, over the ideal (fair share)", "moved / ideal (log; 1 is ideal)", false},
		} {
			if len(part.series) == 0 {
				continue
			}
			pp, err := dotPlot(part.title+"\n"+d.Pools.Title, part.axis, d.Pools.Strategies, part.series, part.idealLines)
			if err != nil {
				return err
			}
			plots = append(plots, pp)
		}
	}
	if len(plots) == 0 {
		return errors.New("the data has nothing to draw: no loads, vnodes, scaling or pools")
	}

	// Up to two panels side by side, then a grid of two columns.
	const panelW, panelH, legendW = 16 * vg.Centimeter, 12 * vg.Centimeter, 9 * vg.Centimeter
	cols := min(len(plots), 2)
	rows := (len(plots) + cols - 1) / cols
	w, h := panelW*vg.Length(cols), panelH*vg.Length(rows)
	if scaleAt >= 0 {
		w += legendW
	}
	var c draw.Canvas
	var save func(io.Writer) (int64, error)
	if ext == ".svg" {
		sc := vgsvg.New(w, h)
		c, save = draw.New(sc), sc.WriteTo
	} else {
		ic := vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(144))}
		c, save = draw.New(ic), ic.WriteTo
	}
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Centimeter, PadY: vg.Centimeter, PadTop: vg.Millimeter * 3,
		PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	grid := make([][]*plot.Plot, rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, cols) // a nil panel is left blank
	}
	for i, p := range plots {
		grid[i/cols][i%cols] = p
	}
	canvases := plot.Align(grid, tiles, c)
	for i, p := range plots {
		pc := canvases[i/cols][i%cols]
		if i == scaleAt {
			scaleLegend.Draw(draw.Crop(pc, pc.Size().X-legendW+vg.Centimeter/2, 0, 0, 0))
			pc = draw.Crop(pc, 0, -legendW, 0, 0)
		}
		p.Draw(pc)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := save(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// loadPlot draws each strategy's per-shard counts as a percentage of the mean count, so a
// perfect split is the flat line at 100.
func loadPlot(d data) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Load per shard (%s)", d.Title)
	p.X.Label.Text = "shard"
	p.Y.Label.Text = "keys, % of the mean"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	ideal := plotter.NewFunction(func(float64) float64 { return 100 })
	ideal.Color = color.Gray{160}
	ideal.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(ideal)
	p.Legend.Add("ideal", ideal)
	lo, hi := 100.0, 100.0
	for i, l := range d.Loads {
		total := 0
		for _, c := range l.Counts {
			total += c
		}
		if total == 0 || len(l.Counts) == 0 {
			continue
		}
		mean := float64(total) / float64(len(l.Counts))
		xy := make(plotter.XYs, len(l.Counts))
		for s, c := range l.Counts {
			xy[s] = plotter.XY{X: float64(s), Y: 100 * float64(c) / mean}
			lo, hi = min(lo, xy[s].Y), max(hi, xy[s].Y)
		}
		line, points, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, err
		}
		line.Color = plotutil.Color(i)
		points.Color = plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		if len(xy) > 64 {
			points.Radius = vg.Points(1)
		}
		p.Add(line, points)
		p.Legend.Add(l.Strategy, line, points)
	}
	// Room above the data for the legend, one line per strategy.
	span := max(hi-lo, 1)
	p.Y.Min = lo - 0.05*span
	p.Y.Max = hi + span*(0.08*float64(len(d.Loads)+1)+0.05)
	p.Y.Tick.Marker = shortTicks{}
	return p, nil
}

// vnodesPlot draws the consistent-hash homework's [002] curve on a logarithmic vnode axis.
func vnodesPlot(d data) (*plot.Plot, error) {
	v := d.Vnodes
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Murmur ring: %d shards, %d UUIDs, mean of %d runs", v.Shards, v.Keys, v.Seeds)
	p.X.Label.Text = "vnodes per shard"
	p.Y.Label.Text = "stddev of keys per shard, % of the mean"
	p.X.Scale = plot.LogScale{}
	var ticks []plot.Tick
	for _, pt := range v.Points {
		ticks = append(ticks, plot.Tick{Value: float64(pt.Vnodes), Label: fmt.Sprint(pt.Vnodes)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Add(plotter.NewGrid())
	xy := make(plotter.XYs, len(v.Points))
	var labels []string
	for i, pt := range v.Points {
		xy[i] = plotter.XY{X: float64(pt.Vnodes), Y: pt.StddevPct}
		labels = append(labels, fmt.Sprintf("%.2f%%", pt.StddevPct))
	}
	line, points, err := plotter.NewLinePoints(xy)
	if err != nil {
		return nil, err
	}
	line.Color = plotutil.Color(0)
	points.Color = plotutil.Color(0)
	lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: xy, Labels: labels})
	if err != nil {
		return nil, err
	}
	for i := range lbl.TextStyle {
		lbl.TextStyle[i].XAlign = draw.XCenter
		lbl.Offset = vg.Point{Y: vg.Points(6)}
	}
	p.Add(line, points, lbl)
	p.Y.Min = 0
	return p, nil
}

// scalingPlot draws ns per lookup against the shard count, both axes logarithmic, one line
// per implementation, and names the lines in legend.
func scalingPlot(s scaling, legend *plot.Legend) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = s.Title
	p.X.Label.Text = "shards"
	p.Y.Label.Text = "ns per lookup"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = powerTicks{}, powerTicks{}
	legend.Top, legend.Left = true, true
	p.Add(plotter.NewGrid())
	for i, series := range s.Series {
		xy := make(plotter.XYs, 0, len(series.Points))
		for _, pt := range series.Points {
			if pt.Shards > 0 && pt.Ns > 0 { // a log axis has no room for 0
				xy = append(xy, plotter.XY{X: float64(pt.Shards), Y: pt.Ns})
			}
		}
		if len(xy) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, err
		}
		line.Color, points.Color, points.Shape = plotutil.Color(i), plotutil.Color(i), plotutil.Shape(i)
		line.Dashes = plotutil.Dashes(i / 7) // colors repeat after seven series; dashes tell them apart
		p.Add(line, points)
		legend.Add(series.Name, line, points)
	}
	return p, nil
}

// dotPlot draws one row per category (top to bottom in the order given) and one point per
// series in each row, on a logarithmic value axis; with idealLines, each series' ideal is a
// dashed vertical line in its color, else the first series' ideal is one gray line.
func dotPlot(title, axis string, categories []string, series []poolSeries, idealLines bool) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = axis
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	var ticks []plot.Tick
	for i, c := range categories {
		ticks = append(ticks, plot.Tick{Value: float64(len(categories) - 1 - i), Label: c})
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min, p.Y.Max = -0.7, float64(len(categories))-0.3+0.45*float64(len(series))
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, v := range append([]float64{s.Ideal}, s.Values...) {
			if v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 0) {
		return nil, errors.New("pools: no positive value to draw")
	}
	p.X.Min, p.X.Max = lo/1.5, hi*1.5
	// Each series a little above the row's line, so that equal values stay apart.
	step := 0.5 / float64(len(series))
	for i, s := range series {
		xy := make(plotter.XYs, 0, len(s.Values))
		for j, v := range s.Values {
			if v > 0 && j < len(categories) { // a log axis has no room for 0
				xy = append(xy, plotter.XY{X: v, Y: float64(len(categories)-1-j) + step*(float64(i)-float64(len(series)-1)/2)})
			}
		}
		sc, err := plotter.NewScatter(xy)
		if err != nil {
			return nil, err
		}
		sc.Color, sc.Shape, sc.Radius = plotutil.Color(i), plotutil.Shape(i), vg.Points(3)
		p.Add(sc)
		p.Legend.Add(s.Name, sc)
		if (idealLines || i == 0) && s.Ideal > 0 {
			ideal := s.Ideal
			l, err := plotter.NewLine(plotter.XYs{{X: ideal, Y: p.Y.Min}, {X: ideal, Y: p.Y.Max}})
			if err != nil {
				return nil, err
			}
			l.Color, l.Dashes = color.Gray{160}, []vg.Length{vg.Points(4), vg.Points(3)}
			if idealLines {
				l.Color = plotutil.Color(i)
			}
			p.Add(l)
		}
	}
	return p, nil
}

// powerTicks are logarithmic ticks labelled 10, 100, 1000, 10^4, 10^5, ... (not 1e+04).
type powerTicks struct{}

func (powerTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.LogTicks{Prec: -1}.Ticks(min, max)
	for i, t := range ts {
		if e := math.Log10(t.Value); t.Label != "" && t.Value >= 1e4 && e == math.Trunc(e) {
			ts[i].Label = fmt.Sprintf("10^%.0f", e)
		}
	}
	return ts
}

// shortTicks are the default ticks with labels in their shortest form ("125", not "125.00").
type shortTicks struct{}

func (shortTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 6, 64)
		}
	}
	return ts
}

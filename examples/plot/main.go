// Command plot draws the charts of shard compare (cmd/shard) and benchmarks/peers: the load
// of every shard under each strategy, the consistent-hash homework's [002] curve of the
// Murmur ring's deviation against its vnode count (the README's Sources name it), and the
// time of one lookup against the shard count. It reads the data as JSON
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
	if len(plots) == 0 {
		return errors.New("the data has nothing to draw: no loads, vnodes or scaling")
	}

	const panelW, h, legendW = 16 * vg.Centimeter, 12 * vg.Centimeter, 9 * vg.Centimeter
	w := panelW * vg.Length(len(plots))
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
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Centimeter, PadTop: vg.Millimeter * 3,
		PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, c)
	for i, p := range plots {
		pc := canvases[0][i]
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

package main

import (
	"bytes"
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The chart has one panel per kind of result, stacked: throughput (Mpps,
// one pair of horizontal bars per case), round-trip latency (p50 and p99
// per system) and idle CPU. Horizontal bars leave room for readable case
// names; xvswitch is always blue, DPDK always orange.

var (
	colXvs  = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colDPDK = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	// Lighter shades of the two, for a second statistic (best, p50).
	colXvsLight  = color.RGBA{R: 0xae, G: 0xc7, B: 0xe8, A: 0xff}
	colDPDKLight = color.RGBA{R: 0xff, G: 0xbb, B: 0x78, A: 0xff}
)

func caseLabel(res Result) string {
	s := fmt.Sprintf("%d %s", res.Scenario, res.Title)
	if res.Mode != "" {
		s += " " + res.Mode
	}
	if res.Kind == kindRate {
		s += fmt.Sprintf(" %dB", res.Size)
	}
	return s + " " + res.Ring
}

// hbars makes a horizontal grouped bar panel: for each label, one bar per
// series (values in the same order as labels). The first label is drawn
// at the top; the axis leaves room on the right for the legend.
func hbars(title, xlabel string, labels []string, series []string, values [][]float64, colors []color.Color) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.X.Min = 0
	top := 0.0
	for _, vs := range values {
		for _, v := range vs {
			top = max(top, v)
		}
	}
	p.X.Max = 1.3*top + 1e-9
	labels = reversed(labels)
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	const w = 7
	n := len(series)
	for i, name := range series {
		bc, err := plotter.NewBarChart(plotter.Values(reversed(values[i])), vg.Points(w))
		if err != nil {
			return nil, err
		}
		bc.Horizontal = true
		bc.LineStyle.Width = 0
		bc.Color = colors[i]
		// Series are drawn top to bottom in legend order.
		bc.Offset = vg.Points(float64(n-1)/2*w - float64(i)*w)
		p.Add(bc)
		p.Legend.Add(name, bc)
	}
	p.NominalY(labels...)
	return p, nil
}

// chart renders the report's PNG.
func (r *Report) chart() ([]byte, error) {
	var rl, ll, il []string
	rv := [][]float64{nil, nil, nil, nil}
	lv := [][]float64{nil, nil, nil, nil}
	iv := [][]float64{nil, nil}
	for _, res := range r.Results {
		switch res.Kind {
		case kindRate:
			rl = append(rl, caseLabel(res))
			rv[0], rv[1] = append(rv[0], res.Xvswitch.MedianMpps), append(rv[1], res.DPDK.MedianMpps)
			rv[2], rv[3] = append(rv[2], res.Xvswitch.BestMpps), append(rv[3], res.DPDK.BestMpps)
		case kindLatency:
			ll = append(ll, caseLabel(res))
			x, d := res.Xvswitch.Latency, res.DPDK.Latency
			if x == nil {
				x = &LatencySummary{}
			}
			if d == nil {
				d = &LatencySummary{}
			}
			lv[0], lv[1] = append(lv[0], x.MedianP99), append(lv[1], d.MedianP99)
			lv[2], lv[3] = append(lv[2], x.MedianP50), append(lv[3], d.MedianP50)
		case kindIdle:
			il = append(il, caseLabel(res))
			iv[0] = append(iv[0], res.Xvswitch.CPUPercent)
			iv[1] = append(iv[1], res.DPDK.CPUPercent)
		}
	}
	type panel struct {
		p      *plot.Plot
		height vg.Length
	}
	var panels []panel
	row := func(groups, bars int) vg.Length { return vg.Points(float64(groups*bars*7+groups*6) + 90) }
	if len(rl) > 0 {
		p, err := hbars("Throughput (median and best run; higher is better)", "Mpps", rl,
			[]string{"xvswitch median", "DPDK median", "xvswitch best", "DPDK best"}, rv,
			[]color.Color{colXvs, colDPDK, colXvsLight, colDPDKLight})
		if err != nil {
			return nil, err
		}
		panels = append(panels, panel{p, row(len(rl), 4)})
	}
	if len(ll) > 0 {
		p, err := hbars("NIC <-> VM round trip, median of the runs (lower is better)", "µs", ll,
			[]string{"xvswitch p99", "DPDK p99", "xvswitch p50", "DPDK p50"}, lv,
			[]color.Color{colXvs, colDPDK, colXvsLight, colDPDKLight})
		if err != nil {
			return nil, err
		}
		panels = append(panels, panel{p, row(len(ll), 4)})
	}
	if len(il) > 0 {
		p, err := hbars("Idle: switching process CPU (median), guest connected, no traffic (lower is better)", "% of one core", il,
			[]string{"xvswitch", "DPDK testpmd"}, iv, []color.Color{colXvs, colDPDK})
		if err != nil {
			return nil, err
		}
		panels = append(panels, panel{p, row(len(il), 2)})
	}
	if len(panels) == 0 {
		return nil, fmt.Errorf("nothing to draw")
	}
	width := vg.Points(900)
	var height vg.Length
	for _, p := range panels {
		height += p.height
	}
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseBackgroundColor(color.White), vgimg.UseDPI(96))
	dc := draw.New(img)
	top := height
	for _, p := range panels {
		// Crop's offsets: from the canvas's bottom edge up, from its top
		// edge down (negative).
		c := draw.Crop(dc, 0, 0, top-p.height, top-height)
		p.p.Draw(c)
		top -= p.height
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func reversed[T any](s []T) []T {
	out := make([]T, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

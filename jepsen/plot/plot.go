// Package plot draws the chaos test's latency and throughput plots as PNGs,
// with the fault windows shaded, using only image/png and a bitmap font.
package plot

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/seqd/seqd/jepsen/record"
)

const (
	width, height = 1400, 640
	left, right   = 80, 230 // the legend lives on the right
	top, bottom   = 40, 50
)

var (
	white = color.RGBA{255, 255, 255, 255}
	black = color.RGBA{0, 0, 0, 255}
	grid  = color.RGBA{225, 225, 225, 255}
	// Outcome colours, as in Jepsen's plots.
	okColor   = color.RGBA{31, 119, 180, 255}
	failColor = color.RGBA{214, 39, 40, 255}
	infoColor = color.RGBA{255, 127, 14, 255}
)

// faultColor gives each kind of fault a light shade.
func faultColor(fault string) color.RGBA {
	switch {
	case fault == "kill-all":
		return color.RGBA{255, 190, 190, 255}
	case strings.HasPrefix(fault, "kill"):
		return color.RGBA{255, 218, 218, 255}
	case strings.HasPrefix(fault, "pause"):
		return color.RGBA{255, 244, 196, 255}
	case strings.HasPrefix(fault, "partition"):
		return color.RGBA{206, 228, 255, 255}
	case strings.HasPrefix(fault, "loss"):
		return color.RGBA{232, 214, 255, 255}
	case fault == "member-remove":
		return color.RGBA{190, 236, 228, 255}
	case fault == "member-return":
		return color.RGBA{214, 238, 190, 255}
	case strings.HasPrefix(fault, "member"):
		return color.RGBA{236, 226, 200, 255}
	// Operator faults.
	case fault == "stale-copy", fault == "bootstrap-single":
		return color.RGBA{250, 210, 170, 255}
	case fault == "wipe-restart":
		return color.RGBA{240, 180, 220, 255}
	case fault == "restore-mistake":
		return color.RGBA{200, 200, 240, 255}
	case fault == "lease-change":
		return color.RGBA{255, 236, 150, 255}
	case fault == "disk-full":
		return color.RGBA{200, 200, 200, 255}
	}
	return color.RGBA{220, 240, 220, 255}
}

type canvas struct {
	img          *image.RGBA
	x0, x1       float64 // data range on x
	y0, y1       float64 // data range on y (log10 values when logY)
	logY         bool
	plotW, plotH int
}

func newCanvas(title string, xmax, ymin, ymax float64, logY bool) *canvas {
	c := &canvas{img: image.NewRGBA(image.Rect(0, 0, width, height)), x0: 0, x1: math.Max(xmax, 1), logY: logY}
	if logY {
		c.y0, c.y1 = math.Log10(ymin), math.Log10(ymax)
	} else {
		c.y0, c.y1 = ymin, ymax
	}
	c.plotW, c.plotH = width-left-right, height-top-bottom
	draw.Draw(c.img, c.img.Bounds(), &image.Uniform{white}, image.Point{}, draw.Src)
	c.text(left, 22, title, black)
	return c
}

func (c *canvas) px(x float64) int {
	return left + int(math.Round((x-c.x0)/(c.x1-c.x0)*float64(c.plotW)))
}

func (c *canvas) py(y float64) int {
	if c.logY {
		y = math.Log10(math.Max(y, math.Pow(10, c.y0)))
	}
	f := (y - c.y0) / (c.y1 - c.y0)
	f = math.Max(0, math.Min(1, f))
	return top + c.plotH - int(math.Round(f*float64(c.plotH)))
}

func (c *canvas) fill(x0, y0, x1, y1 int, col color.Color) {
	draw.Draw(c.img, image.Rect(x0, y0, x1, y1).Intersect(c.img.Bounds()), &image.Uniform{col}, image.Point{}, draw.Src)
}

func (c *canvas) set(x, y int, col color.RGBA) {
	if image.Pt(x, y).In(c.img.Bounds()) {
		c.img.SetRGBA(x, y, col)
	}
}

func (c *canvas) line(x0, y0, x1, y1 int, col color.RGBA, thick int) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for n := 0; n < 100000; n++ {
		for t := 0; t < thick; t++ {
			c.set(x0, y0+t, col)
		}
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func (c *canvas) text(x, y int, s string, col color.Color) {
	d := &font.Drawer{Dst: c.img, Src: &image.Uniform{col}, Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func textWidth(s string) int { return 7 * len(s) }

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

// shade draws the fault windows and returns the legend entries.
func (c *canvas) shade(windows []record.Window) []string {
	seen := map[string]bool{}
	var names []string
	for _, w := range windows {
		x0, x1 := c.px(w.Start.Seconds()), c.px(w.End.Seconds())
		if x1 <= x0 {
			x1 = x0 + 1
		}
		c.fill(max(x0, left), top, min(x1, left+c.plotW), top+c.plotH, faultColor(w.Fault))
		if !seen[w.Fault] {
			seen[w.Fault] = true
			names = append(names, w.Fault)
		}
	}
	sort.Strings(names)
	return names
}

// axes draws the frame, grid and tick labels.
func (c *canvas) axes(xlabel, ylabel string, yticks []float64, yfmt func(float64) string) {
	// x ticks: a "nice" step giving about 10 ticks.
	step := niceStep((c.x1 - c.x0) / 10)
	for x := 0.0; x <= c.x1+1e-9; x += step {
		px := c.px(x)
		c.line(px, top, px, top+c.plotH, grid, 1)
		lbl := fmt.Sprintf("%g", x)
		c.text(px-textWidth(lbl)/2, top+c.plotH+16, lbl, black)
	}
	for _, y := range yticks {
		py := c.py(y)
		c.line(left, py, left+c.plotW, py, grid, 1)
		lbl := yfmt(y)
		c.text(left-8-textWidth(lbl), py+4, lbl, black)
	}
	c.line(left, top, left, top+c.plotH, black, 1)
	c.line(left, top+c.plotH, left+c.plotW, top+c.plotH, black, 1)
	c.line(left, top, left+c.plotW, top, black, 1)
	c.line(left+c.plotW, top, left+c.plotW, top+c.plotH, black, 1)
	c.text(left+c.plotW/2-textWidth(xlabel)/2, height-12, xlabel, black)
	c.text(8, top-8, ylabel, black)
}

// legend draws colour swatches with labels on the right.
func (c *canvas) legend(y int, entries []string, colors []color.Color) int {
	x := left + c.plotW + 16
	for i, e := range entries {
		c.fill(x, y-10, x+14, y+2, colors[i])
		c.text(x+20, y, e, black)
		y += 18
	}
	return y
}

func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func save(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func clientOps(ops []record.Op) []record.Op {
	var out []record.Op
	for _, o := range ops {
		if o.IsCall() {
			out = append(out, o)
		}
	}
	return out
}

func duration(ops []record.Op) float64 {
	return record.End(ops).Seconds()
}

// Latency plots each call's latency (log scale) at its invocation time,
// coloured by outcome, over the fault windows.
func Latency(path, title string, ops []record.Op, windows []record.Window) error {
	cops := clientOps(ops)
	maxLat := 1.0
	for _, o := range cops {
		maxLat = math.Max(maxLat, float64(o.Latency())/float64(time.Millisecond))
	}
	ymax := math.Pow(10, math.Ceil(math.Log10(maxLat*1.01)))
	c := newCanvas(title, duration(ops), 0.1, ymax, true)
	faults := c.shade(windows)
	var ticks []float64
	for y := 0.1; y <= ymax*1.001; y *= 10 {
		ticks = append(ticks, y)
	}
	c.axes("time (s)", "latency (ms)", ticks, func(y float64) string { return fmt.Sprintf("%g", y) })
	// ok first, then info and fail on top (they are rarer and matter more).
	for _, typ := range []string{record.OK, record.Info, record.Fail} {
		col := map[string]color.RGBA{record.OK: okColor, record.Info: infoColor, record.Fail: failColor}[typ]
		for _, o := range cops {
			if o.Type != typ {
				continue
			}
			x, y := c.px(o.Invoke.Seconds()), c.py(float64(o.Latency())/float64(time.Millisecond))
			for dx := -1; dx <= 1; dx++ {
				for dy := -1; dy <= 1; dy++ {
					if abs(dx)+abs(dy) < 2 {
						c.set(x+dx, y+dy, col)
					}
				}
			}
		}
	}
	c.drawLegend(faults)
	return save(path, c.img)
}

func (c *canvas) drawLegend(faults []string) {
	y := c.legend(top+10, []string{"ok", "info (timeout)", "fail"}, []color.Color{okColor, infoColor, failColor})
	if len(faults) > 0 {
		y += 10
		c.text(left+c.plotW+16, y, "faults:", black)
		y += 18
		var cols []color.Color
		for _, f := range faults {
			cols = append(cols, faultColor(f))
		}
		c.legend(y, faults, cols)
	}
}

// Rate plots completed calls per second by outcome over the fault windows.
func Rate(path, title string, ops []record.Op, windows []record.Window) error {
	cops := clientOps(ops)
	n := int(duration(ops)) + 1
	counts := map[string][]float64{record.OK: make([]float64, n), record.Info: make([]float64, n), record.Fail: make([]float64, n)}
	for _, o := range cops {
		s := int(o.Complete / time.Second)
		if s >= n {
			continue
		}
		typ := o.Type
		if typ != record.OK && typ != record.Fail {
			typ = record.Info
		}
		counts[typ][s]++
	}
	ymax := 10.0
	for _, v := range counts {
		for _, x := range v {
			ymax = math.Max(ymax, x)
		}
	}
	ystep := niceStep(ymax / 8)
	ymax = math.Ceil(ymax*1.05/ystep) * ystep
	c := newCanvas(title, duration(ops), 0, ymax, false)
	faults := c.shade(windows)
	var ticks []float64
	for y := 0.0; y <= ymax+1e-9; y += ystep {
		ticks = append(ticks, y)
	}
	c.axes("time (s)", "completed calls per second", ticks, func(y float64) string { return fmt.Sprintf("%g", y) })
	for _, typ := range []string{record.OK, record.Info, record.Fail} {
		col := map[string]color.RGBA{record.OK: okColor, record.Info: infoColor, record.Fail: failColor}[typ]
		v := counts[typ]
		for i := 1; i < len(v); i++ {
			// Plot each second's count at the middle of the second.
			c.line(c.px(float64(i-1)+0.5), c.py(v[i-1]), c.px(float64(i)+0.5), c.py(v[i]), col, 2)
		}
	}
	c.drawLegend(faults)
	return save(path, c.img)
}

// GroupRow is one raft group's lane in Groups: when its successful calls
// completed and its outage windows (stretches without one).
type GroupRow struct {
	Name    string
	OK      []time.Duration
	Outages [][2]time.Duration // start, end
}

// Groups draws one lane per raft group over the fault windows: a tick per
// second with successful calls of the group (blue, its height the share of
// the busiest second), and the group's outage windows as red bars.
func Groups(path, title string, rows []GroupRow, end time.Duration, windows []record.Window) error {
	n := max(len(rows), 1)
	c := newCanvas(title, end.Seconds(), 0, float64(n), false)
	faults := c.shade(windows)
	var ticks []float64
	for i := range n + 1 {
		ticks = append(ticks, float64(i))
	}
	c.axes("time (s)", "ok calls per 100 ms, by raft group (red: an outage)", ticks, func(float64) string { return "" })
	for i, r := range rows {
		lane0, lane1 := c.py(float64(n-i)), c.py(float64(n-i-1)) // top, bottom of the lane
		c.text(left-8-textWidth(r.Name), (lane0+lane1)/2+4, r.Name, black)
		bins := map[int]int{}
		most := 1
		for _, t := range r.OK {
			b := int(t / (100 * time.Millisecond))
			bins[b]++
			most = max(most, bins[b])
		}
		h := lane1 - lane0 - 8
		for b, k := range bins {
			x := c.px((float64(b) + 0.5) / 10)
			y := lane1 - 4 - k*h/most
			c.line(x, lane1-4, x, y, okColor, 1)
		}
		for _, o := range r.Outages {
			x0, x1 := c.px(o[0].Seconds()), c.px(o[1].Seconds())
			c.fill(x0, lane1-10, max(x1, x0+1), lane1-4, failColor)
		}
	}
	y := c.legend(top+10, []string{"ok calls", "outage"}, []color.Color{okColor, failColor})
	if len(faults) > 0 {
		y += 10
		c.text(left+c.plotW+16, y, "faults:", black)
		y += 18
		var cols []color.Color
		for _, f := range faults {
			cols = append(cols, faultColor(f))
		}
		c.legend(y, faults, cols)
	}
	return save(path, c.img)
}

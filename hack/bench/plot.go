package main

// plotLatency draws approval→certificate latency over each run as a PNG with the standard
// library only: one panel per workload, one colour per signer, x = seconds since the first
// create, y = latency in ms on a log scale. Text uses a built-in 3×5 pixel font.

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"strings"
)

var seriesColors = []color.RGBA{
	{110, 110, 110, 255}, // ceiling
	{214, 39, 40, 255},   // KCM default
	{255, 127, 14, 255},  // KCM 1000
	{31, 119, 180, 255},  // Signet
	{44, 160, 44, 255},
}

const (
	plotW      = 1200
	panelH     = 430
	marginL    = 90
	marginR    = 20
	marginT    = 70
	marginB    = 50
	minLogMS   = -1.0 // 0.1 ms
	fontScale  = 2
	glyphWidth = 4 * fontScale
)

func plotLatency(path string, results []result) error {
	var loads []string
	byLoad := map[string][]result{}
	for _, r := range results {
		if _, ok := byLoad[r.load.label]; !ok {
			loads = append(loads, r.load.label)
		}
		byLoad[r.load.label] = append(byLoad[r.load.label], r)
	}
	img := image.NewRGBA(image.Rect(0, 0, plotW, panelH*len(loads)))
	fill(img, img.Bounds(), color.RGBA{255, 255, 255, 255})
	for p, load := range loads {
		drawPanel(img, image.Rect(0, p*panelH, plotW, (p+1)*panelH), load, byLoad[load])
	}
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

func drawPanel(img *image.RGBA, r image.Rectangle, load string, rs []result) {
	black := color.RGBA{0, 0, 0, 255}
	grid := color.RGBA{225, 225, 225, 255}
	plot := image.Rect(r.Min.X+marginL, r.Min.Y+marginT, r.Max.X-marginR, r.Max.Y-marginB)
	maxX, maxLat := 0.0, 1.0
	for _, res := range rs {
		for _, pt := range res.points {
			maxX = math.Max(maxX, pt.at.Seconds())
			maxLat = math.Max(maxLat, float64(pt.latency.Microseconds())/1000)
		}
	}
	maxX = niceCeil(maxX)
	maxLog := math.Ceil(math.Log10(maxLat))
	xOf := func(s float64) int { return plot.Min.X + int(s/maxX*float64(plot.Dx())) }
	yOf := func(latMS float64) int {
		l := math.Max(math.Log10(math.Max(latMS, 1e-9)), minLogMS)
		return plot.Max.Y - int((l-minLogMS)/(maxLog-minLogMS)*float64(plot.Dy()))
	}
	// Grid and y labels: decades.
	for d := minLogMS; d <= maxLog; d++ {
		y := yOf(math.Pow(10, d))
		hline(img, plot.Min.X, plot.Max.X, y, grid)
		label := strconvFloat(math.Pow(10, d))
		drawText(img, plot.Min.X-8-len(label)*glyphWidth, y-5*fontScale/2, label, black)
	}
	// x ticks: 5 steps.
	for i := 0; i <= 5; i++ {
		s := maxX * float64(i) / 5
		x := xOf(s)
		vline(img, x, plot.Min.Y, plot.Max.Y, grid)
		label := fmt.Sprintf("%g", math.Round(s*100)/100)
		drawText(img, x-len(label)*glyphWidth/2, plot.Max.Y+8, label, black)
	}
	hline(img, plot.Min.X, plot.Max.X, plot.Max.Y, black)
	vline(img, plot.Min.X, plot.Min.Y, plot.Max.Y, black)
	drawText(img, plot.Min.X, r.Min.Y+8, "APPROVAL TO CERTIFICATE LATENCY (MS, LOG) OVER THE RUN - "+load, black)
	drawText(img, plot.Min.X+plot.Dx()/2-20*glyphWidth/2, plot.Max.Y+26, "SECONDS SINCE FIRST CREATE", black)
	// Points and legend.
	lx := plot.Min.X
	for i, res := range rs {
		c := seriesColors[(i+4)%len(seriesColors)]
		switch {
		case res.signer.kind == "ceiling":
			c = seriesColors[0]
		case res.signer.kind == "kcm" && res.signer.qps == 0:
			c = seriesColors[1]
		case res.signer.kind == "kcm":
			c = seriesColors[2]
		case res.signer.kind == "signet":
			c = seriesColors[3]
		}
		for _, pt := range res.points {
			dot(img, xOf(pt.at.Seconds()), yOf(float64(pt.latency.Microseconds())/1000), c)
		}
		name := res.signer.label
		if k := strings.Index(name, " ("); k > 0 && res.signer.kind != "ceiling" {
			name = name[:k]
		}
		if res.signer.kind == "kcm" {
			name = "KCM QPS 20"
			if res.signer.qps > 0 {
				name = fmt.Sprintf("KCM QPS %d", res.signer.qps)
			}
		}
		if res.signer.kind == "ceiling" {
			name = "APISERVER CEILING"
		}
		fill(img, image.Rect(lx, r.Min.Y+30, lx+12, r.Min.Y+42), c)
		drawText(img, lx+18, r.Min.Y+31, name, black)
		lx += 18 + (len(name)+3)*glyphWidth
	}
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

func hline(img *image.RGBA, x0, x1, y int, c color.RGBA) { fill(img, image.Rect(x0, y, x1+1, y+1), c) }
func vline(img *image.RGBA, x, y0, y1 int, c color.RGBA) { fill(img, image.Rect(x, y0, x+1, y1+1), c) }

func dot(img *image.RGBA, x, y int, c color.RGBA) {
	for dy := -2; dy <= 2; dy++ {
		for dx := -2; dx <= 2; dx++ {
			if dx*dx+dy*dy <= 5 && image.Pt(x+dx, y+dy).In(img.Bounds()) {
				img.SetRGBA(x+dx, y+dy, c)
			}
		}
	}
}

// font3x5 holds 3×5 glyphs, rows top to bottom, '#' = ink.
var font3x5 = map[rune][5]string{
	'0': {"###", "#.#", "#.#", "#.#", "###"}, '1': {".#.", "##.", ".#.", ".#.", "###"},
	'2': {"###", "..#", "###", "#..", "###"}, '3': {"###", "..#", ".##", "..#", "###"},
	'4': {"#.#", "#.#", "###", "..#", "..#"}, '5': {"###", "#..", "###", "..#", "###"},
	'6': {"###", "#..", "###", "#.#", "###"}, '7': {"###", "..#", ".#.", ".#.", ".#."},
	'8': {"###", "#.#", "###", "#.#", "###"}, '9': {"###", "#.#", "###", "..#", "###"},
	'A': {".#.", "#.#", "###", "#.#", "#.#"}, 'B': {"##.", "#.#", "##.", "#.#", "##."},
	'C': {".##", "#..", "#..", "#..", ".##"}, 'D': {"##.", "#.#", "#.#", "#.#", "##."},
	'E': {"###", "#..", "##.", "#..", "###"}, 'F': {"###", "#..", "##.", "#..", "#.."},
	'G': {".##", "#..", "#.#", "#.#", ".##"}, 'H': {"#.#", "#.#", "###", "#.#", "#.#"},
	'I': {"###", ".#.", ".#.", ".#.", "###"}, 'J': {"..#", "..#", "..#", "#.#", ".#."},
	'K': {"#.#", "#.#", "##.", "#.#", "#.#"}, 'L': {"#..", "#..", "#..", "#..", "###"},
	'M': {"#.#", "###", "###", "#.#", "#.#"}, 'N': {"##.", "#.#", "#.#", "#.#", "#.#"},
	'O': {".#.", "#.#", "#.#", "#.#", ".#."}, 'P': {"##.", "#.#", "##.", "#..", "#.."},
	'Q': {".#.", "#.#", "#.#", "##.", ".##"}, 'R': {"##.", "#.#", "##.", "#.#", "#.#"},
	'S': {".##", "#..", ".#.", "..#", "##."}, 'T': {"###", ".#.", ".#.", ".#.", ".#."},
	'U': {"#.#", "#.#", "#.#", "#.#", "###"}, 'V': {"#.#", "#.#", "#.#", "#.#", ".#."},
	'W': {"#.#", "#.#", "###", "###", "#.#"}, 'X': {"#.#", "#.#", ".#.", "#.#", "#.#"},
	'Y': {"#.#", "#.#", ".#.", ".#.", ".#."}, 'Z': {"###", "..#", ".#.", "#..", "###"},
	'.': {"...", "...", "...", "...", ".#."}, ',': {"...", "...", "...", ".#.", "#.."},
	'-': {"...", "...", "###", "...", "..."}, '+': {"...", ".#.", "###", ".#.", "..."},
	'/': {"..#", "..#", ".#.", "#..", "#.."}, '(': {".#.", "#..", "#..", "#..", ".#."},
	')': {".#.", "..#", "..#", "..#", ".#."}, ':': {"...", ".#.", "...", ".#.", "..."},
	'=': {"...", "###", "...", "###", "..."},
}

func drawText(img *image.RGBA, x, y int, s string, c color.RGBA) {
	for _, ch := range strings.ToUpper(s) {
		if g, ok := font3x5[ch]; ok {
			for row := range 5 {
				for col := range 3 {
					if g[row][col] == '#' {
						fill(img, image.Rect(x+col*fontScale, y+row*fontScale, x+(col+1)*fontScale, y+(row+1)*fontScale), c)
					}
				}
			}
		}
		x += glyphWidth
	}
}

func strconvFloat(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%g", v)
	}
	return fmt.Sprintf("%.0f", v)
}

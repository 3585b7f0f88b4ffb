package main

import (
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// colours counts the pixels of each colour in rectangle r of img.
func colours(img image.Image, r image.Rectangle) map[color.RGBA]int {
	n := map[color.RGBA]int{}
	if rgba, ok := img.(*image.RGBA); ok { // what png.Decode returns for an opaque RGBA image: fast path
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for i := rgba.PixOffset(r.Min.X, y); i < rgba.PixOffset(r.Max.X, y); i += 4 {
				n[color.RGBA{rgba.Pix[i], rgba.Pix[i+1], rgba.Pix[i+2], rgba.Pix[i+3]}]++
			}
		}
		return n
	}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			n[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
		}
	}
	return n
}

// TestPlotLatency draws one workload (one panel: the plot costs about a second per panel under
// -race on a small machine) with the four signers: the ceiling without points, the others with.
func TestPlotLatency(t *testing.T) {
	withPoints := func(r result, pts ...point) result { r.points = pts; return r }
	results := []result{
		run(ceilingSigner, burstLoad, 1000, time.Second, 0, 0, 0),
		withPoints(run(kcmDefault, burstLoad, 1000, 50*time.Second, 0, 0, 0), point{10 * time.Second, 3 * time.Second}, point{45 * time.Second, 9 * time.Second}),
		withPoints(run(kcmFast, burstLoad, 1000, 2*time.Second, 0, 0, 0), point{time.Second, 8 * msec}, point{2 * time.Second, 30 * msec}, point{1500 * msec, 120 * msec}),
		// From 0.5 ms to 2 s, and one negative latency (drawn at the 0.1 ms floor).
		withPoints(run(signetSigner, burstLoad, 1000, time.Second, 0, 0, 0),
			point{100 * msec, 500 * time.Microsecond}, point{5 * time.Second, 5 * msec}, point{20 * time.Second, 50 * msec},
			point{30 * time.Second, 2 * time.Second}, point{40 * time.Second, -time.Millisecond}),
	}
	path := filepath.Join(t.TempDir(), "latency.png")
	if err := plotLatency(path, results); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the plot is not a PNG: %v", err)
	}
	if got, want := img.Bounds(), image.Rect(0, 0, plotW, panelH); got != want {
		t.Fatalf("plot bounds %v, want %v (one panel for one workload)", got, want)
	}
	n := colours(img, img.Bounds())
	const swatch = 12 * 12 // a legend swatch; more pixels than that means points were drawn
	const dot = 13         // at least, of a dot's 21 pixels, left visible by later dots
	for _, tt := range []struct {
		name     string
		c        color.RGBA
		min, max int
	}{
		{"ceiling (no points)", seriesColors[0], swatch, swatch},
		{"KCM default QPS", seriesColors[1], swatch + 2*dot, swatch + 2*21},
		{"KCM QPS 1000", seriesColors[2], swatch + 3*dot, swatch + 3*21},
		{"Signet", seriesColors[3], swatch + 5*dot, swatch + 5*21},
		{"unused fifth colour", seriesColors[4], 0, 0},
	} {
		if n[tt.c] < tt.min || n[tt.c] > tt.max {
			t.Errorf("%s: %d pixels of its colour, want %d to %d", tt.name, n[tt.c], tt.min, tt.max)
		}
	}
}

// TestPlotLatencyNoResults: with no workload the image has no height, which PNG cannot encode:
// plotLatency reports an error rather than writing a valid empty plot.
func TestPlotLatencyNoResults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.png")
	if err := plotLatency(path, nil); err == nil {
		t.Fatal("plotLatency with no results: no error")
	}
}

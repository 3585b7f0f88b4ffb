package main

import (
	"slices"
	"strings"
	"testing"
)

func TestRowMarkdown(t *testing.T) {
	for _, tt := range []struct {
		name string
		r    row
		want string
	}{
		{
			name: "one round at the lint-off floor",
			r:    row{ca: "P-256", callers: 64, bare: []float64{1000}, inProcess: []float64{800}, grpc: []float64{600}, echo: []float64{4000}},
			want: "| P-256 | 64 | off | 1000 | 800 | 600 | 4000 | 0.60 | 0.60–0.60 | 0.67 | ≥ 0.60 meets (1 of 1 rounds) |",
		},
		{
			name: "one round just under the lint-off floor",
			r:    row{ca: "P-256", callers: 1, bare: []float64{1000}, inProcess: []float64{800}, grpc: []float64{599}, echo: []float64{4000}},
			want: "| P-256 | 1 | off | 1000 | 800 | 599 | 4000 | 0.60 | 0.60–0.60 | 0.67 | ≥ 0.60 BELOW (0 of 1 rounds) |",
		},
		{
			name: "lint on at its floor",
			r:    row{ca: "RSA-2048", callers: 64, lint: true, bare: []float64{2000}, inProcess: []float64{700}, grpc: []float64{500}, echo: []float64{7000}},
			want: "| RSA-2048 | 64 | on (default gate) | 2000 | 700 | 500 | 7000 | 0.25 | 0.25–0.25 | 0.32 | ≥ 0.25 meets (1 of 1 rounds) |",
		},
		{
			name: "lint on under its floor",
			r:    row{ca: "RSA-2048", callers: 1, lint: true, bare: []float64{2000}, inProcess: []float64{700}, grpc: []float64{400}, echo: []float64{7000}},
			want: "| RSA-2048 | 1 | on (default gate) | 2000 | 700 | 400 | 7000 | 0.20 | 0.20–0.20 | 0.32 | ≥ 0.25 BELOW (0 of 1 rounds) |",
		},
		{
			// Round ratios 0.50, 0.70, 0.65: the median ratio is a round's own (0.65), not
			// median(grpc)/median(bare) = 650/1000; the rates are each column's median. The
			// rounds' bounds are 0.60, 0.56 and 0.50.
			name: "three rounds: medians, range and rounds meeting",
			r: row{ca: "P-256", callers: 64,
				bare:      []float64{1200, 1000, 800},
				inProcess: []float64{900, 700, 800},
				grpc:      []float64{600, 700, 520},
				echo:      []float64{3600, 2800, 800}},
			want: "| P-256 | 64 | off | 1000 | 800 | 600 | 2800 | 0.65 | 0.50–0.70 | 0.56 | ≥ 0.60 meets (2 of 3 rounds) |",
		},
		{
			name: "even rounds: the median ratio is the mean of the middle two",
			r: row{ca: "P-256", callers: 1,
				bare:      []float64{1000, 1000, 1000, 1000},
				inProcess: []float64{900, 900, 900, 900},
				grpc:      []float64{500, 580, 640, 700},
				echo:      []float64{9000, 1800, 9000, 1800}},
			want: "| P-256 | 1 | off | 1000 | 900 | 610 | 5400 | 0.61 | 0.50–0.70 | 0.71 | ≥ 0.60 meets (2 of 4 rounds) |",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.markdown(); got != tt.want {
				t.Errorf("markdown:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
	rows := []row{
		{ca: "P-256", callers: 1, bare: []float64{10}, inProcess: []float64{9}, grpc: []float64{8}, echo: []float64{90}},
		{ca: "P-256", callers: 64, lint: true, bare: []float64{40}, inProcess: []float64{20}, grpc: []float64{5}, echo: []float64{80}},
	}
	lines := strings.Split(render(rows), "\n")
	if len(lines) != 5 || lines[4] != "" || !strings.HasPrefix(lines[0], "| CA key | callers |") || lines[1] != "|---|---|---|---|---|---|---|---|---|---|---|" ||
		lines[2] != rows[0].markdown() || lines[3] != rows[1].markdown() {
		t.Errorf("render = %q", lines)
	}
	if n := strings.Count(lines[0], "|"); n != strings.Count(lines[2], "|") {
		t.Errorf("header has %d cell borders, rows %d", n, strings.Count(lines[2], "|"))
	}
}

func TestRowBounds(t *testing.T) {
	// Per call, in-process 1/800 s and a health check 1/4000 s add up to 1/666.7 s: against a
	// bare rate of 1000/s, 0.667. A round's bound uses that round's three rates only.
	r := row{bare: []float64{1000, 500}, inProcess: []float64{800, 400}, echo: []float64{4000, 400}}
	got := r.bounds()
	want := []float64{2.0 / 3, 0.4}
	if len(got) != len(want) {
		t.Fatalf("bounds = %v, want %v", got, want)
	}
	for i := range want {
		if d := got[i] - want[i]; d > 1e-9 || d < -1e-9 {
			t.Errorf("bounds[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	// A health check costing nothing leaves the in-process pipeline's own ratio.
	if got := (row{bare: []float64{1000}, inProcess: []float64{800}, echo: []float64{1e18}}).bounds(); got[0] < 0.7999 || got[0] > 0.8 {
		t.Errorf("bound with a free health check = %v, want 0.8 (in-process / bare)", got[0])
	}
}

func TestRowRatiosPairRounds(t *testing.T) {
	r := row{bare: []float64{100, 200, 400}, grpc: []float64{50, 150, 100}}
	if got, want := r.ratios(), []float64{0.5, 0.75, 0.25}; !slices.Equal(got, want) {
		t.Errorf("ratios = %v, want %v (each round's gRPC over the same round's bare)", got, want)
	}
}

func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := slices.Clone(tt.in)
		if got := median(in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
		if !slices.Equal(in, tt.in) {
			t.Errorf("median reordered its argument: %v, was %v", in, tt.in)
		}
	}
}

func TestParseLintModes(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []bool
	}{
		{"off,on", []bool{false, true}},
		{"on", []bool{true}},
		{" off , on ", []bool{false, true}},
	} {
		if got, err := parseLintModes(tt.in); err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("parseLintModes(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "of", "off,", "yes"} {
		if got, err := parseLintModes(in); err == nil || got != nil {
			t.Errorf("parseLintModes(%q) = %v, %v; want an error", in, got, err)
		} else if !strings.Contains(err.Error(), "accepted: off, on") {
			t.Errorf("parseLintModes(%q) error %q does not say what is accepted", in, err)
		}
	}
}

func TestRoundOrder(t *testing.T) {
	for round, want := range [][]int{{0, 1, 2, 3}, {0, 3, 2, 1}, {2, 3, 0, 1}, {2, 1, 0, 3}, {0, 1, 2, 3}} {
		if got := roundOrder(4, round); !slices.Equal(got, want) {
			t.Errorf("roundOrder(4, %d) = %v, want %v", round, got, want)
		}
	}
	// With 3 measurements over 5 rounds (server alone), each runs first and last at least once
	// and follows each of the others at least once.
	first, last, after := map[int]bool{}, map[int]bool{}, map[[2]int]bool{}
	for round := range 5 {
		o := roundOrder(3, round)
		first[o[0]], last[o[2]] = true, true
		after[[2]int{o[0], o[1]}], after[[2]int{o[1], o[2]}] = true, true
	}
	if len(first) != 3 || len(last) != 3 || len(after) != 6 {
		t.Errorf("over 5 rounds of 3: first %v, last %v, pairs %v; want every one first and last, all 6 orders of a pair", first, last, after)
	}
	if got := roundOrder(1, 7); !slices.Equal(got, []int{0}) {
		t.Errorf("roundOrder(1, 7) = %v, want [0]", got)
	}
}

package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseTrustBundles(t *testing.T) {
	tests := []struct {
		list    string
		want    []bool
		wantErr bool
	}{
		{"on", []bool{true}, false},
		{"on,off", []bool{true, false}, false},
		{" off , on ", []bool{false, true}, false},
		{"on,maybe", nil, true},
		{"", nil, true},
	}
	for _, tt := range tests {
		got, err := parseTrustBundles(tt.list)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("parseTrustBundles(%q) = %v, %v; want %v (error %v)", tt.list, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestSignetSigners(t *testing.T) {
	off := signerKind{label: "Signet, trust bundle publishing off", name: "signet", kind: "signet", trustBundlesOff: true}
	tests := []struct {
		settings []bool
		want     []signerKind
	}{
		{nil, []signerKind{signetSigner}},
		{[]bool{true}, []signerKind{signetSigner}},
		{[]bool{true, false}, []signerKind{signetSigner, off}},
		{[]bool{false, true, false}, []signerKind{off, signetSigner}}, // each setting once
	}
	for _, tt := range tests {
		if got := signetSigners(tt.settings); !slices.Equal(got, tt.want) {
			t.Errorf("signetSigners(%v) = %+v, want %+v", tt.settings, got, tt.want)
		}
	}
}

func TestSpread(t *testing.T) {
	tests := []struct {
		xs           []float64
		med, lo, hi  float64
		text, format string
	}{
		{[]float64{3, 1, 2}, 2, 1, 3, "2.0 (1.0–3.0)", "%.1f"},
		{[]float64{4, 1, 3, 2}, 2, 1, 4, "2.00× (1.00×–4.00×)", "%.2f×"}, // lower middle, as medianRun
		{[]float64{1.5}, 1.5, 1.5, 1.5, "1.5", "%.1f"},
		{nil, 0, 0, 0, "0", "%.0f"},
	}
	for _, tt := range tests {
		before := slices.Clone(tt.xs)
		med, lo, hi := spread(tt.xs)
		if med != tt.med || lo != tt.lo || hi != tt.hi {
			t.Errorf("spread(%v) = %v, %v, %v; want %v, %v, %v", tt.xs, med, lo, hi, tt.med, tt.lo, tt.hi)
		}
		if !slices.Equal(tt.xs, before) {
			t.Errorf("spread reordered %v", before)
		}
		if got := spreadText(tt.format, tt.xs); got != tt.text {
			t.Errorf("spreadText(%q, %v) = %q, want %q", tt.format, tt.xs, got, tt.text)
		}
	}
}

func TestTrustBundleCost(t *testing.T) {
	sec := time.Second
	signers := signetSigners([]bool{true, false})
	signers = append([]signerKind{kcmFast}, signers...)
	withCPU := func(r result, watcherCPU float64) result { r.cpuEach = []float64{1, watcherCPU}; return r }
	on, off := signers[1], signers[2]
	runs := [][]result{
		{run(kcmFast, burstLoad, 1000, sec, 0, 0, 0)},
		// on: 100, 125, 80 /s; p99 200, 250, 300 ms
		{withCPU(run(on, burstLoad, 1000, 10*sec, 0, 0, 200*msec), 1.1), withCPU(run(on, burstLoad, 1000, 8*sec, 0, 0, 250*msec), 1.2), withCPU(run(on, burstLoad, 1000, 12500*msec, 0, 0, 300*msec), 1.3)},
		// off: 100, 100, 100 /s; p99 200, 200, 200 ms
		{withCPU(run(off, burstLoad, 1000, 10*sec, 0, 0, 200*msec), 1.0), withCPU(run(off, burstLoad, 1000, 10*sec, 0, 0, 200*msec), 1.0), withCPU(run(off, burstLoad, 1000, 10*sec, 0, 0, 200*msec), 1.0)},
	}
	got := trustBundleCost(burstLoad, signers, runs)
	want := "| burst 1000 | 3 | 100.0 (80.0–125.0) | 100.0 (100.0–100.0) | **1.00× (0.80×–1.25×)** | 250 (200–300) | 200 (200–200) | **1.25× (1.00×–1.50×)** | 1.20 (1.10–1.30) | 1.00 (1.00–1.00) |\n"
	if got != want {
		t.Errorf("trustBundleCost =\n%s\nwant\n%s", got, want)
	}
	if got := trustBundleCost(burstLoad, signers[:2], runs[:2]); got != "" {
		t.Errorf("trustBundleCost without an off run = %q, want nothing", got)
	}
	if got := trustBundleTable(""); got != "" {
		t.Errorf("trustBundleTable of no rows = %q, want nothing", got)
	}
	table := trustBundleTable(want)
	if !strings.Contains(table, "(on, period 2s:") || !strings.HasSuffix(table, "|---|---|---|---|---|---|---|---|---|---|\n"+want) {
		t.Errorf("trustBundleTable =\n%s", table)
	}
}

// TestRoundOrderTwo: Signet with publishing on and off (two signers) take turns running
// first; rotating and then reversing odd rounds would keep the same order in every round.
func TestRoundOrderTwo(t *testing.T) {
	for round, want := range [][]int{{0, 1}, {1, 0}, {0, 1}, {1, 0}} {
		if got := roundOrder(2, round); !slices.Equal(got, want) {
			t.Errorf("roundOrder(2, %d) = %v, want %v", round, got, want)
		}
	}
}

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name          string
		ds            []time.Duration
		p50, p90, top time.Duration
	}{
		// 10 samples, as -rotation-n's default: p50 the 5th, p90 the 9th, max the 10th.
		{"ten, unsorted", []time.Duration{900, 100, 1000, 300, 200, 500, 400, 800, 700, 600}, 500, 900, 1000},
		{"three", []time.Duration{30, 10, 20}, 20, 30, 30},
		{"one", []time.Duration{7}, 7, 7, 7},
		{"none", nil, 0, 0, 0},
	}
	for _, tt := range tests {
		before := slices.Clone(tt.ds)
		p50, p90, top := summarize(tt.ds)
		if p50 != tt.p50 || p90 != tt.p90 || top != tt.top {
			t.Errorf("%s: summarize = %v, %v, %v; want %v, %v, %v", tt.name, p50, p90, top, tt.p50, tt.p90, tt.top)
		}
		if !slices.Equal(tt.ds, before) {
			t.Errorf("%s: summarize reordered its argument", tt.name)
		}
	}
}

func TestFingerprints(t *testing.T) {
	der1, der2 := []byte("first certificate"), []byte("second certificate")
	bundle := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der1})) +
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("not a certificate")})) +
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der2}))
	hash := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	got := fingerprints(bundle)
	if len(got) != 2 || !got[hash(der1)] || !got[hash(der2)] {
		t.Errorf("fingerprints = %v, want the SHA-256 of both certificates only", got)
	}
	if got := fingerprints(""); len(got) != 0 {
		t.Errorf("fingerprints of nothing = %v", got)
	}
	set := map[string]bool{"a": true, "b": true}
	if !containsAll(set, map[string]bool{"a": true}) || containsAll(set, map[string]bool{"a": true, "c": true}) {
		t.Error("containsAll")
	}
	if !containsAny(set, map[string]bool{"c": true, "b": true}) || containsAny(set, map[string]bool{"c": true}) {
		t.Error("containsAny")
	}
}

func TestRotationTable(t *testing.T) {
	var samples []rotationSample
	for i := 1; i <= 10; i++ {
		d := time.Duration(i) * 200 * msec // 0.2 … 2 s
		samples = append(samples, rotationSample{stageCall: time.Duration(i) * msec, visible: d, retireCall: 2 * msec, gone: d + 50*msec})
	}
	got := rotationTable(samples, "v1.37.1", 2*time.Second, 95*time.Second)
	for _, want := range []string{
		"One etcd + kube-apiserver (v1.37.1);",
		"(on, period 2s, not set)",
		"10 CAs (self-signed P-256",
		"uniformly from [0, 2s)",
		"Whole run: 1m35s.",
		"| step | n | p50 ms | p90 ms | max ms | what bounds it |\n|---|---|---|---|---|---|\n",
		"| stage → CA in the cluster's bundle | 10 | 1000 | 1800 | 2000 | ≤ period (2s) + one publisher pass + watch delivery; target < 5 s |\n",
		"| retire → CA out of the bundle | 10 | 1050 | 1850 | 2050 |",
		"| StageCA call (included above) | 10 | 5.00 | 9.00 | 10.0 |",
		"| RetireCA call (included above) | 10 | 2.00 | 2.00 | 2.00 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rotationTable lacks %q:\n%s", want, got)
		}
	}
	if got := rotationTable(samples, "v1.37.1", 0, time.Minute); !strings.Contains(got, "; no pause: each call right after the watch saw the previous change") {
		t.Errorf("rotationTable without jitter does not say so:\n%s", got)
	}
}

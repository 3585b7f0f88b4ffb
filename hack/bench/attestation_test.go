package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseBenchOutput(t *testing.T) {
	out := []byte(`goos: linux
goarch: amd64
pkg: github.com/signet-pki/signet/attestation
cpu: Intel(R) Xeon(R) Processor
BenchmarkVerifyRawSignaturesParallel-2   	   22532	    123892 ns/op	    183438 cpu-ns/op	      8072 verifications/s	      4036 verifications/s/core
BenchmarkVerify-2                        	    4627	    557748 ns/op	      1793 verifications/s	      1793 verifications/s/core
PASS
`)
	for _, tt := range []struct {
		name string
		want benchResult
	}{
		// BenchmarkVerify is a prefix of the parallel variant's name: the whole name counts.
		// A run too short for the CPU time reports no cpu-ns/op.
		{"BenchmarkVerify", benchResult{nsPerOp: 557748, procs: 2}},
		{"BenchmarkVerifyRawSignaturesParallel", benchResult{nsPerOp: 123892, cpuNsPerOp: 183438, procs: 2}},
	} {
		got, err := parseBenchOutput(out, tt.name)
		if err != nil || got != tt.want {
			t.Errorf("%s: got %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
	// GOMAXPROCS 1: no suffix.
	if got, err := parseBenchOutput([]byte("BenchmarkVerify \t 10\t 2000 ns/op\n"), "BenchmarkVerify"); err != nil || got != (benchResult{nsPerOp: 2000, procs: 1}) {
		t.Errorf("no suffix: got %+v, %v", got, err)
	}
	if _, err := parseBenchOutput(out, "BenchmarkVerifyParallel"); err == nil || !strings.Contains(err.Error(), "no result line") {
		t.Errorf("a missing benchmark: got %v", err)
	}
	if _, err := parseBenchOutput([]byte("--- FAIL: BenchmarkVerify\nBenchmarkVerify-2 \t 1\t 0 ns/op\n"), "BenchmarkVerify"); err == nil {
		t.Error("0 ns/op was accepted")
	}
}

func TestAttestationTable(t *testing.T) {
	var run attestationRun
	run.procs = 2
	run.nsPerOp[benchVerify] = []float64{500000, 550000, 450000} // 2000, 1818, 2222/s
	run.nsPerOp[benchRaw] = []float64{200000, 200000, 150000}    // 5000, 5000, 6667/s
	run.cpuNsPerOp[benchVerify] = []float64{510000, 500000, 520000}
	run.nsPerOp[benchVerifyParallel] = []float64{400000, 250000, 300000}
	run.nsPerOp[benchRawParallel] = []float64{100000, 100000, 100000}
	run.cpuNsPerOp[benchVerifyParallel] = []float64{500000, 480000, 520000}
	got := attestationTable(run, 3, time.Second, time.Minute, 0.05)
	for _, want := range []string{
		// Median 500 µs = 2000/s; CPU 510 µs = 1961/s; ratios 0.40, 0.36, 0.33.
		"| 1 | 500.0 | 2000 | 2000 | 510.0 | 1961 | 200.0 | 5000 | 0.36 | 0.33–0.40 |\n",
		// 300 µs = 3333/s over 2 cores; raw 10000/s = 5000 per core; ratios 0.25, 0.40, 0.33.
		"| 2 (all cores) | 300.0 | 3333 | 1667 | 500.0 | 2000 | 100.0 | 5000 | 0.33 | 0.25–0.40 |\n",
		"- 1 goroutine: 2000 verifications/s per core (rounds 1818–2222; target ≥ 1000): meets; by CPU time 1961 per core (510 µs of CPU per verification): meets; " +
			"in the anchor's terms, at this machine's 5000 raw checks/s per core the target needs full / raw ≥ 0.20, and the run read 0.36\n",
		"- all 2 cores: 1667 verifications/s per core (rounds 1250–2000; target ≥ 1000): meets; by CPU time 2000 per core",
		// 10,000 × 500 µs = 5 core-seconds; over 3 × 2 cores 0.8 s.
		"- 10000 nodes in 60 s on 3 servers is 56 verifications/s per server; at 500 µs of CPU per verification (all 2 cores), 10000 verifications are 5.0 core-seconds: 0.8 s of the 60 on 3 servers of 2 cores",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}

	// No CPU times: the rates alone, and the fleet from the last row's rate.
	run.cpuNsPerOp = [benchCount][]float64{}
	run.nsPerOp[benchVerify] = []float64{2000000}
	run.nsPerOp[benchRaw] = []float64{200000}
	got = attestationTargets(run)
	for _, want := range []string{
		"- 1 goroutine: 500 verifications/s per core (rounds 500–500; target ≥ 1000): MISSES; in the anchor's terms",
		"at 1667 verifications/s per core (all 2 cores), 10000 verifications are 6.0 core-seconds",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the targets lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "CPU time") {
		t.Errorf("CPU figures without CPU times:\n%s", got)
	}
}

package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

const msec = time.Millisecond

// The workloads and signers as runCluster builds them.
var (
	burstLoad = workload{label: "burst 1000", n: 1000}
	pacedLoad = workload{label: "paced 10/s", n: 200, rate: 10}
	pcrLoad   = workload{label: "PCR burst 500", n: 500, pcr: true}

	ceilingSigner = signerKind{label: "apiserver-only ceiling (generator writes the cert)", name: "ceiling", kind: "ceiling"}
	kcmDefault    = signerKind{label: "KCM csrsigning, default QPS 20/burst 30", name: "kcm", kind: "kcm"}
	kcmFast       = signerKind{label: "KCM csrsigning, QPS 1000/burst 2000", name: "kcm-qps", kind: "kcm", qps: 1000}
	signetSigner  = signerKind{label: "Signet (signet-server + signet-watcher)", name: "signet", kind: "signet"}
)

func run(s signerKind, l workload, signed int, total, p50, p90, p99 time.Duration) result {
	return result{signer: s, load: l, signed: signed, total: total, p50: p50, p90: p90, p99: p99}
}

func TestMedianRun(t *testing.T) {
	sec := time.Second
	mk := func(l workload, total, p50 time.Duration) result { return run(signetSigner, l, 1000, total, p50, 0, 0) }
	// Every case is built so that the input's middle element, the median by the other key and
	// the upper median (for even counts) are all different runs from the expected one.
	tests := []struct {
		name               string
		runs               []result
		wantTotal, wantP50 time.Duration
	}{
		// Throughputs 1000, 250, 500 /s: median 500 (2 s); by p50 it would be the 4 s run.
		{"burst, 3 runs: median throughput", []result{mk(burstLoad, sec, 30*msec), mk(burstLoad, 4*sec, 20*msec), mk(burstLoad, 2*sec, 10*msec)}, 2 * sec, 10 * msec},
		// p50s 20, 10, 30 ms: median 20 ms (4 s); by throughput it would be the 2 s run.
		{"paced, 3 runs: median p50", []result{mk(pacedLoad, 4*sec, 20*msec), mk(pacedLoad, 2*sec, 10*msec), mk(pacedLoad, sec, 30*msec)}, 4 * sec, 20 * msec},
		// Throughputs 1000, 500, 200, 100 /s: the code takes index (n-1)/2 of the ascending
		// order, the lower middle: 200 /s (5 s).
		{"burst, 4 runs: lower of the two middle throughputs", []result{mk(burstLoad, sec, 40*msec), mk(burstLoad, 2*sec, 20*msec), mk(burstLoad, 5*sec, 10*msec), mk(burstLoad, 10*sec, 30*msec)}, 5 * sec, 10 * msec},
		// p50s 40, 10, 30, 20 ms: the lower middle, 20 ms (8 s).
		{"paced, 4 runs: lower of the two middle p50s", []result{mk(pacedLoad, sec, 40*msec), mk(pacedLoad, 2*sec, 10*msec), mk(pacedLoad, 4*sec, 30*msec), mk(pacedLoad, 8*sec, 20*msec)}, 8 * sec, 20 * msec},
		{"single run", []result{mk(burstLoad, 3*sec, 7*msec)}, 3 * sec, 7 * msec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(tt.runs)
			got := medianRun(tt.runs)
			if got.total != tt.wantTotal || got.p50 != tt.wantP50 {
				t.Errorf("medianRun picked the run with total %v, p50 %v; want total %v, p50 %v", got.total, got.p50, tt.wantTotal, tt.wantP50)
			}
			if got.rounds != len(tt.runs) {
				t.Errorf("rounds = %d, want %d", got.rounds, len(tt.runs))
			}
			for i := range before {
				if tt.runs[i].total != before[i].total || tt.runs[i].p50 != before[i].p50 {
					t.Fatalf("medianRun reordered its argument")
				}
			}
		})
	}
}

func TestQuantile(t *testing.T) {
	seq := func(n int) []time.Duration {
		var s []time.Duration
		for i := 1; i <= n; i++ {
			s = append(s, time.Duration(i)*msec)
		}
		return s
	}
	hundred, ten, three := seq(100), seq(10), seq(3)
	one := []time.Duration{7 * msec}
	tests := []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"1..100 p50", hundred, 0.50, 50 * msec},
		{"1..100 p90", hundred, 0.90, 90 * msec},
		{"1..100 p99", hundred, 0.99, 99 * msec},
		{"1..100 q=0 is the smallest", hundred, 0, 1 * msec},
		{"1..100 q=1 is the largest", hundred, 1, 100 * msec},
		{"1..10 p50", ten, 0.50, 5 * msec},
		{"1..10 p90", ten, 0.90, 9 * msec},
		{"1..10 p99 rounds up to the largest", ten, 0.99, 10 * msec},
		{"1..10 q=0.94: rank 9.4 rounds to 9 (not the ceiling, 10)", ten, 0.94, 9 * msec},
		{"1..10 q=0.95: rank 9.5 rounds to 10", ten, 0.95, 10 * msec},
		{"1..3 p50 is the middle", three, 0.50, 2 * msec},
		{"1..3 p90", three, 0.90, 3 * msec},
		{"single p0", one, 0, 7 * msec},
		{"single p50", one, 0.5, 7 * msec},
		{"single p99", one, 0.99, 7 * msec},
		{"single p100", one, 1, 7 * msec},
		{"empty is 0", nil, 0.5, 0},
	}
	for _, tt := range tests {
		if got := quantile(tt.sorted, tt.q); got != tt.want {
			t.Errorf("%s: quantile(q=%g) = %v, want %v", tt.name, tt.q, got, tt.want)
		}
	}
}

func TestRatio(t *testing.T) {
	tests := []struct {
		a, b float64
		want string
	}{
		{101, 100, "1.01×"},
		{2, 1, "2.00×"},
		{1, 2, "0.50×"},
		{625, 20, "31.25×"},
		{0.0125, 1, "0.01×"},      // 0.0125 is not < 0.01: two decimals
		{1, 1000, "0.001×"},       // below 0.01: one significant digit instead of "0.00×"
		{1, 300, "0.003×"},        // 0.00333…
		{4, 24000, "0.0002×"},     // 0.000167
		{0, 5, "0×"},              // nothing signed by Signet
		{1, 0, "–"},               // no denominator: a dash, not +Inf
		{0, 0, "–"},               // both missing
		{1.5, 0.0, "–"},           // e.g. a signer whose CPU could not be read
		{3.0, 1.0 / 3.0, "9.00×"}, // rounding of the quotient, not of the operands
	}
	for _, tt := range tests {
		if got := ratio(tt.a, tt.b); got != tt.want {
			t.Errorf("ratio(%g, %g) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestTargets(t *testing.T) {
	sec := time.Second
	results := []result{
		// burst: Signet 1000/s; KCM QPS 1000 909.09/s (1.10×, meets ≥ 0.95); KCM default
		// 125/s (8.00×, misses ≥ 10). Swapped operands give 0.91× (misses) and 0.12×.
		run(ceilingSigner, burstLoad, 1000, sec/4, 0, 0, 0),
		run(kcmDefault, burstLoad, 1000, 8*sec, 0, 0, 0),
		run(kcmFast, burstLoad, 1000, 1100*msec, 0, 0, 0),
		run(signetSigner, burstLoad, 1000, sec, 0, 0, 0),
		// paced: p50 12/10 ms = 1.20× (meets ≤ 1.5); p99 50/20 ms = 2.50× (misses ≤ 2).
		// The throughputs (Signet slower) must not matter for a paced stream.
		run(kcmDefault, pacedLoad, 200, 20*sec, 5*sec, 0, 9*sec),
		run(kcmFast, pacedLoad, 200, 20*sec, 10*msec, 0, 20*msec),
		run(signetSigner, pacedLoad, 100, 20*sec, 12*msec, 0, 50*msec),
		// PCR: no KCM, so no target.
		run(ceilingSigner, pcrLoad, 500, sec, 0, 0, 0),
		run(signetSigner, pcrLoad, 500, 2*sec, 0, 0, 0),
	}
	got := targets(results)
	want := "\nTargets:\n\n" +
		"- burst 1000: throughput Signet / KCM (QPS 1000) 1.10× (target ≥ 0.95×): meets\n" +
		"- burst 1000: throughput Signet / KCM (default QPS) 8.00× (target ≥ 10×): MISSES target\n" +
		"- paced 10/s: p50 Signet / KCM (QPS 1000) 1.20× (target ≤ 1.5×): meets\n" +
		"- paced 10/s: p99 Signet / KCM (QPS 1000) 2.50× (target ≤ 2×): MISSES target\n"
	if got != want {
		t.Errorf("targets:\n%s\nwant:\n%s", got, want)
	}
}

// TestTargetsStorm: from 10,000 objects on, the renewal-storm targets are judged too: the
// watcher's CPU per object against KCM's, the control plane's CPU, the watcher's peak RSS,
// and PodCertificateRequests against the ceiling. Smaller bursts get none of them.
func TestTargetsStorm(t *testing.T) {
	sec := time.Second
	storm := workload{label: "burst 10000", n: 10000}
	pcrStorm := workload{label: "PCR burst 10000", n: 10000, pcr: true}
	with := func(r result, cpu, rss []float64, plane float64) result {
		r.cpuEach, r.rssEach, r.planeCPU = cpu, rss, plane
		return r
	}
	results := []result{
		// KCM 200/s, 1.4 ms CPU per CSR, control plane 80 s. Signet 10000/52 s = 192.3/s
		// (0.96×), watcher 7.7 s = 0.77 ms per CSR (0.55×), control plane 84 s (1.05×),
		// watcher RSS 88 MiB.
		with(run(kcmFast, storm, 10000, 50*sec, 0, 0, 0), []float64{14}, []float64{150}, 80),
		with(run(signetSigner, storm, 10000, 52*sec, 0, 0, 0), []float64{12, 7.7}, []float64{60, 88}, 84),
		// PCR: ceiling 400/s, Signet 333.3/s (0.83×); KCM has no PCR signer.
		run(ceilingSigner, pcrStorm, 10000, 25*sec, 0, 0, 0),
		with(run(signetSigner, pcrStorm, 10000, 30*sec, 0, 0, 0), []float64{8, 5.7}, []float64{170, 101}, 45),
		// A 1,000 burst with the same figures: only the throughput target.
		with(run(kcmFast, burstLoad, 1000, 5*sec, 0, 0, 0), []float64{1.4}, []float64{87}, 8),
		with(run(signetSigner, burstLoad, 1000, 4*sec, 0, 0, 0), []float64{1, 0.9}, []float64{47, 150}, 9),
	}
	got := targets(results)
	want := "\nTargets:\n\n" +
		"- burst 10000: throughput Signet / KCM (QPS 1000) 0.96× (target ≥ 0.95×): meets\n" +
		"- burst 10000: watcher CPU per object / KCM (QPS 1000)'s 0.55× (target ≤ 0.5×): MISSES target\n" +
		"- burst 10000: apiserver+etcd CPU Signet / KCM (QPS 1000) 1.05× (target ≤ 1×): MISSES target\n" +
		"- burst 10000: watcher peak RSS 88 MiB (target ≤ 100 MiB): meets\n" +
		"- PCR burst 10000: throughput Signet / ceiling 0.83× (target ≥ 0.95×): MISSES target\n" +
		"- burst 1000: throughput Signet / KCM (QPS 1000) 1.25× (target ≥ 0.95×): meets\n"
	if got != want {
		t.Errorf("targets:\n%s\nwant:\n%s", got, want)
	}

	// The watcher over 100 MiB misses; a ceiling that signed nothing cannot be judged.
	got = targets([]result{
		with(run(kcmFast, storm, 10000, 50*sec, 0, 0, 0), []float64{14}, []float64{150}, 80),
		with(run(signetSigner, storm, 10000, 50*sec, 0, 0, 0), []float64{12, 5}, []float64{60, 101}, 70),
		run(ceilingSigner, pcrStorm, 0, 25*sec, 0, 0, 0),
		run(signetSigner, pcrStorm, 10000, 30*sec, 0, 0, 0),
	})
	for _, line := range []string{
		"- burst 10000: watcher CPU per object / KCM (QPS 1000)'s 0.36× (target ≤ 0.5×): meets\n",
		"- burst 10000: apiserver+etcd CPU Signet / KCM (QPS 1000) 0.88× (target ≤ 1×): meets\n",
		"- burst 10000: watcher peak RSS 101 MiB (target ≤ 100 MiB): MISSES target\n",
		"- PCR burst 10000: throughput Signet / ceiling cannot be judged: the ceiling's figure is 0 (target ≥ 0.95×)\n",
	} {
		if !strings.Contains(got, line) {
			t.Errorf("targets lack %q:\n%s", line, got)
		}
	}
}

// TestRoundByRound: Signet's ratios to its anchor are given per round, in round order, for
// bursts run more than once: throughput (and the watcher's CPU per object for CSRs) against
// KCM at QPS 1000, throughput against the ceiling for PodCertificateRequests.
func TestRoundByRound(t *testing.T) {
	sec := time.Second
	storm := workload{label: "burst 10000", n: 10000}
	pcrStorm := workload{label: "PCR burst 10000", n: 10000, pcr: true}
	cpu := func(r result, each ...float64) result { r.cpuEach = each; return r }
	kcm := []result{
		cpu(run(kcmFast, storm, 10000, 50*sec, 0, 0, 0), 14),
		cpu(run(kcmFast, storm, 10000, 40*sec, 0, 0, 0), 16),
	}
	signet := []result{
		cpu(run(signetSigner, storm, 10000, 40*sec, 0, 0, 0), 10, 7),  // 1.25×, 0.50×
		cpu(run(signetSigner, storm, 10000, 50*sec, 0, 0, 0), 10, 12), // 0.80×, 0.75×
	}
	ceiling := []result{run(ceilingSigner, pcrStorm, 10000, 25*sec, 0, 0, 0), run(ceilingSigner, pcrStorm, 10000, 20*sec, 0, 0, 0)}
	pcr := []result{run(signetSigner, pcrStorm, 10000, 25*sec, 0, 0, 0), run(signetSigner, pcrStorm, 10000, 25*sec, 0, 0, 0)} // 1.00×, 0.80×
	results := []result{medianRun(kcm), medianRun(signet), medianRun(ceiling), medianRun(pcr),
		// Run once: no line.
		medianRun([]result{run(kcmFast, burstLoad, 1000, sec, 0, 0, 0)}), medianRun([]result{run(signetSigner, burstLoad, 1000, sec, 0, 0, 0)})}
	got := roundByRound(results)
	want := "\nRound by round (each round runs its scenarios back to back; the median rows above may come from different rounds):" +
		" burst 10000: throughput Signet / KCM (QPS 1000) 1.25× / 0.80×, watcher CPU per object / KCM's 0.50× / 0.75×;" +
		" PCR burst 10000: throughput Signet / ceiling 1.00× / 0.80×;\n"
	if got != want {
		t.Errorf("roundByRound =\n%q\nwant\n%q", got, want)
	}
	if got := roundByRound(results[4:]); got != "" {
		t.Errorf("one round: %q, want nothing", got)
	}
}

// TestTargetsBoundaries: a ratio exactly on the target meets it; just past it does not.
func TestTargetsBoundaries(t *testing.T) {
	sec := time.Second
	tests := []struct {
		name        string
		signet, kcm result
		want        string
	}{
		{"throughput exactly 0.95×", run(signetSigner, burstLoad, 950, sec, 0, 0, 0), run(kcmFast, burstLoad, 1000, sec, 0, 0, 0),
			"throughput Signet / KCM (QPS 1000) 0.95× (target ≥ 0.95×): meets"},
		{"throughput 0.949×", run(signetSigner, burstLoad, 949, sec, 0, 0, 0), run(kcmFast, burstLoad, 1000, sec, 0, 0, 0),
			"throughput Signet / KCM (QPS 1000) 0.95× (target ≥ 0.95×): MISSES target"},
		{"default QPS exactly 10×", run(signetSigner, burstLoad, 1000, sec, 0, 0, 0), run(kcmDefault, burstLoad, 1000, 10*sec, 0, 0, 0),
			"throughput Signet / KCM (default QPS) 10.00× (target ≥ 10×): meets"},
		{"p50 exactly 1.5×", run(signetSigner, pacedLoad, 200, sec, 1500*msec, 0, 0), run(kcmFast, pacedLoad, 200, sec, sec, 0, sec),
			"p50 Signet / KCM (QPS 1000) 1.50× (target ≤ 1.5×): meets"},
		{"p50 1.501×", run(signetSigner, pacedLoad, 200, sec, 1501*msec, 0, 0), run(kcmFast, pacedLoad, 200, sec, sec, 0, sec),
			"p50 Signet / KCM (QPS 1000) 1.50× (target ≤ 1.5×): MISSES target"},
		{"p99 exactly 2×", run(signetSigner, pacedLoad, 200, sec, 0, 0, 2*sec), run(kcmFast, pacedLoad, 200, sec, sec, 0, sec),
			"p99 Signet / KCM (QPS 1000) 2.00× (target ≤ 2×): meets"},
		{"p99 2.001×", run(signetSigner, pacedLoad, 200, sec, 0, 0, 2001*msec), run(kcmFast, pacedLoad, 200, sec, sec, 0, sec),
			"p99 Signet / KCM (QPS 1000) 2.00× (target ≤ 2×): MISSES target"},
		{"KCM signed nothing", run(signetSigner, burstLoad, 1000, sec, 0, 0, 0), run(kcmFast, burstLoad, 0, sec, 0, 0, 0),
			"throughput Signet / KCM (QPS 1000) cannot be judged: KCM's figure is 0 (target ≥ 0.95×)"},
		{"KCM p50 of 0", run(signetSigner, pacedLoad, 200, sec, msec, 0, msec), run(kcmFast, pacedLoad, 200, sec, 0, 0, sec),
			"p50 Signet / KCM (QPS 1000) cannot be judged: KCM's figure is 0 (target ≤ 1.5×)"},
	}
	for _, tt := range tests {
		got := targets([]result{tt.kcm, tt.signet})
		if !strings.Contains(got, ": "+tt.want+"\n") {
			t.Errorf("%s: targets =\n%s\nwant a line ending %q", tt.name, got, tt.want)
		}
	}
}

func TestTargetsNone(t *testing.T) {
	sec := time.Second
	for name, rs := range map[string][]result{
		"no results":       nil,
		"no Signet":        {run(kcmFast, burstLoad, 1000, sec, 0, 0, 0), run(ceilingSigner, burstLoad, 1000, sec, 0, 0, 0)},
		"Signet, no KCM":   {run(ceilingSigner, pcrLoad, 500, sec, 0, 0, 0), run(signetSigner, pcrLoad, 500, sec, 0, 0, 0)},
		"paced, only slow": {run(kcmDefault, pacedLoad, 200, sec, sec, 0, sec), run(signetSigner, pacedLoad, 200, sec, msec, 0, msec)},
	} {
		if got := targets(rs); got != "" {
			t.Errorf("%s: targets = %q, want none", name, got)
		}
	}
}

// cells returns the trimmed cells of the table row whose first two cells are load and signer.
func cells(t *testing.T, table, load, signer string) []string {
	t.Helper()
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		c := strings.Split(strings.Trim(line, "|"), "|")
		for i := range c {
			c[i] = strings.TrimSpace(c[i])
		}
		if len(c) == 11 && c[0] == load && c[1] == signer {
			return c
		}
	}
	t.Fatalf("no row %q / %q in\n%s", load, signer, table)
	return nil
}

func TestClusterTable(t *testing.T) {
	sec := time.Second
	with := func(r result, cpu []float64, rss, plane float64, rounds int) result {
		r.cpuEach, r.rss, r.planeCPU, r.rounds = cpu, rss, plane, rounds
		return r
	}
	sigPaced := with(run(signetSigner, pacedLoad, 198, 20*sec, 9*msec, 30*msec, 90*msec), []float64{0.4, 0.2}, 40, 2, 3)
	sigPaced.failed, sigPaced.negative, sigPaced.busy = 2, 2, 0.12
	sigPaced.breakdown = breakdown{calls: 200, rpc: 0.0029, handler: 0.0019, issuance: 0.0009, ledger: 0.0006}
	results := []result{
		with(run(ceilingSigner, burstLoad, 1000, sec/2, 2*msec, 3*msec, 5*msec), nil, 0, 3, 3),
		with(run(kcmDefault, burstLoad, 1000, 50*sec, 24000*msec, 44000*msec, 49000*msec), []float64{2}, 80, 6, 1),
		with(run(kcmFast, burstLoad, 1000, 2*sec, 8*msec, 20*msec, 200*msec), []float64{5}, 60, 5, 3),
		with(run(signetSigner, burstLoad, 1000, 1600*msec, 4*msec, 12*msec, 140*msec), []float64{1, 0.5}, 45, 4, 3),
		with(run(kcmFast, pacedLoad, 200, 20*sec, 10*msec, 20*msec, 40*msec), nil, 0, 2, 3), // CPU and RSS unread
		sigPaced,
		with(run(ceilingSigner, pcrLoad, 500, sec, 2*msec, 3*msec, 4*msec), nil, 0, 1, 3),
		with(run(signetSigner, pcrLoad, 500, 2*sec, 4*msec, 6*msec, 8*msec), []float64{0.3, 0.1}, 50, 2, 3),
	}
	table := clusterTable(results, "v1.34.1", 61600*msec)

	for _, s := range []string{"(v1.34.1)", "median of 3 interleaved runs", "Whole run: 1m2s.",
		"| workload | signer | signed | total s | per s | latency p50 ms |"} {
		if !strings.Contains(table, s) {
			t.Errorf("table lacks %q", s)
		}
	}
	// Signer rows: signed, total s, per s, p50, p90, p99 (ms: 2 decimals < 10, 1 < 100, 0 above), CPU, RSS, plane CPU.
	rows := []struct {
		load, signer string
		want         []string
	}{
		{burstLoad.label, ceilingSigner.label, []string{"1000/1000", "0.50", "2000.0", "2.00", "3.00", "5.00", "–", "–", "3.00"}},
		{burstLoad.label, kcmDefault.label, []string{"1000/1000", "50.00", "20.0", "24000", "44000", "49000", "2.00", "80", "6.00"}},
		{burstLoad.label, kcmFast.label, []string{"1000/1000", "2.00", "500.0", "8.00", "20.0", "200", "5.00", "60", "5.00"}},
		{burstLoad.label, signetSigner.label, []string{"1000/1000", "1.60", "625.0", "4.00", "12.0", "140", "1.50", "45", "4.00"}},
		{pacedLoad.label, signetSigner.label, []string{"198/200 (2 failed)", "20.00", "9.9", "9.00", "30.0", "90.0", "0.60", "40", "2.00"}},
		// Ratio rows, Signet / other: per s (bold), p50, p90, p99, CPU, RSS, plane CPU.
		{burstLoad.label, "**Signet / KCM (QPS 1000)**", []string{"", "", "**1.25×**", "0.50×", "0.60×", "0.70×", "0.30×", "0.75×", "0.80×"}},
		{burstLoad.label, "**Signet / KCM (default QPS)**", []string{"", "", "**31.25×**", "0.0002×", "0.0003×", "0.003×", "0.75×", "0.56×", "0.67×"}},
		{burstLoad.label, "**Signet / ceiling**", []string{"", "", "**0.31×**", "2.00×", "4.00×", "28.00×", "–", "–", "1.33×"}},
		{pacedLoad.label, "**Signet / KCM (QPS 1000)**", []string{"", "", "**0.99×**", "0.90×", "1.50×", "2.25×", "–", "–", "1.00×"}},
		{pcrLoad.label, "**Signet / ceiling**", []string{"", "", "**0.50×**", "2.00×", "2.00×", "2.00×", "–", "–", "2.00×"}},
	}
	for _, r := range rows {
		got := cells(t, table, r.load, r.signer)[2:]
		if !slices.Equal(got, r.want) {
			t.Errorf("row %s / %s:\n got %q\nwant %q", r.load, r.signer, got, r.want)
		}
	}
	// Ratio rows only against signers present in that workload; after the load's signer rows,
	// in the order KCM (QPS 1000), KCM (default QPS), ceiling.
	for _, absent := range []string{"| paced 10/s | **Signet / KCM (default QPS)**", "| paced 10/s | **Signet / ceiling**", "| PCR burst 500 | **Signet / KCM"} {
		if strings.Contains(table, absent) {
			t.Errorf("table has a row %q for a signer absent from that workload", absent)
		}
	}
	order := []string{"| burst 1000 | " + signetSigner.label, "| burst 1000 | **Signet / KCM (QPS 1000)**",
		"| burst 1000 | **Signet / KCM (default QPS)**", "| burst 1000 | **Signet / ceiling**", "| paced 10/s | " + kcmFast.label,
		"| PCR burst 500 | " + ceilingSigner.label, "\nTargets:\n"}
	for i := 1; i < len(order); i++ {
		if a, b := strings.Index(table, order[i-1]), strings.Index(table, order[i]); a < 0 || b < 0 || a > b {
			t.Errorf("%q (at %d) should come before %q (at %d)", order[i-1], a, order[i], b)
		}
	}
	for _, s := range []string{
		"- burst 1000: throughput Signet / KCM (QPS 1000) 1.25× (target ≥ 0.95×): meets\n",
		"- burst 1000: throughput Signet / KCM (default QPS) 31.25× (target ≥ 10×): meets\n",
		"- paced 10/s: p99 Signet / KCM (QPS 1000) 2.25× (target ≤ 2×): MISSES target\n",
		" paced 10/s / Signet (signet-server + signet-watcher) 12 %;",
		" burst 1000 server 1.00 s, watcher 0.50 s (1.00 / 0.50 ms per object);",
		" paced 10/s server 0.40 s, watcher 0.20 s (2.02 / 1.01 ms per object);",
		"Note: paced 10/s, Signet (signet-server + signet-watcher): 2 certificate(s) seen on the watch before the approval call returned",
		// Only the run with a breakdown gets one.
		"/metrics: the watcher's signet_watcher_server_rpc_duration_seconds, the server's sign_duration_seconds, issuance_duration_seconds " +
			"and ledger_append_duration_seconds): paced 10/s: watcher → server 2.90 ms = server 1.90 (issuance 0.90, ledger 0.60, rest 0.40) " +
			"+ transport and waiting 1.00;\n",
	} {
		if !strings.Contains(table, s) {
			t.Errorf("table lacks %q", s)
		}
	}
}

func TestParseInts(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []int
	}{
		{"1000", []int{1000}},
		{"1,64", []int{1, 64}},
		{" 100 , 1000,5000 ", []int{100, 1000, 5000}},
		{"", nil},
		{"   ", nil},
	} {
		got, err := parseInts(tt.in)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("parseInts(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"1,x", "0", "-5", "1,,2", "1,", "1.5", "64,0"} {
		if got, err := parseInts(in); err == nil || got != nil {
			t.Errorf("parseInts(%q) = %v, %v; want an error", in, got, err)
		} else if !strings.Contains(err.Error(), "bad count") {
			t.Errorf("parseInts(%q) error %q does not name the bad count", in, err)
		}
	}
}

package main

// -attestation: the server's check of a TPM-attested request against the raw signature
// checks it contains, in the same run. The benchmarks are attestation/bench_test.go's (one
// piece of evidence made on the in-process TPM simulator, then verified again and again):
//
//   - BenchmarkVerify: attestation.Split, x509.ParseCertificateRequest, CheckSignature and
//     attestation.Verify (allow-list trust, the ticket key, a clock inside the ticket's life);
//   - BenchmarkVerifyRawSignatures, the anchor: the three ECDSA P-256 verifications that
//     contains (the AK's over the certification, the binding key's over the binding digest,
//     the request's own), straight on crypto/ecdsa;
//   - their Parallel variants (b.RunParallel, GOMAXPROCS goroutines).
//
// The package's test binary is built once (go test -c) and each benchmark runs in its own
// process, one after another in roundOrder, for -attestation-rounds rounds; the report gives
// medians and each round's own ratio. The target is absolute (≥ 1,000 verifications/s
// per core), so the report also states it in the anchor's terms: the ratio that would meet it
// at this machine's raw signature rate.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Targets of the attestation issue.
const (
	// attestPerCoreFloor: verifications per second per core.
	attestPerCoreFloor = 1000.0
	// attestNodes join within attestWindow on attestServers servers: what the floor is for.
	attestNodes   = 10000
	attestWindow  = time.Minute
	attestServers = 3
)

// attestationPkg is the package holding the benchmarks, relative to the module root (where
// make runs the bench).
const attestationPkg = "./attestation/"

// attestation benchmarks, in the order of attestationRun's fields.
const (
	benchVerify = iota
	benchRaw
	benchVerifyParallel
	benchRawParallel
	benchCount
)

var attestationBenchmarks = [benchCount]string{
	benchVerify:         "BenchmarkVerify",
	benchRaw:            "BenchmarkVerifyRawSignatures",
	benchVerifyParallel: "BenchmarkVerifyParallel",
	benchRawParallel:    "BenchmarkVerifyRawSignaturesParallel",
}

type attestationOpts struct {
	goCmd     string
	rounds    int
	benchtime time.Duration
	out       string
}

// attestationRun is what the rounds measured: each benchmark's ns/op (wall time) and
// cpu-ns/op (the benchmark process's CPU time per operation, when it reported one), one per
// round, and the GOMAXPROCS the benchmarks ran with (their parallel variants run that many
// goroutines).
type attestationRun struct {
	nsPerOp, cpuNsPerOp [benchCount][]float64
	procs               int
}

// benchResult is one benchmark's result line.
type benchResult struct {
	nsPerOp, cpuNsPerOp float64 // cpuNsPerOp 0: not reported
	procs               int
}

// runAttestation builds attestation's test binary, runs its verification benchmarks over
// o.rounds interleaved rounds and prints (and writes to o.out) the report.
func runAttestation(ctx context.Context, o attestationOpts) error {
	if o.rounds < 1 {
		return fmt.Errorf("-attestation-rounds %d: want at least 1", o.rounds)
	}
	dir, err := os.MkdirTemp("", "signet-bench-attestation-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "attestation.test")
	build := exec.CommandContext(ctx, o.goCmd, "test", "-c", "-o", bin, attestationPkg)
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the attestation benchmarks (%s test -c %s): %w\n%s", o.goCmd, attestationPkg, err, out)
	}
	busy := waitQuiet(30 * time.Second)
	start := time.Now()
	var run attestationRun
	for round := range o.rounds {
		for _, i := range roundOrder(benchCount, round) {
			name := attestationBenchmarks[i]
			c := exec.CommandContext(ctx, bin, "-test.run", "^$", "-test.bench", "^"+name+"$",
				"-test.benchtime", o.benchtime.String(), "-test.count", "1")
			c.Dir = filepath.Clean(attestationPkg) // go test runs a package's tests in its folder
			var stderr bytes.Buffer
			c.Stderr = &stderr
			out, err := c.Output()
			if err != nil {
				return fmt.Errorf("round %d, %s: %w\n%s%s", round+1, name, err, out, stderr.Bytes())
			}
			res, err := parseBenchOutput(out, name)
			if err != nil {
				return fmt.Errorf("round %d: %w", round+1, err)
			}
			run.nsPerOp[i] = append(run.nsPerOp[i], res.nsPerOp)
			if res.cpuNsPerOp > 0 {
				run.cpuNsPerOp[i] = append(run.cpuNsPerOp[i], res.cpuNsPerOp)
			}
			run.procs = res.procs
			fmt.Fprintf(os.Stderr, "round %d: %s %.0f ns/op, %.0f cpu-ns/op\n", round+1, name, res.nsPerOp, res.cpuNsPerOp)
		}
	}
	table := attestationTable(run, o.rounds, o.benchtime, time.Since(start), busy)
	fmt.Print(table)
	if o.out != "" {
		return os.WriteFile(o.out, []byte(table), 0o644)
	}
	return nil
}

// parseBenchOutput finds benchmark name's result line in go test's output and returns its
// ns/op, its cpu-ns/op if it has one, and the GOMAXPROCS it ran with (the name's -N suffix;
// none means 1).
func parseBenchOutput(out []byte, name string) (benchResult, error) {
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		res := benchResult{procs: 1}
		if f[0] != name {
			suffix, ok := strings.CutPrefix(f[0], name+"-")
			if !ok {
				continue
			}
			p, err := strconv.Atoi(suffix)
			if err != nil || p < 1 {
				continue
			}
			res.procs = p
		}
		// name, iterations, then value-unit pairs.
		for k := 2; k+1 < len(f); k += 2 {
			var into *float64
			switch f[k+1] {
			case "ns/op":
				into = &res.nsPerOp
			case "cpu-ns/op":
				into = &res.cpuNsPerOp
			default:
				continue
			}
			v, err := strconv.ParseFloat(f[k], 64)
			if err != nil || v <= 0 {
				return benchResult{}, fmt.Errorf("%s: bad %s %q in %q", name, f[k+1], f[k], line)
			}
			*into = v
		}
		if res.nsPerOp == 0 {
			return benchResult{}, fmt.Errorf("%s: no ns/op in %q", name, line)
		}
		return res, nil
	}
	return benchResult{}, fmt.Errorf("%s: no result line in the benchmark's output:\n%s", name, out)
}

// opsPerSecond turns ns/op into operations per second, per round.
func opsPerSecond(nsPerOp []float64) []float64 {
	out := make([]float64, len(nsPerOp))
	for i, ns := range nsPerOp {
		out[i] = 1e9 / ns
	}
	return out
}

// scaled is xs, each divided by d.
func scaled(xs []float64, d float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x / d
	}
	return out
}

// attestationRow is one line of the report: the full check against the raw checks, with one
// goroutine or with all cores.
type attestationRow struct {
	label     string
	full, raw []float64 // ns/op by round
	fullCPU   []float64 // cpu-ns/op by round, if reported
	cores     int       // cores the rate is shared by
}

func (run attestationRun) rows() []attestationRow {
	procs := max(run.procs, 1)
	var out []attestationRow
	for _, r := range []attestationRow{
		{label: "1", full: run.nsPerOp[benchVerify], raw: run.nsPerOp[benchRaw], fullCPU: run.cpuNsPerOp[benchVerify], cores: 1},
		{label: fmt.Sprintf("%d (all cores)", procs), full: run.nsPerOp[benchVerifyParallel], raw: run.nsPerOp[benchRawParallel], fullCPU: run.cpuNsPerOp[benchVerifyParallel], cores: procs},
	} {
		if len(r.full) > 0 && len(r.raw) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// perCore is the full check's verifications per second per core, by round.
func (r attestationRow) perCore() []float64 { return scaled(opsPerSecond(r.full), float64(r.cores)) }

// rawPerCore is the median of the raw checks per second per core.
func (r attestationRow) rawPerCore() float64 {
	return median(scaled(opsPerSecond(r.raw), float64(r.cores)))
}

// ratios is each round's full check rate over its raw checks rate.
func (r attestationRow) ratios() []float64 {
	return perRound(opsPerSecond(r.full), opsPerSecond(r.raw))
}

// cpuPerCore is the median of the verifications one core makes by CPU time (1 / CPU time per
// verification), or 0 if the benchmarks reported none.
func (r attestationRow) cpuPerCore() float64 {
	if len(r.fullCPU) == 0 {
		return 0
	}
	return 1e9 / median(r.fullCPU)
}

// attestationTable renders the -attestation report: what was measured, the table, the
// targets.
func attestationTable(run attestationRun, rounds int, benchtime, elapsed time.Duration, busyAtStart float64) string {
	var sb strings.Builder
	procs := max(run.procs, 1)
	fmt.Fprintf(&sb, "Run %s on %s, %d cores (GOMAXPROCS %d), %s; %d interleaved rounds of %s per benchmark (each in its own process; the order changes every round), whole run %s; "+
		"the machine was %.0f %% busy (one-second sample) when the measurements began, after waiting up to 30 s for < 15 %%. ",
		time.Now().Format("2006-01-02"), cpuModel(), runtime.NumCPU(), procs, runtime.Version(), rounds, benchtime, elapsed.Round(time.Second), 100*busyAtStart)
	sb.WriteString("Full check = what the server does per attested request (attestation/bench_test.go, BenchmarkVerify): attestation.Split, x509.ParseCertificateRequest, CheckSignature, attestation.Verify " +
		"(allow-list trust, the ticket key, a clock inside the ticket's life), on one piece of evidence made beforehand on the in-process TPM simulator (AK and binding key ECDSA P-256, request key P-256). " +
		"Raw = the three ECDSA P-256 verifications the full check contains (the AK's over the certification, the binding key's over the binding digest, the request's own), straight on crypto/ecdsa with the digests made beforehand (BenchmarkVerifyRawSignatures). " +
		"1 goroutine: per core = the rate; all cores: b.RunParallel with GOMAXPROCS goroutines, per core = the rate / GOMAXPROCS, which counts only the cores the machine left the run. " +
		"CPU = the benchmark process's user+sys time per verification (/proc/self/stat over the timed loop, every thread, garbage collection included); by CPU time, one core makes 1 / that per second, whatever else runs on the machine. " +
		"Figures are the medians of the rounds; full / raw is the median of each round's own ratio of rates (the share of the full check's time that is the signature math), with its range.\n\n")
	sb.WriteString("| goroutines | full check µs | verifications/s | verifications/s per core | CPU µs per verification | verifications/s per core by CPU time | raw checks µs | raw checks/s per core | full / raw | rounds' ratios |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range run.rows() {
		ratios := r.ratios()
		cpu, byCPU := "–", "–"
		if c := r.cpuPerCore(); c > 0 {
			cpu, byCPU = fmt.Sprintf("%.1f", median(r.fullCPU)/1000), fmt.Sprintf("%.0f", c)
		}
		fmt.Fprintf(&sb, "| %s | %.1f | %.0f | %.0f | %s | %s | %.1f | %.0f | %.2f | %.2f–%.2f |\n", r.label,
			median(r.full)/1000, 1e9/median(r.full), median(r.perCore()), cpu, byCPU, median(r.raw)/1000, r.rawPerCore(),
			median(ratios), slices.Min(ratios), slices.Max(ratios))
	}
	sb.WriteString(attestationTargets(run))
	return sb.String()
}

// attestationTargets judges the per-core target for one goroutine and for all cores (by the
// rate, and by CPU time where measured), states it in the anchor's terms, and what the
// measured cost means for the fleet.
func attestationTargets(run attestationRun) string {
	procs := max(run.procs, 1)
	var sb strings.Builder
	// The fleet's arithmetic takes the last row's CPU time per verification if measured (what
	// a verification costs, whatever else ran), else its rate per core.
	var fleetPerCore, wallPerCore float64
	var fleetBasis, wallBasis string
	for _, r := range run.rows() {
		perCore := r.perCore()
		got := median(perCore)
		label := "1 goroutine"
		if r.cores > 1 {
			label = fmt.Sprintf("all %d cores", r.cores)
		}
		fmt.Fprintf(&sb, "- %s: %.0f verifications/s per core (rounds %.0f–%.0f; target ≥ %.0f): %s", label, got, slices.Min(perCore), slices.Max(perCore), attestPerCoreFloor, verdict(got, attestPerCoreFloor))
		if c := r.cpuPerCore(); c > 0 {
			fmt.Fprintf(&sb, "; by CPU time %.0f per core (%.0f µs of CPU per verification): %s", c, median(r.fullCPU)/1000, verdict(c, attestPerCoreFloor))
			fleetPerCore, fleetBasis = c, fmt.Sprintf("%.0f µs of CPU per verification (%s)", median(r.fullCPU)/1000, label)
		}
		wallPerCore, wallBasis = got, fmt.Sprintf("%.0f verifications/s per core (%s)", got, label)
		fmt.Fprintf(&sb, "; in the anchor's terms, at this machine's %.0f raw checks/s per core the target needs full / raw ≥ %.2f, and the run read %.2f\n",
			r.rawPerCore(), attestPerCoreFloor/r.rawPerCore(), median(r.ratios()))
	}
	if sb.Len() == 0 {
		return ""
	}
	if fleetPerCore == 0 {
		fleetPerCore, fleetBasis = wallPerCore, wallBasis
	}
	if fleetPerCore > 0 {
		need := float64(attestNodes) / attestWindow.Seconds() / attestServers
		fmt.Fprintf(&sb, "- %d nodes in %.0f s on %d servers is %.0f verifications/s per server; at %s, %d verifications are %.1f core-seconds: %.1f s of the %.0f on %d servers of %d cores (verification only: the challenge, the activation, the issuance and its ledger record come on top)\n",
			attestNodes, attestWindow.Seconds(), attestServers, need, fleetBasis, attestNodes, float64(attestNodes)/fleetPerCore,
			float64(attestNodes)/(fleetPerCore*float64(procs)*attestServers), attestWindow.Seconds(), attestServers, procs)
	}
	return "\nTargets (absolute rates depend on the hardware; the full / raw ratio much less):\n\n" + sb.String()
}

package main

// The -hardware report: the Markdown table of raw and through-the-server rates per CA key
// backend, and the verdicts against the targets with what bounds each.

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Targets of the hardware-key issue.
const (
	// tpmServerFloor: through the server ≥ 0.8 × the raw rate of a TPM key (the device is the
	// bottleneck; the server must not add to it).
	tpmServerFloor = 0.8
	// hsmFileFloor: SoftHSM2 at many callers ≥ 0.6 × the file key's issuance rate, same run.
	hsmFileFloor = 0.6
	// hsmTargetCallers is the caller count the SoftHSM2 target is stated for.
	hsmTargetCallers = 64
)

// isTPM reports whether the row's key is in a TPM: the server/raw target applies.
func (r keyRow) isTPM() bool { return r.name == "tpm-simulator" || r.name == "swtpm" }

// isHSM reports whether the row's key is on the SoftHSM2 token: the file-ratio target applies.
func (r keyRow) isHSM() bool { return strings.HasPrefix(r.name, "softhsm") }

// fileAnchor is the row of the plain file key of the same algorithm and caller count in rows,
// or nil (r is that row, or it was not measured).
func (r keyRow) fileAnchor(rows []keyRow) *keyRow {
	want := "file"
	if r.algorithm != "P-256" {
		want = "file-rsa"
	}
	for i := range rows {
		if rows[i].name == want && rows[i].callers == r.callers && rows[i].name != r.name {
			return &rows[i]
		}
	}
	return nil
}

// perRound is num[i]/den[i] for each round both were measured in.
func perRound(num, den []float64) []float64 {
	out := make([]float64, 0, len(num))
	for i := range min(len(num), len(den)) {
		if den[i] > 0 {
			out = append(out, num[i]/den[i])
		}
	}
	return out
}

// span is "median (min–max)" of xs, or "–".
func span(xs []float64) string {
	if len(xs) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", median(xs), slices.Min(xs), slices.Max(xs))
}

func msPerOp(cpu []float64) string {
	if len(cpu) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f", 1000*median(cpu))
}

// markdown is r's table row; rows holds the anchors of the same run.
func (r keyRow) markdown(rows []keyRow) string {
	raw := fmt.Sprintf("%.0f", median(r.raw.rate))
	if len(r.socket.rate) > 0 {
		raw += fmt.Sprintf(" (over the server's socket: %.0f)", median(r.socket.rate))
	}
	vsFile := "–"
	if a := r.fileAnchor(rows); a != nil {
		vsFile = span(perRound(r.server.rate, a.server.rate))
	}
	return fmt.Sprintf("| %s | %s | %s | %d | %s | %s | %.0f | %s | %.2f / %.2f | %s | %s |",
		r.label, r.name, r.algorithm, r.callers, raw, msPerOp(r.raw.cpu), median(r.server.rate), msPerOp(r.server.cpu),
		median(r.server.rate)*median(r.server.cpu), median(r.server.machine), span(perRound(r.server.rate, r.raw.rate)), vsFile)
}

// hardwareTable renders the -hardware rows as Markdown: what was measured, the table and the
// targets.
func hardwareTable(rows []keyRow, rounds int, benchtime, elapsed time.Duration, busyAtStart float64) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Run %s on %s, %d cores (GOMAXPROCS %d), %s; %d interleaved rounds of %s per measurement (the order changes every round), whole run %s; "+
		"the machine was %.0f %% busy (one-second sample) when the measurements began, after waiting up to 30 s for < 15 %%. ",
		time.Now().Format("2006-01-02"), cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), rounds, benchtime, elapsed.Round(time.Second), 100*busyAtStart)
	sb.WriteString("Raw = crypto.Signer.Sign of a SHA-256 digest on the key as keystore.Open gives it to the server (an HSM or TPM key is a keystore.Device: a timeout on every call). " +
		"Server = issuances over gRPC with mutual TLS from one shared client connection to signet-server in this process (kube-apiserver-client profile, default lint gate, durable ledger), " +
		"the key as its signer's CA key under a root the key made itself; certsign verifies every signature of an HSM or TPM key. " +
		"Rates are the median of the rounds; ratios are the median of each round's own ratio, with their range. " +
		"CPU per op = user+sys seconds of the bench process (and of swtpm for its key) over the measurement, calibration included, per call. " +
		"Cores busy during the server runs: ours = server rate × its CPU per issuance; machine = all processes (/proc/stat), other people's work on the shared box included.\n\n")
	sb.WriteString("| device | backend | key | callers | raw signatures/s | CPU ms per signature | issuances/s through the server | CPU ms per issuance | cores busy, server runs (ours / machine) | server / raw | server / file key's server, same algorithm |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		sb.WriteString(r.markdown(rows) + "\n")
	}
	sb.WriteString(hardwareTargets(rows, runtime.NumCPU()))
	return sb.String()
}

// hardwareTargets states each target's ratio, its verdict and, when it is missed, the bound
// this run's own figures put on it.
func hardwareTargets(rows []keyRow, cores int) string {
	var sb strings.Builder
	for _, r := range rows {
		switch {
		case r.isTPM():
			ratios := perRound(r.server.rate, r.raw.rate)
			if len(ratios) == 0 {
				continue
			}
			got := median(ratios)
			fmt.Fprintf(&sb, "- %s, %d caller%s: server / raw %.2f (rounds %.2f–%.2f; target ≥ %.1f): %s%s\n", r.name, r.callers, plural(r.callers),
				got, slices.Min(ratios), slices.Max(ratios), tpmServerFloor, verdict(got, tpmServerFloor), tpmBound(r, rows, cores))
		case r.isHSM() && r.callers == hsmTargetCallers:
			a := r.fileAnchor(rows)
			if a == nil {
				continue
			}
			ratios := perRound(r.server.rate, a.server.rate)
			if len(ratios) == 0 {
				continue
			}
			got := median(ratios)
			fmt.Fprintf(&sb, "- %s, %d callers: server / %s key's server %.2f (rounds %.2f–%.2f; target ≥ %.1f): %s%s\n", r.name, r.callers, a.name,
				got, slices.Min(ratios), slices.Max(ratios), hsmFileFloor, verdict(got, hsmFileFloor), cpuBound(r, *a, cores))
		}
	}
	if sb.Len() == 0 {
		return ""
	}
	return "\nTargets:\n\n" + sb.String()
}

func verdict(got, floor float64) string {
	if got >= floor {
		return "meets"
	}
	return "MISSES"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// tpmBound is what limits a TPM key's server / raw ratio in this run. One caller waits for the
// server's own work and the device's signature in turn, so the ratio can be at most
// t_dev / (t_dev + t_server), t_server taken from the file key's server at one caller (whose
// software signature costs next to nothing). Many callers can overlap the two, until the
// cores are full: at most cores / (CPU per issuance) issuances per second, the device's own
// CPU included (the simulator runs in the bench, swtpm is counted with it).
func tpmBound(r keyRow, rows []keyRow, cores int) string {
	if r.callers == 1 {
		a := r.fileAnchor(rows)
		if a == nil {
			return ""
		}
		// Per round: t_dev / (t_dev + t_server) = file server rate / (raw rate + file server rate).
		var bounds []float64
		for i := range min(len(r.raw.rate), len(a.server.rate)) {
			bounds = append(bounds, a.server.rate[i]/(r.raw.rate[i]+a.server.rate[i]))
		}
		return fmt.Sprintf("; one caller waits for the device (%.2f ms per signature) and for the server's own work (%.2f ms per issuance with the file key) in turn: at most %s",
			1000/median(r.raw.rate), 1000/median(a.server.rate), span(bounds))
	}
	cpu := median(r.server.cpu)
	if cpu <= 0 {
		return ""
	}
	ceiling := float64(cores) / cpu
	return fmt.Sprintf("; the server runs kept %.2f of %d cores busy (the machine %.2f) at %.2f ms CPU per issuance, device included: %d cores to ourselves would allow at most %.0f/s, %.2f × raw",
		median(r.server.rate)*cpu, cores, median(r.server.machine), 1000*cpu, cores, ceiling, ceiling/median(r.raw.rate))
}

// cpuBound compares the CPU per issuance of r's server with that of the file key's: when both
// fill the cores, their rates can differ by no less than that.
func cpuBound(r, file keyRow, cores int) string {
	c, f := median(r.server.cpu), median(file.server.cpu)
	if c <= 0 || f <= 0 {
		return ""
	}
	return fmt.Sprintf("; CPU per issuance %.3f ms against the file key's %.3f ms (ours / the machine's cores busy %.2f / %.2f and %.2f / %.2f of %d): with the cores full, at most %.2f",
		1000*c, 1000*f, median(r.server.rate)*c, median(r.server.machine), median(file.server.rate)*f, median(file.server.machine), cores, f/c)
}

// cpuModel is the first model name in /proc/cpuinfo, or "unknown CPU".
func cpuModel() string {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

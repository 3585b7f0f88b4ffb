package main

// The -cluster report: the Markdown table, the ratio rows and the verdict against the targets.

import (
	"fmt"
	"strings"
	"time"
)

func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// clusterTable renders the -cluster results, run on Kubernetes kubeVersion, as Markdown.
func clusterTable(results []result, kubeVersion string, elapsed time.Duration) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Same run, same etcd + kube-apiserver (%s), all processes on the same cores as the load generator (16 workers: create → approve; the ceiling also writes the certificate). "+
		"CSRs: kubernetes.io/kube-apiserver-client, P-256, client auth + digital signature; P-256 CA for both signers. "+
		"Throughput = signed / (first create → last certificate seen on the watch); latency = approval returned → certificate seen. "+
		"PCR rows: PodCertificateRequests (certificates.k8s.io/v1, empty stub PKCS#10 with a P-256 key, as the kubelet makes them) for a pod-identity signer, Signet only (kube-controller-manager has no PodCertificateRequest signer); there is no approval, so latency = create returned → Issued seen, and the ceiling writes the Issued status (chain, notBefore, notAfter, beginRefreshAt) itself. "+
		"CPU = user+sys seconds of the signer process(es) over the scenario; RSS = VmHWM (Signet: server + watcher summed); apiserver+etcd CPU = the same for the control plane, which shares the 2 cores with the signer, so signer CPU is taken from the API server. "+
		"Both signers run as least-privilege users with the same RBAC rules. "+
		"Each row is the median of %d interleaved runs (by throughput for bursts, by p50 for the paced stream; KCM at its default QPS runs bursts once: its rate is its client's QPS limit); the signers' order changes from round to round (rotated, odd rounds reversed). "+
		"Ratio rows: throughput and latency as Signet / other (throughput > 1 and latency < 1 favour Signet). Whole run: %s.\n\n",
		kubeVersion, rounds(results), elapsed.Round(time.Second))
	sb.WriteString("| workload | signer | signed | total s | per s | latency p50 ms | p90 ms | p99 ms | signer CPU s | signer peak RSS MiB | apiserver+etcd CPU s |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	byLoad := map[string][]result{}
	var order []string
	for _, r := range results {
		if _, ok := byLoad[r.load.label]; !ok {
			order = append(order, r.load.label)
		}
		byLoad[r.load.label] = append(byLoad[r.load.label], r)
	}
	for _, load := range order {
		rs := byLoad[load]
		var signet *result
		for i := range rs {
			r := rs[i]
			if r.signer.kind == "signet" && !r.signer.trustBundlesOff { // the default deployment's
				signet = &rs[i]
			}
			cpu, rss := "–", "–"
			if r.signer.kind != "ceiling" {
				cpu, rss = fmt.Sprintf("%.2f", r.cpu()), fmt.Sprintf("%.0f", r.rss)
			}
			signed := fmt.Sprintf("%d/%d", r.signed, r.load.n)
			if r.failed > 0 {
				signed += fmt.Sprintf(" (%d failed)", r.failed)
			}
			fmt.Fprintf(&sb, "| %s | %s | %s | %.2f | %.1f | %s | %s | %s | %s | %s | %.2f |\n", load, r.signer.label, signed,
				r.total.Seconds(), r.throughput(), ms(r.p50), ms(r.p90), ms(r.p99), cpu, rss, r.planeCPU)
		}
		if signet == nil {
			continue
		}
		for _, want := range []struct {
			kind string
			qps  int
			name string
		}{{"kcm", 1000, "KCM (QPS 1000)"}, {"kcm", 0, "KCM (default QPS)"}, {"ceiling", 0, "ceiling"}} {
			for _, r := range rs {
				if r.signer.kind != want.kind || r.signer.qps != want.qps {
					continue
				}
				cpu, rss := "–", "–"
				if r.signer.kind != "ceiling" && r.cpu() > 0 && r.rss > 0 {
					cpu, rss = ratio(signet.cpu(), r.cpu()), ratio(signet.rss, r.rss)
				}
				fmt.Fprintf(&sb, "| %s | **Signet / %s** | | | **%s** | %s | %s | %s | %s | %s | %s |\n", load, want.name,
					ratio(signet.throughput(), r.throughput()), ratio(signet.p50.Seconds(), r.p50.Seconds()),
					ratio(signet.p90.Seconds(), r.p90.Seconds()), ratio(signet.p99.Seconds(), r.p99.Seconds()), cpu, rss, ratio(signet.planeCPU, r.planeCPU))
			}
		}
	}
	sb.WriteString(targets(results))
	sb.WriteString(roundByRound(results))
	sb.WriteString("\nMachine busy (all cores, one-second sample) just before each scenario, after waiting up to 60 s for < 15 %:")
	for _, r := range results {
		fmt.Fprintf(&sb, " %s / %s %.0f %%;", r.load.label, r.signer.label, 100*r.busy)
	}
	sb.WriteString("\n\nSignet's CPU and peak RSS by process (server on its own host in production; only the watcher shares the control plane's cores):")
	for _, r := range results {
		if w, ok := r.watcherCPUPerObject(); ok {
			fmt.Fprintf(&sb, " %s%s server %.2f s, watcher %.2f s (%.2f / %.2f ms per object)", r.load.label, offNote(r.signer), r.cpuEach[0], r.cpuEach[1],
				1000*r.cpuEach[0]/float64(r.signed), 1000*w)
			if len(r.rssEach) == 2 {
				fmt.Fprintf(&sb, ", server %.0f MiB, watcher %.0f MiB", r.rssEach[0], r.rssEach[1])
			}
			sb.WriteString(";")
		}
	}
	sb.WriteString("\n")
	sb.WriteString(apiRequestsTable(results))
	var parts []string
	for _, r := range results {
		if r.breakdown.calls > 0 {
			parts = append(parts, fmt.Sprintf(" %s%s: %s;", r.load.label, offNote(r.signer), r.breakdown))
		}
	}
	if len(parts) > 0 {
		sb.WriteString("\nWhere Signet's signing calls spend their time (means over each timed run, from the deltas of both processes' /metrics: " +
			"the watcher's signet_watcher_server_rpc_duration_seconds, the server's sign_duration_seconds, issuance_duration_seconds and ledger_append_duration_seconds):")
		sb.WriteString(strings.Join(parts, ""))
		sb.WriteString("\n")
	}
	for _, r := range results {
		if r.negative > 0 {
			fmt.Fprintf(&sb, "\nNote: %s, %s: %d certificate(s) seen on the watch before the approval call returned (negative latency, kept in the quantiles; drawn at 0.1 ms in the plot).\n", r.load.label, r.signer.label, r.negative)
		}
	}
	return sb.String()
}

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	if r := a / b; r < 0.01 {
		return fmt.Sprintf("%.1g×", r)
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// rounds is the largest number of runs behind any result.
func rounds(results []result) int {
	n := 1
	for _, r := range results {
		n = max(n, r.rounds)
	}
	return n
}

// stormBurst is the burst size from which the renewal-storm targets apply (issue 27).
const stormBurst = 10000

// Renewal-storm targets: the watcher's CPU per CSR at most half KCM's, the control plane's CPU
// no more than during KCM's burst, the watcher's peak RSS, and PodCertificateRequests at
// least 0.95 × the ceiling.
const (
	stormWatcherCPU   = 0.5
	stormPlaneCPU     = 1.0
	stormWatcherRSS   = 100 // MiB
	stormPCRToCeiling = 0.95
)

// findResult returns the result of workload load for the signer of kind and qps (with trust
// bundle publishing on, as deployed), or nil.
func findResult(results []result, load, kind string, qps int) *result {
	for i := range results {
		r := &results[i]
		if r.load.label == load && r.signer.kind == kind && r.signer.qps == qps && !r.signer.trustBundlesOff {
			return r
		}
	}
	return nil
}

// targets states, for every workload, Signet's ratios against the speed targets: burst
// throughput ≥ 0.95 × KCM at QPS 1000 and ≥ 10 × KCM at its default QPS; paced p50 ≤ 1.5 ×
// and p99 ≤ 2 × KCM's (QPS 1000: the faster KCM); and from stormBurst objects on, the
// renewal-storm targets above.
func targets(results []result) string {
	find := func(load, kind string, qps int) *result { return findResult(results, load, kind, qps) }
	var sb strings.Builder
	seen := map[string]bool{}
	for _, r := range results {
		load := r.load.label
		if seen[load] {
			continue
		}
		seen[load] = true
		signet, fast, slow := find(load, "signet", 0), find(load, "kcm", 1000), find(load, "kcm", 0)
		if signet == nil {
			continue
		}
		// check states num/den against bound (at least, or at most); a zero anchor (KCM or the
		// ceiling signed nothing, or a latency of 0) is reported, not judged. anchor names it.
		check := func(name, anchor string, num, den, bound float64, atLeast bool) {
			op := "≤"
			if atLeast {
				op = "≥"
			}
			if den <= 0 {
				fmt.Fprintf(&sb, "- %s: %s cannot be judged: %s figure is 0 (target %s %g×)\n", load, name, anchor, op, bound)
				return
			}
			got := num / den
			verdict := "meets"
			if (atLeast && got < bound) || (!atLeast && got > bound) {
				verdict = "MISSES target"
			}
			fmt.Fprintf(&sb, "- %s: %s %.2f× (target %s %g×): %s\n", load, name, got, op, bound, verdict)
		}
		if r.load.rate == 0 {
			if fast != nil {
				check("throughput Signet / KCM (QPS 1000)", "KCM's", signet.throughput(), fast.throughput(), 0.95, true)
			}
			if slow != nil {
				check("throughput Signet / KCM (default QPS)", "KCM's", signet.throughput(), slow.throughput(), 10, true)
			}
			if r.load.n < stormBurst {
				continue
			}
			if ceiling := find(load, "ceiling", 0); r.load.pcr && ceiling != nil {
				check("throughput Signet / ceiling", "the ceiling's", signet.throughput(), ceiling.throughput(), stormPCRToCeiling, true)
			}
			if w, ok := signet.watcherCPUPerObject(); ok && fast != nil {
				check("watcher CPU per object / KCM (QPS 1000)'s", "KCM's", w, fast.cpuPerObject(), stormWatcherCPU, false)
			}
			if fast != nil {
				check("apiserver+etcd CPU Signet / KCM (QPS 1000)", "KCM's", signet.planeCPU, fast.planeCPU, stormPlaneCPU, false)
			}
			if !r.load.pcr && len(signet.rssEach) == 2 {
				verdict := "meets"
				if signet.rssEach[1] > stormWatcherRSS {
					verdict = "MISSES target"
				}
				fmt.Fprintf(&sb, "- %s: watcher peak RSS %.0f MiB (target ≤ %d MiB): %s\n", load, signet.rssEach[1], stormWatcherRSS, verdict)
			}
			continue
		}
		if fast != nil {
			check("p50 Signet / KCM (QPS 1000)", "KCM's", signet.p50.Seconds(), fast.p50.Seconds(), 1.5, false)
			check("p99 Signet / KCM (QPS 1000)", "KCM's", signet.p99.Seconds(), fast.p99.Seconds(), 2, false)
		}
	}
	if sb.Len() == 0 {
		return ""
	}
	return "\nTargets:\n\n" + sb.String()
}

// roundByRound gives, for every burst run more than once, Signet's ratios to its anchor (KCM
// at QPS 1000 for CSRs, the ceiling for PodCertificateRequests) round by round: each round
// runs its scenarios back to back, while the median rows may come from different rounds.
func roundByRound(results []result) string {
	find := func(load, kind string, qps int) *result { return findResult(results, load, kind, qps) }
	join := func(ratios []float64) string {
		parts := make([]string, len(ratios))
		for i, v := range ratios {
			parts[i] = fmt.Sprintf("%.2f×", v)
		}
		return strings.Join(parts, " / ")
	}
	var sb strings.Builder
	for _, signet := range results {
		if signet.signer.kind != "signet" || signet.signer.trustBundlesOff || signet.load.rate != 0 || len(signet.runs) < 2 {
			continue
		}
		anchor, name := find(signet.load.label, "kcm", 1000), "KCM (QPS 1000)"
		if signet.load.pcr {
			anchor, name = find(signet.load.label, "ceiling", 0), "ceiling"
		}
		if anchor == nil || len(anchor.runs) != len(signet.runs) {
			continue
		}
		var tput, cpu []float64
		for i, s := range signet.runs {
			a := anchor.runs[i]
			if a.throughput() > 0 {
				tput = append(tput, s.throughput()/a.throughput())
			}
			if w, ok := s.watcherCPUPerObject(); ok && !signet.load.pcr && a.cpuPerObject() > 0 {
				cpu = append(cpu, w/a.cpuPerObject())
			}
		}
		if len(tput) == len(signet.runs) {
			fmt.Fprintf(&sb, " %s: throughput Signet / %s %s", signet.load.label, name, join(tput))
			if len(cpu) == len(signet.runs) {
				fmt.Fprintf(&sb, ", watcher CPU per object / KCM's %s", join(cpu))
			}
			sb.WriteString(";")
		}
	}
	if sb.Len() == 0 {
		return ""
	}
	return "\nRound by round (each round runs its scenarios back to back; the median rows above may come from different rounds):" + sb.String() + "\n"
}

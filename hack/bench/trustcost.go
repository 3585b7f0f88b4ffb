package main

// -cluster-trust-bundles: Signet's burst with the watcher's ClusterTrustBundle publishing on
// (its default) and off, in the same run and the same interleaved rounds, and what publishing
// costs the burst. The publisher makes, per signer and period (2 s by default), one
// GetTrustAnchors and one ReportTrustBundle call to the signing server and one GET of the bundle
// from the API server, and writes only when the anchors change, which they do not during a
// burst; the table says whether that shows.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/signet-pki/signet/watcher"
)

// parseTrustBundles parses -cluster-trust-bundles: a comma-separated list of on and off, in
// the order given; true is on.
func parseTrustBundles(list string) ([]bool, error) {
	var out []bool
	for _, f := range strings.Split(list, ",") {
		switch strings.TrimSpace(f) {
		case "on":
			out = append(out, true)
		case "off":
			out = append(out, false)
		default:
			return nil, fmt.Errorf("-cluster-trust-bundles: bad setting %q in %q (accepted: on, off)", f, list)
		}
	}
	return out, nil
}

// signetLabel is the label of Signet with publishing on, the default deployment: the label of
// every earlier run, so that the tables stay comparable.
const signetLabel = "Signet (signet-server + signet-watcher)"

// signetSigners returns Signet once per setting of the watcher's trust bundle publishing
// (none: on only, the default).
func signetSigners(settings []bool) []signerKind {
	if len(settings) == 0 {
		settings = []bool{true}
	}
	var out []signerKind
	for i, on := range settings {
		if slices.Contains(settings[:i], on) {
			continue
		}
		s := signerKind{label: signetLabel, name: "signet", kind: "signet"}
		if !on {
			s.label, s.trustBundlesOff = "Signet, trust bundle publishing off", true
		}
		out = append(out, s)
	}
	return out
}

// offNote is what follows a workload's label in the report's per-run notes for Signet with
// publishing off; empty for every other signer.
func offNote(s signerKind) string {
	if s.trustBundlesOff {
		return " (trust bundles off)"
	}
	return ""
}

// noTrustBundlesFlags writes, once, a WatcherConfiguration that turns trust bundle publishing
// off and leaves everything else to the flags and the defaults, and returns the flag that
// loads it.
func (b *clusterBench) noTrustBundlesFlags() ([]string, error) {
	path := filepath.Join(b.dir, "watcher-no-trust-bundles.yaml")
	cfg := fmt.Sprintf("apiVersion: %s\nkind: %s\ntrustBundles:\n  enabled: false\n", watcher.APIVersion, watcher.Kind)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	return []string{"--config", path}, nil
}

// spread is the median (the lower middle of an even count, as medianRun) and the range of xs.
func spread(xs []float64) (median, lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2], s[0], s[len(s)-1]
}

// spreadText renders spread(xs) with format f: "m (lo–hi)", or "m" for a single value.
func spreadText(f string, xs []float64) string {
	m, lo, hi := spread(xs)
	if len(xs) < 2 {
		return fmt.Sprintf(f, m)
	}
	return fmt.Sprintf(f+" ("+f+"–"+f+")", m, lo, hi)
}

// trustBundleCost returns the Markdown rows comparing Signet with publishing on and off on
// workload l, from every round's run (runs[i] are signers[i]'s, in round order): throughput
// and p99 of each (median of the rounds and range), and the on/off ratios of the runs of the
// same round (the two ran one right after the other). Empty unless both ran.
func trustBundleCost(l workload, signers []signerKind, runs [][]result) string {
	var on, off []result
	for i, s := range signers {
		switch {
		case i >= len(runs) || s.kind != "signet":
		case s.trustBundlesOff:
			off = runs[i]
		default:
			on = runs[i]
		}
	}
	n := min(len(on), len(off))
	if n == 0 {
		return ""
	}
	var tOn, tOff, pOn, pOff, tRatio, pRatio, wOn, wOff []float64
	for k := range n {
		a, b := on[k], off[k]
		tOn, tOff = append(tOn, a.throughput()), append(tOff, b.throughput())
		pOn, pOff = append(pOn, msf(a.p99)), append(pOff, msf(b.p99))
		if b.throughput() > 0 {
			tRatio = append(tRatio, a.throughput()/b.throughput())
		}
		if b.p99 > 0 {
			pRatio = append(pRatio, a.p99.Seconds()/b.p99.Seconds())
		}
		if len(a.cpuEach) == 2 && len(b.cpuEach) == 2 {
			wOn, wOff = append(wOn, a.cpuEach[1]), append(wOff, b.cpuEach[1])
		}
	}
	return fmt.Sprintf("| %s | %d | %s | %s | **%s** | %s | %s | **%s** | %s | %s |\n", l.label, n,
		spreadText("%.1f", tOn), spreadText("%.1f", tOff), spreadText("%.2f×", tRatio),
		spreadText("%.0f", pOn), spreadText("%.0f", pOff), spreadText("%.2f×", pRatio),
		spreadText("%.2f", wOn), spreadText("%.2f", wOff))
}

// trustBundleTable is the table of trustBundleCost's rows under its explanation; empty
// without rows.
func trustBundleTable(rows string) string {
	if rows == "" {
		return ""
	}
	return fmt.Sprintf("\nTrust bundle publishing on against off (-cluster-trust-bundles): Signet's watcher with its default trustBundles (on, period %s: "+
		"per signer and period one GetTrustAnchors and one ReportTrustBundle call to the signing server and one GET of the bundle, no write while the anchors do not change) "+
		"and with trustBundles.enabled false, in the same interleaved rounds. Each cell is the median of the rounds and, in brackets, their range; "+
		"the ratios are taken round by round (on / off of the same round) before the median: throughput > 1 and p99 < 1 favour publishing on. Watcher CPU = user+sys seconds of signet-watcher over the run.\n\n"+
		"| workload | rounds | on: per s | off: per s | throughput on / off | on: p99 ms | off: p99 ms | p99 on / off | on: watcher CPU s | off: watcher CPU s |\n"+
		"|---|---|---|---|---|---|---|---|---|---|\n%s", watcher.DefaultTrustBundlePeriod, rows)
}

// msf is d in milliseconds.
func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

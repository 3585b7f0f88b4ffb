package authority

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Report is the last trust bundle one cluster reported for a signer.
type Report struct {
	Cluster string
	// Source is where the bundle lives (signetv1's TrustSource constants): empty for the
	// ClusterTrustBundle.
	Source     string
	BundleHash string
	Anchors    []string
	// ReportedAt is when this bundle hash was first reported; LastSeen the latest report.
	ReportedAt, LastSeen time.Time
	// StagedAt is when the cluster first reported a bundle holding the staged CA: zero when
	// it has not, or nothing is staged.
	StagedAt time.Time
}

// Holds reports whether the report's bundle holds the CA of fingerprint fp.
func (r Report) Holds(fp string) bool { return slices.Contains(r.Anchors, fp) }

// Gate is whether a rotation step may be taken now.
type Gate struct {
	Ready bool
	// Blocking says what stands in the way, one sentence each.
	Blocking []string
	// NotBefore is when time alone stops blocking; zero when something else blocks.
	NotBefore time.Time
}

// Err is the gate's refusal, wrapping ErrRotationRefused; nil when ready.
func (g Gate) Err(step string) error {
	if g.Ready {
		return nil
	}
	return fmt.Errorf("%w: %s is not possible yet: %s", ErrRotationRefused, step, strings.Join(g.Blocking, "; "))
}

// Expected returns the clusters that must publish the staged CA: the configured ones, those
// recorded when it was staged, and any that has published it since, sorted, each once.
func Expected(configured, recorded []string, reports map[string]Report) []string {
	out := slices.Concat(configured, recorded)
	for c, r := range reports {
		if !r.StagedAt.IsZero() {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// DescribeSource says where trust of source lives, for the gate's messages.
func DescribeSource(source string) string {
	switch source {
	case "apiserver-client-ca":
		return "the API server's client-ca-file (ConfigMap kube-system/extension-apiserver-authentication, which the watcher reports)"
	case "kubelet-certificate-authority":
		return "the API server's --kubelet-certificate-authority, which nothing publishes: an admin confirms it per cluster (signetctl ca confirm)"
	}
	return "its trust bundle (the ClusterTrustBundle the watcher publishes)"
}

// ActivationGate decides whether the staged CA of s may become active at now: every expected
// cluster has reported a bundle holding it, from source (where the signer's trust lives:
// reports holds that source's reports), and delay has passed since the last of them did.
func ActivationGate(s Set, expected []string, reports map[string]Report, source string, delay time.Duration, now time.Time) Gate {
	staged := s.InState(Staged)
	if len(staged) == 0 {
		return Gate{Blocking: []string{"no CA is staged"}}
	}
	fp := staged[0].Fingerprint
	var g Gate
	if len(expected) == 0 {
		g.Blocking = append(g.Blocking, "no cluster is registered for the signer and none has reported "+DescribeSource(source)+": "+
			"list the clusters in signers[].rotation.clusters, or run a watcher that publishes the bundle")
	}
	var last time.Time
	for _, c := range expected {
		r, ok := reports[c]
		switch {
		case !ok:
			g.Blocking = append(g.Blocking, fmt.Sprintf("cluster %q has not reported %s", c, DescribeSource(source)))
		case !r.Holds(fp) || r.StagedAt.IsZero():
			g.Blocking = append(g.Blocking, fmt.Sprintf("cluster %q has not published the staged CA %s in %s yet (its bundle %s, reported %s)",
				c, short(fp), DescribeSource(source), short(r.BundleHash), r.LastSeen.UTC().Format(time.RFC3339)))
		case r.StagedAt.After(last):
			last = r.StagedAt
		}
	}
	if len(g.Blocking) > 0 {
		return g
	}
	if ready := last.Add(delay); now.Before(ready) {
		return Gate{NotBefore: ready, Blocking: []string{fmt.Sprintf(
			"the minimum propagation delay of %s has not passed since the last cluster published the staged CA (%s): activation is possible from %s",
			delay, last.UTC().Format(time.RFC3339), ready.UTC().Format(time.RFC3339))}}
	}
	return Gate{Ready: true}
}

// RetirementGate decides whether CA e may leave the bundle at now: no leaf it signed is still
// valid. lastLeaf is the latest NotAfter of its leaves (zero if none).
func RetirementGate(e Entry, lastLeaf time.Time, now time.Time) Gate {
	switch e.State {
	case Active:
		return Gate{Blocking: []string{"it is the active CA; stage and activate its successor first"}}
	case Removed:
		return Gate{Blocking: []string{"it was already removed"}}
	}
	if now.Before(lastLeaf) {
		return Gate{NotBefore: lastLeaf, Blocking: []string{fmt.Sprintf(
			"a leaf it signed is valid until %s (from the ledger): relying parties still need the CA; retirement is possible from then",
			lastLeaf.UTC().Format(time.RFC3339))}}
	}
	return Gate{Ready: true}
}

// Status is a signer's CA set, what its clusters published, and the gates of the next steps.
type Status struct {
	Signer string
	// CAs are the signer's CAs: active, staged, retired, then removed.
	CAs []CAStatus
	// Clusters are the expected clusters and any other that reported, sorted by name.
	Clusters []ClusterStatus
	// Delay is the minimum propagation delay before activation.
	Delay time.Duration
	// Activation is whether the staged CA may be activated now.
	Activation Gate
}

// CAStatus is one CA of a Status.
type CAStatus struct {
	Entry
	// LastLeaf is the latest NotAfter of a leaf it signed, from the ledger; zero if none.
	LastLeaf time.Time
	// Retirement is whether it may leave the bundle now (retired and staged CAs).
	Retirement Gate
}

// ClusterStatus is one cluster of a Status.
type ClusterStatus struct {
	Report
	// Registered: the cluster must publish the staged CA before activation.
	Registered bool
}

package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/signet-pki/signet/internal/version"
)

// Values of the client_version label of signet_server_client_version_refused_total that are
// not a release line (vMAJOR.MINOR).
const (
	// ClientVersionDevel stands for every version that names no release (a development
	// build's, or text that is no version). The skew policy accepts development builds, so the
	// server's check never counts one; the value keeps the label bounded whatever is passed.
	ClientVersionDevel = "devel"
	// ClientVersionOther stands for every release line past the first
	// maxClientVersionLines ones counted, so that clients sending ever new versions cannot
	// grow the series without bound.
	ClientVersionOther = "other"
)

// maxClientVersionLines bounds how many distinct client_version values (release lines, and
// ClientVersionDevel) the counter holds besides ClientVersionOther.
const maxClientVersionLines = 16

// clientVersionMetrics is signet_server_client_version_refused_total and the label values it
// holds.
type clientVersionMetrics struct {
	refused *prometheus.CounterVec
	mu      sync.Mutex
	lines   map[string]bool // client_version values with a series
}

// newClientVersionMetrics registers signet_server_client_version_refused_total on reg. The
// release lines that a server of version serverVersion refuses and that sit next to the ones
// it accepts (the next minor and the next major version, the newest minor too old) have a
// series from the start, at zero: those are the versions a roll-out in the wrong order, or
// one minor version too far, sends. Other lines get theirs at their first refusal. A
// development server refuses nothing and starts with none.
func newClientVersionMetrics(reg prometheus.Registerer, serverVersion string) *clientVersionMetrics {
	c := &clientVersionMetrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Subsystem: subsystem, Name: "client_version_refused_total",
			Help: "signet.v1 calls refused because the client's version (the signet-client-version header) is outside the skew " +
				"policy (docs/compatibility.md), by the client's release line (vMAJOR.MINOR; \"other\" past the first 16 lines seen).",
		}, []string{"client_version"}),
		lines: map[string]bool{},
	}
	reg.MustRegister(c.refused)
	if sv, err := version.Parse(serverVersion); err == nil {
		neighbours := []version.Semver{{Major: sv.Major, Minor: sv.Minor + 1}, {Major: sv.Major + 1}}
		if tooOld := sv.Minor - version.MinorSkew - 1; tooOld >= 0 {
			neighbours = append(neighbours, version.Semver{Major: sv.Major, Minor: tooOld})
		}
		for _, n := range neighbours {
			if !version.CheckSkew(serverVersion, n.String()).Accepted() {
				c.label(n.String())
			}
		}
	}
	return c
}

// ClientVersionLabel is the client_version label of a client version: its release line
// (vMAJOR.MINOR, what the skew policy compares), or ClientVersionDevel for a version that
// names no release. The raw version is never a label value: a patch level or a commit would
// make a series per build.
func ClientVersionLabel(clientVersion string) string {
	v, err := version.Parse(clientVersion)
	if err != nil {
		return ClientVersionDevel
	}
	return v.MajorMinor()
}

// label returns the series for clientVersion's label, creating it (at zero) while fewer than
// maxClientVersionLines exist, else the ClientVersionOther series.
func (c *clientVersionMetrics) label(clientVersion string) prometheus.Counter {
	l := ClientVersionLabel(clientVersion)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.lines[l] {
		if len(c.lines) >= maxClientVersionLines {
			l = ClientVersionOther
		} else {
			c.lines[l] = true
		}
	}
	return c.refused.WithLabelValues(l)
}

// ObserveClientVersionRefused counts one call refused by the skew policy, from a client that
// sent clientVersion (counted under its release line, ClientVersionLabel).
func (m *Metrics) ObserveClientVersionRefused(clientVersion string) {
	if m == nil {
		return
	}
	m.clientVersions.label(clientVersion).Inc()
}

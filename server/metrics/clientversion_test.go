package metrics

import (
	"fmt"
	"maps"
	"slices"
	"testing"
)

const clientVersionRefused = "signet_server_client_version_refused_total"

// TestClientVersionRefusedAtStart: a released server starts with a zero series for each
// release line next to the ones it accepts that it refuses (the next minor and major
// versions, the newest minor too old); a development server refuses nothing and has none.
func TestClientVersionRefusedAtStart(t *testing.T) {
	for server, want := range map[string][]string{
		"v0.3.1":                             {"client_version=v0.1", "client_version=v0.4", "client_version=v1.0"},
		"v0.1.0":                             {"client_version=v0.2", "client_version=v1.0"}, // no minor too old: v0.0 is accepted
		"v1.0.0-rc.1":                        {"client_version=v1.1", "client_version=v2.0"},
		"v2.5.0-3-gabc1234":                  {"client_version=v2.3", "client_version=v2.6", "client_version=v3.0"},
		"devel":                              nil,
		"81c084c-dirty":                      nil,
		"v0.0.0-20261128060000-abcdef123456": nil,
	} {
		m := New(server, "abc1234", []string{serving})
		got := gather(t, m.Registry(), clientVersionRefused)
		if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, want) || slices.ContainsFunc(slices.Collect(maps.Values(got)), func(v float64) bool { return v != 0 }) {
			t.Errorf("server %s: %s at start = %v, want %v at zero", server, clientVersionRefused, got, want)
		}
	}
}

// TestClientVersionRefused: each refusal counts under the client's release line, never its
// raw version; a version that names no release counts as devel; past 16 values every new line
// counts as other, so the series stay bounded whatever clients send.
func TestClientVersionRefused(t *testing.T) {
	m := New("v0.3.1", "abc1234", []string{serving})
	for _, v := range []string{"v0.4.0", "v0.4.2", "v0.4.0-rc.1", "0.4.7", "v0.1.9", "v0.0.3-2-gabc1234-dirty", "v2.1.0", "81c084c", "x\ny"} {
		m.ObserveClientVersionRefused(v)
	}
	got := gather(t, m.Registry(), clientVersionRefused)
	want := map[string]float64{
		"client_version=v0.4": 4, "client_version=v0.1": 1, "client_version=v0.0": 1,
		"client_version=v2.1": 1, "client_version=v1.0": 0, "client_version=devel": 2,
	}
	if !maps.Equal(got, want) {
		t.Errorf("%s = %v, want %v", clientVersionRefused, got, want)
	}

	for i := range 3 * maxClientVersionLines {
		m.ObserveClientVersionRefused(fmt.Sprintf("v9.%d.0", i))
	}
	got = gather(t, m.Registry(), clientVersionRefused)
	if len(got) != maxClientVersionLines+1 || got["client_version=v0.4"] != 4 {
		t.Errorf("%s after %d more lines: %d series, want %d and other: %v", clientVersionRefused, 3*maxClientVersionLines, len(got), maxClientVersionLines, got)
	}
	// The lines already counted keep their series; the rest went to other.
	m.ObserveClientVersionRefused("v0.4.1")
	if other := gather(t, m.Registry(), clientVersionRefused)["client_version=other"]; other != float64(3*maxClientVersionLines-(maxClientVersionLines-len(want))) {
		t.Errorf("other = %v, want the lines past the bound", other)
	}
	if v := gather(t, m.Registry(), clientVersionRefused)["client_version=v0.4"]; v != 5 {
		t.Errorf("v0.4 after the bound = %v, want 5: a counted line keeps its series", v)
	}
	checkLint(t, m)
	checkNilRecordsNothing(t, "ObserveClientVersionRefused", func(m *Metrics) { m.ObserveClientVersionRefused("v0.4.0") })
}

package issuance

import (
	"slices"
	"testing"

	"github.com/signet-pki/signet/server/profile/spec"
)

// TestConfigurationCopiesMatch pins the copies server/profile/spec keeps so that the
// configuration is checked without linking the issuer: the lifetime floors, and the usages it
// accepts in a custom profile, which must be exactly those ParseUsages maps.
func TestConfigurationCopiesMatch(t *testing.T) {
	if spec.MinLifetime != MinLifetime || spec.PodMinLifetime != PodMinLifetime {
		t.Errorf("spec's floors %s and %s, the issuer's %s and %s", spec.MinLifetime, spec.PodMinLifetime, MinLifetime, PodMinLifetime)
	}
	var mapped []string
	for u := range keyUsages {
		mapped = append(mapped, string(u))
	}
	for u := range extKeyUsages {
		mapped = append(mapped, string(u))
	}
	slices.Sort(mapped)
	known := slices.Sorted(slices.Values(spec.KnownUsages))
	if !slices.Equal(known, mapped) {
		t.Errorf("spec.KnownUsages %q, the usages ParseUsages maps %q", known, mapped)
	}
}

package profile_test

import (
	"slices"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/lint"
	"github.com/signet-pki/signet/server/profile"
)

// TestLintOptions: kubernetes.io profiles drop e_ecdsa_allowed_ku on top of the default
// exclusions (kubelets ask for key encipherment on ECDSA keys), custom profiles keep the
// default gate, and exclusions the operator configured are never changed.
func TestLintOptions(t *testing.T) {
	t.Parallel()
	newProfile := func(spec profile.Spec) profile.Profile {
		p, err := profile.New(spec, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	custom := newProfile(profile.Spec{Name: profile.NameCustom, Custom: &profile.CustomSpec{Usages: profile.UsageSpec{Allowed: []string{"client auth"}}}})
	for _, name := range []string{profile.NameKubeAPIServerClient, profile.NameKubeAPIServerClientKubelet, profile.NameKubeletServing, profile.NameLegacyUnknown} {
		got := newProfile(profile.Spec{Name: name}).LintOptions(lint.Options{})
		if !slices.Contains(got.Exclude, "e_ecdsa_allowed_ku") {
			t.Errorf("%s: exclusions %v lack e_ecdsa_allowed_ku", name, got.Exclude)
		}
		for _, e := range lint.DefaultExclusions() {
			if !slices.Contains(got.Exclude, e.Lint) {
				t.Errorf("%s: exclusions %v lack the default %s", name, got.Exclude, e.Lint)
			}
		}
		if _, err := lint.New(got); err != nil {
			t.Errorf("%s: the options do not build a gate: %v", name, err)
		}
		configured := []string{"e_rfc_dnsname_empty_label"}
		if got := newProfile(profile.Spec{Name: name}).LintOptions(lint.Options{Exclude: configured}); !slices.Equal(got.Exclude, configured) {
			t.Errorf("%s: configured exclusions became %v", name, got.Exclude)
		}
	}
	if got := custom.LintOptions(lint.Options{}); got.Exclude != nil {
		t.Errorf("custom: exclusions %v, want the default gate (nil)", got.Exclude)
	}
}

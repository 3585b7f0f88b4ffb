package config_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/profile/spec"
)

// podSigner is the minimal configuration with its signer turned into a pod-identity one with
// the given profile body (YAML at the indentation of "profile:").
func podSigner(profileYAML string) string {
	return strings.Replace(minimal, "    profile: {name: legacy-unknown}\n", profileYAML, 1)
}

// TestPodIdentityConfig: a pod-identity signer loads with or without settings, and each wrong
// setting is refused naming its field.
func TestPodIdentityConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, profile string
		want          string // "" loads
	}{
		{"defaults", "    profile: {name: pod-identity}\n", ""},
		{"settings", "    profile:\n      name: pod-identity\n      podIdentity: {trustDomain: prod.example.com, allowedAnnotations: [example.com/purpose]}\n", ""},
		{"trust domain with scheme", "    profile: {name: pod-identity, podIdentity: {trustDomain: \"spiffe://prod.example.com\"}}\n",
			`signers[0].profile: podIdentity.trustDomain: "spiffe://prod.example.com": must be a bare trust domain`},
		{"upper-case trust domain", "    profile: {name: pod-identity, podIdentity: {trustDomain: Prod.Example.com}}\n", "podIdentity.trustDomain"},
		{"annotation without a domain", "    profile: {name: pod-identity, podIdentity: {allowedAnnotations: [purpose]}}\n",
			`signers[0].profile: podIdentity.allowedAnnotations[0]: "purpose": is not a domain-prefixed key`},
		{"settings on another profile", "    profile: {name: legacy-unknown, podIdentity: {}}\n", "podIdentity: only allowed when name is pod-identity"},
		{"unknown setting", "    profile: {name: pod-identity, podIdentity: {trustdomain: x}}\n", `unknown field "signers[0].profile.podIdentity.trustdomain"`},
		{"maximum under an hour", "    maxLifetime: 30m\n    profile: {name: pod-identity}\n",
			"signers[0].maxLifetime 30m0s is below the 1h floor of pod certificates"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := config.Load(writeConfig(t, podSigner(tt.profile)))
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Load = %v, want an error saying %s", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := cfg.Signers[0].Profile.Name; got != spec.NamePodIdentity {
				t.Errorf("profile %q", got)
			}
		})
	}
}

// TestPodIdentitySignerInGo: the configuration other packages build in Go (the integration
// tests, the benchmark) validates.
func TestPodIdentitySignerInGo(t *testing.T) {
	t.Parallel()
	cfg := config.Config{
		TLS:     config.TLS{CertFile: "s.crt", KeyFile: "s.key", ClientCAFile: "c.crt"},
		Clients: []access.Client{{Identity: "w", Signers: []string{access.AllSigners}}},
		Ledger:  config.Ledger{Dir: "ledger"},
		Signers: []config.Signer{{Name: "example.com/pods", Key: "k", Certificate: "c", MaxLifetime: &metav1.Duration{Duration: 24 * time.Hour},
			Profile: spec.Spec{Name: "pod-identity", PodIdentity: &spec.PodIdentitySpec{TrustDomain: "cluster.local"}}}},
	}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

package spec_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/profile/spec"
)

// TestCompileCustom: a custom spec compiles to the patterns server/profile matches names
// with, DNS patterns and email domains lower-cased, as the package documentation says.
func TestCompileCustom(t *testing.T) {
	c, err := spec.Spec{Name: spec.NameCustom, Custom: &spec.CustomSpec{
		Subject: spec.SubjectSpec{CommonNames: []string{"*"}},
		SANs: spec.SANSpec{DNS: []string{"*.Svc.Cluster.Local", "**.apps.example.com"}, IP: []string{"10.0.0.0/8"},
			URI: []string{"spiffe://cluster.local/ns/*/sa/*"}, Email: []string{"*@Example.COM"}},
		Usages: spec.UsageSpec{Allowed: []string{"digital signature", "server auth"}},
	}}.Compile()
	if err != nil || c.Custom == nil || c.Pod != nil {
		t.Fatalf("Compile: %+v, %v", c, err)
	}
	for _, tt := range []struct {
		globs []spec.Glob
		name  string
		want  bool
	}{
		{c.Custom.DNS, "api.svc.cluster.local", true},
		{c.Custom.DNS, "api.ns.svc.cluster.local", false},
		{c.Custom.DNS, "a.b.apps.example.com", true},
		{c.Custom.URI, "spiffe://cluster.local/ns/a/sa/b", true},
		{c.Custom.URI, "spiffe://cluster.local/ns/a/b/sa/c", false},
		{c.Custom.Email, "ops@example.com", true},
		{c.Custom.CommonNames, "", true},
	} {
		if got := spec.MatchAny(tt.globs, tt.name); got != tt.want {
			t.Errorf("MatchAny(%v, %q) = %v, want %v", tt.globs, tt.name, got, tt.want)
		}
	}
	if got := c.Custom.DNS[0].String(); got != "*.svc.cluster.local" {
		t.Errorf("the DNS pattern compiled as %q, want it lower-cased", got)
	}
	if want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}; !slices.Equal(c.Custom.IP, want) {
		t.Errorf("IP ranges %v, want %v", c.Custom.IP, want)
	}
}

// TestValidateListsEveryProblem: every problem of a spec is reported at once, each with the
// path of its field inside the profile.
func TestValidateListsEveryProblem(t *testing.T) {
	err := spec.Spec{Name: spec.NameCustom, PrivilegedGroups: []string{"a", "a"}, Custom: &spec.CustomSpec{
		SANs:     spec.SANSpec{DNS: []string{"a..b"}, IP: []string{"10.1.2.3/8"}},
		Usages:   spec.UsageSpec{Allowed: []string{"cert sign", "flying"}, Required: []string{"server auth"}},
		KeyTypes: []string{"P-256"},
	}}.Validate()
	for _, want := range []string{
		`privilegedGroups[1]: "a" duplicates privilegedGroups[0]`,
		`custom.sans.dns[0]: "a..b": has an empty label`,
		`custom.sans.ip[0]: "10.1.2.3/8": has bits set beyond the prefix length; write 10.0.0.0/8`,
		`custom.usages.allowed[0]: "cert sign": is reserved for CA certificates`,
		`custom.usages.allowed[1]: "flying": is not a certificates.k8s.io/v1 usage`,
		`custom.usages.required[0]: "server auth": is not in custom.usages.allowed`,
		`custom.keyTypes[0]: "P-256": is not one of RSA-2048`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v\nlacks %q", err, want)
		}
	}
}

// TestCompilePodIdentity: a pod-identity spec without settings gets the default trust
// domain; annotation keys are lower-cased as the kube-apiserver compares them.
func TestCompilePodIdentity(t *testing.T) {
	c, err := spec.Spec{Name: spec.NamePodIdentity}.Compile()
	if err != nil || c.Pod == nil || c.Pod.TrustDomain != spec.DefaultTrustDomain {
		t.Errorf("defaults: %+v, %v", c.Pod, err)
	}
	c, err = spec.Spec{Name: spec.NamePodIdentity, PodIdentity: &spec.PodIdentitySpec{TrustDomain: "prod", AllowedAnnotations: []string{"Example.com/Purpose"}}}.Compile()
	if err != nil || c.Pod.TrustDomain != "prod" || !slices.Equal(c.Pod.AllowedAnnotations, []string{"example.com/purpose"}) {
		t.Errorf("settings: %+v, %v", c.Pod, err)
	}
	if err := (spec.Spec{Name: spec.NamePodIdentity, PodIdentity: &spec.PodIdentitySpec{TrustDomain: "spiffe://x"}}).Validate(); err == nil ||
		!strings.HasPrefix(err.Error(), `podIdentity.trustDomain: "spiffe://x": must be a bare trust domain`) {
		t.Errorf("a trust domain with a scheme: %v", err)
	}
}

func TestCheckMaxLifetime(t *testing.T) {
	for _, tt := range []struct {
		name string
		max  time.Duration
		want string
	}{
		{spec.NameCustom, 10 * time.Minute, ""},
		{spec.NameCustom, 9 * time.Minute, "9m0s is below the 10m floor"},
		{spec.NamePodIdentity, 59 * time.Minute, "59m0s is below the 1h floor of pod certificates"},
		{spec.NamePodIdentity, time.Hour, ""},
	} {
		err := spec.CheckMaxLifetime(tt.name, tt.max)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)) {
			t.Errorf("CheckMaxLifetime(%s, %s) = %v, want %q", tt.name, tt.max, err, tt.want)
		}
	}
}

func TestKubernetesProfileFor(t *testing.T) {
	if name, ok := spec.KubernetesProfileFor("kubernetes.io/kubelet-serving"); !ok || name != spec.NameKubeletServing {
		t.Errorf("kubelet-serving: %q, %v", name, ok)
	}
	for _, s := range []string{"kubernetes.io/custom", "example.com/kubelet-serving", "kubernetes.io/kubelet-serving-tpm"} {
		if name, ok := spec.KubernetesProfileFor(s); ok {
			t.Errorf("%s: %q, want none", s, name)
		}
	}
}

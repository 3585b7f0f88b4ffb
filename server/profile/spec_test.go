package profile_test

import (
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/profile"
)

// validCustom returns a minimal valid custom spec for the Validate tests to break.
func validCustom(modify func(*profile.CustomSpec)) profile.Spec {
	c := &profile.CustomSpec{Usages: profile.UsageSpec{Allowed: []string{ca}}}
	if modify != nil {
		modify(c)
	}
	return profile.Spec{Name: profile.NameCustom, Custom: c}
}

// TestSpecValidate checks that every invalid field is refused with an error naming it.
func TestSpecValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		spec profile.Spec
		want []string
	}{
		{"zero spec", profile.Spec{}, []string{"name: required"}},
		{"unknown name", profile.Spec{Name: "kube-apiserver-serving"}, []string{`name: "kube-apiserver-serving" is not one of`}},
		{"name case", profile.Spec{Name: "Kubelet-Serving"}, []string{"name:"}},
		{"custom without custom", profile.Spec{Name: profile.NameCustom}, []string{"custom: required when name is custom"}},
		{"custom on another profile", profile.Spec{Name: profile.NameLegacyUnknown, Custom: &profile.CustomSpec{}}, []string{"custom: only allowed when name is custom"}},
		{"allowPrivileged on kubelet serving", profile.Spec{Name: profile.NameKubeletServing, AllowPrivileged: true}, []string{"allowPrivileged: not allowed on kubelet-serving"}},
		{"privilegedGroups on kubelet client", profile.Spec{Name: profile.NameKubeAPIServerClientKubelet, PrivilegedGroups: []string{"x"}},
			[]string{"privilegedGroups: not allowed on kube-apiserver-client-kubelet"}},
		{"empty privileged group", profile.Spec{Name: profile.NameKubeAPIServerClient, PrivilegedGroups: []string{"system:masters", ""}},
			[]string{`privilegedGroups[1]: "": must not be empty`}},
		{"duplicate privileged group", profile.Spec{Name: profile.NameLegacyUnknown, PrivilegedGroups: []string{"a", "b", "a"}},
			[]string{`privilegedGroups[2]: "a" duplicates privilegedGroups[0]`}},
		{"privileged group with newline", profile.Spec{Name: profile.NameLegacyUnknown, PrivilegedGroups: []string{"a\nb"}},
			[]string{"privilegedGroups[0]", "control character"}},
		{"bootstrap on kubelet serving", profile.Spec{Name: profile.NameKubeletServing, Bootstrap: &profile.BootstrapSpec{}},
			[]string{`bootstrap: only allowed when name is kube-apiserver-client-kubelet, kubelet-client-tpm or kubelet-client-insecure, not "kubelet-serving"`}},
		{"bootstrap groups when disabled", profile.Spec{Name: profile.NameKubeAPIServerClientKubelet,
			Bootstrap: &profile.BootstrapSpec{Disabled: true, Groups: []string{"acme:joiners"}}},
			[]string{"bootstrap.groups: not allowed when bootstrap.disabled is set"}},
		{"system:nodes as bootstrap group", profile.Spec{Name: profile.NameKubeAPIServerClientKubelet,
			Bootstrap: &profile.BootstrapSpec{Groups: []string{"system:bootstrappers", "system:nodes"}}},
			[]string{`bootstrap.groups[1]: "system:nodes": cannot be a bootstrap group: every node is in it`}},
		{"everyone as bootstrap group", profile.Spec{Name: profile.NameKubeAPIServerClientKubelet,
			Bootstrap: &profile.BootstrapSpec{Groups: []string{"system:authenticated"}}},
			[]string{`bootstrap.groups[0]: "system:authenticated": cannot be a bootstrap group`}},
		{"duplicate bootstrap group", profile.Spec{Name: profile.NameKubeAPIServerClientKubelet,
			Bootstrap: &profile.BootstrapSpec{Groups: []string{"a", "a"}}},
			[]string{`bootstrap.groups[1]: "a" duplicates bootstrap.groups[0]`}},
		{"empty bootstrap group", profile.Spec{Name: profile.NameKubeAPIServerClientKubelet,
			Bootstrap: &profile.BootstrapSpec{Groups: []string{""}}},
			[]string{`bootstrap.groups[0]: "": must not be empty`}},
		{"no allowed usages", validCustom(func(c *profile.CustomSpec) { c.Usages.Allowed = nil }), []string{"custom.usages.allowed: required"}},
		{"unknown usage", validCustom(func(c *profile.CustomSpec) { c.Usages.Allowed = []string{ca, "Client Auth"} }),
			[]string{`custom.usages.allowed[1]: "Client Auth": is not a certificates.k8s.io/v1 usage`}},
		{"cert sign allowed", validCustom(func(c *profile.CustomSpec) { c.Usages.Allowed = []string{"cert sign"} }),
			[]string{`custom.usages.allowed[0]: "cert sign": is reserved for CA certificates`}},
		{"crl sign allowed", validCustom(func(c *profile.CustomSpec) { c.Usages.Allowed = []string{ca, "crl sign"} }), []string{"custom.usages.allowed[1]"}},
		{"duplicate usage", validCustom(func(c *profile.CustomSpec) { c.Usages.Allowed = []string{ca, ca} }), []string{"custom.usages.allowed[1]", "duplicates"}},
		{"required not allowed", validCustom(func(c *profile.CustomSpec) { c.Usages.Required = []string{sa} }),
			[]string{`custom.usages.required[0]: "server auth": is not in custom.usages.allowed`}},
		{"unknown key type", validCustom(func(c *profile.CustomSpec) { c.KeyTypes = []string{"ECDSA-P256", "P-256"} }),
			[]string{`custom.keyTypes[1]: "P-256": is not one of RSA-2048`, "Ed25519"}},
		{"duplicate key type", validCustom(func(c *profile.CustomSpec) { c.KeyTypes = []string{"Ed25519", "Ed25519"} }), []string{"custom.keyTypes[1]", "duplicates"}},
		{"empty common name pattern", validCustom(func(c *profile.CustomSpec) { c.Subject.CommonNames = []string{""} }),
			[]string{"custom.subject.commonNames[0]", "must not be empty"}},
		{"organization pattern with control", validCustom(func(c *profile.CustomSpec) { c.Subject.Organizations = []string{"a\x00"} }),
			[]string{"custom.subject.organizations[0]", "control character"}},
		{"DNS pattern with underscore", validCustom(func(c *profile.CustomSpec) { c.SANs.DNS = []string{"ok.example.com", "a_b.example.com"} }),
			[]string{"custom.sans.dns[1]", "letters, digits, hyphens"}},
		{"DNS pattern empty label", validCustom(func(c *profile.CustomSpec) { c.SANs.DNS = []string{"a..example.com"} }), []string{"custom.sans.dns[0]", "empty label"}},
		{"DNS pattern trailing dot", validCustom(func(c *profile.CustomSpec) { c.SANs.DNS = []string{"example.com."} }), []string{"custom.sans.dns[0]", "empty label"}},
		{"URI pattern without scheme", validCustom(func(c *profile.CustomSpec) { c.SANs.URI = []string{"cluster.local/ns/*"} }),
			[]string{"custom.sans.uri[0]", "must start with a scheme"}},
		{"URI pattern with space", validCustom(func(c *profile.CustomSpec) { c.SANs.URI = []string{"spiffe://a b"} }), []string{"custom.sans.uri[0]", "space"}},
		{"email pattern without at", validCustom(func(c *profile.CustomSpec) { c.SANs.Email = []string{"example.com"} }), []string{"custom.sans.email[0]", "local@domain"}},
		{"email pattern with two at", validCustom(func(c *profile.CustomSpec) { c.SANs.Email = []string{"a@b@c"} }), []string{"custom.sans.email[0]"}},
		{"IP range with host bits", validCustom(func(c *profile.CustomSpec) { c.SANs.IP = []string{"10.1.2.3/8"} }),
			[]string{"custom.sans.ip[0]", "write 10.0.0.0/8"}},
		{"IP not an address", validCustom(func(c *profile.CustomSpec) { c.SANs.IP = []string{"10.0.0.0/8", "localhost"} }),
			[]string{"custom.sans.ip[1]", "not a CIDR range or an IP address"}},
		{"IP mapped", validCustom(func(c *profile.CustomSpec) { c.SANs.IP = []string{"::ffff:10.0.0.0/104"} }), []string{"custom.sans.ip[0]", "IPv4-mapped"}},
		{"IP zone", validCustom(func(c *profile.CustomSpec) { c.SANs.IP = []string{"fe80::1%eth0"} }), []string{"custom.sans.ip[0]", "zone"}},
		{"SAN required but none allowed", validCustom(func(c *profile.CustomSpec) { c.SANs.Required = true }), []string{"custom.sans.required"}},
		{"every problem reported", validCustom(func(c *profile.CustomSpec) {
			c.SANs.DNS = []string{"a..b"}
			c.KeyTypes = []string{"DSA"}
		}), []string{"custom.sans.dns[0]", "custom.keyTypes[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.spec.Validate()
			if err == nil {
				t.Fatal("Validate() = nil, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
			if _, nerr := profile.New(tt.spec, maxLifetime); nerr == nil || nerr.Error() != err.Error() {
				t.Errorf("New error = %v, want the Validate error %v", nerr, err)
			}
		})
	}
}

// TestSpecValid checks that valid specs, including the zero-valued optional fields, load.
func TestSpecValid(t *testing.T) {
	t.Parallel()
	specs := []profile.Spec{
		{Name: profile.NameKubeAPIServerClient},
		{Name: profile.NameKubeAPIServerClient, AllowPrivileged: true, PrivilegedGroups: []string{"system:masters", "acme:admins"}},
		{Name: profile.NameKubeAPIServerClientKubelet},
		{Name: profile.NameKubeletServing},
		{Name: profile.NameLegacyUnknown},
		validCustom(nil),
		meshSpec(),
		validCustom(func(c *profile.CustomSpec) {
			c.SANs.IP = []string{"0.0.0.0/0", "::/0", "2001:db8::1"}
			c.KeyTypes = []string{"RSA-2048", "RSA-3072", "RSA-4096", "RSA-8192", "ECDSA-P256", "ECDSA-P384", "ECDSA-P521", "Ed25519"}
			c.Usages = profile.UsageSpec{Allowed: []string{sig, ds, ca, "any"}, Required: []string{ca}}
		}),
	}
	for _, s := range specs {
		if err := s.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", s, err)
		}
	}
}

// TestNewMaxLifetime checks the lifetime floor.
func TestNewMaxLifetime(t *testing.T) {
	t.Parallel()
	_, err := profile.New(profile.Spec{Name: profile.NameLegacyUnknown}, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "maxLifetime: 1m0s is below the 10m floor") {
		t.Fatalf("New with 1m = %v, want a maxLifetime error", err)
	}
	_, err = profile.New(profile.Spec{}, 0)
	if err == nil || !strings.Contains(err.Error(), "maxLifetime") || !strings.Contains(err.Error(), "name: required") {
		t.Fatalf("New(zero, 0) = %v, want both errors", err)
	}
}

// TestKubernetesProfileFor checks the signer name → profile mapping.
func TestKubernetesProfileFor(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"kubernetes.io/kube-apiserver-client":         profile.NameKubeAPIServerClient,
		"kubernetes.io/kube-apiserver-client-kubelet": profile.NameKubeAPIServerClientKubelet,
		"kubernetes.io/kubelet-serving":               profile.NameKubeletServing,
		"kubernetes.io/legacy-unknown":                profile.NameLegacyUnknown,
		"kubernetes.io/custom":                        "",
		"kubernetes.io/pod-identity":                  "",
		"kubernetes.io/kube-apiserver-serving":        "",
		"example.com/kubelet-serving":                 "",
		"kubelet-serving":                             "",
	}
	for signer, want := range tests {
		got, ok := profile.KubernetesProfileFor(signer)
		if got != want || ok != (want != "") {
			t.Errorf("KubernetesProfileFor(%q) = %q, %v; want %q", signer, got, ok, want)
		}
	}
}

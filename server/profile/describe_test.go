package profile_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/signet-pki/signet/server/profile"
)

// TestDescribe checks that each description states the configuration's key facts.
func TestDescribe(t *testing.T) {
	t.Parallel()
	type want map[string][]string // field name → substrings
	common := want{
		"Expiration":     {"24h0m0s", "spec.expirationSeconds", "10m0s", "backdated by 5m0s", "CA certificate's NotAfter"},
		"CABit":          {"Not allowed", "CA:TRUE", "refused", "CA:FALSE", "cert sign and crl sign"},
		"ExtraPEMBlocks": {"leaf certificate first", "intermediate", "root is never included"},
	}
	tests := []struct {
		spec profile.Spec
		want want
	}{
		{profile.Spec{Name: profile.NameKubeAPIServerClient}, want{
			"TrustDistribution":   {"kube-apiserver", "--client-ca-file", "not distribute"},
			"PermittedSubjects":   {"Any subject", "privileged group (system:masters) is refused", "allowPrivileged"},
			"PermittedExtensions": {"URI, DNS, IP and email SANs are honored", "discarded"},
			"PermittedKeyUsages":  {`must include "client auth"`, `"digital signature" and "key encipherment"`, `"cert sign" and "crl sign" are refused`, "spec.usages only"},
		}},
		{profile.Spec{Name: profile.NameKubeAPIServerClient, AllowPrivileged: true, PrivilegedGroups: []string{"system:masters", "acme:admins"}}, want{
			"PermittedSubjects": {"system:masters, acme:admins", "allowed", "allowPrivileged is set"},
		}},
		{profile.Spec{Name: profile.NameKubeAPIServerClientKubelet}, want{
			"TrustDistribution": {"kubelet client certificates", "--client-ca-file"},
			"PermittedSubjects": {`["system:nodes"]`, `"system:node:"`, "spec.username", "spec.groups",
				`bootstrap group (["system:bootstrappers"])`, "system:bootstrap:<token id>", "approval is the authority", "bootstrap.disabled"},
			"PermittedExtensions": {"No SANs", "refused"},
			"PermittedKeyUsages":  {`{"digital signature", "client auth"}`, `{"digital signature", "key encipherment", "client auth"}`},
		}},
		{profile.Spec{Name: profile.NameKubeAPIServerClientKubelet, Bootstrap: &profile.BootstrapSpec{Groups: []string{"acme:joiners"}}}, want{
			"PermittedSubjects": {`bootstrap group (["acme:joiners"])`},
		}},
		{profile.Spec{Name: profile.NameKubeAPIServerClientKubelet, Bootstrap: &profile.BootstrapSpec{Disabled: true}}, want{
			"PermittedSubjects": {"Bootstrap is off (bootstrap.disabled)", "bootstrap token included, is refused"},
		}},
		{profile.Spec{Name: profile.NameKubeletServing}, want{
			"TrustDistribution":   {"--kubelet-certificate-authority"},
			"PermittedSubjects":   {`["system:nodes"]`, `"system:node:"`, "spec.username"},
			"PermittedExtensions": {"At least one DNS or IP SAN is required", "Email and URI SANs are refused"},
			"PermittedKeyUsages":  {`{"digital signature", "server auth"}`, `{"digital signature", "key encipherment", "server auth"}`},
		}},
		{profile.Spec{Name: profile.NameLegacyUnknown}, want{
			"TrustDistribution":   {"None"},
			"PermittedSubjects":   {"Any subject", "system:masters", "can authenticate clients"},
			"PermittedExtensions": {"URI, DNS, IP and email SANs are honored"},
			"PermittedKeyUsages":  {"Any known", `"cert sign" and "crl sign" are refused`},
		}},
		{meshSpec(), want{
			"TrustDistribution":   {"Out of band", "ClusterTrustBundle"},
			"PermittedSubjects":   {`["svc-*" "*.mesh.internal"]`, `["team-*"]`, "No other subject attribute", "system:masters", `"**"`},
			"PermittedExtensions": {`["*.*.svc.cluster.local" "api.example.com" "**.apps.example.com"]`, `["10.0.0.0/8" "fd00::/8" "192.0.2.7"]`, `spiffe://cluster.local/ns/*/sa/*`, `["*@example.com"]`, "At least one SAN is required"},
			"PermittedKeyUsages":  {`at most ["digital signature" "key encipherment" "server auth" "client auth"]`, `must include ["server auth"]`},
		}},
		{validCustom(nil), want{
			"PermittedSubjects":   {"common name must be empty", "No organization"},
			"PermittedExtensions": {"DNS SANs are refused", "IP SANs are refused", "URI SANs are refused", "Email SANs are refused"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.spec.Name, func(t *testing.T) {
			t.Parallel()
			d := newProfile(t, tt.spec).Describe()
			if d.Profile != tt.spec.Name || d.MaxLifetime != maxLifetime {
				t.Errorf("Profile, MaxLifetime = %q, %s", d.Profile, d.MaxLifetime)
			}
			v := reflect.ValueOf(d)
			for _, f := range []string{"TrustDistribution", "PermittedSubjects", "PermittedExtensions", "PermittedKeyUsages", "Expiration", "CABit", "ExtraPEMBlocks"} {
				if v.FieldByName(f).String() == "" {
					t.Errorf("%s is empty", f)
				}
			}
			for _, w := range []want{common, tt.want} {
				for field, subs := range w {
					text := v.FieldByName(field).String()
					for _, s := range subs {
						if !strings.Contains(text, s) {
							t.Errorf("%s = %q\nwant it to contain %q", field, text, s)
						}
					}
				}
			}
		})
	}
}

// TestDescribeKeyTypes checks the key types: the baseline, or a custom profile's list.
func TestDescribeKeyTypes(t *testing.T) {
	t.Parallel()
	got := newProfile(t, profile.Spec{Name: profile.NameKubeletServing}).Describe().KeyTypes
	if len(got) != 5 || !strings.HasPrefix(got[0], "RSA (2048 to 8192 bits") || !slices.Contains(got, "Ed25519") {
		t.Errorf("baseline key types = %q", got)
	}
	got = newProfile(t, meshSpec()).Describe().KeyTypes
	if !slices.Equal(got, []string{"ECDSA-P256", "Ed25519"}) {
		t.Errorf("custom key types = %q", got)
	}
	if d := (profile.Profile{}).Describe(); !strings.Contains(d.TrustDistribution, "not configured") {
		t.Errorf("zero profile description = %+v", d)
	}
}

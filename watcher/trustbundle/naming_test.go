package trustbundle

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TestName checks the names against the API server's rule for signer-linked bundles
// (k8s.io/kubernetes pkg/apis/core/validation ValidateClusterTrustBundleName): the signer
// name with "/" replaced by ":", then ":", then a DNS subdomain.
func TestName(t *testing.T) {
	for signer, want := range map[string]string{
		"example.com/serving":                    "example.com:serving:signet",
		"kubernetes.io/kube-apiserver-client":    "kubernetes.io:kube-apiserver-client:signet",
		"it.signet.dev/ns.name":                  "it.signet.dev:ns.name:signet",
		"a.b/" + strings.Repeat("x", 253):        "a.b:" + strings.Repeat("x", 253) + ":signet",
		"signet.dev/pod-identity":                "signet.dev:pod-identity:signet",
		"sub.domain.example.com/workload-client": "sub.domain.example.com:workload-client:signet",
	} {
		got := Name(signer)
		if got != want {
			t.Errorf("Name(%q) = %q, want %q", signer, got, want)
		}
		prefix := strings.ReplaceAll(signer, "/", ":") + ":"
		if !strings.HasPrefix(got, prefix) {
			t.Errorf("Name(%q) = %q lacks the required prefix %q", signer, got, prefix)
		}
		if errs := validation.IsDNS1123Subdomain(strings.TrimPrefix(got, prefix)); len(errs) > 0 {
			t.Errorf("Name(%q): the suffix is not a DNS subdomain: %v", signer, errs)
		}
		if Name(signer) != got {
			t.Errorf("Name(%q) is not stable", signer)
		}
	}
}

func TestSignerLabelValue(t *testing.T) {
	long := "sub." + strings.Repeat("d", 60) + ".example.com/" + strings.Repeat("p", 200)
	longer := long + "q"
	for _, tt := range []struct{ signer, want string }{
		{"example.com/serving", "example.com_serving"},
		{"kubernetes.io/kube-apiserver-client", "kubernetes.io_kube-apiserver-client"},
		{"it.signet.dev/ns.name", "it.signet.dev_ns.name"},
		{long, ""},
		{longer, ""},
	} {
		got := SignerLabelValue(tt.signer)
		if tt.want != "" && got != tt.want {
			t.Errorf("SignerLabelValue(%q) = %q, want %q", tt.signer, got, tt.want)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("SignerLabelValue(%q) = %q, not a label value: %v", tt.signer, got, errs)
		}
	}
	if a, b := SignerLabelValue(long), SignerLabelValue(longer); a == b || len(a) != labelValueMax {
		t.Errorf("long signer names share the label value %q / %q, or it is not %d characters", a, b, labelValueMax)
	}
	labels := Labels("example.com/serving")
	if labels[ManagedByLabel] != ManagedBy || labels[SignerLabel] != "example.com_serving" || len(labels) != 2 {
		t.Errorf("Labels = %v", labels)
	}
	for k := range labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			t.Errorf("label key %q: %v", k, errs)
		}
	}
}

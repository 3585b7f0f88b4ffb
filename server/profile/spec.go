// Package profile holds Signet's signer profiles: the rules one signer applies to a parsed
// certificate request and the operator-facing description of those rules (the seven points the
// Kubernetes certificates KEP asks every signer to document).
//
// Four profiles reproduce kube-controller-manager's built-in signers (kube-apiserver-client,
// kube-apiserver-client-kubelet, kubelet-serving, legacy-unknown), with Signet's deliberate
// additions: requester checks for the kubelet profiles, a privileged-group rule for profiles
// that issue client certificates, a refusal of CA requests and of the cert sign / crl sign
// usages, and a key-strength baseline. The fifth, custom, is configured by CustomSpec.
//
// The configuration of a profile (Spec and the types it holds, the profile names, its
// structural checks) lives in server/profile/spec, which links no issuance or lint code so
// that the server's configuration stays plain data; the names here are aliases of its.
//
// # Patterns
//
// Custom profiles match names with globs, validated when the profile is loaded:
//   - "*" matches any run of characters, possibly empty, that does not contain the
//     separator of the kind of name: "." in DNS names, "/" in URIs, "@" in email addresses;
//     common names and organizations have no separator;
//   - "**" matches any run of characters, separators included;
//   - every other character matches itself; there is no escape, so a pattern cannot match
//     a literal "*".
//
// A pattern matches the whole name. DNS names and the domain part of email addresses match
// case-insensitively; everything else is case-sensitive. For example "*.svc.cluster.local"
// matches "api.svc.cluster.local" but not "api.ns.svc.cluster.local" (use
// "*.*.svc.cluster.local" or "**.svc.cluster.local"), and "spiffe://cluster.local/ns/*/sa/*"
// matches one namespace and one service account segment. IP addresses match CIDR ranges
// ("10.0.0.0/8", "fd00::/8") or single addresses.
package profile

import (
	"time"

	"github.com/signet-pki/signet/server/profile/spec"
)

// Profile names, the values of Spec.Name (see server/profile/spec).
const (
	NameKubeAPIServerClient        = spec.NameKubeAPIServerClient
	NameKubeAPIServerClientKubelet = spec.NameKubeAPIServerClientKubelet
	NameKubeletServing             = spec.NameKubeletServing
	NameLegacyUnknown              = spec.NameLegacyUnknown
	NameCustom                     = spec.NameCustom
	NamePodIdentity                = spec.NamePodIdentity
	NameKubeletClientTPM           = spec.NameKubeletClientTPM
	NameKubeletClientInsecure      = spec.NameKubeletClientInsecure
	NameKubeletServingTPM          = spec.NameKubeletServingTPM
)

// DefaultTrustDomain is the SPIFFE trust domain of a pod-identity profile that sets none.
const DefaultTrustDomain = spec.DefaultTrustDomain

// The configuration of a profile, defined in server/profile/spec.
type (
	Spec            = spec.Spec
	BootstrapSpec   = spec.BootstrapSpec
	PodIdentitySpec = spec.PodIdentitySpec
	CustomSpec      = spec.CustomSpec
	SubjectSpec     = spec.SubjectSpec
	SANSpec         = spec.SANSpec
	UsageSpec       = spec.UsageSpec
)

// KubernetesProfileFor returns the profile that reproduces the built-in kubernetes.io signer
// signerName ("kubernetes.io/kubelet-serving" → "kubelet-serving"), and false for any other
// signer name.
func KubernetesProfileFor(signerName string) (string, bool) {
	return spec.KubernetesProfileFor(signerName)
}

// CheckMaxLifetime checks a signer's maximum lifetime for the profile named name (see
// spec.CheckMaxLifetime).
func CheckMaxLifetime(name string, maxLifetime time.Duration) error {
	return spec.CheckMaxLifetime(name, maxLifetime)
}

// isKubeletClient reports whether the profile named name issues kubelet client certificates.
func isKubeletClient(name string) bool { return spec.IsKubeletClient(name) }

// isControl reports whether r is an ASCII or Unicode control character.
func isControl(r rune) bool { return spec.IsControl(r) }

// Package spec is the configuration of a signer profile as plain data: the Spec types that a
// ServerConfiguration holds, the profile names, and the structural checks of a spec (Validate,
// Compile). It carries no issuance or lint code, so the configuration and the programs that
// only check it (signetctl validate server) link no zlint; server/profile builds the rules a
// signer applies from a compiled spec.
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
package spec

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Profile names, the values of Spec.Name.
const (
	NameKubeAPIServerClient        = "kube-apiserver-client"
	NameKubeAPIServerClientKubelet = "kube-apiserver-client-kubelet"
	NameKubeletServing             = "kubelet-serving"
	NameLegacyUnknown              = "legacy-unknown"
	NameCustom                     = "custom"
	NamePodIdentity                = "pod-identity"
	// NameKubeletClientTPM is kube-apiserver-client-kubelet with TPM node attestation: the
	// request must carry evidence the server verified for the node it names (attested.go).
	NameKubeletClientTPM = "kubelet-client-tpm"
	// NameKubeletClientInsecure is kube-apiserver-client-kubelet with no attestation at all,
	// seed 004's "always allow" signer for providers with no secure mechanism: named loudly
	// wherever it is used.
	NameKubeletClientInsecure = "kubelet-client-insecure"
	// NameKubeletServingTPM is kubelet-serving with TPM node attestation and every DNS and IP
	// SAN bound to the node's own addresses (attested.go).
	NameKubeletServingTPM = "kubelet-serving-tpm"
)

// names lists the profile names in the order error messages show them.
var names = []string{NameKubeAPIServerClient, NameKubeAPIServerClientKubelet, NameKubeletServing, NameLegacyUnknown, NameCustom, NamePodIdentity,
	NameKubeletClientTPM, NameKubeletClientInsecure, NameKubeletServingTPM}

// kubernetesNames are the profiles that reproduce kube-controller-manager's kubernetes.io
// signers, named as those signers are.
var kubernetesNames = []string{NameKubeAPIServerClient, NameKubeAPIServerClientKubelet, NameKubeletServing, NameLegacyUnknown}

// DefaultPrivilegedGroups returns the privileged group list of a spec whose PrivilegedGroups
// is empty.
func DefaultPrivilegedGroups() []string { return []string{"system:masters"} }

// IsKubeletClient reports whether the profile named name issues kubelet client certificates:
// kube-apiserver-client-kubelet and its attested and insecure variants, which share its rules.
func IsKubeletClient(name string) bool {
	return name == NameKubeAPIServerClientKubelet || name == NameKubeletClientTPM || name == NameKubeletClientInsecure
}

// KubernetesProfileFor returns the profile that reproduces the built-in kubernetes.io signer
// signerName ("kubernetes.io/kubelet-serving" → "kubelet-serving"), and false for any other
// signer name.
func KubernetesProfileFor(signerName string) (string, bool) {
	name, ok := strings.CutPrefix(signerName, "kubernetes.io/")
	if !ok || !slices.Contains(kubernetesNames, name) {
		return "", false
	}
	return name, true
}

// Spec is the configuration of one signer's profile. Its zero value is invalid (Name is
// required); every other field is optional.
type Spec struct {
	// Name selects the profile: kube-apiserver-client, kube-apiserver-client-kubelet,
	// kubelet-serving, legacy-unknown, custom or pod-identity.
	Name string `json:"name"`
	// AllowPrivileged opts in to signing client certificates whose subject organizations
	// include a privileged group. Not allowed on the kubelet profiles (their organization is
	// pinned to system:nodes).
	AllowPrivileged bool `json:"allowPrivileged,omitempty"`
	// PrivilegedGroups are the privileged groups; default ["system:masters"]. Not allowed on
	// the kubelet profiles.
	PrivilegedGroups []string `json:"privilegedGroups,omitempty"`
	// Custom configures the custom profile; required when Name is custom, refused otherwise.
	Custom *CustomSpec `json:"custom,omitempty"`
	// PodIdentity configures the pod-identity profile; optional when Name is pod-identity
	// (nil: every default), refused otherwise.
	PodIdentity *PodIdentitySpec `json:"podIdentity,omitempty"`
	// Bootstrap configures who, besides the node itself, may obtain a node's client
	// certificate; only on the kubelet client profiles (kube-apiserver-client-kubelet,
	// kubelet-client-tpm, kubelet-client-insecure; nil: every default).
	Bootstrap *BootstrapSpec `json:"bootstrap,omitempty"`
	// BindSANsToNode, on kubelet-serving, accepts only DNS and IP SANs that are among the
	// node's own addresses (Node status.addresses, which the watcher forwards for the signer
	// names of its nodeAddresses setting). kube-controller-manager never checks those SANs.
	// Always on for kubelet-serving-tpm; not allowed on other profiles.
	BindSANsToNode bool `json:"bindSANsToNode,omitempty"`
}

// BootstrapSpec configures the bootstrap rule of the kubelet client profiles: a requester
// in one of Groups may obtain a client certificate for any system:node:<name>, as a kubelet
// joining with a bootstrap token does (requester system:bootstrap:<token id>, group
// system:bootstrappers). The authority over a first node certificate is the approver (the
// nodeclient SubjectAccessReview kube-controller-manager's approver makes), so the signer
// only checks that the requester is one the cluster lets bootstrap nodes.
type BootstrapSpec struct {
	// Disabled turns the rule off: only the node itself (spec.username equal to the common
	// name, system:nodes among spec.groups) may obtain its certificate. For clusters that join
	// nodes by other means.
	Disabled bool `json:"disabled,omitempty"`
	// Groups are the bootstrap groups; default ["system:bootstrappers"], the group every
	// bootstrap token authenticates into. system:nodes and the groups every user or every
	// anonymous request has are refused. Not allowed with Disabled.
	Groups []string `json:"groups,omitempty"`
}

// DefaultBootstrapGroups returns the bootstrap group list of a BootstrapSpec whose Groups is
// empty.
func DefaultBootstrapGroups() []string { return []string{"system:bootstrappers"} }

// forbiddenBootstrapGroups are groups that must not be bootstrap groups, with the reason.
var forbiddenBootstrapGroups = map[string]string{
	"system:nodes":           "every node is in it, so any node could obtain another node's certificate",
	"system:authenticated":   "every authenticated user is in it",
	"system:unauthenticated": "every anonymous request is in it",
	"system:serviceaccounts": "every service account is in it",
	"system:masters":         "a cluster administrator needs no bootstrap rule; use a dedicated group",
}

// PodIdentitySpec configures the pod-identity profile, which serves PodCertificateRequests.
type PodIdentitySpec struct {
	// TrustDomain is the SPIFFE trust domain of the URI SAN (default "cluster.local").
	TrustDomain string `json:"trustDomain,omitempty"`
	// AllowedAnnotations are the spec.unverifiedUserAnnotations keys the signer accepts (and ignores); any other key is refused. Empty: none.
	AllowedAnnotations []string `json:"allowedAnnotations,omitempty"`
}

// CustomSpec configures a custom profile. Every list is an allow-list: an empty list allows
// nothing of its kind (see each field), so a custom profile only issues what it names.
type CustomSpec struct {
	// Subject restricts the subject.
	Subject SubjectSpec `json:"subject,omitempty"`
	// SANs restricts the subject alternative names.
	SANs SANSpec `json:"sans,omitempty"`
	// Usages restricts spec.usages; Usages.Allowed is required.
	Usages UsageSpec `json:"usages"`
	// KeyTypes restricts the public key type beyond Signet's baseline. Known types: RSA-2048,
	// RSA-3072, RSA-4096, RSA-8192 (exact modulus sizes), ECDSA-P256, ECDSA-P384, ECDSA-P521
	// and Ed25519. Empty: every key the baseline accepts (RSA 2048–8192 bits with exponent
	// 65537, ECDSA P-256/P-384/P-521, Ed25519).
	KeyTypes []string `json:"keyTypes,omitempty"`
}

// SubjectSpec restricts the subject of a custom profile.
type SubjectSpec struct {
	// CommonNames are the patterns the common name must match. Empty: the common name must be
	// empty. ["*"] allows any common name, the empty one included.
	CommonNames []string `json:"commonNames,omitempty"`
	// Organizations are the patterns every organization must match. Empty: no organization
	// is allowed.
	Organizations []string `json:"organizations,omitempty"`
	// AllowOtherAttributes allows subject attributes other than common name and organization
	// (OU, C, L, ST, ...), which are then copied unchecked. Off: they are refused.
	AllowOtherAttributes bool `json:"allowOtherAttributes,omitempty"`
}

// SANSpec restricts the subject alternative names of a custom profile. A SAN type is allowed
// when its list is non-empty, and then every SAN of the type must match one of its entries.
type SANSpec struct {
	// DNS are DNS name patterns, e.g. "*.svc.cluster.local". Requested DNS names must also be
	// valid host names (letters, digits and hyphens; no wildcard labels).
	DNS []string `json:"dns,omitempty"`
	// IP are CIDR ranges or single addresses, e.g. "10.0.0.0/8", "fd00::/8", "192.0.2.7".
	IP []string `json:"ip,omitempty"`
	// URI are URI patterns, e.g. "spiffe://cluster.local/ns/*/sa/*". Requested URIs must have
	// no user information, query, fragment or "." / ".." path segment.
	URI []string `json:"uri,omitempty"`
	// Email are email address patterns, e.g. "*@example.com".
	Email []string `json:"email,omitempty"`
	// Required asks for at least one SAN of an allowed type.
	Required bool `json:"required,omitempty"`
}

// UsageSpec restricts spec.usages of a custom profile. Usages are compared as strings, as
// kube-controller-manager does ("signing" and "digital signature" are different entries).
type UsageSpec struct {
	// Allowed are the usages a request may carry; at least one. "cert sign" and "crl sign"
	// are not allowed: Signet issues leaf certificates only.
	Allowed []string `json:"allowed"`
	// Required are usages every request must carry; each must also be allowed.
	Required []string `json:"required,omitempty"`
}

// Validate checks the spec. Each error names the field by its path inside the profile
// ("custom.sans.dns[0]", "privilegedGroups[1]") so a caller can prefix the enclosing path;
// all problems are reported, joined.
func (s Spec) Validate() error {
	_, err := s.Compile()
	return err
}

// Compiled is a validated spec's compiled configuration: the custom profile's compiled
// patterns, the pod-identity profile's settings with their defaults; nil for other profiles.
type Compiled struct {
	Custom *Custom
	Pod    *Pod
}

// Compile validates s (see Validate) and returns its compiled configuration.
func (s Spec) Compile() (Compiled, error) {
	var c Compiled
	var errs []error
	switch {
	case s.Name == "":
		errs = append(errs, fmt.Errorf("name: required, one of %s", strings.Join(names, ", ")))
	case !slices.Contains(names, s.Name):
		errs = append(errs, fmt.Errorf("name: %q is not one of %s", s.Name, strings.Join(names, ", ")))
	}
	if why, pinned := subjectPinned[s.Name]; pinned {
		if s.AllowPrivileged {
			errs = append(errs, fmt.Errorf("allowPrivileged: not allowed on %s (%s)", s.Name, why))
		}
		if len(s.PrivilegedGroups) != 0 {
			errs = append(errs, fmt.Errorf("privilegedGroups: not allowed on %s (%s)", s.Name, why))
		}
	}
	errs = append(errs, validateList("privilegedGroups", s.PrivilegedGroups, func(g string) error {
		return checkPlain(g)
	})...)
	switch {
	case s.Name == NameCustom && s.Custom == nil:
		errs = append(errs, errors.New("custom: required when name is custom"))
	case s.Name != NameCustom && s.Custom != nil:
		errs = append(errs, fmt.Errorf("custom: only allowed when name is custom, not %q", s.Name))
	case s.Custom != nil:
		var cerrs []error
		c.Custom, cerrs = compileCustom(*s.Custom)
		errs = append(errs, cerrs...)
	}
	errs = append(errs, s.validateBootstrap()...)
	if s.BindSANsToNode && s.Name != NameKubeletServing {
		errs = append(errs, fmt.Errorf("bindSANsToNode: only allowed when name is %s (always on for %s), not %q", NameKubeletServing, NameKubeletServingTPM, s.Name))
	}
	switch {
	case s.Name != NamePodIdentity && s.PodIdentity != nil:
		errs = append(errs, fmt.Errorf("podIdentity: only allowed when name is pod-identity, not %q", s.Name))
	case s.Name == NamePodIdentity:
		var perrs []error
		c.Pod, perrs = compilePodIdentity(s.PodIdentity)
		errs = append(errs, perrs...)
	}
	if err := errors.Join(errs...); err != nil {
		return Compiled{}, err
	}
	return c, nil
}

// validateBootstrap checks the bootstrap settings: only on the kubelet client profiles,
// groups not with disabled, each group plain, not duplicated and not a group every node or
// user is in.
func (s Spec) validateBootstrap() []error {
	b := s.Bootstrap
	if b == nil {
		return nil
	}
	if !IsKubeletClient(s.Name) {
		return []error{fmt.Errorf("bootstrap: only allowed when name is %s, %s or %s, not %q",
			NameKubeAPIServerClientKubelet, NameKubeletClientTPM, NameKubeletClientInsecure, s.Name)}
	}
	var errs []error
	if b.Disabled && len(b.Groups) != 0 {
		errs = append(errs, errors.New("bootstrap.groups: not allowed when bootstrap.disabled is set"))
	}
	errs = append(errs, validateList("bootstrap.groups", b.Groups, func(g string) error {
		if err := checkPlain(g); err != nil {
			return err
		}
		if why, ok := forbiddenBootstrapGroups[g]; ok {
			return fmt.Errorf("cannot be a bootstrap group: %s", why)
		}
		return nil
	})...)
	return errs
}

// subjectPinned are the profiles whose subject the profile fixes, so the privileged-group
// settings make no sense there, with the reason.
var subjectPinned = map[string]string{
	NameKubeAPIServerClientKubelet: "the organization is pinned to system:nodes",
	NameKubeletServing:             "the organization is pinned to system:nodes",
	NameKubeletClientTPM:           "the organization is pinned to system:nodes",
	NameKubeletClientInsecure:      "the organization is pinned to system:nodes",
	NameKubeletServingTPM:          "the organization is pinned to system:nodes",
	NamePodIdentity:                "its certificates have no subject",
}

// validateList checks every entry of a list with check and refuses duplicates. Errors name
// the entry as field[i].
func validateList(field string, list []string, check func(string) error) []error {
	var errs []error
	for i, v := range list {
		if err := check(v); err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %q: %w", field, i, v, err))
		}
		if j := slices.Index(list, v); j < i {
			errs = append(errs, fmt.Errorf("%s[%d]: %q duplicates %s[%d]", field, i, v, field, j))
		}
	}
	return errs
}

// checkPlain refuses empty strings and strings with control characters.
func checkPlain(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if strings.ContainsFunc(s, IsControl) {
		return errors.New("contains a control character")
	}
	return nil
}

// IsControl reports whether r is an ASCII or Unicode control character: what no pattern, group
// or name may contain.
func IsControl(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r < 0xa0)
}

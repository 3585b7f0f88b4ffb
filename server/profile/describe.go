package profile

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/profile/spec"
)

// Description is how a signer works, for operators and requesters: the seven points the
// Kubernetes certificates KEP asks every signer to document, specific to the configuration.
type Description struct {
	// Profile is the profile name.
	Profile string `json:"profile"`
	// TrustDistribution: how the CA bundle reaches relying parties.
	TrustDistribution string `json:"trustDistribution"`
	// PermittedSubjects: which subjects are signed, and what happens to others.
	PermittedSubjects string `json:"permittedSubjects"`
	// PermittedExtensions: which SANs and extensions are honored, and what happens to others.
	PermittedExtensions string `json:"permittedExtensions"`
	// PermittedKeyUsages: which usages may or must be requested, and what happens to others.
	PermittedKeyUsages string `json:"permittedKeyUsages"`
	// Expiration: how the certificate lifetime is chosen.
	Expiration string `json:"expiration"`
	// CABit: whether CA certificates are issued, and what happens to a request for one.
	CABit string `json:"caBit"`
	// ExtraPEMBlocks: the meaning of the certificates after the first in the issued chain.
	ExtraPEMBlocks string `json:"extraPEMBlocks"`
	// MaxLifetime is the longest lifetime the signer issues.
	MaxLifetime time.Duration `json:"maxLifetime"`
	// KeyTypes are the accepted public key types.
	KeyTypes []string `json:"keyTypes"`
}

// Sentences shared by several descriptions.
const (
	refusal          = " A request outside these rules is refused with a message naming the rule (a Failed condition on a CertificateSigningRequest)."
	otherExtensions  = " Every other extension in the request (basic constraints, key usage, extended key usage, custom OIDs) is discarded: the certificate carries only the subject, the SANs, key usage and extended key usage from spec.usages and basic constraints CA:FALSE (plus the authority key identifier when the CA certificate has a subject key identifier)."
	usagesOnlySpec   = " Key usage and extended key usage come from spec.usages only; usages inside the CSR are ignored."
	wellFormed       = " Names must be well formed, unlike kube-controller-manager, which copies anything: no control character in the subject; DNS names of letters, digits and hyphens (no empty label, space, underscore or control character; a hyphen not at a label's edge; a wildcard only as the whole leftmost label; punycode that decodes); email addresses without spaces or display names; URIs with a scheme and something after it."
	leafOnlyUsages   = ` "cert sign" and "crl sign" are refused on every profile: Signet issues leaf certificates only.`
	apiserverOnlyFmt = "Only the kube-apiserver is meant to trust these certificates%s: configure this signer's CA bundle in its %s. Signet does not distribute the bundle by any other means."
)

// Describe returns the profile's description.
func (p Profile) Describe() Description {
	d := Description{
		Profile:     p.spec.Name,
		Expiration:  p.describeExpiration(),
		CABit:       "Not allowed. A CSR asking for a CA certificate (basic constraints CA:TRUE) is refused with a policy violation naming the rule \"ca\", as are the cert sign and crl sign usages: Signet issues leaf certificates only. Every certificate carries basic constraints CA:FALSE.",
		MaxLifetime: p.maxLifetime,
		KeyTypes:    slices.Clone(baselineKeyTypes),
		ExtraPEMBlocks: "Standard meaning: status.certificate holds the leaf certificate first, then this signer's configured intermediate CA certificates (if any), " +
			"to be presented in TLS handshakes after the leaf. The root is never included.",
	}
	if p.custom != nil && len(p.custom.KeyTypes) != 0 {
		d.KeyTypes = slices.Clone(p.custom.KeyTypes)
	}
	switch p.spec.Name {
	case NameKubeAPIServerClient:
		p.describeKubeAPIServerClient(&d)
	case NameKubeAPIServerClientKubelet, NameKubeletServing, NameKubeletClientTPM, NameKubeletClientInsecure, NameKubeletServingTPM:
		p.describeKubelet(&d)
	case NameLegacyUnknown:
		d.TrustDistribution = "None: there is no standard trust or distribution for this signer in a Kubernetes cluster. Any party that trusts its certificates does so by its own configuration."
		d.PermittedSubjects = "Any subject." + p.describePrivileged(false)
		d.PermittedExtensions = "URI, DNS, IP and email SANs are honored and copied as requested." + wellFormed + otherExtensions
		d.PermittedKeyUsages = "Any known certificates.k8s.io/v1 usage, at least one; an unknown usage is refused." + leafOnlyUsages + usagesOnlySpec
	case NameCustom:
		p.custom.describe(&d, p.describePrivileged(false))
	case NamePodIdentity:
		p.pod.describe(&d, p.maxLifetime)
	default:
		d.TrustDistribution = "This profile is not configured and refuses every request."
	}
	return d
}

// describeExpiration explains the lifetime rules of issuance.ClampLifetime and the issuer.
func (p Profile) describeExpiration() string {
	return fmt.Sprintf("Lifetime is the minimum of spec.expirationSeconds and the configured maximum, %s; without expirationSeconds it is %s, "+
		"and a request for less than %s gets %s. NotBefore is backdated by %s for clock skew; for lifetimes of %s or more NotAfter is brought "+
		"in by the same %s, as kube-controller-manager does. NotAfter is never later than the CA certificate's NotAfter.",
		p.maxLifetime, p.maxLifetime, issuance.MinLifetime, issuance.MinLifetime, issuance.Backdate, issuance.ShortLifetime, issuance.Backdate)
}

// describePrivileged explains the privileged-group rule, applied always or only to
// certificates that can authenticate clients.
func (p Profile) describePrivileged(always bool) string {
	groups := strings.Join(p.privileged, ", ")
	when := ""
	if !always {
		when = " when the certificate can authenticate clients (extended key usage client auth or any, or no extended key usage at all)"
	}
	if p.spec.AllowPrivileged {
		return fmt.Sprintf(" Privileged groups (%s) are allowed as organizations because allowPrivileged is set: review approvals of such requests carefully.", groups)
	}
	return fmt.Sprintf(" A subject whose organizations include a privileged group (%s) is refused%s; set allowPrivileged to sign them.", groups, when)
}

// describeNodeIdentity explains kube-apiserver-client's node identity rule.
func (p Profile) describeNodeIdentity() string {
	if p.spec.AllowPrivileged {
		return " Node identities (common name system:node:<name>, organization system:nodes) are allowed because allowPrivileged is set."
	}
	return " A node identity (common name system:node:<name> or organization system:nodes) is refused, unlike kube-controller-manager: nodes get their client certificates from kubernetes.io/kube-apiserver-client-kubelet, which checks the requester; set allowPrivileged to sign them here."
}

// describeKubeAPIServerClient fills d for kube-apiserver-client.
func (p Profile) describeKubeAPIServerClient(d *Description) {
	d.TrustDistribution = fmt.Sprintf(apiserverOnlyFmt, " as client certificates", "--client-ca-file")
	d.PermittedSubjects = "Any subject: the common name becomes the Kubernetes user name and each organization a group, so approve only identities you would grant." +
		p.describePrivileged(true) + p.describeNodeIdentity()
	d.PermittedExtensions = "URI, DNS, IP and email SANs are honored and copied as requested." + wellFormed + otherExtensions
	d.PermittedKeyUsages = `spec.usages must include "client auth" and may add only "digital signature" and "key encipherment" (exact strings: "signing" is refused, as kube-controller-manager does).` +
		leafOnlyUsages + usagesOnlySpec + refusal
}

// describeKubelet fills d for kube-apiserver-client-kubelet and kubelet-serving.
func (p Profile) describeKubelet(d *Description) {
	d.PermittedSubjects = `Organization exactly ["system:nodes"] (a single entry) and a common name starting with "system:node:". ` +
		`The requester must be that node: spec.username equal to the common name and "system:nodes" among spec.groups.`
	if isKubeletClient(p.spec.Name) {
		d.TrustDistribution = fmt.Sprintf(apiserverOnlyFmt, " as kubelet client certificates", "--client-ca-file")
		d.PermittedSubjects += p.describeBootstrap() + describeAttestation(p.spec.Name) + refusal
		d.PermittedExtensions = "No SANs: a request with any DNS, IP, email or URI SAN is refused." + otherExtensions
		d.PermittedKeyUsages = `spec.usages must be exactly {"digital signature", "client auth"} or {"digital signature", "key encipherment", "client auth"}, ` +
			`the sets kube-controller-manager accepts (key encipherment is optional for keys other than RSA); anything else is refused.` + leafOnlyUsages + usagesOnlySpec
		return
	}
	d.TrustDistribution = fmt.Sprintf(apiserverOnlyFmt, " as kubelet serving certificates", "--kubelet-certificate-authority")
	d.PermittedSubjects += describeAttestation(p.spec.Name) + refusal
	d.PermittedExtensions = "At least one DNS or IP SAN is required; DNS and IP SANs are copied as requested. Email and URI SANs are refused." + p.describeNodeSANs() + wellFormed + otherExtensions
	d.PermittedKeyUsages = `spec.usages must be exactly {"digital signature", "server auth"} or {"digital signature", "key encipherment", "server auth"}, ` +
		`the sets kube-controller-manager accepts (key encipherment is optional for keys other than RSA); anything else is refused.` + leafOnlyUsages + usagesOnlySpec
}

// describeBootstrap explains the bootstrap rule of kube-apiserver-client-kubelet as
// configured.
func (p Profile) describeBootstrap() string {
	if b := p.spec.Bootstrap; b != nil && b.Disabled {
		return " Bootstrap is off (bootstrap.disabled): a requester that is not the node, a kubelet joining with a bootstrap token included, " +
			"is refused, so nodes must obtain their first certificate by other means."
	}
	groups := spec.DefaultBootstrapGroups()
	if b := p.spec.Bootstrap; b != nil && len(b.Groups) != 0 {
		groups = b.Groups
	}
	return fmt.Sprintf(" For a node's first certificate, a requester in a bootstrap group (%s) may instead ask for any system:node:<name>, "+
		"as a kubelet joining with a bootstrap token does (username system:bootstrap:<token id>, group system:bootstrappers). "+
		"As with kube-controller-manager, the approval is the authority over which node a bootstrap requester may join as "+
		"(its csrapproving controller checks the nodeclient permission); the ledger records such issuances with grounds \"bootstrap\". "+
		"Set bootstrap.disabled to refuse them.", quoted(groups))
}

// describe fills d for a custom profile; privileged explains the privileged-group rule.
func (c *compiledCustom) describe(d *Description, privileged string) {
	d.TrustDistribution = "Out of band, chosen by the operator: relying parties must be given this signer's CA bundle " +
		"(for example a signer-linked ClusterTrustBundle published by signet-watcher, or a file). Trust only what this profile permits."
	var subj []string
	if len(c.CommonNames) == 0 {
		subj = append(subj, "The common name must be empty.")
	} else {
		subj = append(subj, fmt.Sprintf("The common name must match one of %s.", quoted(texts(c.CommonNames))))
	}
	if len(c.Organizations) == 0 {
		subj = append(subj, "No organization is allowed.")
	} else {
		subj = append(subj, fmt.Sprintf("Every organization must match one of %s.", quoted(texts(c.Organizations))))
	}
	if c.Spec.Subject.AllowOtherAttributes {
		subj = append(subj, "Other subject attributes (OU, C, L, ...) are copied unchecked.")
	} else {
		subj = append(subj, "No other subject attribute (OU, C, L, ...) is allowed.")
	}
	subj = append(subj, patternSyntax+privileged+refusal)
	d.PermittedSubjects = strings.Join(subj, " ")
	d.PermittedExtensions = c.describeSANs() + otherExtensions + refusal
	d.PermittedKeyUsages = fmt.Sprintf("spec.usages must be at most %s", quoted(c.Spec.Usages.Allowed))
	if len(c.Spec.Usages.Required) != 0 {
		d.PermittedKeyUsages += fmt.Sprintf(" and must include %s", quoted(c.Spec.Usages.Required))
	}
	d.PermittedKeyUsages += " (exact strings)." + leafOnlyUsages + usagesOnlySpec + refusal
}

// patternSyntax explains the glob patterns in descriptions.
const patternSyntax = `Patterns: "*" matches any run of characters without the separator ("." in DNS names, "/" in URIs, "@" in email addresses), "**" any run at all.`

// describeSANs explains the SAN rules of a custom profile.
func (c *compiledCustom) describeSANs() string {
	var parts []string
	add := func(kind string, allowed []string, extra string) {
		if len(allowed) == 0 {
			parts = append(parts, kind+" SANs are refused.")
			return
		}
		parts = append(parts, fmt.Sprintf("%s SANs must match one of %s%s.", kind, quoted(allowed), extra))
	}
	add("DNS", texts(c.DNS), " and be host names (no wildcard names)")
	add("IP", c.Spec.SANs.IP, " (CIDR ranges)")
	add("URI", texts(c.URI), " and have no user information, query, fragment or dot segment")
	add("Email", texts(c.Email), "")
	if c.Spec.SANs.Required {
		parts = append(parts, "At least one SAN is required.")
	}
	parts = append(parts, "Permitted SANs are copied as requested.")
	return strings.Join(parts, " ")
}

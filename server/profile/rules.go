package profile

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/profile/spec"
)

// Kubernetes names the kubelet profiles check.
const (
	nodesGroup       = "system:nodes"
	nodeCommonPrefix = "system:node:"
)

// Usage strings, as spec.usages carries them.
const (
	usageDigitalSignature = string(certificatesv1.UsageDigitalSignature)
	usageKeyEncipherment  = string(certificatesv1.UsageKeyEncipherment)
	usageClientAuth       = string(certificatesv1.UsageClientAuth)
	usageServerAuth       = string(certificatesv1.UsageServerAuth)
	usageCertSign         = string(certificatesv1.UsageCertSign)
	usageCRLSign          = string(certificatesv1.UsageCRLSign)
)

var oidBasicConstraints = asn1.ObjectIdentifier{2, 5, 29, 19}

// keyRule checks the public key: Signet's baseline (issuance.CheckPublicKey) and, on a custom
// profile with KeyTypes, membership of the list. Failures wrap issuance.ErrUnsupportedKey.
func (p Profile) keyRule() rule {
	var allowed []string
	if p.custom != nil {
		allowed = p.custom.KeyTypes
	}
	name := "key: RSA of 2048 to 8192 bits (whole bytes) with exponent 65537, ECDSA P-256, P-384 or P-521, or Ed25519"
	if len(allowed) != 0 {
		name = "key: one of " + strings.Join(allowed, ", ")
	}
	return rule{name: name, check: func(in *input) (string, error) {
		found := "key is " + keyTypeOf(in.csr.PublicKey)
		if err := issuance.CheckPublicKey(in.csr.PublicKey); err != nil {
			detail, _ := fromError(err)
			return detail, issuance.ErrUnsupportedKey
		}
		if len(allowed) != 0 && !slices.Contains(allowed, keyTypeOf(in.csr.PublicKey)) {
			return found + ", not one of " + strings.Join(allowed, ", "), issuance.ErrUnsupportedKey
		}
		return found, nil
	}}
}

// caRule refuses a request for a CA certificate (issuance.CheckNotCA).
func caRule() rule {
	return rule{name: "ca: no CA certificate requested (leaf-only signer)", check: func(in *input) (string, error) {
		if err := issuance.CheckNotCA(in.csr); err != nil {
			return fromError(err)
		}
		if slices.ContainsFunc(in.csr.Extensions, func(e pkix.Extension) bool { return e.Id.Equal(oidBasicConstraints) }) {
			return "basic constraints CA:FALSE", nil
		}
		return "no basic constraints requested", nil
	}}
}

// usagesKnownRule requires at least one usage, each a known certificates.k8s.io/v1 usage.
func usagesKnownRule() rule {
	return rule{name: "usages: at least one, each a known certificates.k8s.io/v1 usage", check: func(in *input) (string, error) {
		switch {
		case in.usageErr != nil:
			detail, _ := fromError(in.usageErr)
			return detail, issuance.ErrPolicyViolation
		case len(in.usages) == 0:
			return "no usages requested", issuance.ErrPolicyViolation
		}
		return "usages are " + quoted(in.usages), nil
	}}
}

// leafUsagesRule refuses the usages only a CA needs, on every profile.
func leafUsagesRule() rule {
	return rule{name: "usages: no cert sign or crl sign (leaf-only signer)", check: func(in *input) (string, error) {
		for _, u := range []string{usageCertSign, usageCRLSign} {
			if slices.Contains(in.usages, u) {
				return fmt.Sprintf("%q is reserved for CA certificates", u), issuance.ErrPolicyViolation
			}
		}
		return "usages are " + quoted(in.usages), nil
	}}
}

// kubeAPIServerClientRules are kube-controller-manager's checks for
// kubernetes.io/kube-apiserver-client (validAPIServerClientUsages).
func kubeAPIServerClientRules() []rule {
	return []rule{
		{name: "usages: include client auth", check: func(in *input) (string, error) {
			return outcome(slices.Contains(in.usages, usageClientAuth), "usages are "+quoted(in.usages))
		}},
		usagesAtMostRule([]string{usageDigitalSignature, usageKeyEncipherment, usageClientAuth}),
	}
}

// nodeIdentityRule refuses, on kube-apiserver-client, a certificate that would authenticate as
// a node (common name system:node:<name> or organization system:nodes) unless AllowPrivileged:
// the apiserver's admission only stops system:masters there, and a node identity carries the
// Node authorizer's rights over that node's pods and secrets. Nodes get their client
// certificates from kube-apiserver-client-kubelet, whose rules check the requester.
func (p Profile) nodeIdentityRule() rule {
	name := "privileged: no node identity (common name " + nodeCommonPrefix + "<name> or organization " + nodesGroup + ")"
	if p.spec.AllowPrivileged {
		name = "privileged: node identities allowed (allowPrivileged)"
	}
	return rule{name: name, check: func(in *input) (string, error) {
		cn, orgs := in.csr.Subject.CommonName, in.csr.Subject.Organization
		found := fmt.Sprintf("common name is %q, organizations are %s", cn, quoted(orgs))
		if !p.spec.AllowPrivileged && (strings.HasPrefix(cn, nodeCommonPrefix) || slices.Contains(orgs, nodesGroup)) {
			return found + "; a node's identity comes from kubernetes.io/kube-apiserver-client-kubelet (set allowPrivileged to sign it here)", issuance.ErrPolicyViolation
		}
		return found, nil
	}}
}

// usagesAtMostRule requires every usage to be one of allowed.
func usagesAtMostRule(allowed []string) rule {
	return rule{name: "usages: at most " + strings.Join(allowed, ", "), check: func(in *input) (string, error) {
		for _, u := range in.usages {
			if !slices.Contains(allowed, u) {
				return fmt.Sprintf("usages are %s; %q is not allowed", quoted(in.usages), u), issuance.ErrPolicyViolation
			}
		}
		return "usages are " + quoted(in.usages), nil
	}}
}

// kubeletClientRules are kube-controller-manager's ValidateKubeletClientCSR, in its order,
// then Signet's requester check, with bootstrap configured by b (nil: the defaults).
func kubeletClientRules(b *BootstrapSpec) []rule {
	return []rule{
		organizationNodesRule(),
		{name: "sans: none (no DNS name, IP address, email address or URI)", check: func(in *input) (string, error) {
			return outcome(sanCount(in.csr) == 0, describeSANs(in.csr))
		}},
		commonNamePrefixRule(),
		usagesExactlyRule(usageClientAuth),
		nodeClientRequesterRule(b),
	}
}

// nodeClientRequesterRule requires the requester to be the node itself (spec.username equal
// to the common name, system:nodes among spec.groups: a renewal) or, unless b disables it, a
// member of a bootstrap group (a node's first certificate). The second sets the decision's
// grounds, which the ledger records.
func nodeClientRequesterRule(b *BootstrapSpec) rule {
	disabled := b != nil && b.Disabled
	groups := spec.DefaultBootstrapGroups()
	if b != nil && len(b.Groups) != 0 {
		groups = b.Groups
	}
	const self = "the node itself (username equals the common name, groups include " + nodesGroup + ")"
	name := "requester: " + self + " or in a bootstrap group " + list(groups)
	if disabled {
		name = "requester: " + self + "; bootstrap is off (bootstrap.disabled)"
	}
	return rule{name: name, check: func(in *input) (string, error) {
		user, userGroups, cn := in.req.Requester.Username, in.req.Requester.Groups, in.csr.Subject.CommonName
		found := fmt.Sprintf("username is %q, groups are %s, common name is %q", user, quoted(userGroups), cn)
		if user != "" && user == cn && slices.Contains(userGroups, nodesGroup) {
			return "the node itself: " + found, nil
		}
		i := slices.IndexFunc(userGroups, func(g string) bool { return slices.Contains(groups, g) })
		switch {
		case i >= 0 && disabled:
			return fmt.Sprintf("%s; %q is a bootstrap group, but bootstrap is turned off for this signer (profile bootstrap.disabled: true), "+
				"so only the node itself may obtain its certificate", found, userGroups[i]), issuance.ErrPolicyViolation
		case i >= 0:
			in.grounds = fmt.Sprintf("bootstrap: requester in group %q", userGroups[i])
			return fmt.Sprintf("bootstrap: %s; %q is a bootstrap group", found, userGroups[i]), nil
		case disabled:
			return found + "; the requester is not the node (bootstrap is off: bootstrap.disabled)", issuance.ErrPolicyViolation
		}
		return found + "; the requester is neither the node nor in a bootstrap group", issuance.ErrPolicyViolation
	}}
}

// kubeletServingRules are kube-controller-manager's ValidateKubeletServingCSR, in its order,
// then Signet's requester checks.
func kubeletServingRules() []rule {
	return []rule{
		organizationNodesRule(),
		{name: "sans: at least one DNS name or IP address", check: func(in *input) (string, error) {
			return outcome(len(in.csr.DNSNames)+len(in.csr.IPAddresses) > 0, describeSANs(in.csr))
		}},
		{name: "sans: no email address or URI", check: func(in *input) (string, error) {
			return outcome(len(in.csr.EmailAddresses)+len(in.csr.URIs) == 0, describeSANs(in.csr))
		}},
		usagesExactlyRule(usageServerAuth),
		commonNamePrefixRule(),
		requesterUsernameRule(),
		requesterGroupRule(),
	}
}

// organizationNodesRule requires the organizations to be exactly [system:nodes].
func organizationNodesRule() rule {
	return rule{name: "subject: organization exactly [system:nodes]", check: func(in *input) (string, error) {
		o := in.csr.Subject.Organization
		return outcome(len(o) == 1 && o[0] == nodesGroup, "organizations are "+quoted(o))
	}}
}

// commonNamePrefixRule requires the common name to start with system:node:.
func commonNamePrefixRule() rule {
	return rule{name: "subject: common name starts with " + nodeCommonPrefix, check: func(in *input) (string, error) {
		cn := in.csr.Subject.CommonName
		return outcome(strings.HasPrefix(cn, nodeCommonPrefix), fmt.Sprintf("common name is %q", cn))
	}}
}

// usagesExactlyRule requires the set of usages to be {digital signature, eku} or
// {digital signature, key encipherment, eku}: kube-controller-manager compares sets, so a
// repeated usage is the same usage, and key encipherment is optional (keys other than RSA do
// not encipher).
func usagesExactlyRule(eku string) rule {
	name := fmt.Sprintf("usages: exactly %s and %s, optionally with %s", usageDigitalSignature, eku, usageKeyEncipherment)
	short := slices.Sorted(slices.Values([]string{usageDigitalSignature, eku}))
	long := slices.Sorted(slices.Values([]string{usageDigitalSignature, usageKeyEncipherment, eku}))
	return rule{name: name, check: func(in *input) (string, error) {
		set := slices.Compact(slices.Sorted(slices.Values(in.usages)))
		return outcome(slices.Equal(set, short) || slices.Equal(set, long), "usages are "+quoted(in.usages))
	}}
}

// requesterUsernameRule requires spec.username to be the common name: a node may only ask for
// its own certificate.
func requesterUsernameRule() rule {
	return rule{name: "requester: username equals the common name", check: func(in *input) (string, error) {
		user, cn := in.req.Requester.Username, in.csr.Subject.CommonName
		return outcome(user != "" && user == cn, fmt.Sprintf("username is %q, common name is %q", user, cn))
	}}
}

// requesterGroupRule requires system:nodes among spec.groups.
func requesterGroupRule() rule {
	return rule{name: "requester: groups include " + nodesGroup, check: func(in *input) (string, error) {
		groups := in.req.Requester.Groups
		return outcome(slices.Contains(groups, nodesGroup), "groups are "+quoted(groups))
	}}
}

// privilegedRule refuses subject organizations in the privileged groups unless
// AllowPrivileged. Unless always, it applies only to certificates that can authenticate a
// client: extended key usage client auth or any, or no extended key usage at all (which TLS
// stacks, Go's included, accept for every purpose). An unknown usage counts as able.
func (p Profile) privilegedRule(always bool) rule {
	groups := p.privileged
	var name string
	if p.spec.AllowPrivileged {
		name = "privileged: organizations in " + list(groups) + " allowed (allowPrivileged)"
	} else {
		name = "privileged: no organization in " + list(groups)
	}
	if !always && !p.spec.AllowPrivileged {
		name += " when the certificate can authenticate clients"
	}
	return rule{name: name, check: func(in *input) (string, error) {
		orgs := in.csr.Subject.Organization
		found := "organizations are " + quoted(orgs)
		if p.spec.AllowPrivileged {
			return found, nil
		}
		if !always && !clientCapable(in) {
			return "not applicable: usages " + quoted(in.usages) + " do not allow client authentication; " + found, nil
		}
		for _, o := range orgs {
			if slices.Contains(groups, o) {
				return fmt.Sprintf("%s; %q is a privileged group (set allowPrivileged to sign it)", found, o), issuance.ErrPolicyViolation
			}
		}
		return found, nil
	}}
}

// clientCapable reports whether the requested usages give a certificate that TLS clients
// could present: an extended key usage of client auth or any, or none at all.
func clientCapable(in *input) bool {
	if in.usageErr != nil || len(in.ekus) == 0 {
		return true
	}
	return slices.Contains(in.ekus, x509.ExtKeyUsageClientAuth) || slices.Contains(in.ekus, x509.ExtKeyUsageAny)
}

// sanCount returns the number of SANs of every type.
func sanCount(csr *x509.CertificateRequest) int {
	return len(csr.DNSNames) + len(csr.IPAddresses) + len(csr.EmailAddresses) + len(csr.URIs)
}

// describeSANs lists the SANs of a request, e.g. `DNS names ["a"]; IP addresses [10.0.0.1]`.
func describeSANs(csr *x509.CertificateRequest) string {
	var parts []string
	if len(csr.DNSNames) != 0 {
		parts = append(parts, "DNS names "+quoted(csr.DNSNames))
	}
	if len(csr.IPAddresses) != 0 {
		parts = append(parts, fmt.Sprintf("IP addresses %v", csr.IPAddresses))
	}
	if len(csr.EmailAddresses) != 0 {
		parts = append(parts, "email addresses "+quoted(csr.EmailAddresses))
	}
	if len(csr.URIs) != 0 {
		uris := make([]string, len(csr.URIs))
		for i, u := range csr.URIs {
			uris[i] = u.String()
		}
		parts = append(parts, "URIs "+quoted(uris))
	}
	if len(parts) == 0 {
		return "no SANs"
	}
	return strings.Join(parts, "; ")
}

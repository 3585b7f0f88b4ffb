package profile

import (
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/profile/spec"
)

// maxPodUIDLength is the kube-apiserver's limit on the UIDs of a PodCertificateRequest.
const maxPodUIDLength = 128

// podKeyTypes are the keys the kube-apiserver accepts in a PodCertificateRequest (and the
// kubelet generates: keyType RSA3072, RSA4096, ECDSAP256, ECDSAP384, ECDSAP521, ED25519), in
// keyTypeOf's names. RSA must have exactly these modulus sizes.
var podKeyTypes = []string{"ECDSA-P256", "ECDSA-P384", "ECDSA-P521", "Ed25519", "RSA-3072", "RSA-4096"}

// compiledPod is the pod-identity profile's compiled configuration (spec.Pod), with its
// rules.
type compiledPod struct{ *spec.Pod }

// rules are pod-identity's rules for a PodCertificateRequest, in order.
func (c *compiledPod) rules(maxLifetime time.Duration) []rule {
	return []rule{
		podKeyRule(),
		emptyStubRule(),
		podFieldsRule(),
		podNamesRule(),
		c.annotationsRule(),
		podLifetimeRule(maxLifetime),
	}
}

// podKeyRule accepts only the keys the kube-apiserver allows in a PodCertificateRequest.
func podKeyRule() rule {
	return rule{name: "key: one of " + strings.Join(podKeyTypes, ", "), check: func(in *input) (string, error) {
		kt := keyTypeOf(in.key.PublicKey)
		if !slices.Contains(podKeyTypes, kt) {
			return fmt.Sprintf("key is %s; use one of %s (a podCertificate volume's keyType, e.g. ECDSAP256 or ED25519)",
				kt, strings.Join(podKeyTypes, ", ")), issuance.ErrUnsupportedKey
		}
		return "key is " + kt, nil
	}}
}

// emptyStubRule refuses a stub request with any content: the kubelet sends an empty one, and
// Kubernetes asks signers to deny any other (nothing in it would reach the certificate, so a
// requester who put something there expects what it will not get).
func emptyStubRule() rule {
	return rule{name: "request: the stub PKCS#10 request is empty (no subject, attribute or extension)", check: func(in *input) (string, error) {
		if in.key.Stub == nil {
			return "not applicable: the key came as pkix_public_key with proof_of_possession", nil
		}
		if found := in.key.StubContents(); len(found) > 0 {
			return "the stub request carries " + strings.Join(found, ", ") + "; the signer takes names from the pod identity only", issuance.ErrPolicyViolation
		}
		return "the stub request is empty", nil
	}}
}

// podField is one field of the pod identity, by its wire name.
type podField struct {
	name, value string
}

// podFields lists the pod identity's fields by their wire names.
func podFields(p issuance.PodIdentity) []podField {
	return []podField{
		{"namespace", p.Namespace}, {"pod_name", p.PodName}, {"pod_uid", p.PodUID},
		{"service_account_name", p.ServiceAccountName}, {"service_account_uid", p.ServiceAccountUID},
		{"node_name", p.NodeName}, {"node_uid", p.NodeUID},
	}
}

// podFieldsRule requires every field of the pod identity.
func podFieldsRule() rule {
	return rule{name: "pod: every identity field set (namespace, pod, service account and node names and UIDs)", check: func(in *input) (string, error) {
		var missing []string
		for _, f := range podFields(in.pod.Pod) {
			if f.value == "" {
				missing = append(missing, f.name)
			}
		}
		if len(missing) > 0 {
			return "missing " + strings.Join(missing, ", "), issuance.ErrMalformedRequest
		}
		return "all set", nil
	}}
}

// podNamesRule requires the names Kubernetes would accept: a DNS-1123 label for the
// namespace, DNS-1123 subdomains for the pod, service account and node names, and UIDs of at
// most 128 characters without control characters. Nothing else can then reach the URI SAN.
func podNamesRule() rule {
	return rule{name: "pod: namespace a DNS-1123 label; pod, service account and node names DNS-1123 subdomains; UIDs at most 128 characters",
		check: func(in *input) (string, error) {
			if problems := podNameProblems(in.pod.Pod); len(problems) > 0 {
				return strings.Join(problems, "; "), issuance.ErrMalformedRequest
			}
			return fmt.Sprintf("namespace %q, service account %q", in.pod.Pod.Namespace, in.pod.Pod.ServiceAccountName), nil
		}}
}

// podNameProblems lists what is wrong with the non-empty fields of p.
func podNameProblems(p issuance.PodIdentity) []string {
	var problems []string
	for _, f := range podFields(p) {
		var errs []string
		switch {
		case f.value == "":
			continue
		case f.name == "namespace":
			errs = validation.IsDNS1123Label(f.value)
		case strings.HasSuffix(f.name, "_uid"):
			if len(f.value) > maxPodUIDLength {
				errs = []string{fmt.Sprintf("must be no more than %d characters", maxPodUIDLength)}
			} else if strings.ContainsFunc(f.value, isControl) {
				errs = []string{"must not contain control characters"}
			}
		default:
			errs = validation.IsDNS1123Subdomain(f.value)
		}
		if len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("%s %q: %s", f.name, f.value, strings.Join(errs, ", ")))
		}
	}
	return problems
}

// annotationsRule refuses unverified user annotation keys that are not allowed, compared
// case-insensitively as the kube-apiserver validates them; allowed ones are ignored.
func (c *compiledPod) annotationsRule() rule {
	name := "annotations: no spec.unverifiedUserAnnotations (none allowed)"
	if len(c.AllowedAnnotations) > 0 {
		name = "annotations: spec.unverifiedUserAnnotations keys only from " + list(c.AllowedAnnotations)
	}
	return rule{name: name, check: func(in *input) (string, error) {
		keys := make([]string, 0, len(in.pod.UnverifiedUserAnnotations))
		for k := range in.pod.UnverifiedUserAnnotations {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		unknown := slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return slices.Contains(c.AllowedAnnotations, strings.ToLower(k)) })
		switch {
		case len(unknown) > 0:
			return fmt.Sprintf("keys %s are not recognised by this signer", quoted(unknown)), issuance.ErrUnknownAnnotation
		case len(keys) == 0:
			return "no annotations", nil
		}
		return fmt.Sprintf("keys %s are allowed (and ignored)", quoted(keys)), nil
	}}
}

// podLifetimeRule requires a maxExpirationSeconds (the kube-apiserver always sets one) and a
// lifetime, min(maxExpirationSeconds, maxLifetime), of at least issuance.PodMinLifetime.
func podLifetimeRule(maxLifetime time.Duration) rule {
	name := fmt.Sprintf("lifetime: min(spec.maxExpirationSeconds, %s) at least %s", maxLifetime, issuance.PodMinLifetime)
	return rule{name: name, check: func(in *input) (string, error) {
		secs := in.pod.MaxExpirationSeconds
		if secs <= 0 {
			return fmt.Sprintf("max_expiration_seconds is %d; the kube-apiserver always sets it (default 86400)", secs), issuance.ErrMalformedRequest
		}
		lifetime := podLifetime(secs, maxLifetime)
		if lifetime < issuance.PodMinLifetime {
			return fmt.Sprintf("maxExpirationSeconds %d gives %s, under the %s the kube-apiserver requires of a pod certificate", secs, lifetime, issuance.PodMinLifetime),
				issuance.ErrPolicyViolation
		}
		return fmt.Sprintf("lifetime %s (maxExpirationSeconds %d)", lifetime, secs), nil
	}}
}

// podLifetime is min(maxExpirationSeconds, maxLifetime).
func podLifetime(maxExpirationSeconds int32, maxLifetime time.Duration) time.Duration {
	return min(time.Duration(maxExpirationSeconds)*time.Second, maxLifetime)
}

// decision is what pod-identity issues for an allowed request:
//   - Lifetime min(maxExpirationSeconds, maxLifetime);
//   - the one URI SAN spiffe://<trust domain>/ns/<namespace>/sa/<service account> (the rules
//     have checked both are DNS names, so they need no escaping);
//   - key usage digital signature, plus key encipherment for RSA keys only: TLS 1.2's RSA key
//     exchange encrypts to the certificate's key, and Kubernetes' own serving certificates
//     carry both for RSA keys; ECDSA and Ed25519 keys never encipher (RFC 5480 and RFC 8410
//     do not allow it, and zlint's e_ecdsa_allowed_ku refuses it);
//   - extended key usage server auth and client auth: a workload identity serves and calls.
func (c *compiledPod) decision(key *issuance.PodKey, req issuance.PodRequest, maxLifetime time.Duration) issuance.Decision {
	ku := x509.KeyUsageDigitalSignature
	if _, ok := key.PublicKey.(*rsa.PublicKey); ok {
		ku |= x509.KeyUsageKeyEncipherment
	}
	return issuance.Decision{
		Lifetime:    podLifetime(req.MaxExpirationSeconds, maxLifetime),
		KeyUsage:    ku,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{c.spiffeID(req.Pod)},
	}
}

// spiffeID is the SPIFFE ID of the pod's service account.
func (c *compiledPod) spiffeID(p issuance.PodIdentity) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: c.TrustDomain, Path: "/ns/" + p.Namespace + "/sa/" + p.ServiceAccountName}
}

// describe fills d for pod-identity, whose signer serves PodCertificateRequests only.
func (c *compiledPod) describe(d *Description, maxLifetime time.Duration) {
	id := fmt.Sprintf("spiffe://%s/ns/<namespace>/sa/<serviceAccountName>", c.TrustDomain)
	d.KeyTypes = slices.Clone(podKeyTypes)
	d.TrustDistribution = "Out of band, chosen by the operator: relying parties need this signer's CA bundle " +
		"(for example a signer-linked ClusterTrustBundle published by signet-watcher, which pods mount with a clusterTrustBundle projection). " +
		fmt.Sprintf("Trust it for SPIFFE IDs in the trust domain %q only.", c.TrustDomain)
	d.PermittedSubjects = "PodCertificateRequests only; a CertificateSigningRequest is refused. The certificate has an empty subject and names the pod's service account as " +
		id + ", from the request's spec (which the kube-apiserver's NodeRestriction admission, when enabled, ties to the real pod). " +
		"Every pod, service account and node name and UID must be set; the namespace must be a DNS-1123 label and the names DNS-1123 subdomains, or the request is refused as malformed."
	d.PermittedExtensions = "Exactly one SAN, the URI " + id + " (critical, as the subject is empty); no DNS, IP or email SAN. " +
		"The stub PKCS#10 request must be empty, as the kubelet sends it: one with a subject, attribute or extension is refused. " +
		c.describeAnnotations() + " The certificate carries only that SAN, key usage, extended key usage, basic constraints CA:FALSE and the authority key identifier."
	d.PermittedKeyUsages = "Fixed, nothing is requested: key usage digital signature, plus key encipherment for RSA keys (as Kubernetes' serving certificates), " +
		"and extended key usage server auth and client auth."
	d.Expiration = fmt.Sprintf("Lifetime is the minimum of spec.maxExpirationSeconds and the configured maximum, %s, counted from NotBefore, "+
		"which is %s before signing in whole seconds (the kube-apiserver accepts a notBefore within 5 minutes of its clock). "+
		"A lifetime under %s is refused (the kube-apiserver's floor), and NotAfter is never later than the CA certificate's NotAfter. "+
		"beginRefreshAt is a third of the lifetime before NotAfter, and at least %s before it. "+
		"A retried request gets the same certificate only while its NotBefore is less than %s old; later it gets a new one.",
		maxLifetime, issuance.PodBackdate, issuance.PodMinLifetime, issuance.PodMinRefreshLead, issuance.PodReplayWindow)
	d.CABit = "Not allowed: a pod certificate is always a leaf with basic constraints CA:FALSE; nothing in a PodCertificateRequest can ask for more."
	d.ExtraPEMBlocks = "Standard meaning: status.certificateChain holds the leaf certificate first, then this signer's configured intermediate CA certificates (if any), " +
		"to be presented in TLS handshakes after the leaf. The root is never included."
}

// describeAnnotations explains the unverified user annotation rule.
func (c *compiledPod) describeAnnotations() string {
	if len(c.AllowedAnnotations) == 0 {
		return "Any spec.unverifiedUserAnnotations key is refused (Denied, InvalidUnverifiedUserAnnotations): this signer recognises none."
	}
	return fmt.Sprintf("The spec.unverifiedUserAnnotations keys %s are accepted and ignored; any other key is refused (Denied, InvalidUnverifiedUserAnnotations).", quoted(c.AllowedAnnotations))
}

package adversarial

import (
	"crypto"
	"crypto/rsa"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/signet-pki/signet/server/issuance"
)

// allowedExtensions are the only extensions a Signet leaf may carry.
var allowedExtensions = []asn1.ObjectIdentifier{oidBasicConstr, oidKeyUsage, oidExtKeyUsage, oidSAN, oidAuthKeyID}

// kubernetesProfiles allow a wildcard as the whole leftmost DNS label.
var kubernetesProfiles = []string{"kube-apiserver-client", "kube-apiserver-client-kubelet", "kubelet-serving", "legacy-unknown"}

// Usage strings → the key usage bit or extended key usage they mean (certificates.k8s.io/v1).
var (
	usageBits = map[string]x509.KeyUsage{
		"signing": x509.KeyUsageDigitalSignature, "digital signature": x509.KeyUsageDigitalSignature,
		"content commitment": x509.KeyUsageContentCommitment, "key encipherment": x509.KeyUsageKeyEncipherment,
		"key agreement": x509.KeyUsageKeyAgreement, "data encipherment": x509.KeyUsageDataEncipherment,
		"encipher only": x509.KeyUsageEncipherOnly, "decipher only": x509.KeyUsageDecipherOnly,
	}
	usageEKUs = map[string]x509.ExtKeyUsage{
		"any": x509.ExtKeyUsageAny, "server auth": x509.ExtKeyUsageServerAuth, "client auth": x509.ExtKeyUsageClientAuth,
		"code signing": x509.ExtKeyUsageCodeSigning, "email protection": x509.ExtKeyUsageEmailProtection,
		"s/mime": x509.ExtKeyUsageEmailProtection, "ipsec end system": x509.ExtKeyUsageIPSECEndSystem,
		"ipsec tunnel": x509.ExtKeyUsageIPSECTunnel, "ipsec user": x509.ExtKeyUsageIPSECUser,
		"timestamping": x509.ExtKeyUsageTimeStamping, "ocsp signing": x509.ExtKeyUsageOCSPSigning,
		"microsoft sgc": x509.ExtKeyUsageMicrosoftServerGatedCrypto, "netscape sgc": x509.ExtKeyUsageNetscapeServerGatedCrypto,
	}
)

// parseChain parses every CERTIFICATE block of data; anything else fails t.
func parseChain(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	certs, err := parseCerts(data)
	if err != nil {
		t.Fatal(err)
	}
	return certs
}

func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("a %s block in the chain", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("no certificate in %q", clip(string(data), 80))
	}
	return certs, nil
}

// leafOf is the leaf of an issued answer, nil when there is none or it does not parse.
func leafOf(r *result) *x509.Certificate {
	if r == nil || r.err != nil || r.chainPEM == "" {
		return nil
	}
	certs, err := parseCerts([]byte(r.chainPEM))
	if err != nil {
		return nil
	}
	return certs[0]
}

// isControl reports a C0 or C1 control character or DEL.
func isControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r < 0xa0) }

// badText says what is wrong with a name's text, "" if nothing.
func badText(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "invalid UTF-8"
	case strings.ContainsFunc(s, isControl):
		return "a control character"
	case strings.ContainsRune(s, utf8.RuneError):
		return "U+FFFD"
	}
	return ""
}

// dnsViolation checks a DNS SAN independently of the server: LDH labels of 1–63, 253 in all,
// and a wildcard only as the whole leftmost label where allowed.
func dnsViolation(name string, wildcard bool) string {
	host := name
	if wildcard {
		host = strings.TrimPrefix(name, "*.")
	}
	if name == "" || len(name) > 253 {
		return "not 1 to 253 characters"
	}
	for label := range strings.SplitSeq(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Sprintf("label %q", label)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return fmt.Sprintf("character %q", r)
			}
		}
	}
	return ""
}

// checker checks issued certificates against the invariants.
type checker struct {
	e     *env
	start time.Time // when the run started
	end   time.Time // when it ended
}

// check returns every invariant the certificate of cc's answer breaks.
func (k checker) check(cc *corpusCase, got *result) []string {
	var v []string
	bad := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	certs, err := parseCerts([]byte(got.chainPEM))
	if err != nil {
		return []string{"chain: " + err.Error()}
	}
	leaf, signer := certs[0], cc.req.signer()
	ca, prof := k.e.cas[signer], k.e.profiles[signer]
	if ca == nil {
		return []string{"issued for a signer the corpus does not know: " + signer}
	}
	if got.serial != hex.EncodeToString(leaf.SerialNumber.Bytes()) || leaf.SerialNumber.Sign() <= 0 || len(leaf.SerialNumber.Bytes()) > 20 {
		bad("serial %s does not match the leaf's %x or is not a positive 20-octet serial", got.serial, leaf.SerialNumber)
	}
	if !got.notBefore.Equal(leaf.NotBefore) || !got.notAfter.Equal(leaf.NotAfter) {
		bad("answered validity %s..%s, the leaf's is %s..%s", got.notBefore, got.notAfter, leaf.NotBefore, leaf.NotAfter)
	}
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(ca)
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: leaf.NotBefore.Add(time.Second),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		bad("does not chain to the CA of %s: %v", signer, err)
	}
	if !leaf.BasicConstraintsValid || leaf.IsCA {
		bad("not CA:FALSE")
	}
	if leaf.KeyUsage&(x509.KeyUsageCertSign|x509.KeyUsageCRLSign) != 0 {
		bad("key usage cert sign or crl sign")
	}
	for _, ext := range leaf.Extensions {
		if !slices.ContainsFunc(allowedExtensions, ext.Id.Equal) {
			bad("extension %s is not one a Signet leaf carries", ext.Id)
		}
	}
	if len(leaf.AuthorityKeyId) > 0 && string(leaf.AuthorityKeyId) != string(ca.SubjectKeyId) {
		bad("authority key identifier %x is not the CA's %x", leaf.AuthorityKeyId, ca.SubjectKeyId)
	}
	v = append(v, k.validity(cc, leaf, ca)...)
	v = append(v, names(leaf, slices.Contains(kubernetesProfiles, prof))...)
	v = append(v, privileged(leaf, prof)...)
	v = append(v, requested(cc, leaf)...)
	return v
}

// validity checks NotBefore, NotAfter and the lifetime.
func (k checker) validity(cc *corpusCase, leaf, ca *x509.Certificate) []string {
	var v []string
	span := leaf.NotAfter.Sub(leaf.NotBefore)
	switch {
	case span > maxLifetime+issuance.Backdate:
		v = append(v, fmt.Sprintf("lifetime %s is over the maximum %s", span, maxLifetime))
	case cc.lifetime != 0 && span != cc.lifetime:
		v = append(v, fmt.Sprintf("lifetime %s, want %s", span, cc.lifetime))
	}
	if leaf.NotBefore.Before(k.start.Add(-issuance.Backdate-time.Minute)) || leaf.NotBefore.After(k.end) {
		v = append(v, fmt.Sprintf("NotBefore %s is not within the run (%s..%s) less the backdate", leaf.NotBefore, k.start, k.end))
	}
	if !leaf.NotAfter.After(k.end) || leaf.NotAfter.After(ca.NotAfter) {
		v = append(v, fmt.Sprintf("NotAfter %s is already past or after the CA's %s", leaf.NotAfter, ca.NotAfter))
	}
	return v
}

// names checks every name of the certificate: no control characters, at most one common name,
// DNS names that are host names, plain email addresses and URIs.
func names(leaf *x509.Certificate, wildcard bool) []string {
	var v []string
	cns := 0
	for _, atv := range leaf.Subject.Names {
		if atv.Type.Equal(oidCommonName) {
			cns++
		}
		if s, ok := atv.Value.(string); ok {
			if why := badText(s); why != "" {
				v = append(v, fmt.Sprintf("subject %v %q has %s", atv.Type, s, why))
			}
		}
	}
	if cns > 1 {
		v = append(v, fmt.Sprintf("%d common names", cns))
	}
	for _, d := range leaf.DNSNames {
		if why := dnsViolation(d, wildcard); why != "" {
			v = append(v, fmt.Sprintf("DNS name %q: %s", d, why))
		}
	}
	for _, e := range leaf.EmailAddresses {
		if why := badText(e); why != "" || strings.ContainsAny(e, " <>") || strings.Count(e, "@") != 1 {
			v = append(v, fmt.Sprintf("email address %q is not a plain address", e))
		}
	}
	for _, u := range leaf.URIs {
		if s := u.String(); badText(s) != "" || strings.Contains(s, " ") || u.Scheme == "" {
			v = append(v, fmt.Sprintf("URI %q is not a plain absolute URI", s))
		}
	}
	return v
}

// clientCapable reports whether TLS clients could present the certificate.
func clientCapable(leaf *x509.Certificate) bool {
	return len(leaf.ExtKeyUsage) == 0 || slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) ||
		slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny)
}

// privileged checks the subject against the profile's group and node rules.
func privileged(leaf *x509.Certificate, prof string) []string {
	var v []string
	orgs, cn := leaf.Subject.Organization, leaf.Subject.CommonName
	if clientCapable(leaf) && slices.Contains(orgs, "system:masters") {
		v = append(v, "system:masters in a certificate that authenticates clients")
	}
	node := strings.HasPrefix(cn, "system:node:") && len(orgs) == 1 && orgs[0] == "system:nodes"
	sans := len(leaf.DNSNames) + len(leaf.IPAddresses) + len(leaf.EmailAddresses) + len(leaf.URIs)
	switch prof {
	case "kube-apiserver-client":
		if strings.HasPrefix(cn, "system:node:") || slices.Contains(orgs, "system:nodes") {
			v = append(v, "a node identity from kube-apiserver-client")
		}
	case "kube-apiserver-client-kubelet":
		if !node || sans != 0 || !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
			v = append(v, "not a node client certificate (system:node:<name>, O=system:nodes, no SAN, client auth)")
		}
	case "kubelet-serving":
		if !node || len(leaf.EmailAddresses)+len(leaf.URIs) != 0 || !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
			v = append(v, "not a node serving certificate (system:node:<name>, O=system:nodes, DNS/IP SANs, server auth)")
		}
	case "pod-identity":
		if len(leaf.Subject.Names) != 0 || len(leaf.URIs) != 1 || sans != 1 {
			v = append(v, "a pod certificate with a subject or names other than its one URI")
		}
	}
	return v
}

// requested checks the certificate against the request: the request's key, its names and no
// others, and usages from spec.usages only.
func requested(cc *corpusCase, leaf *x509.Certificate) []string {
	var v []string
	var pub crypto.PublicKey
	switch r := cc.req; {
	case r.csr != nil:
		block, _ := pem.Decode(r.csr.GetRequest())
		if block == nil {
			return []string{"issued for a request without a PEM block"}
		}
		csr, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			return []string{"issued for a request that does not parse: " + err.Error()}
		}
		pub = csr.PublicKey
		if !slices.Equal(leaf.DNSNames, csr.DNSNames) || !slices.Equal(leaf.EmailAddresses, csr.EmailAddresses) || len(leaf.IPAddresses) != len(csr.IPAddresses) || len(leaf.URIs) != len(csr.URIs) {
			v = append(v, "SANs other than the request's")
		}
		var ku x509.KeyUsage
		var ekus []x509.ExtKeyUsage
		for _, u := range r.csr.GetUsages() {
			ku |= usageBits[u]
			if eku, ok := usageEKUs[u]; ok && !slices.Contains(ekus, eku) {
				ekus = append(ekus, eku)
			}
		}
		if leaf.KeyUsage != ku || !sameSet(leaf.ExtKeyUsage, ekus) {
			v = append(v, fmt.Sprintf("usages %v/%v are not spec.usages %q", leaf.KeyUsage, leaf.ExtKeyUsage, r.csr.GetUsages()))
		}
	case r.pod != nil:
		pub = podKey(r)
		want := x509.KeyUsageDigitalSignature
		if _, ok := pub.(*rsa.PublicKey); ok {
			want |= x509.KeyUsageKeyEncipherment
		}
		if leaf.KeyUsage != want || !sameSet(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}) {
			v = append(v, "pod certificate usages are not digital signature (+ key encipherment for RSA), server and client auth")
		}
		id := fmt.Sprintf("spiffe://cluster.local/ns/%s/sa/%s", r.pod.GetPod().GetNamespace(), r.pod.GetPod().GetServiceAccountName())
		if len(leaf.URIs) != 1 || leaf.URIs[0].String() != id {
			v = append(v, fmt.Sprintf("pod certificate URIs %v, want %s", leaf.URIs, id))
		}
	default:
		return nil // raw calls: checked as answers only
	}
	if k, ok := pub.(interface{ Equal(crypto.PublicKey) bool }); !ok || !k.Equal(leaf.PublicKey) {
		v = append(v, "issued for another key than the request's")
	}
	return v
}

// podKey is the key a PodCertificateRequest names.
func podKey(r request) crypto.PublicKey {
	if s := r.pod.GetStubPkcs10Request(); len(s) > 0 {
		if csr, err := x509.ParseCertificateRequest(s); err == nil {
			return csr.PublicKey
		}
		return nil
	}
	pub, _ := x509.ParsePKIXPublicKey(r.pod.GetPkixPublicKey())
	return pub
}

func sameSet[T comparable](a, b []T) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}

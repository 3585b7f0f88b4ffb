package integration

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/signet-pki/signet/internal/testpki"
)

// outcome is what a signer does with an approved CSR.
type outcome string

const (
	issues  outcome = "issues"
	refuses outcome = "refuses"
)

// The identities a differential case creates its CSR as (see startDifferentialCluster).
const (
	asBootstrapToken = "bootstrap token" // system:bootstrap:abcdef in system:bootstrappers, as a joining kubelet
	asNodeA          = "node worker-a"   // system:node:worker-a in system:nodes
	asNodeB          = "node worker-b"   // system:node:worker-b in system:nodes
	asAlice          = "alice"           // a plain user with CSR rights
)

// The rules Signet's refusals must name (server/profile/rules.go).
const (
	ruleNodeClientRequester = "requester: the node itself (username equals the common name, groups include system:nodes) " +
		"or in a bootstrap group [system:bootstrappers]"
	ruleServingRequester = "requester: username equals the common name"
)

// kubeletCase is one CSR that kube-controller-manager and Signet both decide.
type kubeletCase struct {
	name   string
	signer string
	as     string // the identity that creates the CSR
	key    testpki.KeyType
	csr    x509.CertificateRequest
	usages []certificatesv1.KeyUsage
	// duration, if set, becomes spec.expirationSeconds (RequestCertificate's duration).
	duration *time.Duration
	// lifetime is the NotAfter-NotBefore of the certificate(s) issued.
	lifetime time.Duration
	kcm      outcome
	signet   outcome
	// rule is the text Signet's refusal must contain; why says why the difference is deliberate.
	rule, why string
}

// kubeletRequesterCases are the kubelet profiles' requester cases. The signing duration of
// kube-controller-manager and Signet's maximum lifetime are both 24h.
//
// Not covered here: an RSA key with usages key encipherment + client auth, which
// kube-controller-manager signs and Signet's lint gate refuses.
// TODO(#17): add that case once Signet's lint gate matches.
func kubeletRequesterCases() []kubeletCase {
	clientUsages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	servingUsages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	nodeA := pkix.Name{CommonName: "system:node:worker-a", Organization: []string{"system:nodes"}}
	client := x509.CertificateRequest{Subject: nodeA}
	serving := x509.CertificateRequest{Subject: nodeA, DNSNames: []string{"worker-a"}, IPAddresses: []net.IP{net.ParseIP("192.0.2.10")}}
	tenMinutes := 10 * time.Minute
	return []kubeletCase{
		{name: "bootstrap token, client, P-256", signer: certificatesv1.KubeAPIServerClientKubeletSignerName, as: asBootstrapToken,
			key: testpki.P256, csr: client, usages: clientUsages, lifetime: 24 * time.Hour, kcm: issues, signet: issues},
		{name: "bootstrap token, client, P-384", signer: certificatesv1.KubeAPIServerClientKubeletSignerName, as: asBootstrapToken,
			key: testpki.P384, csr: client, usages: clientUsages, lifetime: 24 * time.Hour, kcm: issues, signet: issues},
		{name: "node renews its client certificate", signer: certificatesv1.KubeAPIServerClientKubeletSignerName, as: asNodeA,
			key: testpki.P256, csr: client, usages: clientUsages, lifetime: 24 * time.Hour, kcm: issues, signet: issues},
		// expirationSeconds 600: NotBefore is backdated 5 minutes and NotAfter is 600 s after
		// signing, so the certificate spans 900 s.
		{name: "bootstrap token, client, expirationSeconds 600", signer: certificatesv1.KubeAPIServerClientKubeletSignerName, as: asBootstrapToken,
			key: testpki.P256, csr: client, usages: clientUsages, duration: &tenMinutes, lifetime: 15 * time.Minute, kcm: issues, signet: issues},
		{name: "plain user asks for a node's client certificate", signer: certificatesv1.KubeAPIServerClientKubeletSignerName, as: asAlice,
			key: testpki.P256, csr: client, usages: clientUsages, lifetime: 24 * time.Hour, kcm: issues, signet: refuses,
			rule: ruleNodeClientRequester,
			why:  "kube-controller-manager never looks at the requester; Signet issues a node's client certificate only to the node itself or to a bootstrap requester"},
		{name: "another node asks for worker-a's client certificate", signer: certificatesv1.KubeAPIServerClientKubeletSignerName, as: asNodeB,
			key: testpki.P256, csr: client, usages: clientUsages, lifetime: 24 * time.Hour, kcm: issues, signet: refuses,
			rule: ruleNodeClientRequester,
			why:  "kube-controller-manager never looks at the requester; a node is not a bootstrap requester, and may only renew its own certificate"},
		{name: "node requests its serving certificate", signer: certificatesv1.KubeletServingSignerName, as: asNodeA,
			key: testpki.P256, csr: serving, usages: servingUsages, lifetime: 24 * time.Hour, kcm: issues, signet: issues},
		// The kubelet requests its serving certificate with its node credentials (after it has
		// its client certificate), never with the bootstrap token: Signet has no bootstrap rule
		// for kubelet-serving.
		{name: "bootstrap token requests a serving certificate", signer: certificatesv1.KubeletServingSignerName, as: asBootstrapToken,
			key: testpki.P256, csr: serving, usages: servingUsages, lifetime: 24 * time.Hour, kcm: issues, signet: refuses,
			rule: ruleServingRequester,
			why:  "kube-controller-manager never looks at the requester; Signet issues a serving certificate only to the node it names, and a kubelet never asks for one with its bootstrap token"},
	}
}

// certDiffs lists the fields in which Signet's certificate differs from kube-controller-
// manager's, as a user of the certificate sees them, each "field: KCM x, Signet y". Issuer,
// serial, validity instants, key identifiers' values and signature differ by nature (two CAs,
// two moments) and are not compared; the lifetime is, within lifetimeSlack.
func certDiffs(kcm, signet *x509.Certificate) []string {
	var diffs []string
	field := func(name string, k, s any) {
		if ks, ss := fmt.Sprint(k), fmt.Sprint(s); ks != ss {
			diffs = append(diffs, fmt.Sprintf("%s: KCM %s, Signet %s", name, ks, ss))
		}
	}
	field("subject", kcm.Subject, signet.Subject)
	field("subject common name", fmt.Sprintf("%q", kcm.Subject.CommonName), fmt.Sprintf("%q", signet.Subject.CommonName))
	field("subject organizations", fmt.Sprintf("%q", kcm.Subject.Organization), fmt.Sprintf("%q", signet.Subject.Organization))
	field("subject DER", fmt.Sprintf("%x", kcm.RawSubject), fmt.Sprintf("%x", signet.RawSubject))
	field("DNS SANs", kcm.DNSNames, signet.DNSNames)
	field("IP SANs", kcm.IPAddresses, signet.IPAddresses)
	field("email SANs", kcm.EmailAddresses, signet.EmailAddresses)
	field("URI SANs", kcm.URIs, signet.URIs)
	field("key usage", keyUsageNames(kcm.KeyUsage), keyUsageNames(signet.KeyUsage))
	field("extended key usage", extKeyUsageNames(kcm.ExtKeyUsage), extKeyUsageNames(signet.ExtKeyUsage))
	field("unknown extended key usage", kcm.UnknownExtKeyUsage, signet.UnknownExtKeyUsage)
	field("basic constraints present", kcm.BasicConstraintsValid, signet.BasicConstraintsValid)
	field("CA", kcm.IsCA, signet.IsCA)
	field("path length", kcm.MaxPathLen, signet.MaxPathLen)
	field("subject key ID present", len(kcm.SubjectKeyId) > 0, len(signet.SubjectKeyId) > 0)
	field("authority key ID present", len(kcm.AuthorityKeyId) > 0, len(signet.AuthorityKeyId) > 0)
	field("extensions (OID, critical)", extensionList(kcm), extensionList(signet))
	field("version", kcm.Version, signet.Version)
	field("signature algorithm (both CAs P-256)", kcm.SignatureAlgorithm, signet.SignatureAlgorithm)
	if k, s := kcm.NotAfter.Sub(kcm.NotBefore), signet.NotAfter.Sub(signet.NotBefore); absDuration(k-s) > lifetimeSlack {
		diffs = append(diffs, fmt.Sprintf("lifetime (NotAfter-NotBefore): KCM %s, Signet %s", k, s))
	}
	return diffs
}

// extensionList lists cert's extensions as "OID" or "OID critical", sorted.
func extensionList(cert *x509.Certificate) []string {
	out := make([]string, 0, len(cert.Extensions))
	for _, e := range cert.Extensions {
		s := e.Id.String()
		if e.Critical {
			s += " critical"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// keyUsageNames names the bits of ku, in bit order.
func keyUsageNames(ku x509.KeyUsage) []string {
	names := []string{"digital signature", "content commitment", "key encipherment", "data encipherment",
		"key agreement", "cert sign", "crl sign", "encipher only", "decipher only"}
	var out []string
	for i, name := range names {
		if ku&(1<<i) != 0 {
			out = append(out, name)
		}
	}
	return out
}

// extKeyUsageNames names the extended key usages the kubelet profiles can grant, and numbers
// the others.
func extKeyUsageNames(ekus []x509.ExtKeyUsage) []string {
	out := make([]string, 0, len(ekus))
	for _, e := range ekus {
		switch e {
		case x509.ExtKeyUsageClientAuth:
			out = append(out, "client auth")
		case x509.ExtKeyUsageServerAuth:
			out = append(out, "server auth")
		default:
			out = append(out, fmt.Sprintf("ext key usage %d", e))
		}
	}
	return out
}

// checkSerials checks the one deliberate difference between certificates both sides issue:
// the serial number's form. kube-controller-manager draws a random number below 2^128 (so its
// length varies); Signet puts a fixed 0x01 octet before 128 random bits (server/issuance,
// Issuer.serial), so its serials always have 129 bits and 17 octets. Both carry 128 random
// bits and fit RFC 5280's 20 octets; no client reads more into a serial.
func checkSerials(t *testing.T, kcm, signet *x509.Certificate) {
	t.Helper()
	if n := kcm.SerialNumber.BitLen(); n > 128 {
		t.Errorf("KCM serial %x has %d bits, want a random number below 2^128", kcm.SerialNumber, n)
	}
	if n := signet.SerialNumber.BitLen(); n != 129 {
		t.Errorf("Signet serial %x has %d bits, want 129 (0x01, then 128 random bits)", signet.SerialNumber, n)
	}
}

// describeCert summarizes what certDiffs compares, for the test log.
func describeCert(c *x509.Certificate) string {
	return fmt.Sprintf("subject %s, DNS %v, IP %v, key usage %v, ext key usage %v, CA %v (basic constraints %v), "+
		"lifetime %s, extensions %v, subject key ID %v, serial %d bits, signature %s",
		c.Subject, c.DNSNames, c.IPAddresses, keyUsageNames(c.KeyUsage), extKeyUsageNames(c.ExtKeyUsage), c.IsCA, c.BasicConstraintsValid,
		c.NotAfter.Sub(c.NotBefore), extensionList(c), len(c.SubjectKeyId) > 0, c.SerialNumber.BitLen(), c.SignatureAlgorithm)
}

// TestCertDiffs checks that the differential comparison notices a difference a user would
// see and names the field with both values.
func TestCertDiffs(t *testing.T) {
	ca := testpki.CA(t)
	key := testpki.Key(t, testpki.P256)
	base := func() *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: "system:node:worker-a", Organization: []string{"system:nodes"}},
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			BasicConstraintsValid: true, NotBefore: time.Unix(1e9, 0), NotAfter: time.Unix(1e9, 0).Add(time.Hour)}
	}
	kcm := ca.Sign(t, base(), key.Public())
	if diffs := certDiffs(kcm, ca.Sign(t, base(), key.Public())); len(diffs) != 0 {
		t.Errorf("equal certificates differ: %q", diffs)
	}
	other := base()
	other.KeyUsage |= x509.KeyUsageKeyEncipherment
	other.SubjectKeyId = []byte{1, 2, 3}
	other.NotAfter = other.NotAfter.Add(time.Minute)
	diffs := strings.Join(certDiffs(kcm, ca.Sign(t, other, key.Public())), "\n")
	for _, want := range []string{
		"key usage: KCM [digital signature], Signet [digital signature key encipherment]",
		"subject key ID present: KCM false, Signet true",
		"lifetime (NotAfter-NotBefore): KCM 1h0m0s, Signet 1h1m0s",
	} {
		if !strings.Contains(diffs, want) {
			t.Errorf("differences %q lack %q", diffs, want)
		}
	}
}

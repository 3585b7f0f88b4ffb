package integration

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/signet-pki/signet/internal/testpki"
)

// signerAPIClient is kubernetes.io/kube-apiserver-client.
const signerAPIClient = certificatesv1.KubeAPIServerClientSignerName

// Lifetimes of short certificates: below 8 hours, NotAfter is not brought in by the 5-minute
// backdate, so the certificate spans the requested time plus 5 minutes.
const fifteenMinutes = 15 * time.Minute

// developers is alice's usual subject's organization.
var developers = []string{"developers"}

// apiClientCases are kubernetes.io/kube-apiserver-client's cases: by default alice asks for
// CN=alice, O=developers (P-256, digital signature and client auth).
func apiClientCases() []diffCase {
	return concat(apiClientKeyCases(), apiClientSubjectCases(), apiClientSANCases(), apiClientExtensionCases(), apiClientLifetimeCases())
}

// apiClientKeyCases vary the key and the usages.
func apiClientKeyCases() []diffCase {
	c := func(tc diffCase) diffCase { tc.signer = signerAPIClient; return tc }
	const kuEKU = "e_key_usage_and_extended_key_usage_inconsistent"
	return []diffCase{
		c(diffCase{name: "P-256", want: same()}),
		c(diffCase{name: "P-384", key: testpki.P384, want: same()}),
		c(diffCase{name: "P-521", key: testpki.P521, want: same()}),
		c(diffCase{name: "Ed25519", key: testpki.Ed25519, want: same()}),
		c(diffCase{name: "RSA-2048", key: testpki.RSA2048, want: same()}),
		c(diffCase{name: "RSA-3072", key: testpki.RSA3072, want: same()}),
		c(diffCase{name: "RSA-2052, a modulus not a multiple of 8 bits", key: rsa2052, want: deliberately(diffRSABytes)}),
		c(diffCase{name: "RSA-2048 with key encipherment", key: testpki.RSA2048, usages: use(uDS, uKE, uCA), want: sameThoughLinted(kuEKU)}),
		c(diffCase{name: "P-256 with key encipherment", usages: use(uDS, uKE, uCA), want: sameThoughLinted(kuEKU)}),
		c(diffCase{name: "Ed25519 with key encipherment", key: testpki.Ed25519, usages: use(uDS, uKE, uCA), want: sameThoughLinted(kuEKU)}),
		c(diffCase{name: "RSA-2048, key encipherment and client auth only", key: testpki.RSA2048, usages: use(uKE, uCA), want: sameThoughLinted(kuEKU)}),
		c(diffCase{name: "client auth only", usages: use(uCA), want: same()}),
		c(diffCase{name: "client auth first", usages: use(uCA, uDS), want: same()}),
		c(diffCase{name: "server auth too", usages: use(uDS, uCA, uSA), want: bothRefuse("invalid usage for client certificate: server auth", ruleAPIAtMost)}),
		c(diffCase{name: "no client auth", usages: use(uDS, uKE), want: bothRefuse("missing required usage for client certificate: client auth", ruleAPIClientAuth)}),
		c(diffCase{name: "signing instead of digital signature", usages: use(certificatesv1.UsageSigning, uCA),
			want: bothRefuse("invalid usage for client certificate: signing", ruleAPIAtMost)}),
		c(diffCase{name: "cert sign", usages: use(uDS, certificatesv1.UsageCertSign, uCA),
			want: bothRefuse("invalid usage for client certificate: cert sign", ruleLeafUsages)}),
		c(diffCase{name: "RSA-1024", key: testpki.RSA1024, want: deliberately(diffSmallRSA)}),
		c(diffCase{name: "RSA-2048 with exponent 3", key: rsaExponent3, want: deliberately(diffRSAExponent)}),
		c(diffCase{name: "P-224", key: testpki.P224, want: deliberately(diffCurve)}),
		c(diffCase{name: "duplicate usage", usages: use(uDS, uCA, uDS), want: apiserverRefuses("Duplicate value")}),
		c(diffCase{name: "unknown usage", usages: use(uDS, uCA, "frobnicate"), want: apiserverRefuses("Unsupported value")}),
		c(diffCase{name: "signature does not verify", brokenSignature: true, want: apiserverRefuses("spec.request")}),
	}
}

// apiClientSubjectCases vary the subject and the SANs.
func apiClientSubjectCases() []diffCase {
	c := func(tc diffCase) diffCase { tc.signer = signerAPIClient; return tc }
	longNS, longName := strings.Repeat("n", 40), strings.Repeat("s", 40)
	return []diffCase{
		c(diffCase{name: "no common name", csr: req("", developers), want: same()}),
		c(diffCase{name: "no organization", csr: req("alice", nil), want: same()}),
		c(diffCase{name: "several organizations", csr: req("alice", []string{"developers", "ops", "oncall"}), want: same()}),
		c(diffCase{name: "no subject, a DNS SAN", csr: req("", nil, dnsNames("alice.example.com")), want: same()}),
		c(diffCase{name: "no subject, no SANs", csr: req("", nil), want: sameThoughLinted("e_subject_empty_without_san")}),
		c(diffCase{name: "service account name over 64 characters", as: asServiceAccount,
			csr:  req("system:serviceaccount:"+longNS+":"+longName, []string{"system:serviceaccounts"}),
			want: sameThoughLinted("e_subject_common_name_max_length")}),
		c(diffCase{name: "organization over 64 characters", csr: req("alice", []string{strings.Repeat("o", 70)}),
			want: sameThoughLinted("e_subject_organization_name_max_length")}),
		c(diffCase{name: "more attributes: C, ST, L, OU, street, postal code, serial number", csr: req("alice", developers,
			func(r *x509.CertificateRequest) {
				s := &r.Subject
				s.Country, s.Province, s.Locality, s.OrganizationalUnit = []string{"DE"}, []string{"Berlin"}, []string{"Berlin"}, []string{"platform"}
				s.StreetAddress, s.PostalCode, s.SerialNumber = []string{"Unter den Linden 1"}, []string{"10117"}, "4711"
			}), want: same()}),
		c(diffCase{name: "attributes Go does not know: emailAddress, UID, DC", csr: req("alice", developers,
			func(r *x509.CertificateRequest) { r.Subject.ExtraNames = unmappedAttributes() }), want: same()}),
		c(diffCase{name: "lower-case country", csr: req("alice", developers, func(r *x509.CertificateRequest) { r.Subject.Country = []string{"de"} }),
			want: sameThoughLinted("e_subj_country_not_uppercase")}),
		c(diffCase{name: "common name first, organizations in separate RDNs", csr: &x509.CertificateRequest{RawSubject: reversedSubject()}, want: same()}),
		c(diffCase{name: "non-ASCII common name", csr: req("jürgen", developers), want: same()}),
		c(diffCase{name: "serial number attribute with an underscore", csr: req("alice", developers,
			func(r *x509.CertificateRequest) { r.Subject.SerialNumber = "node_7" }), want: sameThoughLinted("e_subject_dn_serial_number_not_printable_string")}),
		c(diffCase{name: "control character in the common name", csr: req("alice\a", developers), want: deliberately(diffNames)}),
		c(diffCase{name: "organization System:Masters (other case)", csr: req("alice", []string{"System:Masters"}), want: same()}),
		c(diffCase{name: "a node's identity, asked by the node", as: asNodeA, csr: req("system:node:worker-a", nodeA), want: deliberately(diffNodeIdentity)}),
		c(diffCase{name: "organization system:nodes", csr: req("alice", []string{"developers", "system:nodes"}), want: deliberately(diffNodeIdentity)}),
		c(diffCase{name: "O=system:masters", csr: req("alice", []string{"developers", "system:masters"}),
			want: apiserverRefuses("use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed")}),
		c(diffCase{name: "O=system:masters stored past admission", csr: req("alice", []string{"system:masters"}), store: storeEtcd,
			want: deliberately(diffPrivileged)}),
		c(diffCase{name: "requester: a node", as: asNodeA, want: same()}),
		c(diffCase{name: "requester: the bootstrap token", as: asBootstrapToken, want: same()}),
		c(diffCase{name: "requester: a service account", as: asServiceAccount, want: same()}),
	}
}

// apiClientSANCases vary the SANs: kube-controller-manager copies any.
func apiClientSANCases() []diffCase {
	c := func(tc diffCase) diffCase { tc.signer = signerAPIClient; return tc }
	alice := func(opt func(*x509.CertificateRequest)) *x509.CertificateRequest {
		return req("alice", developers, opt)
	}
	return []diffCase{
		c(diffCase{name: "DNS, IP, email and URI SANs", csr: req("alice", developers, dnsNames("alice.example.com"), ipAddrs("192.0.2.20"),
			emailAddrs("alice@example.com"), uriNames("spiffe://cluster.local/ns/team-a/sa/alice")), want: same()}),
		c(diffCase{name: "IPv6 and URN SANs", csr: req("alice", developers, ipAddrs("2001:db8::20"), uriNames("urn:uuid:0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")),
			want: same()}),
		c(diffCase{name: "URI SAN with a single-label trust domain", csr: alice(uriNames("spiffe://prod/ns/team-a/sa/alice")),
			want: sameThoughLinted("e_ext_san_uri_host_not_fqdn_or_ip")}),
		c(diffCase{name: "DNS SAN with underscores", csr: alice(dnsNames("db_1.my_cluster.local")), want: deliberately(diffNames)}),
		c(diffCase{name: "DNS SAN with upper-case letters", csr: alice(dnsNames("Alice.Example.COM")), want: same()}),
		c(diffCase{name: "DNS SAN with an empty label", csr: alice(dnsNames("alice..example.com")), want: deliberately(diffNames)}),
		c(diffCase{name: "DNS SAN ending in a dot", csr: alice(dnsNames("alice.example.com.")), want: deliberately(diffNames)}),
		c(diffCase{name: "DNS SAN label starting with a hyphen", csr: alice(dnsNames("-alice.example.com")), want: deliberately(diffNames)}),
		c(diffCase{name: "wildcard not in the leftmost label", csr: alice(dnsNames("alice.*.example.com")), want: deliberately(diffNames)}),
		c(diffCase{name: "email SAN with a space", csr: alice(emailAddrs("alice @example.com")), want: deliberately(diffNames)}),
		c(diffCase{name: "URI SAN without a scheme", csr: alice(uriNames("alice/profile")), want: deliberately(diffNames)}),
		c(diffCase{name: "256 DNS SANs, Signet's limit", csr: alice(dnsNames(manyNames(256, 20)...)), want: same()}),
		c(diffCase{name: "257 DNS SANs", csr: alice(dnsNames(manyNames(257, 20)...)), want: deliberately(diffLimits)}),
		c(diffCase{name: "a request over 64 KiB", csr: alice(dnsNames(manyNames(250, 250)...)), want: deliberately(diffLimits)}),
	}
}

// manyNames returns n distinct DNS names of about size bytes each (labels of at most 63).
func manyNames(n, size int) []string {
	names := make([]string, n)
	for i := range names {
		name := fmt.Sprintf("host-%d.example.com", i)
		for len(name) < size {
			name = strings.Repeat("a", min(63, size-len(name))) + "." + name
		}
		names[i] = name
	}
	return names
}

// apiClientExtensionCases request extensions: kube-controller-manager drops them all.
func apiClientExtensionCases() []diffCase {
	c := func(tc diffCase) diffCase { tc.signer = signerAPIClient; return tc }
	return []diffCase{
		c(diffCase{name: "CA:TRUE requested", exts: ext(basicConstraints(true, -1, true)), want: deliberately(diffCARequest)}),
		c(diffCase{name: "CA:FALSE requested", exts: ext(basicConstraints(false, -1, true)), want: same()}),
		c(diffCase{name: "basic constraints that do not parse", exts: ext(pkix.Extension{Id: testpki.OIDBasicConstraints, Value: []byte{0x01, 0x02}}),
			want: deliberately(diffCAUnparsable)}),
		c(diffCase{name: "key usage extension asking for cert sign", exts: ext(keyUsageExt()), want: same()}),
		c(diffCase{name: "extended key usage extension asking for server auth",
			exts: ext(pkix.Extension{Id: oidExtKeyUsage, Value: mustMarshal([]asn1.ObjectIdentifier{oidServerAuth})}), want: same()}),
		c(diffCase{name: "critical custom extension", exts: ext(customExt(true)), want: same()}),
		c(diffCase{name: "non-critical custom extension", exts: ext(customExt(false)), want: same()}),
		c(diffCase{name: "subject key identifier requested", exts: ext(pkix.Extension{Id: oidSubjectKeyID, Value: mustMarshal([]byte{1, 2, 3, 4})}),
			want: same()}),
	}
}

// apiClientLifetimeCases vary spec.expirationSeconds.
func apiClientLifetimeCases() []diffCase {
	c := func(tc diffCase) diffCase { tc.signer = signerAPIClient; return tc }
	return []diffCase{
		c(diffCase{name: "expirationSeconds absent", want: same()}),
		c(diffCase{name: "expirationSeconds 600, the minimum", expirationSeconds: seconds(600), lifetime: fifteenMinutes, want: same()}),
		c(diffCase{name: "expirationSeconds 3600", expirationSeconds: seconds(3600), lifetime: 65 * time.Minute, want: same()}),
		c(diffCase{name: "expirationSeconds 28799, just under 8h", expirationSeconds: seconds(28799),
			lifetime: 8*time.Hour + 4*time.Minute + 59*time.Second, want: same()}),
		c(diffCase{name: "expirationSeconds 28800, 8h", expirationSeconds: seconds(28800), lifetime: 8 * time.Hour, want: same()}),
		c(diffCase{name: "expirationSeconds 172800, 48h", expirationSeconds: seconds(172800), lifetime: 48 * time.Hour, want: same()}),
		c(diffCase{name: "expirationSeconds 63072000, two years: over the maximum", expirationSeconds: seconds(63072000), want: same()}),
		c(diffCase{name: "expirationSeconds 2^31-1", expirationSeconds: seconds(1<<31 - 1), want: same()}),
		c(diffCase{name: "expirationSeconds 599", expirationSeconds: seconds(599),
			want: apiserverRefuses("may not specify a duration less than 600 seconds")}),
	}
}

// ext lists extensions.
func ext(e ...pkix.Extension) []pkix.Extension { return e }

// customExt is an extension of a private OID.
func customExt(critical bool) pkix.Extension {
	return pkix.Extension{Id: oidCustom, Critical: critical, Value: mustMarshal("signet differential")}
}

// unmappedAttributes are subject attributes pkix.Name has no field for: emailAddress, UID
// and domainComponent.
func unmappedAttributes() []pkix.AttributeTypeAndValue {
	return []pkix.AttributeTypeAndValue{
		{Type: asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}, Value: "alice@example.com"},
		{Type: asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}, Value: "alice"},
		{Type: asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}, Value: "example"},
	}
}

// reversedSubject is CN=alice, O=developers, O=ops encoded in that order, one attribute per
// RDN (Go writes O before CN and several O in one RDN).
func reversedSubject() []byte {
	cn, o := asn1.ObjectIdentifier{2, 5, 4, 3}, asn1.ObjectIdentifier{2, 5, 4, 10}
	return mustMarshal(pkix.RDNSequence{
		{{Type: cn, Value: "alice"}},
		{{Type: o, Value: "developers"}},
		{{Type: o, Value: "ops"}},
	})
}

// concat joins case lists.
func concat(lists ...[]diffCase) []diffCase {
	var out []diffCase
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

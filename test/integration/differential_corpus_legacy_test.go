package integration

import (
	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/signet-pki/signet/internal/testpki"
)

// legacyUnknownCases are kubernetes.io/legacy-unknown's cases: by default CN=legacy-client,
// O=developers (P-256, digital signature and client auth) stored in etcd as alice's
// (storeEtcd: certificates.k8s.io/v1 refuses the signer name, which the first case checks).
// kube-controller-manager checks nothing for this signer; Signet's legacy-unknown profile
// only its baseline (key, CA, usages) and the privileged groups.
func legacyUnknownCases() []diffCase {
	return concat(legacyUsageCases(), legacyOtherCases())
}

// legacyUsageCases vary the usages and the key.
func legacyUsageCases() []diffCase {
	c := func(tc diffCase) diffCase { tc.signer = signerLegacyUnknown; return tc }
	return []diffCase{
		c(diffCase{name: "digital signature and client auth", want: same()}),
		c(diffCase{name: "digital signature and server auth", usages: use(uDS, uSA), want: same()}),
		c(diffCase{name: "RSA-2048, server and client auth with key encipherment", key: testpki.RSA2048, usages: use(uDS, uKE, uSA, uCA), want: same()}),
		c(diffCase{name: "RSA-2048, client auth with key encipherment", key: testpki.RSA2048, usages: use(uDS, uKE, uCA),
			want: sameThoughLinted("e_key_usage_and_extended_key_usage_inconsistent")}),
		c(diffCase{name: "P-256, key agreement and client auth", usages: use(uKA, uCA), want: same()}),
		c(diffCase{name: "RSA-2048, key agreement and client auth", key: testpki.RSA2048, usages: use(uKA, uCA),
			want: sameThoughLinted("e_rsa_allowed_ku_ee")}),
		c(diffCase{name: "RSA-2048, key and data encipherment without extended usage", key: testpki.RSA2048,
			usages: use(uDS, uKE, certificatesv1.UsageDataEncipherment), want: same()}),
		c(diffCase{name: "content commitment", usages: use(uDS, certificatesv1.UsageContentCommitment), want: same()}),
		c(diffCase{name: "code signing", usages: use(uDS, certificatesv1.UsageCodeSigning), want: same()}),
		c(diffCase{name: "RSA-2048, email protection with key encipherment", key: testpki.RSA2048,
			usages: use(uDS, uKE, certificatesv1.UsageEmailProtection), want: same()}),
		c(diffCase{name: "s/mime", usages: use(uDS, certificatesv1.UsageSMIME), want: same()}),
		c(diffCase{name: "timestamping", usages: use(uDS, certificatesv1.UsageTimestamping), want: same()}),
		c(diffCase{name: "OCSP signing", usages: use(uDS, certificatesv1.UsageOCSPSigning), want: same()}),
		c(diffCase{name: "any", usages: use(certificatesv1.UsageAny), want: same()}),
		c(diffCase{name: "IPsec end system, tunnel and user", usages: use(uDS, certificatesv1.UsageIPsecEndSystem,
			certificatesv1.UsageIPsecTunnel, certificatesv1.UsageIPsecUser), want: same()}),
		c(diffCase{name: "Microsoft and Netscape SGC", usages: use(uDS, certificatesv1.UsageMicrosoftSGC, certificatesv1.UsageNetscapeSGC), want: same()}),
		c(diffCase{name: "P-256, key agreement with encipher only", usages: use(uKA, certificatesv1.UsageEncipherOnly), want: same()}),
		c(diffCase{name: "P-256, key agreement with decipher only", usages: use(uKA, certificatesv1.UsageDecipherOnly), want: same()}),
		c(diffCase{name: "cert sign", usages: use(uDS, certificatesv1.UsageCertSign), want: deliberately(diffCertSign)}),
		c(diffCase{name: "crl sign", usages: use(uDS, certificatesv1.UsageCRLSign, uSA), want: deliberately(diffCertSign)}),
		c(diffCase{name: "Ed25519", key: testpki.Ed25519, want: same()}),
		c(diffCase{name: "RSA-1024", key: testpki.RSA1024, want: deliberately(diffSmallRSA)}),
		c(diffCase{name: "P-224", key: testpki.P224, want: deliberately(diffCurve)}),
	}
}

// legacyOtherCases vary the subject, the SANs, requested extensions and the lifetime.
func legacyOtherCases() []diffCase {
	c := func(tc diffCase) diffCase { tc.signer = signerLegacyUnknown; return tc }
	masters := []string{"system:masters"}
	return []diffCase{
		c(diffCase{name: "created through certificates.k8s.io/v1", store: storeAPI,
			want: apiserverRefuses("the legacy signerName is not allowed via this API version")}),
		c(diffCase{name: "O=system:masters, client auth", csr: req("admin", masters), want: deliberately(diffPrivileged)}),
		c(diffCase{name: "O=system:masters, no extended usage", csr: req("admin", masters), usages: use(uDS), want: deliberately(diffPrivileged)}),
		c(diffCase{name: "O=system:masters, server auth only", csr: req("admin", masters, dnsNames("admin.example.com")),
			usages: use(uDS, uSA), want: same()}),
		c(diffCase{name: "no subject, a DNS SAN", csr: req("", nil, dnsNames("legacy.example.com")), want: same()}),
		c(diffCase{name: "no subject, no SANs", csr: req("", nil), want: sameThoughLinted("e_subject_empty_without_san")}),
		c(diffCase{name: "email and URI SANs", csr: req("legacy-client", developers, emailAddrs("legacy@example.com"),
			uriNames("spiffe://cluster.local/ns/legacy/sa/client")), want: same()}),
		c(diffCase{name: "DNS SAN ending with a hyphen", csr: req("legacy-client", developers, dnsNames("legacy-.example.com")), want: deliberately(diffNames)}),
		c(diffCase{name: "CA:TRUE requested", exts: ext(basicConstraints(true, -1, true)), want: deliberately(diffCARequest)}),
		c(diffCase{name: "critical custom extension", exts: ext(customExt(true)), want: same()}),
		c(diffCase{name: "expirationSeconds 600", expirationSeconds: seconds(600), lifetime: fifteenMinutes, want: same()}),
		c(diffCase{name: "requester: a node", as: asNodeB, want: same()}),
	}
}

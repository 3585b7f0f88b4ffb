package integration

import (
	"crypto/x509"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/signet-pki/signet/internal/testpki"
)

// The kubelet signers' names, short.
const (
	signerKubeletClient  = certificatesv1.KubeAPIServerClientKubeletSignerName
	signerKubeletServing = certificatesv1.KubeletServingSignerName
)

// nodeA is worker-a's subject, as kubelets request it.
var nodeA = []string{"system:nodes"}

// kubeletClientCases are kubernetes.io/kube-apiserver-client-kubelet's cases: by default a
// bootstrap token asks for worker-a's client certificate (P-256, digital signature and client
// auth), as a joining kubelet does.
func kubeletClientCases() []diffCase {
	c := func(tc diffCase) diffCase { tc.signer = signerKubeletClient; return tc }
	return []diffCase{
		// Requesters.
		c(diffCase{name: "bootstrap token, P-256", want: same()}),
		c(diffCase{name: "bootstrap token, P-384", key: testpki.P384, want: same()}),
		c(diffCase{name: "node renews its own certificate", as: asNodeA, want: same()}),
		c(diffCase{name: "user in system:bootstrappers without a token", as: asBootstrapGroupUser, want: same()}),
		c(diffCase{name: "plain user", as: asAlice, want: deliberately(diffNodeClientRequester)}),
		c(diffCase{name: "another node", as: asNodeB, want: deliberately(diffNodeClientRequester)}),
		c(diffCase{name: "the node without group system:nodes", as: asNodeANoGroup, want: deliberately(diffNodeClientRequester)}),
		// Keys and usages.
		c(diffCase{name: "P-521", key: testpki.P521, want: same()}),
		c(diffCase{name: "Ed25519", key: testpki.Ed25519, want: same()}),
		c(diffCase{name: "RSA-2048", key: testpki.RSA2048, want: same()}),
		c(diffCase{name: "RSA-2048 with key encipherment", key: testpki.RSA2048, usages: use(uDS, uKE, uCA),
			want: sameThoughLinted("e_key_usage_and_extended_key_usage_inconsistent")}),
		c(diffCase{name: "P-256 with key encipherment", usages: use(uDS, uKE, uCA),
			want: sameThoughLinted("e_key_usage_and_extended_key_usage_inconsistent")}),
		c(diffCase{name: "usages in reverse order", usages: use(uCA, uDS), want: same()}),
		c(diffCase{name: "client auth only", usages: use(uCA), want: bothRefuse("usages did not match", ruleClientUsages)}),
		c(diffCase{name: "server auth too", usages: use(uDS, uCA, uSA), want: bothRefuse("usages did not match", ruleClientUsages)}),
		c(diffCase{name: "RSA-1024", key: testpki.RSA1024, want: deliberately(diffSmallRSA)}),
		c(diffCase{name: "P-224", key: testpki.P224, want: deliberately(diffCurve)}),
		// Subjects and SANs.
		c(diffCase{name: "no organization", csr: req("system:node:worker-a", nil),
			want: bothRefuse("subject organization is not system:nodes", ruleOrgNodes)}),
		c(diffCase{name: "a second organization", csr: req("system:node:worker-a", []string{"system:nodes", "ops"}),
			want: bothRefuse("subject organization is not system:nodes", ruleOrgNodes)}),
		c(diffCase{name: "common name without system:node:", csr: req("worker-a", nodeA),
			want: bothRefuse("subject common name does not begin with system:node:", ruleCNNodePrefix)}),
		c(diffCase{name: "organizational unit and country", csr: nodeWith(func(r *x509.CertificateRequest) {
			r.Subject.OrganizationalUnit, r.Subject.Country = []string{"rack-7"}, []string{"DE"}
		}), want: same()}),
		c(diffCase{name: "DNS SAN", csr: nodeWith(dnsNames("worker-a")), want: bothRefuse("DNS subjectAltNames are not allowed", ruleNoSANs)}),
		c(diffCase{name: "IP SAN", csr: nodeWith(ipAddrs("192.0.2.10")), want: bothRefuse("IP subjectAltNames are not allowed", ruleNoSANs)}),
		c(diffCase{name: "email SAN", csr: nodeWith(emailAddrs("ops@example.com")), want: bothRefuse("Email subjectAltNames are not allowed", ruleNoSANs)}),
		c(diffCase{name: "URI SAN", csr: nodeWith(uriNames("spiffe://cluster.local/node/worker-a")),
			want: bothRefuse("URI subjectAltNames are not allowed", ruleNoSANs)}),
		// Requested extensions and lifetimes.
		c(diffCase{name: "CA:TRUE requested", exts: ext(basicConstraints(true, -1, true)), want: deliberately(diffCARequest)}),
		c(diffCase{name: "critical custom extension", exts: ext(customExt(true)), want: same()}),
		c(diffCase{name: "expirationSeconds 600", expirationSeconds: seconds(600), lifetime: fifteenMinutes, want: same()}),
		c(diffCase{name: "expirationSeconds 2^31-1", expirationSeconds: seconds(1<<31 - 1), want: same()}),
	}
}

// kubeletServingCases are kubernetes.io/kubelet-serving's cases: by default worker-a asks as
// itself for its serving certificate (DNS worker-a, IP 192.0.2.10, P-256, digital signature
// and server auth).
func kubeletServingCases() []diffCase {
	c := func(tc diffCase) diffCase { tc.signer = signerKubeletServing; return tc }
	return []diffCase{
		c(diffCase{name: "node itself, P-256", want: same()}),
		c(diffCase{name: "P-384", key: testpki.P384, want: same()}),
		c(diffCase{name: "Ed25519", key: testpki.Ed25519, want: same()}),
		c(diffCase{name: "RSA-2048", key: testpki.RSA2048, want: same()}),
		c(diffCase{name: "RSA-2048 with key encipherment", key: testpki.RSA2048, usages: use(uDS, uKE, uSA), want: same()}),
		c(diffCase{name: "P-256 with key encipherment", usages: use(uDS, uKE, uSA), want: same()}),
		c(diffCase{name: "usages in reverse order", usages: use(uSA, uDS), want: same()}),
		c(diffCase{name: "DNS name only", csr: req("system:node:worker-a", nodeA, dnsNames("worker-a")), want: same()}),
		c(diffCase{name: "IP address only", csr: req("system:node:worker-a", nodeA, ipAddrs("192.0.2.10")), want: same()}),
		c(diffCase{name: "several DNS names, IPv4 and IPv6", csr: req("system:node:worker-a", nodeA,
			dnsNames("worker-a", "worker-a.cluster.example", "*.worker-a.cluster.example"), ipAddrs("192.0.2.10", "2001:db8::10")), want: same()}),
		c(diffCase{name: "DNS name with an empty label", csr: servingWith(dnsNames("worker-a..cluster.example")), want: deliberately(diffNames)}),
		c(diffCase{name: "no SANs", csr: req("system:node:worker-a", nodeA),
			want: bothRefuse("DNS or IP subjectAltName is required", ruleServingSANs)}),
		c(diffCase{name: "email SAN", csr: servingWith(emailAddrs("ops@example.com")),
			want: bothRefuse("Email subjectAltNames are not allowed", ruleServingNoOther)}),
		c(diffCase{name: "URI SAN", csr: servingWith(uriNames("spiffe://cluster.local/node/worker-a")),
			want: bothRefuse("URI subjectAltNames are not allowed", ruleServingNoOther)}),
		c(diffCase{name: "client auth too", usages: use(uDS, uSA, uCA), want: bothRefuse("usages did not match", ruleServingUsages)}),
		c(diffCase{name: "server auth only", usages: use(uSA), want: bothRefuse("usages did not match", ruleServingUsages)}),
		c(diffCase{name: "organization other than system:nodes", csr: req("system:node:worker-a", []string{"ops"}, dnsNames("worker-a")),
			want: bothRefuse("subject organization is not system:nodes", ruleOrgNodes)}),
		c(diffCase{name: "common name without system:node:", csr: req("worker-a", nodeA, dnsNames("worker-a")),
			want: bothRefuse("subject common name does not begin with system:node:", ruleCNNodePrefix)}),
		c(diffCase{name: "another node", as: asNodeB, want: deliberately(diffServingRequester)}),
		c(diffCase{name: "bootstrap token", as: asBootstrapToken, want: deliberately(diffServingRequester)}),
		c(diffCase{name: "plain user", as: asAlice, want: deliberately(diffServingRequester)}),
		c(diffCase{name: "the node without group system:nodes", as: asNodeANoGroup, want: deliberately(diffServingGroup)}),
		c(diffCase{name: "CA:TRUE requested", exts: ext(basicConstraints(true, 0, false)), want: deliberately(diffCARequest)}),
		c(diffCase{name: "RSA-1024", key: testpki.RSA1024, want: deliberately(diffSmallRSA)}),
		c(diffCase{name: "expirationSeconds 600", expirationSeconds: seconds(600), lifetime: fifteenMinutes, want: same()}),
	}
}

// nodeWith is worker-a's client subject changed by opt.
func nodeWith(opt func(*x509.CertificateRequest)) *x509.CertificateRequest {
	return req("system:node:worker-a", nodeA, opt)
}

// servingWith is worker-a's serving request (DNS worker-a) changed by opt.
func servingWith(opt func(*x509.CertificateRequest)) *x509.CertificateRequest {
	return req("system:node:worker-a", nodeA, dnsNames("worker-a"), opt)
}

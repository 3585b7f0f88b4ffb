package server_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/profile"
)

// TestAcceptedLintFindingsAreQuiet: an ordinary ECDSA kubelet serving certificate (digital
// signature, key encipherment, server auth, as kubelets ask) and an RSA kubelet client
// certificate (key encipherment with client auth) are issued by the default gate; the lint
// findings their profiles accept by design are counted in
// signet_server_lint_accepted_findings_total and logged at DEBUG, never as a WARN
// "certificate issued with lint findings".
func TestAcceptedLintFindingsAreQuiet(t *testing.T) {
	t.Parallel()
	const clientSigner = "kubernetes.io/kube-apiserver-client-kubelet"
	s := startServer(t, func(cfg *config.Config) {
		cfg.Signers[0].Profile = profile.Spec{Name: profile.NameKubeletServing}
		client := cfg.Signers[0]
		client.Name, client.Profile = clientSigner, profile.Spec{Name: profile.NameKubeAPIServerClientKubelet}
		cfg.Signers = append(cfg.Signers, client)
	})
	client := signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	node := pkix.Name{CommonName: "system:node:worker-1", Organization: []string{"system:nodes"}}
	requester := &signetv1.Requester{Username: "system:node:worker-1", Groups: []string{"system:nodes", "system:authenticated"}}

	serving := signRequest(testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{
		Subject: node, DNSNames: []string{"worker-1"}, IPAddresses: []net.IP{net.ParseIP("192.0.2.10")}}), "serving")
	serving.Usages, serving.Requester = []string{"digital signature", "key encipherment", "server auth"}, requester
	rsaClient := signRequest(testpki.CSR(t, testpki.Key(t, testpki.RSA2048), &x509.CertificateRequest{Subject: node}), "client")
	rsaClient.SignerName, rsaClient.Requester = clientSigner, requester
	rsaClient.Usages = []string{"digital signature", "key encipherment", "client auth"}
	for _, req := range []*signetv1.SignCertificateSigningRequestRequest{serving, rsaClient} {
		if _, err := client.SignCertificateSigningRequest(callContext(t), req); err != nil {
			t.Fatalf("%s: %v", req.GetObject().GetUid(), err)
		}
	}

	if s.logs.Contains("certificate issued with lint findings") {
		t.Error("a finding the profile accepts by design was logged as a WARN")
	}
	for _, lint := range []string{"n_ecdsa_ee_invalid_ku", "e_ecdsa_allowed_ku", "e_key_usage_and_extended_key_usage_inconsistent"} {
		if !s.logs.Contains(`"level":"DEBUG","msg":"certificate issued with a lint finding the profile accepts by design"`) || !s.logs.Contains(`"lint":"`+lint) {
			t.Errorf("no DEBUG line for the accepted finding %s", lint)
		}
	}
	code, body := httpGet(t, s.srv.HTTPAddr(), "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{
		`signet_server_lint_accepted_findings_total{lint="n_ecdsa_ee_invalid_ku",signer="` + devpki.DefaultSigner + `"} 1`,
		`signet_server_lint_accepted_findings_total{lint="e_ecdsa_allowed_ku",signer="` + devpki.DefaultSigner + `"} 1`,
		`signet_server_lint_accepted_findings_total{lint="e_key_usage_and_extended_key_usage_inconsistent",signer="` + clientSigner + `"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

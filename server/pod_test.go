package server_test

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/keystore/pemfile"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/ledger"
)

// podSignRequest is a PodCertificateRequest for the dev pod-identity signer: pod shop/web-1,
// service account web, a fresh P-256 key.
func podSignRequest(t testing.TB, uid string) *signetv1.SignPodCertificateRequestRequest {
	t.Helper()
	stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, testpki.Key(t, testpki.P256))
	if err != nil {
		t.Fatal(err)
	}
	return &signetv1.SignPodCertificateRequestRequest{
		SignerName: devpki.DefaultPodIdentitySigner,
		Object:     &signetv1.KubernetesObject{Uid: uid, Name: "req-" + uid, Namespace: "shop"},
		Pod: &signetv1.PodIdentity{Namespace: "shop", PodName: "web-1", PodUid: "pod-uid", ServiceAccountName: "web",
			ServiceAccountUid: "sa-uid", NodeName: "node-1", NodeUid: "node-uid"},
		StubPkcs10Request:    stub,
		MaxExpirationSeconds: 86400,
	}
}

// csrOnlyClient is a client identity allowed only the dev CSR signer.
const csrOnlyClient = "csr-only-tool"

// clientCert issues a client certificate for identity from the dev TLS CA.
func (s *testServer) clientCert(t *testing.T, identity string) tls.Certificate {
	t.Helper()
	caKey, err := pemfile.ParsePrivateKeyPEM(s.read(t, "tls-ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	ca := &testpki.Authority{Cert: parsePEMCerts(t, s.read(t, devpki.TLSCACert))[0], Key: caKey}
	key := testpki.Key(t, testpki.P256)
	cert := ca.Sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: identity}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, key.Public())
	return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key}
}

// TestServerSignsPodCertificates drives the dev pod-identity signer over mTLS gRPC as the
// watcher does: the certificate verifies against the pod-identity CA (and not the CSR
// signer's) for both TLS roles and names the service account; a retry gets it again; the
// refusals carry their ErrorInfo reasons; a client not allowed the signer is refused; the
// ledger, the log and /metrics record it all; ListSigners describes the signer.
func TestServerSignsPodCertificates(t *testing.T) {
	t.Parallel()
	s := startServer(t, func(c *config.Config) {
		c.Clients = append(c.Clients, access.Client{Identity: csrOnlyClient, Signers: []string{devpki.DefaultSigner}})
	})
	client := signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	req := podSignRequest(t, "uid-pod-ok")
	resp, err := client.SignPodCertificateRequest(callContext(t), req)
	if err != nil {
		t.Fatalf("SignPodCertificateRequest: %v", err)
	}
	leaf := parsePEMCerts(t, []byte(resp.GetCertificateChainPem()))[0]
	for name, want := range map[string]bool{devpki.PodIdentityCACert: true, devpki.SignerCACert: false} {
		roots := x509.NewCertPool()
		roots.AddCert(parsePEMCerts(t, s.read(t, name))[0])
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
		if (err == nil) != want {
			t.Errorf("verifying against %s: %v, want success %t", name, err, want)
		}
	}
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://cluster.local/ns/shop/sa/web" {
		t.Errorf("URIs = %v", leaf.URIs)
	}
	nb, refresh := resp.GetNotBefore().AsTime(), resp.GetBeginRefreshAt().AsTime()
	if age := time.Since(nb); age < 55*time.Second || age > 2*time.Minute || !nb.Equal(leaf.NotBefore) || !resp.GetNotAfter().AsTime().Equal(leaf.NotAfter) {
		t.Errorf("not_before %s (%s ago), not_after %s; want the leaf's, about a minute ago", nb, age, resp.GetNotAfter().AsTime())
	}
	if refresh.Before(nb.Add(10*time.Minute)) || refresh.After(leaf.NotAfter.Add(-10*time.Minute)) {
		t.Errorf("begin_refresh_at %s outside [NotBefore+10m, NotAfter−10m]", refresh)
	}
	again, err := client.SignPodCertificateRequest(callContext(t), proto.CloneOf(req))
	if err != nil || again.GetCertificateChainPem() != resp.GetCertificateChainPem() || !again.GetBeginRefreshAt().AsTime().Equal(refresh) {
		t.Errorf("retry: %v; want the same certificate and times", err)
	}

	annotated := podSignRequest(t, "uid-pod-annotated")
	annotated.UnverifiedUserAnnotations = map[string]string{"example.com/b": "", "example.com/a": ""}
	_, err = client.SignPodCertificateRequest(callContext(t), annotated)
	wantStatus(t, err, codes.InvalidArgument, "UNKNOWN_ANNOTATION")
	toCSRSigner := podSignRequest(t, "uid-pod-to-csr")
	toCSRSigner.SignerName = devpki.DefaultSigner
	_, err = client.SignPodCertificateRequest(callContext(t), toCSRSigner)
	wantStatus(t, err, codes.FailedPrecondition, "POLICY_VIOLATION")
	csrToPods := signRequest(testpki.CSR(t, testpki.Key(t, testpki.P256), nil), "uid-csr-to-pods")
	csrToPods.SignerName = devpki.DefaultPodIdentitySigner
	_, err = client.SignCertificateSigningRequest(callContext(t), csrToPods)
	wantStatus(t, err, codes.FailedPrecondition, "POLICY_VIOLATION")
	limited := signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.clientCert(t, csrOnlyClient))))
	_, err = limited.SignPodCertificateRequest(callContext(t), podSignRequest(t, "uid-pod-denied"))
	wantStatus(t, err, codes.PermissionDenied, "SIGNER_NOT_ALLOWED")

	if !s.logs.Contains(`"kind":"PodCertificateRequest"`) || !s.logs.Contains(`"object_uid":"uid-pod-ok"`) || !s.logs.Contains(`"service_account":"web"`) {
		t.Error("the issuance was not logged with the kind, the object UID and the service account")
	}
	checkPodLedger(t, s)
	checkPodMetrics(t, s)
	checkPodDescription(t, client)
}

// checkPodLedger: the ledger holds the issuance and each refusal as PodCertificateRequest
// records (the CSR sent to the pod signer as a CertificateSigningRequest record).
func checkPodLedger(t *testing.T, s *testServer) {
	t.Helper()
	want := map[string]string{
		"uid-pod-ok": "issued", "uid-pod-annotated": "UNKNOWN_ANNOTATION", "uid-pod-to-csr": "POLICY_VIOLATION", "uid-pod-denied": "SIGNER_NOT_ALLOWED",
	}
	seen := map[string]int{}
	// Replay reads without the lock, beside the running server.
	err := ledger.Replay(filepath.Join(s.dir, "ledger"), time.Time{}, func(r ledger.Record) error {
		outcome, ok := want[r.ObjectUID]
		switch {
		case r.ObjectUID == "uid-csr-to-pods":
			if r.ObjectKind != "CertificateSigningRequest" || r.Reason != "POLICY_VIOLATION" {
				t.Errorf("CSR record %+v", r)
			}
		case !ok:
			t.Errorf("unexpected record %+v", r)
		case r.ObjectKind != "PodCertificateRequest" || (outcome == "issued") != (r.Decision == ledger.Issued) || (outcome != "issued" && r.Reason != outcome):
			t.Errorf("record %+v, want a PodCertificateRequest record: %s", r, outcome)
		}
		seen[r.ObjectUID]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for uid := range want {
		if seen[uid] != 1 {
			t.Errorf("%d records for %s, want 1 (a replay adds none)", seen[uid], uid)
		}
	}
}

// checkPodMetrics: /metrics counts the pod signer's issuance, replay and refusals.
func checkPodMetrics(t *testing.T, s *testServer) {
	t.Helper()
	code, body := httpGet(t, s.srv.HTTPAddr(), "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{
		`signet_server_requests_total{outcome="issued",signer="signet.dev/pod-identity"} 1`,
		`signet_server_requests_total{outcome="idempotent_replay",signer="signet.dev/pod-identity"} 1`,
		// The replay did not run the pipeline again.
		`signet_server_issuance_duration_seconds_count{signer="signet.dev/pod-identity"} 1`,
		`signet_server_refusals_total{reason="UNKNOWN_ANNOTATION",signer="signet.dev/pod-identity"} 1`,
		`signet_server_refusals_total{reason="POLICY_VIOLATION",signer="signet.dev/dev"} 1`,
		`signet_server_refusals_total{reason="SIGNER_NOT_ALLOWED",signer="signet.dev/pod-identity"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// checkPodDescription: ListSigners describes the pod-identity signer.
func checkPodDescription(t *testing.T, client signetv1.SignerServiceClient) {
	t.Helper()
	resp, err := client.ListSigners(callContext(t), &signetv1.ListSignersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sg := range resp.GetSigners() {
		if sg.GetSignerName() != devpki.DefaultPodIdentitySigner {
			continue
		}
		if sg.GetProfile() != "pod-identity" || sg.GetMaxLifetime().AsDuration() != 24*time.Hour || len(sg.GetKeyTypes()) != 6 ||
			!strings.Contains(sg.GetPermittedSubjects(), "spiffe://cluster.local/ns/<namespace>/sa/<serviceAccountName>") {
			t.Errorf("description %v", sg)
		}
		return
	}
	t.Errorf("ListSigners lists no %s: %v", devpki.DefaultPodIdentitySigner, resp.GetSigners())
}

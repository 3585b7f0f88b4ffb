package server_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	k8swebhook "k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/rest"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/keystore/pemfile"
	"github.com/signet-pki/signet/objectrequest"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/webhook/webhooktest"
)

// webhookServer is a signet-server serving the dev PKI with the webhook on.
type webhookServer struct {
	*testServer
	url       string // https://127.0.0.1:port/
	ledgerDir string
}

// startWebhook runs a server with the webhook on a free port and csrOnlyClient allowed only
// the dev CSR signer; modify may change the configuration first. The input handling (bad
// bodies, the size limit) is tested in server/webhook.
func startWebhook(t *testing.T, modify func(*config.Config)) *webhookServer {
	t.Helper()
	cfg, dir := devConfig(t)
	cfg.Webhook = config.Webhook{Address: "127.0.0.1:0", MaxRequestBytes: config.MinWebhookRequestBytes}
	cfg.Clients = append(cfg.Clients, access.Client{Identity: csrOnlyClient, Signers: []string{devpki.DefaultSigner}})
	if modify != nil {
		modify(cfg)
	}
	s, _ := runServer(t, cfg, dir)
	return &webhookServer{testServer: s, url: "https://" + s.srv.WebhookAddr() + "/", ledgerDir: cfg.Ledger.Dir}
}

// csrObject is an approved CertificateSigningRequest for the dev signer with a serving
// certificate's usages and every requester field set, as the apiserver holds it.
func csrObject(uid string, request []byte) *certificatesv1.CertificateSigningRequest {
	seconds := int32(3600)
	return &certificatesv1.CertificateSigningRequest{
		TypeMeta:   metav1.TypeMeta{APIVersion: "certificates.k8s.io/v1", Kind: "CertificateSigningRequest"},
		ObjectMeta: metav1.ObjectMeta{Name: "csr-" + uid, UID: types.UID(uid), Labels: map[string]string{"app": "web"}},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName:        devpki.DefaultSigner,
			Request:           request,
			ExpirationSeconds: &seconds,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
			Username:          "system:serviceaccount:default:web",
			UID:               "5f1c3e2a-user",
			Groups:            []string{"system:serviceaccounts", "system:authenticated"},
			Extra:             map[string]certificatesv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"web-0"}},
		},
		Status: certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{
			{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AutoApproved"},
		}},
	}
}

// servingCSR is a fresh P-256 request for a serving certificate of web.default.svc.
func servingCSR(t *testing.T) ([]byte, crypto.Signer) {
	t.Helper()
	key := testpki.Key(t, testpki.P256)
	return testpki.CSR(t, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "web"}, DNSNames: []string{"web.default.svc"}}), key
}

// kubeconfig writes the kubeconfig a webhook client uses: the server URL, the TLS CA, and the
// dev client certificate.
func (w *webhookServer) kubeconfig(t *testing.T) string {
	t.Helper()
	body := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: signet
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: signet-client
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: signet
  context: {cluster: signet, user: signet-client}
current-context: signet
`, w.url, filepath.Join(w.dir, devpki.TLSCACert), filepath.Join(w.dir, devpki.ClientCert), filepath.Join(w.dir, devpki.ClientKey))
	path := filepath.Join(t.TempDir(), "webhook.kubeconfig")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// upstreamClient is k8s.io/apiserver's generic webhook client built from the kubeconfig, as
// gcp-controller-manager built its signer's.
func (w *webhookServer) upstreamClient(t *testing.T) *k8swebhook.GenericWebhook {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := certificatesv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	restCfg, err := k8swebhook.LoadKubeconfig(w.kubeconfig(t), nil)
	if err != nil {
		t.Fatalf("LoadKubeconfig: %v", err)
	}
	wh, err := k8swebhook.NewGenericWebhook(scheme, serializer.NewCodecFactory(scheme), restCfg,
		[]schema.GroupVersion{certificatesv1.SchemeGroupVersion}, k8swebhook.DefaultRetryBackoffWithInitialDelay(100*time.Millisecond))
	if err != nil {
		t.Fatalf("NewGenericWebhook: %v", err)
	}
	return wh
}

// upstreamSign posts csr as gcp-controller-manager's webhook signer did and returns the answer.
func upstreamSign(t *testing.T, wh *k8swebhook.GenericWebhook, csr *certificatesv1.CertificateSigningRequest) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	ctx := callContext(t)
	result := wh.WithExponentialBackoff(ctx, func() rest.Result { return wh.RestClient.Post().Body(csr).Do(ctx) })
	var code int
	if result.StatusCode(&code); code != http.StatusOK {
		t.Fatalf("webhook answered %d: %v", code, result.Error())
	}
	out := &certificatesv1.CertificateSigningRequest{}
	if err := result.Into(out); err != nil {
		t.Fatalf("decoding the answer: %v", err)
	}
	return out
}

// contractClient is an HTTP/2 client presenting cert (none if nil) and trusting the dev TLS
// CA: a client written to docs/webhook.md, not to the server's code.
func (w *webhookServer) contractClient(t *testing.T, certs ...tls.Certificate) *http.Client {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: w.clientTLS(t, certs...), ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// records returns the ledger's records by object UID.
func (w *webhookServer) records(t *testing.T) map[string][]ledger.Record {
	t.Helper()
	out := map[string][]ledger.Record{}
	if err := ledger.Replay(w.ledgerDir, time.Time{}, func(r ledger.Record) error {
		out[r.ObjectUID] = append(out[r.ObjectUID], r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWebhookRoundTrip: the upstream generic webhook client, built from a kubeconfig with the
// dev client certificate, gets the object back with a chain that verifies against the signer
// CA for the request's key; the rest of the object is as posted; a retry gets the same
// certificate; the ledger holds one issuance for the object, with the client and requester.
func TestWebhookRoundTrip(t *testing.T) {
	t.Parallel()
	w := startWebhook(t, nil)
	wh := w.upstreamClient(t)
	request, key := servingCSR(t)
	csr := csrObject("uid-webhook-ok", request)
	out := upstreamSign(t, wh, csr)

	chain := parsePEMCerts(t, out.Status.Certificate)
	roots := x509.NewCertPool()
	roots.AddCert(parsePEMCerts(t, w.read(t, devpki.SignerCACert))[0])
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, DNSName: "web.default.svc", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("the certificate does not verify against the signer CA: %v", err)
	}
	if !key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(chain[0].PublicKey) {
		t.Error("the certificate is for another key")
	}
	want := csr.DeepCopy()
	want.Status.Certificate = out.Status.Certificate
	if got, wantJSON := webhooktest.JSON(t, out), webhooktest.JSON(t, want); !bytes.Equal(got, wantJSON) {
		t.Errorf("answer differs from the posted object beyond status.certificate:\n got %s\nwant %s", got, wantJSON)
	}
	if again := upstreamSign(t, wh, csr); !bytes.Equal(again.Status.Certificate, out.Status.Certificate) {
		t.Error("a retry of the same object got another certificate")
	}
	recs := w.records(t)["uid-webhook-ok"]
	if len(recs) != 1 || recs[0].Decision != ledger.Issued || recs[0].Client != devpki.ClientName ||
		recs[0].Requester != csr.Spec.Username || recs[0].Certificate != string(out.Status.Certificate) {
		t.Errorf("ledger records for the object: %+v; want one issuance to %s for %s with the answered chain", recs, devpki.ClientName, csr.Spec.Username)
	}
}

// TestWebhookRefusesLikeGRPC: the same bad requests, from the same client, get the same
// reason, code and message on both front doors (the webhook's HTTP status is server/wire's),
// and the same ledger record: one refusal with the client's identity, the reason, the message,
// the signer, the requester and the request's hash, only the object UID told apart. The core
// counts the refusals of both doors alike (refusals_total by signer and reason). An
// unapproved CSR, which gRPC never sees (the watcher does not forward it), is refused by the
// webhook alone, and recorded and counted the same way.
func TestWebhookRefusesLikeGRPC(t *testing.T) {
	t.Parallel()
	w := startWebhook(t, nil)
	cert := w.clientCert(t, csrOnlyClient)
	grpcClient := signetv1.NewSignerServiceClient(w.dial(t, w.clientTLS(t, cert)))
	hc := w.contractClient(t, cert)
	p256 := testpki.Key(t, testpki.P256)
	tests := []struct {
		name       string
		modify     func(*certificatesv1.CertificateSigningRequest)
		httpStatus int
		status     string
		reason     string
		signer     string // the signer label the refusal is counted under
	}{
		{"unknown signer", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "example.com/not-served" },
			http.StatusNotFound, "NOT_FOUND", "UNKNOWN_SIGNER", "unknown"},
		{"signer not allowed", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = devpki.DefaultPodIdentitySigner },
			http.StatusForbidden, "PERMISSION_DENIED", "SIGNER_NOT_ALLOWED", devpki.DefaultPodIdentitySigner},
		{"no signer name", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "" },
			http.StatusBadRequest, "INVALID_ARGUMENT", "MALFORMED_REQUEST", "unknown"},
		{"malformed PEM", func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = []byte("-----BEGIN CERTIFICATE REQUEST-----\nnot base64\n")
		}, http.StatusBadRequest, "INVALID_ARGUMENT", "MALFORMED_REQUEST", devpki.DefaultSigner},
		{"broken signature", func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = testpki.BreakSignature(t, testpki.CSR(t, p256, nil))
		},
			http.StatusBadRequest, "INVALID_ARGUMENT", "INVALID_SIGNATURE", devpki.DefaultSigner},
		{"policy violation (CA:TRUE)", func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = testpki.CARequestCSR(t, p256) },
			http.StatusBadRequest, "FAILED_PRECONDITION", "POLICY_VIOLATION", devpki.DefaultSigner},
		{"unapproved", func(c *certificatesv1.CertificateSigningRequest) { c.Status.Conditions = nil },
			http.StatusBadRequest, "FAILED_PRECONDITION", "POLICY_VIOLATION", devpki.DefaultSigner},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			uid := fmt.Sprintf("uid-refused-%d", i)
			csr := csrObject(uid+"-webhook", testpki.CSR(t, p256, nil))
			tt.modify(csr)
			resp, body := webhooktest.PostError(t, hc, http.MethodPost, w.url, "application/json", bytes.NewReader(webhooktest.JSON(t, csr)))
			if resp.StatusCode != tt.httpStatus || body.Error.Status != tt.status || body.Reason() != tt.reason {
				t.Fatalf("webhook answered %d %s %s (%q), want %d %s %s", resp.StatusCode, body.Error.Status, body.Reason(), body.Error.Message, tt.httpStatus, tt.status, tt.reason)
			}
			if tt.name == "unapproved" {
				if !strings.Contains(body.Error.Message, "is not approved") {
					t.Errorf("message %q does not say the CSR is not approved", body.Error.Message)
				}
				return
			}
			grpcCSR := csr.DeepCopy()
			grpcCSR.UID = types.UID(uid + "-grpc")
			_, err := grpcClient.SignCertificateSigningRequest(callContext(t), objectrequest.CSR(grpcCSR))
			st := status.Convert(err)
			wantStatus(t, err, st.Code(), tt.reason)
			if got := strings.ToUpper(st.Code().String()); strings.ReplaceAll(body.Error.Status, "_", "") != got {
				t.Errorf("webhook status %s, gRPC code %s", body.Error.Status, st.Code())
			}
			if body.Error.Message != st.Message() {
				t.Errorf("webhook message %q, gRPC message %q", body.Error.Message, st.Message())
			}
			for _, d := range st.Details() {
				if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() != body.Reason() {
					t.Errorf("webhook reason %s, gRPC reason %s", body.Reason(), info.GetReason())
				}
			}
		})
	}
	t.Cleanup(func() {
		recs := w.records(t)
		counted := map[string]int{}
		for i, tt := range tests {
			uid := fmt.Sprintf("uid-refused-%d", i)
			got := recs[uid+"-webhook"]
			if len(got) != 1 || got[0].Decision != ledger.Refused || got[0].Reason != tt.reason || got[0].Client != csrOnlyClient ||
				got[0].Requester != "system:serviceaccount:default:web" || got[0].ObjectKind != "CertificateSigningRequest" {
				t.Errorf("%s: webhook ledger records %+v, want one refusal %s by %s for the requester", tt.name, got, tt.reason, csrOnlyClient)
				continue
			}
			counted[fmt.Sprintf(`reason=%q,signer=%q`, tt.reason, tt.signer)]++
			if tt.name == "unapproved" {
				if got[0].ObjectUID != uid+"-webhook" || got[0].Signer != devpki.DefaultSigner || !strings.Contains(got[0].Message, "is not approved") {
					t.Errorf("%s: record %+v, want the object, its signer and the reason it is refused", tt.name, got[0])
				}
				continue
			}
			counted[fmt.Sprintf(`reason=%q,signer=%q`, tt.reason, tt.signer)]++
			other := recs[uid+"-grpc"]
			if len(other) != 1 {
				t.Errorf("%s: gRPC ledger records %+v, want one", tt.name, other)
				continue
			}
			if a, b := sameDecision(got[0]), sameDecision(other[0]); !reflect.DeepEqual(a, b) {
				t.Errorf("%s: the doors' records differ beyond the object UID:\nwebhook %+v\n   gRPC %+v", tt.name, a, b)
			}
		}
		_, metrics := httpGet(t, w.srv.HTTPAddr(), "/metrics")
		for labels, n := range counted {
			if want := fmt.Sprintf("signet_server_refusals_total{%s} %d\n", labels, n); !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		for code, n := range map[int]int{http.StatusForbidden: 1, http.StatusBadRequest: 5, http.StatusNotFound: 1} {
			if want := fmt.Sprintf(`signet_server_webhook_requests_total{code="%d"} %d`, code, n); !strings.Contains(metrics, want+"\n") {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}

// sameDecision is r without what tells two records of one decision apart: its place in the
// ledger and the object UID (and the idempotency key made from it).
func sameDecision(r ledger.Record) ledger.Record {
	r.Seq, r.Time, r.PrevHash, r.Hash = 0, time.Time{}, "", ""
	r.ObjectUID, r.IdempotencyKey = "", ""
	return r
}

// TestWebhookRequiresClientCertificate: without a client certificate, with one from another
// CA, or with one whose identity is not configured, the handshake fails and no request
// reaches the handler; the refusal is logged as on gRPC.
func TestWebhookRequiresClientCertificate(t *testing.T) {
	t.Parallel()
	w := startWebhook(t, nil)
	otherCA := testpki.CA(t)
	otherKey := testpki.Key(t, testpki.P256)
	otherCert := otherCA.Sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: devpki.ClientName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, otherKey.Public())
	request, _ := servingCSR(t)
	for i, tt := range []struct {
		name  string
		certs []tls.Certificate
	}{
		{"no client certificate", nil},
		{"certificate from another CA", []tls.Certificate{{Certificate: [][]byte{otherCert.Raw}, PrivateKey: otherKey}}},
		{"identity not configured", []tls.Certificate{w.clientCert(t, "stranger")}},
	} {
		uid := fmt.Sprintf("uid-handshake-%d", i)
		req, err := http.NewRequestWithContext(callContext(t), http.MethodPost, w.url, bytes.NewReader(webhooktest.JSON(t, csrObject(uid, request))))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := w.contractClient(t, tt.certs...).Do(req)
		if err == nil {
			_ = resp.Body.Close()
			t.Fatalf("%s: answered %d, want a failed handshake", tt.name, resp.StatusCode)
		}
		t.Logf("%s: refused as expected: %v", tt.name, err)
		if w.logs.Contains(uid) {
			t.Errorf("%s: the handler saw the request", tt.name)
		}
	}
	if !w.logs.Contains("refused a TLS client") || !w.logs.Contains(`unknown client \"stranger\"`) {
		t.Error("the refused handshakes were not logged")
	}
	if len(w.records(t)) != 0 {
		t.Error("a refused handshake reached the ledger")
	}
}

// TestWebhookRateLimited: past the client's rate limit the answer is 429 RESOURCE_EXHAUSTED
// with Retry-After.
func TestWebhookRateLimited(t *testing.T) {
	t.Parallel()
	w := startWebhook(t, func(c *config.Config) { c.Clients[0].RateLimit = &access.Rate{PerSecond: 0.001, Burst: 1} })
	hc := w.contractClient(t, w.devClient(t))
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		request, _ := servingCSR(t)
		resp, data := webhooktest.PostRaw(t, hc, http.MethodPost, w.url, "application/json", bytes.NewReader(webhooktest.JSON(t, csrObject(fmt.Sprintf("uid-rate-%d", i), request))))
		if resp.StatusCode != want {
			t.Fatalf("request %d: %d %s, want %d", i, resp.StatusCode, data, want)
		}
		if want != http.StatusTooManyRequests {
			continue
		}
		var g webhooktest.ErrorBody
		if json.Unmarshal(data, &g) != nil || g.Error.Status != "RESOURCE_EXHAUSTED" || g.Reason() != "RATE_LIMITED" || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("rate limited: %s, Retry-After %q; want RESOURCE_EXHAUSTED RATE_LIMITED and Retry-After 1", data, resp.Header.Get("Retry-After"))
		}
	}
}

// TestWebhookOffByDefault: without webhook.address nothing listens.
func TestWebhookOffByDefault(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	if addr := s.srv.WebhookAddr(); addr != "" {
		t.Errorf("webhook listens on %s without an address configured", addr)
	}
}

// TestWebhookServesReloadedCertificate: a TLS reload applies to the webhook as to gRPC.
func TestWebhookServesReloadedCertificate(t *testing.T) {
	t.Parallel()
	w := startWebhook(t, nil)
	tlsCAKey, err := pemfile.ParsePrivateKeyPEM(w.read(t, "tls-ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	tlsCA := &testpki.Authority{Cert: parsePEMCerts(t, w.read(t, devpki.TLSCACert))[0], Key: tlsCAKey}
	key := testpki.Key(t, testpki.P256)
	cert := tlsCA.Sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "rotated-server"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, key.Public())
	replacePair(t, w.dir, devpki.ServerCert, "server.key", cert, key)
	w.srv.Reload(context.Background())
	clientTLS := w.clientTLS(t, w.devClient(t))
	clientTLS.NextProtos = []string{"h2", "http/1.1"}
	conn, err := tls.Dial("tcp", w.srv.WebhookAddr(), clientTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; got != "rotated-server" {
		t.Fatalf("webhook presents %q after reload, want rotated-server", got)
	}
	if got := conn.ConnectionState().NegotiatedProtocol; got != "h2" {
		t.Errorf("ALPN negotiated %q, want h2", got)
	}
}

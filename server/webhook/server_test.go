package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/servertest"
	"github.com/signet-pki/signet/server/webhook/webhooktest"
)

// The webhook's input handling on a real server (servertest, the dev PKI), with a client
// written to docs/webhook.md. server/webhook_test.go has the round trip through the upstream
// client, the comparison with gRPC and the handshake.

// running is a dev server with the webhook on, its body limit at the floor.
type running struct {
	url       string
	ledgerDir string
	tls       *tls.Config // the dev client's
}

func start(t *testing.T) *running {
	t.Helper()
	cfg, dir := servertest.DevConfig(t, devpki.Options{})
	cfg.Webhook = config.Webhook{Address: "127.0.0.1:0", MaxRequestBytes: config.MinWebhookRequestBytes}
	r := servertest.Start(t, cfg, slog.New(slog.DiscardHandler))
	tlsCfg, err := devpki.ClientTLSConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &running{url: "https://" + r.WebhookAddr() + "/", ledgerDir: cfg.Ledger.Dir, tls: tlsCfg}
}

// client is an HTTP/2 (or HTTP/1.1) client with the dev client certificate, closed before
// the server stops.
func (w *running) client(t *testing.T, h2 bool) *http.Client {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: w.tls.Clone(), ForceAttemptHTTP2: h2}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// records returns the ledger's records by object UID.
func (w *running) records(t *testing.T) map[string][]ledger.Record {
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

func callContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// servingCSR is a fresh P-256 request for web.default.svc.
func servingCSR(t *testing.T) []byte {
	t.Helper()
	return testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "web"}, DNSNames: []string{"web.default.svc"}})
}

// csrObject is an approved CertificateSigningRequest for the dev signer.
func csrObject(uid string, request []byte) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		TypeMeta:   metav1.TypeMeta{APIVersion: "certificates.k8s.io/v1", Kind: "CertificateSigningRequest"},
		ObjectMeta: metav1.ObjectMeta{Name: "csr-" + uid, UID: types.UID(uid)},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: devpki.DefaultSigner,
			Request:    request,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
			Username:   "system:serviceaccount:default:web",
		},
		Status: certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{
			{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue},
		}},
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestWebhookBadInput: what is not an approved certificates.k8s.io/v1
// CertificateSigningRequest in JSON gets a 4xx with a reason, and nothing is issued or
// recorded; another method or path gets 405 or 404 in the same shape.
func TestWebhookBadInput(t *testing.T) {
	t.Parallel()
	w := start(t)
	hc := w.client(t, true)
	request := servingCSR(t)
	object := func(uid string, modify func(*certificatesv1.CertificateSigningRequest)) string {
		c := csrObject(uid, request)
		modify(c)
		return string(mustJSON(t, c))
	}
	condition := func(ct certificatesv1.RequestConditionType) func(*certificatesv1.CertificateSigningRequest) {
		return func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: ct, Status: corev1.ConditionTrue})
		}
	}
	good := object("uid-bad-dup", func(*certificatesv1.CertificateSigningRequest) {})
	tests := []struct {
		name, method, path, contentType, body string
		httpStatus                            int
		status, reason, message               string
	}{
		{"not JSON", "POST", "/", "application/json", "-----BEGIN CERTIFICATE REQUEST-----", 400, "INVALID_ARGUMENT", "MALFORMED_REQUEST", "not a JSON CertificateSigningRequest"},
		{"empty body", "POST", "/", "application/json", "", 400, "INVALID_ARGUMENT", "MALFORMED_REQUEST", "not a JSON CertificateSigningRequest"},
		{"trailing data", "POST", "/", "application/json", good + "{}", 400, "INVALID_ARGUMENT", "MALFORMED_REQUEST", "not a JSON CertificateSigningRequest"},
		{"duplicate field", "POST", "/", "application/json", strings.Replace(good, `"signerName":`, `"signerName":"example.com/other","signerName":`, 1),
			400, "INVALID_ARGUMENT", "MALFORMED_REQUEST", `duplicate field "spec.signerName"`},
		{"wrong kind", "POST", "/", "application/json", object("uid-bad-kind", func(c *certificatesv1.CertificateSigningRequest) { c.Kind = "PodCertificateRequest" }),
			400, "INVALID_ARGUMENT", "MALFORMED_REQUEST", `kind "PodCertificateRequest"`},
		{"v1beta1", "POST", "/", "application/json", object("uid-bad-version", func(c *certificatesv1.CertificateSigningRequest) { c.APIVersion = "certificates.k8s.io/v1beta1" }),
			400, "INVALID_ARGUMENT", "MALFORMED_REQUEST", `apiVersion "certificates.k8s.io/v1beta1"`},
		{"not JSON content type", "POST", "/", "application/vnd.kubernetes.protobuf", good, 415, "INVALID_ARGUMENT", "MALFORMED_REQUEST", "accepts application/json"},
		{"denied", "POST", "/", "application/json", object("uid-bad-denied", condition(certificatesv1.CertificateDenied)), 403, "FAILED_PRECONDITION", "POLICY_VIOLATION", "is denied"},
		{"failed", "POST", "/", "application/json", object("uid-bad-failed", condition(certificatesv1.CertificateFailed)), 403, "FAILED_PRECONDITION", "POLICY_VIOLATION", "has failed"},
		{"approval withdrawn", "POST", "/", "application/json", object("uid-bad-false", func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions[0].Status = corev1.ConditionFalse
		}),
			403, "FAILED_PRECONDITION", "POLICY_VIOLATION", "is not approved"},
		{"already signed", "POST", "/", "application/json", object("uid-bad-signed", func(c *certificatesv1.CertificateSigningRequest) { c.Status.Certificate = []byte("x") }),
			403, "FAILED_PRECONDITION", "POLICY_VIOLATION", "already has a certificate"},
		{"no UID", "POST", "/", "", object("", func(*certificatesv1.CertificateSigningRequest) {}), 400, "INVALID_ARGUMENT", "MALFORMED_REQUEST", "object.uid is required"},
		{"GET", "GET", "/", "", "", 405, "UNIMPLEMENTED", "", "POST only"},
		{"other path", "POST", "/sign", "application/json", good, 404, "NOT_FOUND", "", "served at /"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url := strings.TrimSuffix(w.url, "/") + tt.path
			resp, body := webhooktest.PostError(t, hc, tt.method, url, tt.contentType, strings.NewReader(tt.body))
			if resp.StatusCode != tt.httpStatus || body.Error.Status != tt.status || body.Reason() != tt.reason || !strings.Contains(body.Error.Message, tt.message) {
				t.Errorf("answer %d %s %s %q; want %d %s %s and a message with %q", resp.StatusCode, body.Error.Status, body.Reason(), body.Error.Message,
					tt.httpStatus, tt.status, tt.reason, tt.message)
			}
			if resp.Header.Get("Retry-After") != "" {
				t.Errorf("a final refusal carries Retry-After %s", resp.Header.Get("Retry-After"))
			}
		})
	}
	t.Cleanup(func() {
		for uid, recs := range w.records(t) {
			for _, r := range recs {
				if r.Decision == ledger.Issued || (uid != "" && strings.HasPrefix(uid, "uid-bad-")) {
					t.Errorf("bad input reached the ledger: %+v", r)
				}
			}
		}
	})
}

// endless is a body that never ends, counting what was read from it.
type endless struct{ n atomic.Int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	e.n.Add(int64(len(p)))
	return len(p), nil
}

// TestWebhookBodyLimit: a body over webhook.maxRequestBytes gets 413 without being read whole
// (a body that never ends is answered; one whose Content-Length is over the limit is answered
// before it is sent), over HTTP/2 and HTTP/1.1; a body of exactly the limit is read.
func TestWebhookBodyLimit(t *testing.T) {
	t.Parallel()
	w := start(t)
	const limit = config.MinWebhookRequestBytes
	for _, h2 := range []bool{true, false} {
		hc := w.client(t, h2)
		for _, declared := range []bool{false, true} {
			body := &endless{}
			req, err := http.NewRequestWithContext(callContext(t), http.MethodPost, w.url, io.NopCloser(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if declared {
				req.ContentLength = 1 << 40
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("h2 %t, Content-Length %t: %v", h2, declared, err)
			}
			data, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			var g webhooktest.ErrorBody
			if resp.StatusCode != http.StatusRequestEntityTooLarge || json.Unmarshal(data, &g) != nil || g.Reason() != "MALFORMED_REQUEST" ||
				!strings.Contains(g.Error.Message, fmt.Sprint(limit)) {
				t.Errorf("h2 %t, Content-Length %t: answer %d %q, want 413 naming the limit", h2, declared, resp.StatusCode, data)
			}
			if (resp.ProtoMajor == 2) != h2 {
				t.Errorf("answered over %s, want HTTP/2 %t", resp.Proto, h2)
			}
			// What the client sent before the answer: within the server's limit plus its flow
			// control window (HTTP/2) or socket buffers (HTTP/1.1); the server read at most
			// limit+1 bytes of it.
			if n := body.n.Load(); n > limit+8<<20 {
				t.Errorf("h2 %t, Content-Length %t: the client sent %d bytes before the answer", h2, declared, n)
			}
		}
	}
	hc := w.client(t, true)
	request := servingCSR(t)
	exact := mustJSON(t, csrObject("uid-limit-exact", request))
	exact = append(exact, bytes.Repeat([]byte(" "), limit-len(exact))...)
	if resp, data := webhooktest.PostRaw(t, hc, http.MethodPost, w.url, "application/json", bytes.NewReader(exact)); resp.StatusCode != http.StatusOK {
		t.Errorf("a body of exactly the limit: %d %s", resp.StatusCode, data)
	}
	over := append(exact, ' ')
	if resp, _ := webhooktest.PostError(t, hc, http.MethodPost, w.url, "application/json", bytes.NewReader(over)); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body one byte over the limit: %d, want 413", resp.StatusCode)
	}
}

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
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/access"
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
	httpAddr  string // /metrics
	ledgerDir string
	tls       *tls.Config // the dev client's
}

// start runs the server; modify may change its configuration first (Clients[0] is the dev
// client).
func start(t *testing.T, modify ...func(*config.Config)) *running {
	t.Helper()
	cfg, dir := servertest.DevConfig(t, devpki.Options{})
	cfg.Webhook = config.Webhook{Address: "127.0.0.1:0", MaxRequestBytes: config.MinWebhookRequestBytes}
	for _, m := range modify {
		m(cfg)
	}
	r := servertest.Start(t, cfg, slog.New(slog.DiscardHandler))
	tlsCfg, err := devpki.ClientTLSConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &running{url: "https://" + r.WebhookAddr() + "/", httpAddr: r.HTTPAddr(), ledgerDir: cfg.Ledger.Dir, tls: tlsCfg}
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
	for _, r := range w.ledger(t) {
		out[r.ObjectUID] = append(out[r.ObjectUID], r)
	}
	return out
}

// ledger returns the ledger's records in order.
func (w *running) ledger(t *testing.T) []ledger.Record {
	t.Helper()
	var out []ledger.Record
	if err := ledger.Replay(w.ledgerDir, time.Time{}, func(r ledger.Record) error {
		out = append(out, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// metrics scrapes /metrics: the value of every counter and gauge series, and the count of
// every histogram series (as name_count), keyed as the exposition writes them with labels in
// name order, e.g. signet_server_webhook_requests_total{code="400"}.
func (w *running) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + w.httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	out := map[string]float64{}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			slices.Sort(labels)
			key := "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Counter != nil:
				out[name+key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[name+key] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[name+"_count"+key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// wantMetrics fails t for every series of want whose value in got differs (a missing series
// is 0).
func wantMetrics(t *testing.T, got, want map[string]float64) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			t.Errorf("%s = %v, want %v", k, got[k], want[k])
		}
	}
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

// TestWebhookBadInput: what is not an approved certificates.k8s.io/v1
// CertificateSigningRequest in JSON gets a 4xx with a reason, and nothing is issued; each
// refusal is one refused ledger record with the client's identity, the reason, the answered
// message (and the size of a body that could not be decoded), and the object's UID, signer and
// requester when the CSR decoded; the core counts it as a refusal (signer "unknown" when no
// signer is known). Another method or path gets 501 UNIMPLEMENTED (with Allow: POST) or 404
// NOT_FOUND in the same shape, and no record. Every answer is a canonical pair (webhooktest).
// The webhook counts every answer by HTTP status.
func TestWebhookBadInput(t *testing.T) {
	t.Parallel()
	w := start(t)
	hc := w.client(t, true)
	request := servingCSR(t)
	object := func(uid string, modify func(*certificatesv1.CertificateSigningRequest)) string {
		c := csrObject(uid, request)
		modify(c)
		return string(webhooktest.JSON(t, c))
	}
	condition := func(ct certificatesv1.RequestConditionType) func(*certificatesv1.CertificateSigningRequest) {
		return func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: ct, Status: corev1.ConditionTrue})
		}
	}
	// What the record knows of the request.
	const (
		noRecord     = ""       // no record
		bodyRecord   = "body"   // a body that could not be decoded: the client, reason and size only
		objectRecord = "object" // a decoded CSR: also its UID (the test's uid), signer and requester
	)
	good := object("uid-bad-dup", func(*certificatesv1.CertificateSigningRequest) {})
	tests := []struct {
		name, method, path, contentType, body string
		httpStatus                            int
		status, reason, message               string
		recorded, uid                         string
	}{
		{"not JSON", "POST", "/", "application/json", "-----BEGIN CERTIFICATE REQUEST-----", 400, "INVALID_ARGUMENT", "MALFORMED_REQUEST", "not a JSON CertificateSigningRequest", bodyRecord, ""},
		{"empty body", "POST", "/", "application/json", "", 400, "INVALID_ARGUMENT", "MALFORMED_REQUEST", "not a JSON CertificateSigningRequest", bodyRecord, ""},
		{"trailing data", "POST", "/", "application/json", good + "{}", 400, "INVALID_ARGUMENT", "MALFORMED_REQUEST", "not a JSON CertificateSigningRequest", bodyRecord, ""},
		{"duplicate field", "POST", "/", "application/json", strings.Replace(good, `"signerName":`, `"signerName":"example.com/other","signerName":`, 1),
			400, "INVALID_ARGUMENT", "MALFORMED_REQUEST", `duplicate field "spec.signerName"`, bodyRecord, ""},
		{"wrong kind", "POST", "/", "application/json", object("uid-bad-kind", func(c *certificatesv1.CertificateSigningRequest) { c.Kind = "PodCertificateRequest" }),
			400, "INVALID_ARGUMENT", "MALFORMED_REQUEST", `kind "PodCertificateRequest"`, bodyRecord, ""},
		{"v1beta1", "POST", "/", "application/json", object("uid-bad-version", func(c *certificatesv1.CertificateSigningRequest) { c.APIVersion = "certificates.k8s.io/v1beta1" }),
			400, "INVALID_ARGUMENT", "MALFORMED_REQUEST", `apiVersion "certificates.k8s.io/v1beta1"`, bodyRecord, ""},
		{"not JSON content type", "POST", "/", "application/vnd.kubernetes.protobuf", good, 400, "INVALID_ARGUMENT", "MALFORMED_REQUEST", "accepts application/json", bodyRecord, ""},
		{"denied", "POST", "/", "application/json", object("uid-bad-denied", condition(certificatesv1.CertificateDenied)), 400, "FAILED_PRECONDITION", "POLICY_VIOLATION", "is denied", objectRecord, "uid-bad-denied"},
		{"failed", "POST", "/", "application/json", object("uid-bad-failed", condition(certificatesv1.CertificateFailed)), 400, "FAILED_PRECONDITION", "POLICY_VIOLATION", "has failed", objectRecord, "uid-bad-failed"},
		{"approval withdrawn", "POST", "/", "application/json", object("uid-bad-false", func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions[0].Status = corev1.ConditionFalse
		}),
			400, "FAILED_PRECONDITION", "POLICY_VIOLATION", "is not approved", objectRecord, "uid-bad-false"},
		{"already signed", "POST", "/", "application/json", object("uid-bad-signed", func(c *certificatesv1.CertificateSigningRequest) { c.Status.Certificate = []byte("x") }),
			400, "FAILED_PRECONDITION", "POLICY_VIOLATION", "already has a certificate", objectRecord, "uid-bad-signed"},
		// The core's own refusal, recorded as before.
		{"no UID", "POST", "/", "", object("", func(*certificatesv1.CertificateSigningRequest) {}), 400, "INVALID_ARGUMENT", "MALFORMED_REQUEST", "object.uid is required", objectRecord, ""},
		{"GET", "GET", "/", "", "", 501, "UNIMPLEMENTED", "", "POST only", noRecord, ""},
		{"other path", "POST", "/sign", "application/json", good, 404, "NOT_FOUND", "", "served at /", noRecord, ""},
	}
	// Sequential, so that each case's records are the ones appended during it.
	codes := map[int]float64{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(w.ledger(t))
			url := strings.TrimSuffix(w.url, "/") + tt.path
			resp, answer := webhooktest.PostError(t, hc, tt.method, url, tt.contentType, strings.NewReader(tt.body))
			codes[resp.StatusCode]++
			if resp.StatusCode != tt.httpStatus || answer.Error.Status != tt.status || answer.Reason() != tt.reason || !strings.Contains(answer.Error.Message, tt.message) {
				t.Errorf("answer %d %s %s %q; want %d %s %s and a message with %q", resp.StatusCode, answer.Error.Status, answer.Reason(), answer.Error.Message,
					tt.httpStatus, tt.status, tt.reason, tt.message)
			}
			if resp.Header.Get("Retry-After") != "" {
				t.Errorf("a final refusal carries Retry-After %s", resp.Header.Get("Retry-After"))
			}
			recs := w.ledger(t)[before:]
			if tt.recorded == noRecord {
				if len(recs) != 0 {
					t.Errorf("not a signing request, yet recorded: %+v", recs)
				}
				return
			}
			if len(recs) != 1 {
				t.Fatalf("%d records, want one refusal: %+v", len(recs), recs)
			}
			r := recs[0]
			want := ledger.Record{Decision: ledger.Refused, Reason: tt.reason, Client: devpki.ClientName, ObjectKind: "CertificateSigningRequest"}
			if tt.recorded == objectRecord {
				want.ObjectUID, want.Signer, want.Requester = tt.uid, devpki.DefaultSigner, "system:serviceaccount:default:web"
			}
			if r.Decision != want.Decision || r.Reason != want.Reason || r.Client != want.Client || r.ObjectKind != want.ObjectKind ||
				r.ObjectUID != want.ObjectUID || r.Signer != want.Signer || r.Requester != want.Requester || r.Certificate != "" || r.Serial != "" {
				t.Errorf("record %+v; want %+v", r, want)
			}
			switch {
			case !strings.HasPrefix(r.Message, answer.Error.Message):
				t.Errorf("record message %q is not the answered %q", r.Message, answer.Error.Message)
			case tt.recorded == bodyRecord && !strings.HasSuffix(r.Message, fmt.Sprintf(" %d bytes)", len(tt.body))) &&
				!strings.HasSuffix(r.Message, fmt.Sprintf("(Content-Length %d)", len(tt.body))):
				t.Errorf("record message %q does not give the body's size, %d bytes", r.Message, len(tt.body))
			}
		})
	}
	for _, r := range w.ledger(t) {
		if r.Decision != ledger.Refused {
			t.Errorf("bad input got a record other than a refusal: %+v", r)
		}
	}
	got := w.metrics(t)
	want := map[string]float64{
		// The core counts the webhook's refusals as its own: unknown is the signer of a body
		// that named none.
		`signet_server_refusals_total{reason="MALFORMED_REQUEST",signer="unknown"}`:                      7,
		`signet_server_refusals_total{reason="MALFORMED_REQUEST",signer="` + devpki.DefaultSigner + `"}`: 1,
		`signet_server_refusals_total{reason="POLICY_VIOLATION",signer="` + devpki.DefaultSigner + `"}`:  4,
		`signet_server_requests_total{outcome="refused",signer="unknown"}`:                               7,
		`signet_server_requests_total{outcome="refused",signer="` + devpki.DefaultSigner + `"}`:          5,
		`signet_server_requests_total{outcome="issued",signer="` + devpki.DefaultSigner + `"}`:           0,
		"signet_server_ledger_records_total{}":                                                           12,
	}
	for code, n := range codes {
		want[fmt.Sprintf(`signet_server_webhook_requests_total{code="%d"}`, code)] = n
		want[fmt.Sprintf(`signet_server_webhook_request_duration_seconds_count{code="%d"}`, code)] = n
	}
	wantMetrics(t, got, want)
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

// TestWebhookBodyLimit: a body over webhook.maxRequestBytes gets 400 INVALID_ARGUMENT
// MALFORMED_REQUEST naming the limit without being read whole
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
			if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(data, &g) != nil || g.Error.Status != "INVALID_ARGUMENT" || g.Reason() != "MALFORMED_REQUEST" ||
				!strings.Contains(g.Error.Message, fmt.Sprint(limit)) {
				t.Errorf("h2 %t, Content-Length %t: answer %d %q, want 400 naming the limit", h2, declared, resp.StatusCode, data)
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
	exact := webhooktest.JSON(t, csrObject("uid-limit-exact", request))
	exact = append(exact, bytes.Repeat([]byte(" "), limit-len(exact))...)
	if resp, data := webhooktest.PostRaw(t, hc, http.MethodPost, w.url, "application/json", bytes.NewReader(exact)); resp.StatusCode != http.StatusOK {
		t.Errorf("a body of exactly the limit: %d %s", resp.StatusCode, data)
	}
	over := append(exact, ' ')
	if resp, _ := webhooktest.PostError(t, hc, http.MethodPost, w.url, "application/json", bytes.NewReader(over)); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a body one byte over the limit: %d, want 400", resp.StatusCode)
	}
	// Each of them is a refusal in the ledger, with the client and the limit; the body of exactly
	// the limit was issued.
	refused, issued := 0, 0
	for _, r := range w.ledger(t) {
		switch {
		case r.Decision == ledger.Issued && r.ObjectUID == "uid-limit-exact":
			issued++
		case r.Decision == ledger.Refused && r.Reason == "MALFORMED_REQUEST" && r.Client == devpki.ClientName && r.ObjectUID == "" &&
			strings.Contains(r.Message, fmt.Sprintf("more than the %d bytes this webhook accepts", limit)):
			refused++
		default:
			t.Errorf("unexpected record %+v", r)
		}
	}
	if refused != 5 || issued != 1 {
		t.Errorf("%d refusals and %d issuances in the ledger, want 5 (one per body over the limit) and 1", refused, issued)
	}
	wantMetrics(t, w.metrics(t), map[string]float64{
		`signet_server_webhook_requests_total{code="400"}`: 5,
		`signet_server_webhook_requests_total{code="200"}`: 1,
	})
}

// TestWebhookRefusalsRateLimited: the webhook's own refusals spend the client's rate limit as
// the core's do; past it, bad input gets 429 RESOURCE_EXHAUSTED with Retry-After and is not
// recorded. Another method or path is not a signing request: it spends nothing.
func TestWebhookRefusalsRateLimited(t *testing.T) {
	t.Parallel()
	w := start(t, func(c *config.Config) { c.Clients[0].RateLimit = &access.Rate{PerSecond: 0.001, Burst: 2} })
	hc := w.client(t, true)
	unapproved := csrObject("uid-rate-unapproved", servingCSR(t))
	unapproved.Status.Conditions = nil
	notApproved := string(webhooktest.JSON(t, unapproved))
	for i, tc := range []struct {
		method, contentType, body string
		want                      int
	}{
		{"GET", "", "", http.StatusNotImplemented},
		{"POST", "application/json", "not JSON", http.StatusBadRequest},
		{"POST", "application/json", notApproved, http.StatusBadRequest},
		// The client's two tokens are spent.
		{"POST", "application/json", "not JSON", http.StatusTooManyRequests},
		{"POST", "application/json", notApproved, http.StatusTooManyRequests},
		{"POST", "text/plain", "x", http.StatusTooManyRequests},
	} {
		resp, answer := webhooktest.PostError(t, hc, tc.method, w.url, tc.contentType, strings.NewReader(tc.body))
		if resp.StatusCode != tc.want {
			t.Fatalf("request %d: %d %q, want %d", i, resp.StatusCode, answer.Error.Message, tc.want)
		}
		if tc.want == http.StatusTooManyRequests && (answer.Error.Status != "RESOURCE_EXHAUSTED" || answer.Reason() != "RATE_LIMITED" ||
			resp.Header.Get("Retry-After") != "1" || !strings.Contains(answer.Error.Message, "client rate limit")) {
			t.Errorf("request %d: %s %s %q, Retry-After %q; want RESOURCE_EXHAUSTED RATE_LIMITED naming the client limit, Retry-After 1",
				i, answer.Error.Status, answer.Reason(), answer.Error.Message, resp.Header.Get("Retry-After"))
		}
	}
	recs := w.ledger(t)
	if len(recs) != 2 || recs[0].Reason != "MALFORMED_REQUEST" || recs[1].Reason != "POLICY_VIOLATION" || recs[1].ObjectUID != "uid-rate-unapproved" {
		t.Errorf("ledger %+v; want the two refusals within the rate limit only", recs)
	}
	wantMetrics(t, w.metrics(t), map[string]float64{
		`signet_server_webhook_requests_total{code="429"}`:                                           3,
		`signet_server_rate_limited_total{limit="client",signer="unknown"}`:                          2,
		`signet_server_rate_limited_total{limit="client",signer="` + devpki.DefaultSigner + `"}`:     1,
		`signet_server_requests_total{outcome="rate_limited",signer="unknown"}`:                      2,
		`signet_server_requests_total{outcome="rate_limited",signer="` + devpki.DefaultSigner + `"}`: 1,
		"signet_server_ledger_records_total{}":                                                       2,
	})
}

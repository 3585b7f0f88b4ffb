package webhook

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/keystore/keyerr"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/wire"
)

// fullCSR is a CertificateSigningRequest with every field the watcher forwards set.
func fullCSR() *certificatesv1.CertificateSigningRequest {
	seconds := int32(600)
	return &certificatesv1.CertificateSigningRequest{
		TypeMeta:   metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind},
		ObjectMeta: metav1.ObjectMeta{Name: "csr-1", UID: "uid-1"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName:        "example.com/serving",
			Request:           []byte("PEM"),
			ExpirationSeconds: &seconds,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageServerAuth},
			Username:          "alice",
			UID:               "alice-uid",
			Groups:            []string{"g1", "g2"},
			Extra:             map[string]certificatesv1.ExtraValue{"k": {"v1", "v2"}},
		},
		Status: certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{
			{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue},
		}},
	}
}

// TestCSRRequest: every field of the core's request is filled from the object, as the
// watcher forwards it. A field added to decision.CSR or issuance.Request and not filled fails
// the test, so that the webhook cannot silently drop what gRPC carries.
func TestCSRRequest(t *testing.T) {
	t.Parallel()
	got := CSRRequest(fullCSR())
	seconds := int32(600)
	want := decision.CSR{
		Object: decision.Object{UID: "uid-1", Name: "csr-1"},
		Request: issuance.Request{
			SignerName:        "example.com/serving",
			PEM:               []byte("PEM"),
			Usages:            []string{"server auth"},
			ExpirationSeconds: &seconds,
			Requester:         issuance.Requester{Username: "alice", UID: "alice-uid", Groups: []string{"g1", "g2"}, Extra: map[string][]string{"k": {"v1", "v2"}}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CSRRequest = %+v, want %+v", got, want)
	}
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		if v.Kind() == reflect.Struct {
			for i := range v.NumField() {
				walk(path+"."+v.Type().Field(i).Name, v.Field(i))
			}
			return
		}
		// Attested is what the server verified of the request's TPM evidence, never the
		// caller's to fill; NodeAddresses come from the Node, which a posted CSR does not carry.
		if v.IsZero() && path != "CSR.Request.Attested" && path != "CSR.Request.NodeAddresses" {
			t.Errorf("%s is not filled from the object", path)
		}
	}
	walk("CSR", reflect.ValueOf(got))
}

func TestDecodeCSR(t *testing.T) {
	t.Parallel()
	good, err := json.Marshal(fullCSR())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, body, want string // want "" for no error
	}{
		{"good", string(good), ""},
		{"unknown field ignored", strings.Replace(string(good), `"spec":{`, `"spec":{"newField":1,`, 1), ""},
		{"not JSON", "hello", "not a JSON CertificateSigningRequest"},
		{"JSON array", "[]", "not a JSON CertificateSigningRequest"},
		{"duplicate", strings.Replace(string(good), `"username":"alice"`, `"username":"alice","username":"root"`, 1), `duplicate field "spec.username"`},
		{"field name case", strings.Replace(string(good), `"username":`, `"userName":`, 1), ""},
		{"no kind", strings.Replace(string(good), `"kind":"CertificateSigningRequest",`, "", 1), `kind ""`},
		{"long kind", strings.Replace(string(good), `"kind":"CertificateSigningRequest"`, `"kind":"`+strings.Repeat("K", 10000)+`"`, 1), "K…"},
	} {
		csr := &certificatesv1.CertificateSigningRequest{}
		err := decodeCSR([]byte(tc.body), csr)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, issuance.ErrMalformedRequest)):
			t.Errorf("%s: decodeCSR = %v, want a malformed request saying %q", tc.name, err, tc.want)
		case tc.want != "" && len(err.Error()) > 2*shownBytes+300:
			t.Errorf("%s: the message is %d bytes long", tc.name, len(err.Error()))
		}
		if tc.name == "field name case" && csr.Spec.Username != "" {
			t.Errorf("userName was read as username: field names must be case-sensitive")
		}
	}
}

func TestCheckState(t *testing.T) {
	t.Parallel()
	cond := func(ct certificatesv1.RequestConditionType, st corev1.ConditionStatus) certificatesv1.CertificateSigningRequestCondition {
		return certificatesv1.CertificateSigningRequestCondition{Type: ct, Status: st}
	}
	approved := cond(certificatesv1.CertificateApproved, corev1.ConditionTrue)
	for _, tc := range []struct {
		name   string
		conds  []certificatesv1.CertificateSigningRequestCondition
		cert   []byte
		wantOK bool
		want   string
	}{
		{"approved", []certificatesv1.CertificateSigningRequestCondition{approved}, nil, true, ""},
		{"approved, status unset", []certificatesv1.CertificateSigningRequestCondition{cond(certificatesv1.CertificateApproved, "")}, nil, true, ""},
		{"no condition", nil, nil, false, "is not approved"},
		{"approved False", []certificatesv1.CertificateSigningRequestCondition{cond(certificatesv1.CertificateApproved, corev1.ConditionFalse)}, nil, false, "is not approved"},
		{"denied", []certificatesv1.CertificateSigningRequestCondition{approved, cond(certificatesv1.CertificateDenied, corev1.ConditionTrue)}, nil, false, "is denied"},
		{"failed", []certificatesv1.CertificateSigningRequestCondition{approved, cond(certificatesv1.CertificateFailed, corev1.ConditionTrue)}, nil, false, "has failed"},
		{"failed Unknown", []certificatesv1.CertificateSigningRequestCondition{approved, cond(certificatesv1.CertificateFailed, corev1.ConditionUnknown)}, nil, true, ""},
		{"signed", []certificatesv1.CertificateSigningRequestCondition{approved}, []byte("x"), false, "already has a certificate"},
	} {
		csr := fullCSR()
		csr.Status.Conditions, csr.Status.Certificate = tc.conds, tc.cert
		err := checkState(csr)
		if tc.wantOK != (err == nil) || (err != nil && (!strings.Contains(err.Error(), tc.want) || !errors.Is(err, issuance.ErrPolicyViolation))) {
			t.Errorf("%s: checkState = %v, want ok %t or a policy violation saying %q", tc.name, err, tc.wantOK, tc.want)
		}
	}
}

// TestAnswers: the error body of the core's errors (server/wire's status, the gRPC code's
// name, ErrorInfo reason, public message, Retry-After on the transient ones).
func TestAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err        error
		httpStatus int
		status     string
		reason     string
		message    string
		retryAfter string
	}{
		{fmt.Errorf("%w: bad PEM", issuance.ErrMalformedRequest), 400, "INVALID_ARGUMENT", "MALFORMED_REQUEST", "malformed request: bad PEM", ""},
		{fmt.Errorf("%w: CA:TRUE", issuance.ErrPolicyViolation), 400, "FAILED_PRECONDITION", "POLICY_VIOLATION", "policy violation: CA:TRUE", ""},
		{fmt.Errorf("signing: %w: pkcs11 gone", keyerr.ErrUnavailable), 503, "UNAVAILABLE", "KEY_UNAVAILABLE", "cannot be used now", "5"},
		{errors.New("secret detail"), 500, "INTERNAL", "INTERNAL", "internal error", "5"},
		{context.Canceled, 499, "CANCELLED", "", "cancelled", ""},
	} {
		rec := httptest.NewRecorder()
		writeError(rec, answerFor(tc.err))
		var body ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		e := body.Error
		reason := ""
		if len(e.Details) == 1 && e.Details[0].Type == errorInfoType && e.Details[0].Domain == "signet.dev" {
			reason = e.Details[0].Reason
		}
		if rec.Code != tc.httpStatus || e.Code != tc.httpStatus || e.Status != tc.status || reason != tc.reason ||
			!strings.Contains(e.Message, tc.message) || rec.Header().Get("Retry-After") != tc.retryAfter {
			t.Errorf("%v: answered %d %s (Retry-After %q), want %d %s, reason %s, message with %q, Retry-After %q",
				tc.err, rec.Code, rec.Body, rec.Header().Get("Retry-After"), tc.httpStatus, tc.status, tc.reason, tc.message, tc.retryAfter)
		}
		if strings.Contains(e.Message, "secret detail") || strings.Contains(e.Message, "pkcs11 gone") {
			t.Errorf("%v: the detail of an internal failure reached the caller: %q", tc.err, e.Message)
		}
	}
}

// TestTLSConfig: ALPN offers h2 and HTTP/1.1 in the configuration returned for every client,
// and nothing else of the base changes.
func TestTLSConfig(t *testing.T) {
	t.Parallel()
	inner := &tls.Config{MinVersion: tls.VersionTLS13, ClientAuth: tls.RequireAndVerifyClientCert}
	base := &tls.Config{MinVersion: tls.VersionTLS13, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return inner, nil }}
	cfg := TLSConfig(base)
	got, err := cfg.GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.NextProtos, []string{"h2", "http/1.1"}) || got.ClientAuth != tls.RequireAndVerifyClientCert ||
		!reflect.DeepEqual(cfg.NextProtos, []string{"h2", "http/1.1"}) {
		t.Errorf("NextProtos %v / %v, ClientAuth %v", cfg.NextProtos, got.NextProtos, got.ClientAuth)
	}
	if inner.NextProtos != nil || base.NextProtos != nil {
		t.Error("TLSConfig changed the configurations it was given")
	}
}

// TestNew refuses options without a core, TLS or a positive limit.
func TestNew(t *testing.T) {
	t.Parallel()
	core := decision.New(nil, decision.Access{}, decision.Options{})
	for _, opts := range []Options{
		{TLS: &tls.Config{}, MaxRequestBytes: 1},
		{Core: core, MaxRequestBytes: 1},
		{Core: core, TLS: &tls.Config{}},
	} {
		if _, err := New(opts); err == nil {
			t.Errorf("New(%+v) accepted", opts)
		}
	}
}

// TestHandlerWithoutClientCertificate: a server wired without client verification refuses
// every request with 401 rather than deciding for an unnamed caller.
func TestHandlerWithoutClientCertificate(t *testing.T) {
	t.Parallel()
	s, err := New(Options{Core: decision.New(nil, decision.Access{}, decision.Options{}), TLS: &tls.Config{}, MaxRequestBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, strings.NewReader("{}")))
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), `"status":"UNAUTHENTICATED"`) {
		t.Errorf("answered %d %s, want 401 UNAUTHENTICATED", rec.Code, rec.Body)
	}
}

// TestDocumentedStatuses keeps docs/webhook.md's table of the core's reasons equal to
// server/wire's: every reason has its row with its HTTP status and status name.
func TestDocumentedStatuses(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/webhook.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range decision.Reasons {
		a := wire.For(r)
		row := fmt.Sprintf("| `%s` | %d | `%s` |", r, a.HTTPStatus, codeName(a.Code))
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/webhook.md has no row %q", row)
		}
	}
}

package signerapi_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/idempotency"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/profile"
	"github.com/signet-pki/signet/server/signerapi"
)

const signerName = "example.com/serving"

func newService(t *testing.T, ca *testpki.Authority, log *slog.Logger) *signerapi.Service {
	t.Helper()
	prof, err := profile.New(profile.Spec{Name: profile.NameLegacyUnknown}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	is, err := issuance.NewIssuer(issuance.IssuerOptions{
		SignerName: signerName,
		CA:         &issuance.CA{Certificate: ca.Cert, Key: ca.Key},
		Policy:     prof,
	})
	if err != nil {
		t.Fatal(err)
	}
	led, err := ledger.Open(t.TempDir(), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = led.Close() })
	return signerapi.New(decision.New([]*decision.Signer{{Issuer: is, Profile: prof}}, decision.Access{},
		decision.Options{Log: log, Ledger: led, Store: idempotency.New(idempotency.Options{})}))
}

func errorInfo(t *testing.T, err error) (codes.Code, string, *errdetails.ErrorInfo) {
	t.Helper()
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return st.Code(), st.Message(), info
		}
	}
	t.Fatalf("status %v has no ErrorInfo", st)
	return 0, "", nil
}

// TestInternalErrorsStayInTheLog: a failure that is not the requester's fault (here an
// expired CA) reaches the client as Internal with a generic message; the detail is logged.
func TestInternalErrorsStayInTheLog(t *testing.T) {
	t.Parallel()
	expired := testpki.CA(t, func(c *x509.Certificate) { c.NotAfter = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC) })
	var logs bytes.Buffer
	svc := newService(t, expired, slog.New(slog.NewJSONHandler(&logs, nil)))
	_, err := svc.SignCertificateSigningRequest(context.Background(), &signetv1.SignCertificateSigningRequestRequest{
		SignerName: signerName,
		Request:    testpki.CSR(t, testpki.Key(t, testpki.P256), nil),
		Usages:     []string{"digital signature"},
		Requester:  &signetv1.Requester{Username: "alice"},
		Object:     &signetv1.KubernetesObject{Uid: "uid-1"},
	})
	code, msg, info := errorInfo(t, err)
	if code != codes.Internal || info.GetReason() != "INTERNAL" || info.GetDomain() != signetv1.ErrorDomain {
		t.Errorf("got %s %s/%s, want Internal INTERNAL/%s", code, info.GetReason(), info.GetDomain(), signetv1.ErrorDomain)
	}
	if strings.Contains(msg, "expired") || !strings.Contains(msg, "internal error") {
		t.Errorf("client message %q leaks the detail or is not the generic one", msg)
	}
	if !strings.Contains(logs.String(), "expired") || !strings.Contains(logs.String(), `"object_uid":"uid-1"`) {
		t.Errorf("server log lacks the detail and the object UID:\n%s", logs.String())
	}
}

func TestRefusalsCarryReasonAndMessage(t *testing.T) {
	t.Parallel()
	svc := newService(t, testpki.CA(t), slog.New(slog.DiscardHandler))
	key := testpki.Key(t, testpki.P256)
	tests := []struct {
		signer, usage string
		csr           []byte
		code          codes.Code
		reason, msg   string
	}{
		{signerName, "teleport", testpki.CSR(t, key, nil), codes.FailedPrecondition, "POLICY_VIOLATION", `unknown usage "teleport"`},
		{signerName, "digital signature", []byte("x"), codes.InvalidArgument, "MALFORMED_REQUEST", "no PEM block"},
		{signerName, "digital signature", testpki.BreakSignature(t, testpki.CSR(t, key, nil)), codes.InvalidArgument, "INVALID_SIGNATURE", "signature"},
		{signerName, "digital signature", testpki.CSR(t, testpki.Key(t, testpki.P224), nil), codes.InvalidArgument, "UNSUPPORTED_KEY", "P-224"},
		{"example.com/other", "digital signature", testpki.CSR(t, key, nil), codes.NotFound, "UNKNOWN_SIGNER", `"example.com/other"`},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			t.Parallel()
			_, err := svc.SignCertificateSigningRequest(context.Background(), &signetv1.SignCertificateSigningRequestRequest{
				SignerName: tt.signer, Request: tt.csr, Usages: []string{tt.usage},
				Requester: &signetv1.Requester{Username: "alice"},
				Object:    &signetv1.KubernetesObject{Uid: "uid-" + tt.reason},
			})
			code, msg, info := errorInfo(t, err)
			if code != tt.code || info.GetReason() != tt.reason || info.GetDomain() != signetv1.ErrorDomain {
				t.Errorf("got %s %s/%s, want %s %s/%s", code, info.GetReason(), info.GetDomain(), tt.code, tt.reason, signetv1.ErrorDomain)
			}
			if !strings.Contains(msg, tt.msg) {
				t.Errorf("message %q does not say %q", msg, tt.msg)
			}
		})
	}
}

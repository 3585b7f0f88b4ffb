package signerapi_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/access"
)

// TestUnauthorizedCallsSpendOnlyTheirOwnBudget: a client that may not use signer B sends
// requests for it. Each is refused PermissionDenied (never RATE_LIMITED from B's shared
// bucket, whose state it must not learn) and recorded; they spend the client's own budget
// until it is RATE_LIMITED on its client limit; the watcher's calls for B still get B's whole
// budget. Explain spends tokens as signing does.
func TestUnauthorizedCallsSpendOnlyTheirOwnBudget(t *testing.T) {
	t.Parallel()
	h := newLimitedHarness(t, []access.Client{
		{Identity: "watcher", Signers: []string{access.AllSigners}},
		{Identity: "hostile", Signers: []string{signerA}},
	}, map[string]access.Rate{"hostile": {PerSecond: 1, Burst: 3}}, map[string]access.Rate{signerB: {PerSecond: 1, Burst: 2}})
	hostile, watcher := h.asClient(t, "hostile"), h.asClient(t, "watcher")
	for i := range 3 {
		_, err := h.svc.SignCertificateSigningRequest(hostile, signReq(signerB, "hostile-"+strings.Repeat("x", i+1), csr(t, "svc"), "digital signature"))
		wantStatus(t, err, codes.PermissionDenied, "SIGNER_NOT_ALLOWED")
	}
	_, err := h.svc.SignCertificateSigningRequest(hostile, signReq(signerB, "hostile-4", csr(t, "svc"), "digital signature"))
	if msg := wantStatus(t, err, codes.ResourceExhausted, "RATE_LIMITED"); !strings.Contains(msg, "client rate limit") {
		t.Errorf("the hostile client's fourth call: %q, want its own client limit", msg)
	}
	for _, uid := range []string{"watcher-1", "watcher-2"} {
		if _, err := h.svc.SignCertificateSigningRequest(watcher, signReq(signerB, uid, csr(t, "svc"), "digital signature")); err != nil {
			t.Fatalf("watcher call %s for signer B after the hostile calls: %v", uid, err)
		}
	}
	_, err = h.svc.ExplainCertificateSigningRequest(watcher, &signetv1.ExplainCertificateSigningRequestRequest{
		Request: signReq(signerB, "watcher-3", csr(t, "svc"), "digital signature")})
	if msg := wantStatus(t, err, codes.ResourceExhausted, "RATE_LIMITED"); !strings.Contains(msg, "signer rate limit") {
		t.Errorf("Explain after signer B's burst: %q, want its signer limit", msg)
	}
	issued, refused := h.decisions(t, "")
	if len(issued) != 2 || len(refused) != 3 {
		t.Errorf("ledger: %d issued, %d refused; want the watcher's 2 and the 3 unauthorized calls", len(issued), len(refused))
	}
}

package server_test

import (
	"crypto/x509"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/ledger"
)

// TestPrincipal: a client with role principal asks for itself: the server takes its requester
// from the verified identity and the configured groups, never from the message; a message
// naming another requester is refused, and so is a pod certificate. A forwarder's requester
// still comes from the message.
func TestPrincipal(t *testing.T) {
	t.Parallel()
	cfg, dir := devConfig(t)
	cfg.Clients = append(cfg.Clients, access.Client{Identity: otherIdentity, Signers: []string{access.AllSigners},
		Role: access.RolePrincipal, Groups: []string{"ops"}})
	s, _ := runServer(t, cfg, dir)
	principal := signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, otherClient(t, dir))))

	csr := testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{DNSNames: []string{"svc.example"}})
	own := signRequest(csr, "uid-principal")
	own.Requester = nil
	if _, err := principal.SignCertificateSigningRequest(callContext(t), own); err != nil {
		t.Fatalf("a principal's request without a requester: %v", err)
	}
	other := signRequest(csr, "uid-principal-2")
	other.Requester = &signetv1.Requester{Username: "alice"}
	_, err := principal.SignCertificateSigningRequest(callContext(t), other)
	wantStatus(t, err, codes.InvalidArgument, "MALFORMED_REQUEST")
	if !strings.Contains(err.Error(), "is a principal, which asks for itself") {
		t.Fatalf("refusal %v", err)
	}
	_, err = principal.SignPodCertificateRequest(callContext(t), podSignRequest(t, "uid-principal-pod"))
	wantStatus(t, err, codes.FailedPrecondition, "POLICY_VIOLATION")

	var requesters = map[string]string{}
	if err := ledger.Replay(cfg.Ledger.Dir, ledger.Record{}.Time, func(r ledger.Record) error {
		if r.Decision == ledger.Issued {
			requesters[r.ObjectUID] = r.Requester
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if requesters["uid-principal"] != otherIdentity {
		t.Fatalf("the principal's issuance records requester %q, want its identity", requesters["uid-principal"])
	}
	// The watcher, a forwarder, still forwards its requesters.
	forwarder := signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	if _, err := forwarder.SignCertificateSigningRequest(callContext(t), signRequest(csr, "uid-forwarded")); err != nil {
		t.Fatal(err)
	}
}

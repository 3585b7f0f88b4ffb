package signerapi_test

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/idempotency"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/lint"
	"github.com/signet-pki/signet/server/profile"
	"github.com/signet-pki/signet/server/signerapi"
)

// Signer names used by the behaviour tests.
const (
	signerA = "example.com/signer-a"
	signerB = "example.com/signer-b"
)

// signerSpec describes one signer of a harness: its name, its profile and whether its issuer
// runs the default lint gate.
type signerSpec struct {
	name string
	spec profile.Spec
	lint bool
}

// legacy is a signerSpec with the permissive legacy-unknown profile.
func legacy(name string) signerSpec {
	return signerSpec{name: name, spec: profile.Spec{Name: profile.NameLegacyUnknown}}
}

// harness is a Service with a real ledger in a temporary directory and a fresh idempotency
// store, called directly (no gRPC).
type harness struct {
	svc *signerapi.Service
	led *ledger.Ledger
	dir string
	ca  *testpki.Authority
	// limitClock is the fake clock of newLimitedHarness's rate limiter.
	limitClock *clocktesting.FakePassiveClock
	// signers, access and clock are what svc was built with, for restart.
	signers []*decision.Signer
	access  decision.Access
	clock   clock.PassiveClock
}

type harnessOptions struct {
	signers []signerSpec
	access  decision.Access
	// wrap, if set, wraps the ledger's segment file (fault injection).
	wrap func(ledger.File) ledger.File
	// clock, if set, is the clock of the issuers, the idempotency store and the service.
	clock clock.PassiveClock
	// lint configures the gate of the signers with lint set; the zero value is the default.
	lint lint.Options
	// logs, if set, receives the service's log (JSON lines).
	logs io.Writer
	// intermediates, if set, are returned with every leaf.
	intermediates []*x509.Certificate
	// wrapKey, if set, wraps the CA key (fault injection).
	wrapKey func(crypto.Signer) crypto.Signer
}

func newHarness(t *testing.T, o harnessOptions) *harness {
	t.Helper()
	if len(o.signers) == 0 {
		o.signers = []signerSpec{legacy(signerA)}
	}
	ca := testpki.CA(t)
	caKey := crypto.Signer(ca.Key)
	if o.wrapKey != nil {
		caKey = o.wrapKey(caKey)
	}
	var gate *lint.Gate
	var signers []*decision.Signer
	for _, s := range o.signers {
		prof, err := profile.New(s.spec, time.Hour)
		if err != nil {
			t.Fatalf("profile %s: %v", s.spec.Name, err)
		}
		opts := issuance.IssuerOptions{
			SignerName: s.name,
			CA:         &issuance.CA{Certificate: ca.Cert, Key: caKey, Intermediates: o.intermediates},
			Policy:     prof,
			Clock:      o.clock,
		}
		if s.lint {
			if gate == nil {
				if gate, err = lint.New(o.lint); err != nil {
					t.Fatal(err)
				}
			}
			opts.Lint = gate
		}
		is, err := issuance.NewIssuer(opts)
		if err != nil {
			t.Fatal(err)
		}
		signers = append(signers, &decision.Signer{Issuer: is, Profile: prof})
	}
	dir := t.TempDir()
	led, err := ledger.Open(dir, ledger.Options{WrapFile: o.wrap, Logger: slog.New(slog.DiscardHandler), Clock: o.clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = led.Close() })
	if o.logs == nil {
		o.logs = io.Discard
	}
	svc := signerapi.New(decision.New(signers, o.access, decision.Options{
		Log:    slog.New(slog.NewJSONHandler(o.logs, nil)),
		Ledger: led,
		Store:  idempotency.New(idempotency.Options{Clock: o.clock, ReplayUntil: decision.ReplayUntil}),
		Clock:  o.clock,
	}))
	return &harness{svc: svc, led: led, dir: dir, ca: ca, signers: signers, access: o.access, clock: o.clock}
}

// newLimitedHarness is a harness with signers A and B (legacy-unknown), the given clients, and
// the given per-client and per-signer rate limits on a fake clock.
func newLimitedHarness(t *testing.T, clients []access.Client, perClient, perSigner map[string]access.Rate) *harness {
	t.Helper()
	clk := clocktesting.NewFakePassiveClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	lim, err := access.NewLimiter(perClient, perSigner, clk)
	if err != nil {
		t.Fatal(err)
	}
	authz, err := access.NewAuthorizer(clients, []string{signerA, signerB})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{
		signers: []signerSpec{legacy(signerA), legacy(signerB)},
		access:  decision.Access{Authorizer: authz, Limiter: lim},
	})
	h.limitClock = clk
	return h
}

// asClient returns a context whose peer presented a verified client certificate with the
// given identity: a URI SAN when identity contains "://", else the common name.
func (h *harness) asClient(t *testing.T, identity string) context.Context {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: identity},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if strings.Contains(identity, "://") {
		u, err := url.Parse(identity)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.Subject.CommonName = "not-the-identity"
		tmpl.URIs = []*url.URL{u}
	}
	cert := h.ca.Sign(t, tmpl, testpki.Key(t, testpki.P256).Public())
	if got := access.Identity(cert); got != identity {
		t.Fatalf("client certificate identity %q, want %q", got, identity)
	}
	return peer.NewContext(context.Background(), &peer.Peer{
		AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert, h.ca.Cert}}}},
	})
}

// records returns every record of the harness's ledger, verified.
func (h *harness) records(t *testing.T) []ledger.Record {
	t.Helper()
	var recs []ledger.Record
	if err := ledger.Replay(h.dir, time.Time{}, func(r ledger.Record) error {
		recs = append(recs, r)
		return nil
	}); err != nil {
		t.Fatalf("replaying the ledger: %v", err)
	}
	return recs
}

// decisions counts the ledger records of objectUID ("" for all) by decision.
func (h *harness) decisions(t *testing.T, objectUID string) (issued, refused []ledger.Record) {
	t.Helper()
	for _, r := range h.records(t) {
		if objectUID != "" && r.ObjectUID != objectUID {
			continue
		}
		switch r.Decision {
		case ledger.Issued:
			issued = append(issued, r)
		case ledger.Refused:
			refused = append(refused, r)
		}
	}
	return issued, refused
}

// csr returns a P-256 request for common name cn.
func csr(t *testing.T, cn string) []byte {
	t.Helper()
	return testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}})
}

// csrFor returns a request for cn signed by key.
func csrFor(t *testing.T, key crypto.Signer, cn string) []byte {
	t.Helper()
	return testpki.CSR(t, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}})
}

// signReq builds a sign request.
func signReq(signer, uid string, pem []byte, usages ...string) *signetv1.SignCertificateSigningRequestRequest {
	return &signetv1.SignCertificateSigningRequestRequest{
		SignerName: signer,
		Request:    pem,
		Usages:     usages,
		Requester:  &signetv1.Requester{Username: "alice", Uid: "alice-uid", Groups: []string{"system:authenticated"}},
		Object:     &signetv1.KubernetesObject{Uid: uid, Name: "csr-" + uid},
	}
}

// wantStatus checks err's code and ErrorInfo reason and returns its message.
func wantStatus(t *testing.T, err error, code codes.Code, reason string) string {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s %s", code, reason)
	}
	gotCode, msg, info := errorInfo(t, err)
	if gotCode != code || info.GetReason() != reason || info.GetDomain() != signetv1.ErrorDomain {
		t.Fatalf("got %s %s/%s (%q), want %s %s/%s", gotCode, info.GetReason(), info.GetDomain(), msg, code, reason, signetv1.ErrorDomain)
	}
	return msg
}

// parseLeaf returns the first certificate of a PEM chain.
func parseLeaf(t *testing.T, chainPEM string) *x509.Certificate {
	t.Helper()
	certs, err := parsePEMCerts([]byte(chainPEM))
	if err != nil || len(certs) == 0 {
		t.Fatalf("parsing chain: %v (%d certificates)", err, len(certs))
	}
	return certs[0]
}

func parsePEMCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		block, rest := pem.Decode(data)
		if block == nil {
			return certs, nil
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
		data = rest
	}
}

// faultyFile fails Sync while failSync is set and counts syncs.
type faultyFile struct {
	ledger.File
	failSync atomic.Bool
	syncs    atomic.Int64
}

var errInjectedSync = errors.New("injected: fsync: input/output error")

func (f *faultyFile) Sync() error {
	f.syncs.Add(1)
	if f.failSync.Load() {
		return errInjectedSync
	}
	return f.File.Sync()
}

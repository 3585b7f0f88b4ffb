package decision_test

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/idempotency"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/profile"
)

const (
	served   = "example.com/served"
	reserved = "example.com/reserved" // served, but only the watcher may use it
)

// newCore is a Core with two legacy-unknown signers, a real ledger in a temporary directory,
// the watcher allowed both signers, the tool only served, and a tool limited to one call
// (no refill on the fake clock).
func newCore(t *testing.T) (*decision.Core, string) {
	t.Helper()
	ca := testpki.CA(t)
	prof, err := profile.New(profile.Spec{Name: profile.NameLegacyUnknown}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var signers []*decision.Signer
	for _, name := range []string{served, reserved} {
		is, err := issuance.NewIssuer(issuance.IssuerOptions{SignerName: name, CA: &issuance.CA{Certificate: ca.Cert, Key: ca.Key}, Policy: prof})
		if err != nil {
			t.Fatal(err)
		}
		signers = append(signers, &decision.Signer{Issuer: is, Profile: prof})
	}
	authz, err := access.NewAuthorizer([]access.Client{
		{Identity: "watcher", Signers: []string{"*"}},
		{Identity: "tool", Signers: []string{served}},
		{Identity: "slow-tool", Signers: []string{served}},
	}, []string{served, reserved})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakePassiveClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	lim, err := access.NewLimiter(map[string]access.Rate{"slow-tool": {PerSecond: 0.001, Burst: 1}}, nil, clk)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	led, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = led.Close() })
	return decision.New(signers, decision.Access{Authorizer: authz, Limiter: lim},
		decision.Options{Ledger: led, Store: idempotency.New(idempotency.Options{})}), dir
}

// csrRequest is a request for cn on signer with object UID uid.
func csrRequest(t *testing.T, signer, uid, cn string) decision.CSR {
	t.Helper()
	pem := testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}})
	return decision.CSR{
		Object: decision.Object{UID: uid, Name: "csr-" + uid},
		Request: issuance.Request{SignerName: signer, PEM: pem, Usages: []string{"digital signature", "client auth"},
			Requester: issuance.Requester{Username: "alice", Groups: []string{"system:authenticated"}}},
	}
}

// TestCoreDecides: the core's answers by caller and request, each with the records it leaves:
// one per decision, none for a rate limit's refusal.
func TestCoreDecides(t *testing.T) {
	t.Parallel()
	core, dir := newCore(t)
	ctx := context.Background()
	first := csrRequest(t, served, "uid-1", "svc")
	issued, err := core.SignCSR(ctx, "watcher", first)
	if err != nil {
		t.Fatalf("first request: %v", err)
	}
	other := csrRequest(t, served, "uid-1", "other")
	tests := []struct {
		name     string
		identity string
		req      decision.CSR
		reason   decision.Reason // "" for issued
		records  int
		sameAs   string // the serial the answer must carry, if any
	}{
		{"replay returns the same certificate", "watcher", first, "", 0, issued.Serial},
		{"same UID, another request", "watcher", other, decision.ReasonIdempotencyConflict, 1, ""},
		{"same UID from another client is its own", "tool", other, "", 1, ""},
		{"unknown signer", "watcher", csrRequest(t, "example.com/none", "uid-2", "svc"), decision.ReasonUnknownSigner, 1, ""},
		{"signer not allowed", "tool", csrRequest(t, reserved, "uid-3", "svc"), decision.ReasonSignerNotAllowed, 1, ""},
		{"no signer name", "watcher", csrRequest(t, "", "uid-4", "svc"), decision.ReasonMalformedRequest, 1, ""},
		{"no object UID", "watcher", csrRequest(t, served, "", "svc"), decision.ReasonMalformedRequest, 1, ""},
		{"object UID over the limit", "watcher", csrRequest(t, served, strings.Repeat("u", decision.MaxObjectUIDBytes+1), "svc"), decision.ReasonMalformedRequest, 1, ""},
		{"CA requested", "watcher", func() decision.CSR {
			r := csrRequest(t, served, "uid-5", "svc")
			r.Request.Usages = append(r.Request.Usages, "cert sign")
			return r
		}(), decision.ReasonPolicyViolation, 1, ""},
		{"not a CSR", "watcher", func() decision.CSR {
			r := csrRequest(t, served, "uid-6", "svc")
			r.Request.PEM = []byte("garbage")
			return r
		}(), decision.ReasonMalformedRequest, 1, ""},
		{"a rate-limited client's first call", "slow-tool", csrRequest(t, served, "uid-7", "svc"), "", 1, ""},
		{"a rate-limited client's second call", "slow-tool", csrRequest(t, served, "uid-8", "svc"), decision.ReasonRateLimited, 0, ""},
	}
	for _, tc := range tests {
		before := countRecords(t, dir)
		got, err := core.SignCSR(ctx, tc.identity, tc.req)
		reason := decision.Reason("")
		if err != nil {
			reason, _ = decision.Classify(err)
		}
		if reason != tc.reason {
			t.Errorf("%s: reason %q (%v), want %q", tc.name, reason, err, tc.reason)
		}
		if tc.sameAs != "" && got.Serial != tc.sameAs {
			t.Errorf("%s: serial %s, want %s", tc.name, got.Serial, tc.sameAs)
		}
		if n := countRecords(t, dir) - before; n != tc.records {
			t.Errorf("%s: %d ledger records, want %d", tc.name, n, tc.records)
		}
	}
}

// TestCoreRefusalsCarryTheirMessage: a refusal's message names what to fix; an internal
// failure's public message does not leak the detail.
func TestCoreRefusalsCarryTheirMessage(t *testing.T) {
	t.Parallel()
	core, _ := newCore(t)
	_, err := core.SignCSR(context.Background(), "tool", csrRequest(t, reserved, "uid-1", "svc"))
	if msg := decision.PublicMessage(err); !strings.Contains(msg, `client "tool" may not use signer "example.com/reserved"`) {
		t.Errorf("message %q does not say who may not use what", msg)
	}
	if msg := decision.PublicMessage(context.DeadlineExceeded); strings.Contains(msg, "deadline") {
		t.Errorf("an internal failure's public message %q carries its detail", msg)
	}
}

func countRecords(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	if err := ledger.Replay(dir, time.Time{}, func(ledger.Record) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

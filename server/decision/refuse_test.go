package decision_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/ledger"
)

// TestRefuseCSR: a front door's own refusal is one ledger record with the client, the reason,
// the public message (and the detail, in the record only), and what is known of the object;
// the answer is the refusal itself. A client past its rate limit gets RATE_LIMITED and no
// record: refusals cost the client its tokens as SignCSR's do.
func TestRefuseCSR(t *testing.T) {
	t.Parallel()
	core, dir := newCore(t)
	ctx := context.Background()
	notApproved := fmt.Errorf("%w: CertificateSigningRequest \"csr-uid-1\" is not approved", issuance.ErrPolicyViolation)
	notJSON := fmt.Errorf("%w: the body is not a JSON CertificateSigningRequest", issuance.ErrMalformedRequest)
	for _, tc := range []struct {
		name     string
		identity string
		req      decision.CSR
		refusal  error
		detail   string
		want     ledger.Record // Decision, Reason, Signer, Client, Requester, ObjectUID, ObjectKind, Message
	}{
		{"decoded", "tool", csrRequest(t, served, "uid-1", "svc"), notApproved, "",
			ledger.Record{Decision: ledger.Refused, Reason: "POLICY_VIOLATION", Signer: served, Client: "tool", Requester: "alice",
				ObjectUID: "uid-1", ObjectKind: "CertificateSigningRequest", Message: notApproved.Error()}},
		{"undecodable", "watcher", decision.CSR{}, notJSON, "body of 5 bytes",
			ledger.Record{Decision: ledger.Refused, Reason: "MALFORMED_REQUEST", Client: "watcher",
				ObjectKind: "CertificateSigningRequest", Message: notJSON.Error() + " (body of 5 bytes)"}},
		{"a signer the client may not use", "tool", csrRequest(t, reserved, "uid-2", "svc"), notApproved, "",
			ledger.Record{Decision: ledger.Refused, Reason: "POLICY_VIOLATION", Signer: reserved, Client: "tool", Requester: "alice",
				ObjectUID: "uid-2", ObjectKind: "CertificateSigningRequest", Message: notApproved.Error()}},
		{"a control character", "tool", decision.CSR{Object: decision.Object{UID: "uid-\x1b[2J"}}, notJSON, "",
			ledger.Record{Decision: ledger.Refused, Reason: "MALFORMED_REQUEST", Client: "tool", ObjectUID: `uid-\x1b[2J`,
				ObjectKind: "CertificateSigningRequest", Message: notJSON.Error()}},
		{"a rate-limited client's first refusal", "slow-tool", decision.CSR{}, notJSON, "",
			ledger.Record{Decision: ledger.Refused, Reason: "MALFORMED_REQUEST", Client: "slow-tool",
				ObjectKind: "CertificateSigningRequest", Message: notJSON.Error()}},
	} {
		before := countRecords(t, dir)
		if err := core.RefuseCSR(ctx, tc.identity, tc.req, tc.refusal, tc.detail); err != tc.refusal {
			t.Errorf("%s: RefuseCSR = %v, want the refusal itself", tc.name, err)
		}
		recs := readRecords(t, dir)[before:]
		if len(recs) != 1 {
			t.Errorf("%s: %d records, want 1", tc.name, len(recs))
			continue
		}
		got := recs[0]
		got.Seq, got.Time, got.PrevHash, got.Hash = 0, time.Time{}, "", ""
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tc.want) {
			t.Errorf("%s: record\n %+v\nwant\n %+v", tc.name, got, tc.want)
		}
	}

	before := countRecords(t, dir)
	err := core.RefuseCSR(ctx, "slow-tool", decision.CSR{}, notJSON, "")
	if reason, _ := decision.Classify(err); reason != decision.ReasonRateLimited || !strings.Contains(err.Error(), "client rate limit") {
		t.Errorf("past the client's rate limit: %v, want RATE_LIMITED naming the client limit", err)
	}
	if errors.Is(err, issuance.ErrMalformedRequest) {
		t.Errorf("the rate limit's answer %v carries the refusal it did not record", err)
	}
	if n := countRecords(t, dir) - before; n != 0 {
		t.Errorf("a rate-limited refusal wrote %d records", n)
	}
}

// TestRefuseCSRSparesTheSignerBudget: a refusal spends the client's token only, never the
// signer's shared issuance budget, as SignCSR's refusals before the signer lookup do.
func TestRefuseCSRSparesTheSignerBudget(t *testing.T) {
	t.Parallel()
	core, dir := newCore(t)
	lim, err := access.NewLimiter(nil, map[string]access.Rate{served: {PerSecond: 0.001, Burst: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	core.SetAccess(decision.Access{Limiter: lim})
	ctx := context.Background()
	for range 3 {
		_ = core.RefuseCSR(ctx, "tool", csrRequest(t, served, "uid-r", "svc"), fmt.Errorf("%w: not approved", issuance.ErrPolicyViolation), "")
	}
	if _, err := core.SignCSR(ctx, "tool", csrRequest(t, served, "uid-ok", "svc")); err != nil {
		t.Errorf("the signer's one token is gone after refusals: %v", err)
	}
	if n := countRecords(t, dir); n != 4 {
		t.Errorf("%d records, want 3 refusals and 1 issuance", n)
	}
}

func readRecords(t *testing.T, dir string) []ledger.Record {
	t.Helper()
	var out []ledger.Record
	if err := ledger.Replay(dir, time.Time{}, func(r ledger.Record) error { out = append(out, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

package signerapi_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/profile"
)

// TestIdempotency: the object UID is the idempotency key. The same UID and request get the
// first certificate back byte for byte with a single "issued" ledger record; the same UID with
// anything that shapes the certificate changed is refused as IDEMPOTENCY_CONFLICT, recorded as
// "refused", and issues nothing (the first answer still stands afterwards).
func TestIdempotency(t *testing.T) {
	t.Parallel()
	const uid = "uid-idem"
	tests := []struct {
		name     string
		second   func(t *testing.T, first *signetv1.SignCertificateSigningRequestRequest) *signetv1.SignCertificateSigningRequestRequest
		conflict bool
	}{
		{"same request", func(_ *testing.T, first *signetv1.SignCertificateSigningRequestRequest) *signetv1.SignCertificateSigningRequestRequest {
			return proto.CloneOf(first)
		}, false},
		{"same request, another object name", func(_ *testing.T, first *signetv1.SignCertificateSigningRequestRequest) *signetv1.SignCertificateSigningRequestRequest {
			r := proto.CloneOf(first)
			r.Object.Name = "renamed" // not part of the request hash
			return r
		}, false},
		{"other CSR", func(t *testing.T, first *signetv1.SignCertificateSigningRequestRequest) *signetv1.SignCertificateSigningRequestRequest {
			r := proto.CloneOf(first)
			r.Request = csr(t, "svc")
			return r
		}, true},
		{"other usages", func(_ *testing.T, first *signetv1.SignCertificateSigningRequestRequest) *signetv1.SignCertificateSigningRequestRequest {
			r := proto.CloneOf(first)
			r.Usages = append(r.Usages, "key encipherment")
			return r
		}, true},
		{"other expiration", func(_ *testing.T, first *signetv1.SignCertificateSigningRequestRequest) *signetv1.SignCertificateSigningRequestRequest {
			r := proto.CloneOf(first)
			r.ExpirationSeconds = proto.Int32(1200)
			return r
		}, true},
		{"other requester", func(_ *testing.T, first *signetv1.SignCertificateSigningRequestRequest) *signetv1.SignCertificateSigningRequestRequest {
			r := proto.CloneOf(first)
			r.Requester.Username = "mallory"
			return r
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOptions{})
			ctx := context.Background()
			first := signReq(signerA, uid, csr(t, "svc"), "digital signature", "server auth")
			resp1, err := h.svc.SignCertificateSigningRequest(ctx, first)
			if err != nil {
				t.Fatalf("first call: %v", err)
			}
			resp2, err := h.svc.SignCertificateSigningRequest(ctx, tt.second(t, first))
			if tt.conflict {
				msg := wantStatus(t, err, codes.FailedPrecondition, "IDEMPOTENCY_CONFLICT")
				if resp2 != nil {
					t.Errorf("a conflicting call returned a response: %v", resp2)
				}
				if !strings.Contains(msg, uid) {
					t.Errorf("message %q does not name the object UID", msg)
				}
			} else {
				if err != nil {
					t.Fatalf("second call: %v", err)
				}
				if resp2.GetCertificateChainPem() != resp1.GetCertificateChainPem() || resp2.GetSerialNumber() != resp1.GetSerialNumber() ||
					!resp2.GetNotBefore().AsTime().Equal(resp1.GetNotBefore().AsTime()) || !resp2.GetNotAfter().AsTime().Equal(resp1.GetNotAfter().AsTime()) {
					t.Errorf("the replay differs from the first answer:\nfirst  %v\nsecond %v", resp1, resp2)
				}
			}
			// The original request still gets the original certificate.
			resp3, err := h.svc.SignCertificateSigningRequest(ctx, first)
			if err != nil || resp3.GetCertificateChainPem() != resp1.GetCertificateChainPem() {
				t.Errorf("retrying the first request after the second: %v, same chain %t", err, err == nil && resp3.GetCertificateChainPem() == resp1.GetCertificateChainPem())
			}

			issued, refused := h.decisions(t, uid)
			if len(issued) != 1 {
				t.Fatalf("%d issued records for %s, want exactly 1", len(issued), uid)
			}
			if issued[0].Certificate != resp1.GetCertificateChainPem() || issued[0].Serial != resp1.GetSerialNumber() {
				t.Errorf("issued record (serial %s) does not hold the returned certificate (serial %s)", issued[0].Serial, resp1.GetSerialNumber())
			}
			if leaf := parseLeaf(t, resp1.GetCertificateChainPem()); leaf.SerialNumber.Text(16) != strings.TrimLeft(resp1.GetSerialNumber(), "0") {
				t.Errorf("response serial %s is not the leaf's %x", resp1.GetSerialNumber(), leaf.SerialNumber)
			}
			switch {
			case tt.conflict && (len(refused) != 1 || refused[0].Reason != "IDEMPOTENCY_CONFLICT" || refused[0].Certificate != ""):
				t.Errorf("refused records %+v, want one IDEMPOTENCY_CONFLICT refusal without a certificate", refused)
			case !tt.conflict && len(refused) != 0:
				t.Errorf("refused records %+v, want none", refused)
			}
		})
	}
}

// TestIdempotencyConcurrent: concurrent calls for the same UID and request all get the one
// certificate, and only one is issued and recorded.
func TestIdempotencyConcurrent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	req := signReq(signerA, "uid-concurrent", csr(t, "svc"), "digital signature")
	const n = 16
	chains := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, err := h.svc.SignCertificateSigningRequest(context.Background(), proto.CloneOf(req))
			chains[i], errs[i] = resp.GetCertificateChainPem(), err
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || chains[i] != chains[0] || chains[i] == "" {
			t.Errorf("call %d: err %v, same chain as call 0: %t", i, errs[i], chains[i] == chains[0])
		}
	}
	if issued, refused := h.decisions(t, ""); len(issued) != 1 || len(refused) != 0 {
		t.Errorf("ledger holds %d issued and %d refused records, want 1 and 0", len(issued), len(refused))
	}
}

// TestLedgerRecordsEveryDecision: a run of issuances, replays and refusals leaves a ledger that
// verifies, with one record per decision in call order (replays add none) and each issued
// record holding the chain that was returned.
func TestLedgerRecordsEveryDecision(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	ctx := context.Background()
	first := signReq(signerA, "uid-1", csr(t, "svc-1"), "digital signature")
	noUID := signReq(signerA, "", csr(t, "svc-x"), "digital signature")
	steps := []struct {
		name   string
		req    *signetv1.SignCertificateSigningRequestRequest
		code   codes.Code
		reason string // reason of the refused record; "" with OK: issued (or replayed)
		record bool   // whether the call adds a record
	}{
		{"issue", first, codes.OK, "", true},
		{"replay", first, codes.OK, "", false},
		{"policy violation", signReq(signerA, "uid-2", csr(t, "svc-2"), "cert sign"), codes.FailedPrecondition, "POLICY_VIOLATION", true},
		{"malformed", signReq(signerA, "uid-3", []byte("not a csr"), "digital signature"), codes.InvalidArgument, "MALFORMED_REQUEST", true},
		{"bad signature", signReq(signerA, "uid-4", testpki.BreakSignature(t, csr(t, "svc-4")), "digital signature"), codes.InvalidArgument, "INVALID_SIGNATURE", true},
		{"unknown signer", signReq("example.com/nope", "uid-5", csr(t, "svc-5"), "digital signature"), codes.NotFound, "UNKNOWN_SIGNER", true},
		{"missing uid", noUID, codes.InvalidArgument, "MALFORMED_REQUEST", true},
		{"conflict", signReq(signerA, "uid-1", csr(t, "svc-other"), "digital signature"), codes.FailedPrecondition, "IDEMPOTENCY_CONFLICT", true},
		{"issue another", signReq(signerA, "uid-6", csr(t, "svc-6"), "digital signature", "client auth"), codes.OK, "", true},
	}
	type want struct {
		decision ledger.Decision
		uid      string
		reason   string
		chain    string
	}
	var wants []want
	for _, s := range steps {
		resp, err := h.svc.SignCertificateSigningRequest(ctx, s.req)
		if s.code == codes.OK {
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if s.record {
				wants = append(wants, want{ledger.Issued, s.req.GetObject().GetUid(), "", resp.GetCertificateChainPem()})
			}
			continue
		}
		wantStatus(t, err, s.code, s.reason)
		if resp != nil {
			t.Errorf("%s: refusal carries a response %v", s.name, resp)
		}
		wants = append(wants, want{ledger.Refused, s.req.GetObject().GetUid(), s.reason, ""})
	}

	rep, err := ledger.Verify(h.dir)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if rep.Records != len(wants) || rep.FirstSeq != 1 || rep.LastSeq != uint64(len(wants)) || rep.TornTail != 0 {
		t.Errorf("Verify report %+v, want %d records, seq 1..%d, no torn tail", rep, len(wants), len(wants))
	}
	if seq, hash := h.led.Last(); seq != rep.LastSeq || hash != rep.LastHash {
		t.Errorf("ledger Last() = %d %s, Verify says %d %s", seq, hash, rep.LastSeq, rep.LastHash)
	}
	recs := h.records(t)
	if len(recs) != len(wants) {
		t.Fatalf("%d records, want %d", len(recs), len(wants))
	}
	for i, w := range wants {
		r := recs[i]
		if r.Decision != w.decision || r.ObjectUID != w.uid || r.Reason != w.reason || r.Certificate != w.chain {
			t.Errorf("record %d: %s uid=%q reason=%q cert=%t; want %s uid=%q reason=%q cert=%t",
				r.Seq, r.Decision, r.ObjectUID, r.Reason, r.Certificate != "", w.decision, w.uid, w.reason, w.chain != "")
		}
		if r.Decision == ledger.Refused && r.Message == "" {
			t.Errorf("record %d: refusal without a message", r.Seq)
		}
		if r.Decision == ledger.Issued && (r.RequestHash == "" || r.IdempotencyKey == "" || r.Serial == "" || r.Requester != "alice") {
			t.Errorf("record %d: issued record lacks request hash, idempotency key, serial or requester: %+v", r.Seq, r)
		}
	}
}

// TestLedgerFailureFailsClosed: when the ledger's fsync fails, the call returns Unavailable
// LEDGER_UNAVAILABLE, says nothing was issued, carries no certificate and hides the cause;
// every later issuance also fails, even after the disk recovers, and a retry of the failed
// UID does not return a certificate that was never recorded. A certificate recorded before
// the failure is still replayed (its record is durable).
func TestLedgerFailureFailsClosed(t *testing.T) {
	t.Parallel()
	ff := &faultyFile{}
	h := newHarness(t, harnessOptions{wrap: func(inner ledger.File) ledger.File { ff.File = inner; return ff }})
	ctx := context.Background()
	good := signReq(signerA, "uid-before", csr(t, "svc-before"), "digital signature")
	goodResp, err := h.svc.SignCertificateSigningRequest(ctx, good)
	if err != nil {
		t.Fatalf("issuing before the failure: %v", err)
	}

	ff.failSync.Store(true)
	failed := signReq(signerA, "uid-failed", csr(t, "svc-failed"), "digital signature")
	resp, err := h.svc.SignCertificateSigningRequest(ctx, failed)
	msg := wantStatus(t, err, codes.Unavailable, "LEDGER_UNAVAILABLE")
	if resp != nil {
		t.Errorf("the failed call returned a response %v", resp)
	}
	if !strings.Contains(msg, "nothing was issued") {
		t.Errorf("message %q does not say nothing was issued", msg)
	}
	if strings.Contains(msg, "input/output") || strings.Contains(msg, h.dir) {
		t.Errorf("message %q leaks the internal cause", msg)
	}
	if !errors.Is(h.led.Err(), errInjectedSync) {
		t.Errorf("ledger Err() = %v, want the injected sync error", h.led.Err())
	}

	ff.failSync.Store(false) // the disk recovers; the ledger stays closed until reopened
	syncs := ff.syncs.Load()
	later := []struct {
		name   string
		req    *signetv1.SignCertificateSigningRequestRequest
		code   codes.Code
		reason string
	}{
		{"retry of the failed UID", failed, codes.Unavailable, "LEDGER_UNAVAILABLE"},
		{"new UID", signReq(signerA, "uid-after", csr(t, "svc-after"), "digital signature"), codes.Unavailable, "LEDGER_UNAVAILABLE"},
		{"refusal still refused", signReq(signerA, "uid-refused", csr(t, "svc-r"), "cert sign"), codes.FailedPrecondition, "POLICY_VIOLATION"},
	}
	for _, l := range later {
		t.Run(l.name, func(t *testing.T) {
			resp, err := h.svc.SignCertificateSigningRequest(ctx, l.req)
			wantStatus(t, err, l.code, l.reason)
			if resp != nil {
				t.Errorf("got a response %v", resp)
			}
		})
	}
	if ff.syncs.Load() != syncs {
		t.Errorf("the failed ledger synced again (%d → %d)", syncs, ff.syncs.Load())
	}
	// The certificate recorded before the failure is durable, so its replay is served.
	again, err := h.svc.SignCertificateSigningRequest(ctx, good)
	if err != nil || again.GetCertificateChainPem() != goodResp.GetCertificateChainPem() {
		t.Errorf("replay of the durable certificate: %v", err)
	}
}

// TestAuthorization: a client may only use the signers it is configured for, in signing,
// listing and explaining; identities come from the first URI SAN, else the common name.
func TestAuthorization(t *testing.T) {
	t.Parallel()
	const toolA, toolB = "tool-a", "spiffe://cluster.local/ns/signet/sa/tool-b"
	authz, err := access.NewAuthorizer([]access.Client{
		{Identity: toolA, Signers: []string{signerA}},
		{Identity: toolB, Signers: []string{access.AllSigners}},
		{Identity: "tool-none", Signers: nil},
	}, []string{signerA, signerB})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{signers: []signerSpec{legacy(signerA), legacy(signerB)}, access: decision.Access{Authorizer: authz}})

	t.Run("sign", func(t *testing.T) {
		tests := []struct {
			client, signer string
			code           codes.Code
		}{
			{toolA, signerA, codes.OK},
			{toolA, signerB, codes.PermissionDenied},
			{toolB, signerA, codes.OK},
			{toolB, signerB, codes.OK},
			{"tool-none", signerA, codes.PermissionDenied},
			{"stranger", signerA, codes.PermissionDenied},
			{"", signerA, codes.PermissionDenied}, // no peer certificate at all
		}
		for i, tt := range tests {
			ctx := context.Background()
			if tt.client != "" {
				ctx = h.asClient(t, tt.client)
			}
			uid := "uid-authz-" + string(rune('a'+i))
			resp, err := h.svc.SignCertificateSigningRequest(ctx, signReq(tt.signer, uid, csr(t, "svc"), "digital signature"))
			if tt.code == codes.OK {
				if err != nil || resp.GetCertificateChainPem() == "" {
					t.Errorf("%s → %s: %v", tt.client, tt.signer, err)
				}
				continue
			}
			msg := wantStatus(t, err, codes.PermissionDenied, "SIGNER_NOT_ALLOWED")
			if resp != nil || !strings.Contains(msg, tt.signer) {
				t.Errorf("%s → %s: response %v, message %q (want none, naming the signer)", tt.client, tt.signer, resp, msg)
			}
			issued, refused := h.decisions(t, uid)
			if len(issued) != 0 || len(refused) != 1 || refused[0].Reason != "SIGNER_NOT_ALLOWED" || refused[0].Client != tt.client {
				t.Errorf("%s → %s: records issued %d, refused %+v; want one SIGNER_NOT_ALLOWED refusal by the client", tt.client, tt.signer, len(issued), refused)
			}
		}
	})

	t.Run("list", func(t *testing.T) {
		tests := []struct {
			client string
			want   []string
		}{
			{toolA, []string{signerA}},
			{toolB, []string{signerA, signerB}},
			{"tool-none", nil},
			{"stranger", nil},
		}
		for _, tt := range tests {
			resp, err := h.svc.ListSigners(h.asClient(t, tt.client), &signetv1.ListSignersRequest{})
			if err != nil {
				t.Fatalf("%s: %v", tt.client, err)
			}
			var got []string
			for _, s := range resp.GetSigners() {
				got = append(got, s.GetSignerName())
				if s.GetProfile() != profile.NameLegacyUnknown || s.GetMaxLifetime().AsDuration() != time.Hour {
					t.Errorf("%s: signer %s described as profile %q, max lifetime %v", tt.client, s.GetSignerName(), s.GetProfile(), s.GetMaxLifetime().AsDuration())
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("%s lists %q, want %q", tt.client, got, tt.want)
			}
		}
	})

	t.Run("explain", func(t *testing.T) {
		tests := []struct {
			client, signer string
			code           codes.Code
		}{
			{toolA, signerA, codes.OK},
			{toolA, signerB, codes.PermissionDenied},
			{"stranger", signerA, codes.PermissionDenied},
		}
		for _, tt := range tests {
			resp, err := h.svc.ExplainCertificateSigningRequest(h.asClient(t, tt.client), &signetv1.ExplainCertificateSigningRequestRequest{
				Request: signReq(tt.signer, "uid-explain", csr(t, "svc"), "digital signature"),
			})
			if tt.code == codes.OK {
				if err != nil || !resp.GetAllowed() {
					t.Errorf("%s explains %s: %v, allowed %t", tt.client, tt.signer, err, resp.GetAllowed())
				}
				continue
			}
			wantStatus(t, err, codes.PermissionDenied, "SIGNER_NOT_ALLOWED")
			if resp != nil {
				t.Errorf("%s explains %s: got a response %v", tt.client, tt.signer, resp)
			}
		}
	})
}

// TestRateLimits: a client's token bucket refuses the call after its burst with
// ResourceExhausted RATE_LIMITED, refills with the (fake) clock, and a signer's bucket is
// shared by all its clients. Rate-limited calls are not recorded and consume nothing.
func TestRateLimits(t *testing.T) {
	t.Parallel()
	all := []string{access.AllSigners}
	h := newLimitedHarness(t, []access.Client{{Identity: "tool-a", Signers: all}, {Identity: "tool-b", Signers: all}, {Identity: "tool-c", Signers: all}},
		map[string]access.Rate{"tool-a": {PerSecond: 1, Burst: 2}}, map[string]access.Rate{signerB: {PerSecond: 1, Burst: 2}})
	clk := h.limitClock
	steps := []struct {
		advance        time.Duration
		client, signer string
		limit          string // "" allowed; else the limit named in the refusal
	}{
		// Client limit: burst 2, then 1/s.
		{0, "tool-a", signerA, ""},
		{0, "tool-a", signerA, ""},
		{0, "tool-a", signerA, access.LimitClient},
		{time.Second, "tool-a", signerA, ""},
		{0, "tool-a", signerA, access.LimitClient},
		// Signer limit shared by tool-b and tool-c (neither has a client limit).
		{0, "tool-b", signerB, ""},
		{0, "tool-c", signerB, ""},
		{0, "tool-b", signerB, access.LimitSigner},
		{0, "tool-c", signerB, access.LimitSigner},
		{0, "tool-c", signerA, ""}, // signer A is not limited
		{time.Second, "tool-c", signerB, ""},
		{0, "tool-b", signerB, access.LimitSigner},
		// A client over its own limit does not drain the signer's bucket: both buckets refill
		// to their burst of 2, tool-a spends its own on signer A, is then refused on signer B,
		// and signer B still has both tokens for the other clients.
		{2 * time.Second, "tool-a", signerA, ""},
		{0, "tool-a", signerA, ""},
		{0, "tool-a", signerB, access.LimitClient},
		{0, "tool-b", signerB, ""},
		{0, "tool-c", signerB, ""},
		{0, "tool-b", signerB, access.LimitSigner},
	}
	allowed := 0
	for i, s := range steps {
		clk.SetTime(clk.Now().Add(s.advance))
		uid := "uid-rate-" + strings.Repeat("x", i+1)
		resp, err := h.svc.SignCertificateSigningRequest(h.asClient(t, s.client), signReq(s.signer, uid, csr(t, "svc"), "digital signature"))
		if s.limit == "" {
			if err != nil || resp.GetCertificateChainPem() == "" {
				t.Errorf("step %d (%s → %s): %v, want a certificate", i, s.client, s.signer, err)
			}
			allowed++
			continue
		}
		msg := wantStatus(t, err, codes.ResourceExhausted, "RATE_LIMITED")
		if resp != nil || !strings.Contains(msg, s.limit+" rate limit") {
			t.Errorf("step %d (%s → %s): response %v, message %q; want none, naming the %s limit", i, s.client, s.signer, resp, msg, s.limit)
		}
	}
	if issued, refused := h.decisions(t, ""); len(issued) != allowed || len(refused) != 0 {
		t.Errorf("ledger holds %d issued and %d refused records, want %d and 0 (rate-limited calls are not recorded)", len(issued), len(refused), allowed)
	}
}

// TestLintGateFailsClosed: a custom profile that allows any common name lets through a
// 65-character one, which zlint reports at Error (e_subject_common_name_max_length); the
// issuer's lint gate refuses it with FailedPrecondition LINT_FAILED naming the lint, nothing
// is issued and the refusal is recorded. A conforming request through the same signer is
// issued, so the gate is not refusing everything.
func TestLintGateFailsClosed(t *testing.T) {
	t.Parallel()
	const lintName = "e_subject_common_name_max_length"
	custom := signerSpec{name: signerA, lint: true, spec: profile.Spec{Name: profile.NameCustom, Custom: &profile.CustomSpec{
		Subject: profile.SubjectSpec{CommonNames: []string{"*"}},
		Usages:  profile.UsageSpec{Allowed: []string{"digital signature", "client auth"}},
	}}}
	h := newHarness(t, harnessOptions{signers: []signerSpec{custom}})
	ctx := context.Background()
	longCN := strings.Repeat("a", 65)
	tests := []struct {
		name, uid, cn string
		wantLint      bool
	}{
		{"conforming request", "uid-ok", "svc-ok", false},
		{"common name over 64 characters", "uid-long", longCN, true},
		{"retry is refused again", "uid-long", longCN, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := signReq(signerA, tt.uid, csr(t, tt.cn), "digital signature", "client auth")

			// The profile alone allows the request: Explain shows every profile rule passing,
			// and only the lint rule (last) failing when the lint fails.
			ex, err := h.svc.ExplainCertificateSigningRequest(ctx, &signetv1.ExplainCertificateSigningRequestRequest{Request: req})
			if err != nil {
				t.Fatal(err)
			}
			rules := ex.GetRules()
			if len(rules) < 2 || !strings.HasPrefix(rules[len(rules)-1].GetRule(), "lint:") {
				t.Fatalf("explain rules %v do not end with the lint rule", rules)
			}
			for _, r := range rules[:len(rules)-1] {
				if !r.GetPassed() {
					t.Errorf("profile rule %q failed (%s): the custom profile should allow this request", r.GetRule(), r.GetDetail())
				}
			}
			if last := rules[len(rules)-1]; last.GetPassed() == tt.wantLint || (tt.wantLint && !strings.Contains(last.GetDetail(), lintName)) {
				t.Errorf("lint rule %+v, want passed=%t", last, !tt.wantLint)
			}

			issuedBefore, _ := h.decisions(t, tt.uid)
			resp, err := h.svc.SignCertificateSigningRequest(ctx, req)
			issued, refused := h.decisions(t, tt.uid)
			if !tt.wantLint {
				if err != nil || resp.GetCertificateChainPem() == "" || len(issued) != 1 {
					t.Fatalf("conforming request: %v, %d issued records", err, len(issued))
				}
				return
			}
			msg := wantStatus(t, err, codes.FailedPrecondition, "LINT_FAILED")
			if !strings.Contains(msg, lintName) {
				t.Errorf("message %q does not name %s", msg, lintName)
			}
			if resp != nil || len(issued) != 0 || len(issuedBefore) != 0 {
				t.Errorf("a lint failure issued something: response %v, %d issued records", resp, len(issued))
			}
			if len(refused) == 0 {
				t.Fatal("no refused record")
			}
			last := refused[len(refused)-1]
			if last.Reason != "LINT_FAILED" || !strings.Contains(last.Message, lintName) || last.Certificate != "" {
				t.Errorf("refused record %+v, want reason LINT_FAILED naming %s and no certificate", last, lintName)
			}
		})
	}
}

// TestExplain: Explain reports every rule and the lifetime for an allowed request, and for a
// refused one the reason, message and failing rule among the others; it records nothing,
// issues nothing and does not claim the object UID, but spends a rate-limit token as a sign
// call does (it runs the same policy and lint gate).
func TestExplain(t *testing.T) {
	t.Parallel()
	authz, err := access.NewAuthorizer([]access.Client{{Identity: "tool-a", Signers: []string{signerA}}}, []string{signerA})
	if err != nil {
		t.Fatal(err)
	}
	// Burst 6: the five explains and one sign call.
	lim, err := access.NewLimiter(map[string]access.Rate{"tool-a": {PerSecond: 1, Burst: 6}}, nil,
		clocktesting.NewFakePassiveClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	client := signerSpec{name: signerA, lint: true, spec: profile.Spec{Name: profile.NameKubeAPIServerClient}}
	h := newHarness(t, harnessOptions{signers: []signerSpec{client}, access: decision.Access{Authorizer: authz, Limiter: lim}})
	ctx := h.asClient(t, "tool-a")
	const uid = "uid-explained"
	const atMost = "usages: at most digital signature, key encipherment, client auth"
	withExpiry := func(r *signetv1.SignCertificateSigningRequestRequest, s int32) *signetv1.SignCertificateSigningRequestRequest {
		r.ExpirationSeconds = proto.Int32(s)
		return r
	}
	tests := []struct {
		name       string
		req        *signetv1.SignCertificateSigningRequestRequest
		allowed    bool
		lifetime   time.Duration
		reason     string
		failedRule string // the rule that must fail; every other rule passes
		msg        string
	}{
		{"allowed, default lifetime", signReq(signerA, uid, csr(t, "alice"), "digital signature", "client auth"), true, time.Hour, "", "", ""},
		{"allowed, requested lifetime", withExpiry(signReq(signerA, uid, csr(t, "alice"), "client auth"), 1800), true, 30 * time.Minute, "", "", ""},
		{"server auth on a client profile", signReq(signerA, uid, csr(t, "alice"), "digital signature", "client auth", "server auth"), false, 0, "POLICY_VIOLATION", atMost, `"server auth"`},
		{"no client auth", signReq(signerA, uid, csr(t, "alice"), "digital signature"), false, 0, "POLICY_VIOLATION", "usages: include client auth", "client auth"},
		{"malformed request", signReq(signerA, uid, []byte("junk"), "client auth"), false, 0, "MALFORMED_REQUEST", "request:", "no PEM block"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := h.svc.ExplainCertificateSigningRequest(ctx, &signetv1.ExplainCertificateSigningRequestRequest{Request: tt.req})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetAllowed() != tt.allowed || resp.GetReason() != tt.reason {
				t.Fatalf("allowed %t reason %q (%s), want %t %q", resp.GetAllowed(), resp.GetReason(), resp.GetMessage(), tt.allowed, tt.reason)
			}
			if len(resp.GetRules()) == 0 {
				t.Fatal("no rules reported")
			}
			failed := 0
			for _, r := range resp.GetRules() {
				if r.GetRule() == "" || r.GetDetail() == "" {
					t.Errorf("rule %+v lacks its name or detail", r)
				}
				isTarget := tt.failedRule != "" && strings.HasPrefix(r.GetRule(), tt.failedRule)
				if r.GetPassed() == isTarget {
					t.Errorf("rule %q passed=%t (%s)", r.GetRule(), r.GetPassed(), r.GetDetail())
				}
				if isTarget {
					failed++
				}
			}
			if tt.allowed {
				if got := resp.GetLifetime().AsDuration(); got != tt.lifetime {
					t.Errorf("lifetime %v, want %v", got, tt.lifetime)
				}
				if last := resp.GetRules()[len(resp.GetRules())-1]; !strings.HasPrefix(last.GetRule(), "lint:") {
					t.Errorf("last rule %q is not the lint gate", last.GetRule())
				}
				return
			}
			if failed != 1 {
				t.Errorf("rule %q failed %d times, want once among %d rules", tt.failedRule, failed, len(resp.GetRules()))
			}
			if resp.GetLifetime() != nil {
				t.Errorf("a refused request reports lifetime %v", resp.GetLifetime().AsDuration())
			}
			if !strings.Contains(resp.GetMessage(), tt.msg) {
				t.Errorf("message %q does not say %q", resp.GetMessage(), tt.msg)
			}
		})
	}
	if seq, _ := h.led.Last(); seq != 0 || h.led.Stats().Records != 0 {
		t.Errorf("Explain wrote to the ledger: last seq %d, %d records", seq, h.led.Stats().Records)
	}
	// The UID was not claimed by the requests explained with it: a sign call with yet another
	// request for it is issued, with the last token; the next explain is rate limited.
	resp, err := h.svc.SignCertificateSigningRequest(ctx, signReq(signerA, uid, csr(t, "bob"), "digital signature", "client auth"))
	if err != nil || resp.GetCertificateChainPem() == "" {
		t.Fatalf("signing after the explains: %v", err)
	}
	_, err = h.svc.ExplainCertificateSigningRequest(ctx, &signetv1.ExplainCertificateSigningRequestRequest{Request: tests[0].req})
	wantStatus(t, err, codes.ResourceExhausted, "RATE_LIMITED")
	if issued, refused := h.decisions(t, ""); len(issued) != 1 || len(refused) != 0 {
		t.Errorf("ledger holds %d issued and %d refused records, want only the one sign call", len(issued), len(refused))
	}
}

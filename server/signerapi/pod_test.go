package signerapi_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/idempotency"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/profile"
	"github.com/signet-pki/signet/server/signerapi"
)

// podSigner is the pod-identity signer of the PodCertificateRequest tests.
const podSigner = "example.com/pods"

// podIdentity is a pod-identity signerSpec with the default lint gate, allowing the
// annotation example.com/purpose.
func podIdentity(name string) signerSpec {
	return signerSpec{name: name, lint: true, spec: profile.Spec{Name: profile.NamePodIdentity,
		PodIdentity: &profile.PodIdentitySpec{AllowedAnnotations: []string{"example.com/purpose"}}}}
}

// stubFor returns the DER stub request the kubelet makes for key.
func stubFor(t *testing.T, key crypto.Signer) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// podReq builds a PodCertificateRequest request for pod shop/web-1 (service account web) with
// a fresh P-256 key and maxExpirationSeconds 86400.
func podReq(t *testing.T, signer, uid string) *signetv1.SignPodCertificateRequestRequest {
	t.Helper()
	return &signetv1.SignPodCertificateRequestRequest{
		SignerName: signer,
		Object:     &signetv1.KubernetesObject{Uid: uid, Name: "req-" + uid, Namespace: "shop"},
		Pod: &signetv1.PodIdentity{
			Namespace: "shop", PodName: "web-1", PodUid: "pod-uid-1",
			ServiceAccountName: "web", ServiceAccountUid: "sa-uid-1", NodeName: "node-1", NodeUid: "node-uid-1",
		},
		StubPkcs10Request:    stubFor(t, testpki.Key(t, testpki.P256)),
		MaxExpirationSeconds: 86400,
	}
}

// samePodAnswer reports whether two answers carry the same certificate and times.
func samePodAnswer(a, b *signetv1.SignPodCertificateRequestResponse) bool {
	return a.GetCertificateChainPem() == b.GetCertificateChainPem() && a.GetSerialNumber() == b.GetSerialNumber() &&
		a.GetNotBefore().AsTime().Equal(b.GetNotBefore().AsTime()) && a.GetNotAfter().AsTime().Equal(b.GetNotAfter().AsTime()) &&
		a.GetBeginRefreshAt().AsTime().Equal(b.GetBeginRefreshAt().AsTime())
}

// TestSignPodCertificateRequest: a pod-identity signer answers with the chain, the serial in
// lower-case hex and the three times the status needs, all matching the leaf; the ledger
// records the issuance as a PodCertificateRequest naming the pod.
func TestSignPodCertificateRequest(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakePassiveClock(time.Date(2030, 5, 1, 12, 0, 0, 500_000_000, time.UTC))
	h := newHarness(t, harnessOptions{signers: []signerSpec{podIdentity(podSigner)}, clock: clk})
	resp, err := h.svc.SignPodCertificateRequest(context.Background(), podReq(t, podSigner, "uid-pcr"))
	if err != nil {
		t.Fatalf("SignPodCertificateRequest: %v", err)
	}
	leaf := parseLeaf(t, resp.GetCertificateChainPem())
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://cluster.local/ns/shop/sa/web" {
		t.Errorf("URIs = %v, want the service account's SPIFFE ID", leaf.URIs)
	}
	if want := hex.EncodeToString(leaf.SerialNumber.Bytes()); resp.GetSerialNumber() != want {
		t.Errorf("serial_number = %q, want the leaf's %s (as the CSR call formats it)", resp.GetSerialNumber(), want)
	}
	nb, na, refresh := resp.GetNotBefore().AsTime(), resp.GetNotAfter().AsTime(), resp.GetBeginRefreshAt().AsTime()
	if !nb.Equal(leaf.NotBefore) || !na.Equal(leaf.NotAfter) || !nb.Equal(time.Date(2030, 5, 1, 11, 59, 0, 0, time.UTC)) || na.Sub(nb) != time.Hour {
		t.Errorf("validity %s..%s, want the leaf's %s..%s: one minute before the call, whole seconds, 1h (the signer maximum)", nb, na, leaf.NotBefore, leaf.NotAfter)
	}
	if !refresh.Equal(nb.Add(30 * time.Minute)) {
		t.Errorf("begin_refresh_at = %s, want NotBefore + 30m (30 minutes before NotAfter for a 1h certificate)", refresh)
	}
	issued, refused := h.decisions(t, "uid-pcr")
	if len(issued) != 1 || len(refused) != 0 {
		t.Fatalf("records: %d issued, %d refused; want 1 issued", len(issued), len(refused))
	}
	r := issued[0]
	if r.ObjectKind != "PodCertificateRequest" || r.Certificate != resp.GetCertificateChainPem() || r.Serial != resp.GetSerialNumber() ||
		r.RequestHash == "" || r.IdempotencyKey == "" || !strings.Contains(r.Message, "pod shop/web-1") || !strings.Contains(r.Message, "node node-1") {
		t.Errorf("issued record %+v, want kind PodCertificateRequest, the chain and serial, the request hash and the pod", r)
	}
}

// TestPodReplayWindow: the same PodCertificateRequest gets its certificate back only while
// now − NotBefore < 4 minutes (the kube-apiserver takes a notBefore up to 5 minutes old);
// from then on it gets a new certificate, recorded as a new issuance for the same object.
// A different request for the object stays a conflict, a restart keeps the window, and a
// CertificateSigningRequest's answer is not limited.
func TestPodReplayWindow(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	h := newHarness(t, harnessOptions{signers: []signerSpec{podIdentity(podSigner), legacy(signerA)}, clock: clk})
	ctx := context.Background()
	req := podReq(t, podSigner, "uid-window")
	csrReq := signReq(signerA, "uid-csr", csr(t, "svc"), "digital signature")
	at := func(d time.Duration) { clk.SetTime(t0.Add(d)) }

	first, err := h.svc.SignPodCertificateRequest(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	csrFirst, err := h.svc.SignCertificateSigningRequest(ctx, csrReq)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{2 * time.Minute, 2*time.Minute + 59*time.Second} {
		at(d) // NotBefore was t0 − 1m: under 4 minutes ago
		again, err := h.svc.SignPodCertificateRequest(ctx, proto.CloneOf(req))
		if err != nil || !samePodAnswer(again, first) {
			t.Fatalf("at t0+%s: %v, same answer %t; want the first certificate again", d, err, err == nil && samePodAnswer(again, first))
		}
	}
	at(3 * time.Minute) // now − NotBefore = 4m: too old to hand out again
	second, err := h.svc.SignPodCertificateRequest(ctx, proto.CloneOf(req))
	if err != nil {
		t.Fatal(err)
	}
	if second.GetSerialNumber() == first.GetSerialNumber() || !second.GetNotBefore().AsTime().Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("at t0+3m: serial %s (first %s), NotBefore %s; want a new certificate from t0+2m", second.GetSerialNumber(), first.GetSerialNumber(), second.GetNotBefore().AsTime())
	}
	at(5 * time.Minute)
	if again, err := h.svc.SignPodCertificateRequest(ctx, proto.CloneOf(req)); err != nil || !samePodAnswer(again, second) {
		t.Fatalf("at t0+5m: %v; want the second certificate again", err)
	}
	other := proto.CloneOf(req)
	other.MaxExpirationSeconds = 7200
	_, err = h.svc.SignPodCertificateRequest(ctx, other)
	wantStatus(t, err, codes.FailedPrecondition, "IDEMPOTENCY_CONFLICT")

	// A restart rebuilds the store from the ledger with the same windows.
	svc := h.restart(t)
	if again, err := svc.SignPodCertificateRequest(ctx, proto.CloneOf(req)); err != nil || !samePodAnswer(again, second) {
		t.Fatalf("after a restart at t0+5m: %v; want the second certificate again", err)
	}
	at(6 * time.Minute)
	third, err := svc.SignPodCertificateRequest(ctx, proto.CloneOf(req))
	if err != nil || third.GetSerialNumber() == second.GetSerialNumber() {
		t.Fatalf("after a restart at t0+6m: %v, serial %s; want a third certificate", err, third.GetSerialNumber())
	}
	at(time.Hour)
	if again, err := svc.SignCertificateSigningRequest(ctx, proto.CloneOf(csrReq)); err != nil || again.GetCertificateChainPem() != csrFirst.GetCertificateChainPem() {
		t.Errorf("CSR replay an hour later: %v; want the same certificate (no replay window)", err)
	}
	at(48 * time.Hour)
	if _, err = svc.SignPodCertificateRequest(ctx, other); err != nil {
		t.Errorf("after retention the object UID is free again: %v", err)
	}
	issued, refused := h.decisions(t, "uid-window")
	if len(issued) != 4 || len(refused) != 1 {
		t.Fatalf("records for the object: %d issued, %d refused; want 4 issuances and the conflict", len(issued), len(refused))
	}
	for i, want := range []string{first.GetSerialNumber(), second.GetSerialNumber(), third.GetSerialNumber()} {
		if issued[i].Serial != want || issued[i].ObjectKind != "PodCertificateRequest" || issued[i].IdempotencyKey != issued[0].IdempotencyKey {
			t.Errorf("issued record %d: serial %s kind %q key %s; want serial %s, the same object and request", i, issued[i].Serial, issued[i].ObjectKind, issued[i].IdempotencyKey, want)
		}
	}
}

// restart closes the harness's ledger and reopens it as signet-server starts: the idempotency
// store is rebuilt from the ledger's records; it returns a service over the same signers.
func (h *harness) restart(t *testing.T) *signerapi.Service {
	t.Helper()
	if err := h.led.Close(); err != nil {
		t.Fatal(err)
	}
	store := idempotency.New(idempotency.Options{Clock: h.clock, ReplayUntil: decision.ReplayUntil})
	led, err := ledger.Open(h.dir, ledger.Options{Logger: slog.New(slog.DiscardHandler), Clock: h.clock, Replay: func(r ledger.Record) error {
		store.Load(r)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = led.Close() })
	h.led = led
	return signerapi.New(decision.New(h.signers, h.access, decision.Options{Ledger: led, Store: store, Clock: h.clock}))
}

// TestPodRefusals: every refusal of a PodCertificateRequest has its code, ErrorInfo reason and
// a message naming the problem, and is recorded as a refused PodCertificateRequest; a
// CertificateSigningRequest sent to the pod-identity signer and a PodCertificateRequest sent
// to a CSR signer are refused as policy violations naming the signer and what it serves.
func TestPodRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{signers: []signerSpec{podIdentity(podSigner), legacy(signerA)}})
	ctx := context.Background()
	change := func(uid string, f func(r *signetv1.SignPodCertificateRequestRequest)) *signetv1.SignPodCertificateRequestRequest {
		r := podReq(t, podSigner, uid)
		f(r)
		return r
	}
	tests := []struct {
		name   string
		req    *signetv1.SignPodCertificateRequestRequest
		code   codes.Code
		reason string
		msg    []string
	}{
		{"unknown annotations", change("uid-annot", func(r *signetv1.SignPodCertificateRequestRequest) {
			r.UnverifiedUserAnnotations = map[string]string{"zeta.example/x": "1", "example.com/purpose": "ok", "alpha.example/y": "2"}
		}), codes.InvalidArgument, "UNKNOWN_ANNOTATION", []string{`["alpha.example/y" "zeta.example/x"]`, "not recognised"}},
		{"PCR to a CSR signer", change("uid-kind", func(r *signetv1.SignPodCertificateRequestRequest) { r.SignerName = signerA }),
			codes.FailedPrecondition, "POLICY_VIOLATION", []string{signerA, "serves CertificateSigningRequests only (profile legacy-unknown)"}},
		{"no key", change("uid-nokey", func(r *signetv1.SignPodCertificateRequestRequest) { r.StubPkcs10Request = nil }),
			codes.InvalidArgument, "MALFORMED_REQUEST", []string{"stub_pkcs10_request"}},
		{"both forms", change("uid-both", func(r *signetv1.SignPodCertificateRequestRequest) {
			r.PkixPublicKey, r.ProofOfPossession = []byte{1}, []byte{2}
		}),
			codes.InvalidArgument, "MALFORMED_REQUEST", []string{"exactly one"}},
		{"broken stub signature", change("uid-badsig", func(r *signetv1.SignPodCertificateRequestRequest) {
			r.StubPkcs10Request[len(r.StubPkcs10Request)-1] ^= 0xff
		}),
			codes.InvalidArgument, "INVALID_SIGNATURE", []string{"stub_pkcs10_request"}},
		{"RSA-2048", change("uid-rsa", func(r *signetv1.SignPodCertificateRequestRequest) {
			r.StubPkcs10Request = stubFor(t, testpki.Key(t, testpki.RSA2048))
		}),
			codes.InvalidArgument, "UNSUPPORTED_KEY", []string{"RSA-2048", "use one of"}},
		{"namespace with a slash", change("uid-ns", func(r *signetv1.SignPodCertificateRequestRequest) { r.Pod.Namespace = "shop/sa/admin" }),
			codes.InvalidArgument, "MALFORMED_REQUEST", []string{`namespace "shop/sa/admin"`}},
		{"no pod", change("uid-nopod", func(r *signetv1.SignPodCertificateRequestRequest) { r.Pod = nil }),
			codes.InvalidArgument, "MALFORMED_REQUEST", []string{"pod is required"}},
		{"lifetime under an hour", change("uid-short", func(r *signetv1.SignPodCertificateRequestRequest) { r.MaxExpirationSeconds = 1800 }),
			codes.FailedPrecondition, "POLICY_VIOLATION", []string{"1h"}},
		{"unknown signer", change("uid-unknown", func(r *signetv1.SignPodCertificateRequestRequest) { r.SignerName = "example.com/nope" }),
			codes.NotFound, "UNKNOWN_SIGNER", []string{"example.com/nope"}},
		{"no object UID", change("", func(*signetv1.SignPodCertificateRequestRequest) {}),
			codes.InvalidArgument, "MALFORMED_REQUEST", []string{"object.uid is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := h.svc.SignPodCertificateRequest(ctx, tt.req)
			msg := wantStatus(t, err, tt.code, tt.reason)
			if resp != nil {
				t.Errorf("a refusal carries a response %v", resp)
			}
			for _, m := range tt.msg {
				if !strings.Contains(msg, m) {
					t.Errorf("message %q does not say %q", msg, m)
				}
			}
			issued, refused := h.decisions(t, tt.req.GetObject().GetUid())
			if len(issued) != 0 || len(refused) == 0 {
				t.Fatalf("records: %d issued, %d refused; want a refusal", len(issued), len(refused))
			}
			if r := refused[len(refused)-1]; r.Reason != tt.reason || r.ObjectKind != "PodCertificateRequest" || r.Message != msg || r.Certificate != "" {
				t.Errorf("refused record %+v, want reason %s, kind PodCertificateRequest and the message", r, tt.reason)
			}
		})
	}

	_, err := h.svc.SignCertificateSigningRequest(ctx, signReq(podSigner, "uid-csr-to-pods", csr(t, "svc"), "digital signature", "server auth"))
	msg := wantStatus(t, err, codes.FailedPrecondition, "POLICY_VIOLATION")
	if !strings.Contains(msg, podSigner) || !strings.Contains(msg, "serves PodCertificateRequests only (profile pod-identity)") {
		t.Errorf("CSR to the pod-identity signer: message %q, want the signer and that it serves PodCertificateRequests only", msg)
	}
	if _, refused := h.decisions(t, "uid-csr-to-pods"); len(refused) != 1 || refused[0].ObjectKind != "CertificateSigningRequest" {
		t.Errorf("refused records %+v, want one for the CertificateSigningRequest", refused)
	}
}

// TestPodAccess: PodCertificateRequests go through the same authorization and rate limits as
// CertificateSigningRequests: a client may only use its signers (the refusal is recorded with
// the client), and a client's bucket is shared by both kinds.
func TestPodAccess(t *testing.T) {
	t.Parallel()
	authz, err := access.NewAuthorizer([]access.Client{
		{Identity: "watcher", Signers: []string{podSigner, signerA}},
		{Identity: "csr-only", Signers: []string{signerA}},
	}, []string{podSigner, signerA})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := access.NewLimiter(map[string]access.Rate{"watcher": {PerSecond: 1, Burst: 2}}, nil,
		clocktesting.NewFakePassiveClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{signers: []signerSpec{podIdentity(podSigner), legacy(signerA)}, access: decision.Access{Authorizer: authz, Limiter: lim}})

	_, err = h.svc.SignPodCertificateRequest(h.asClient(t, "csr-only"), podReq(t, podSigner, "uid-denied"))
	if msg := wantStatus(t, err, codes.PermissionDenied, "SIGNER_NOT_ALLOWED"); !strings.Contains(msg, podSigner) {
		t.Errorf("message %q does not name the signer", msg)
	}
	if _, refused := h.decisions(t, "uid-denied"); len(refused) != 1 || refused[0].Client != "csr-only" || refused[0].ObjectKind != "PodCertificateRequest" {
		t.Errorf("refused records %+v, want one by csr-only", refused)
	}

	watcher := h.asClient(t, "watcher")
	if _, err := h.svc.SignPodCertificateRequest(watcher, podReq(t, podSigner, "uid-ok")); err != nil {
		t.Fatalf("allowed client: %v", err)
	}
	if _, err := h.svc.SignCertificateSigningRequest(watcher, signReq(signerA, "uid-csr", csr(t, "svc"), "digital signature")); err != nil {
		t.Fatalf("allowed client, CSR: %v", err)
	}
	_, err = h.svc.SignPodCertificateRequest(watcher, podReq(t, podSigner, "uid-limited"))
	wantStatus(t, err, codes.ResourceExhausted, "RATE_LIMITED")
	if issued, refused := h.decisions(t, "uid-limited"); len(issued)+len(refused) != 0 {
		t.Error("a rate-limited call was recorded")
	}
}

// TestPodLedgerFailureFailsClosed: when the decision cannot be recorded, no pod certificate
// leaves the server, and a retry does not get one either.
func TestPodLedgerFailureFailsClosed(t *testing.T) {
	t.Parallel()
	ff := &faultyFile{}
	h := newHarness(t, harnessOptions{signers: []signerSpec{podIdentity(podSigner)}, wrap: func(inner ledger.File) ledger.File { ff.File = inner; return ff }})
	ff.failSync.Store(true)
	req := podReq(t, podSigner, "uid-unrecorded")
	for range 2 {
		resp, err := h.svc.SignPodCertificateRequest(context.Background(), proto.CloneOf(req))
		wantStatus(t, err, codes.Unavailable, "LEDGER_UNAVAILABLE")
		if resp != nil {
			t.Fatalf("got a response %v", resp)
		}
	}
}

// TestReplayUntil: only PodCertificateRequest records get a replay window, NotBefore + 4m.
func TestReplayUntil(t *testing.T) {
	t.Parallel()
	nb := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := decision.ReplayUntil(ledger.Record{ObjectKind: string(issuance.KindPodCertificateRequest), NotBefore: nb}); !got.Equal(nb.Add(4 * time.Minute)) {
		t.Errorf("PCR record: %s, want NotBefore + 4m", got)
	}
	for _, kind := range []string{"", string(issuance.KindCertificateSigningRequest)} {
		if got := decision.ReplayUntil(ledger.Record{ObjectKind: kind, NotBefore: nb}); !got.IsZero() {
			t.Errorf("record of kind %q: %s, want none", kind, got)
		}
	}
}

package signerapi_test

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/ledger"
)

// maxRefusedLine is the bound docs/security.md and the ledger docs give for the line of a
// refused record, whatever the caller sends.
const maxRefusedLine = 8 << 10

// TestLimitsRefuseAndRecord: a field over its limit is refused as MALFORMED_REQUEST naming the
// field, the refusal has exactly one ledger record, and a value at the limit passes the edge.
func TestLimitsRefuseAndRecord(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{signers: []signerSpec{legacy(signerA), podIdentity(podSigner)}})
	ctx := h.asClient(t, "watcher")
	long := func(n int) string { return strings.Repeat("a", n) }
	groups := func(n, each int) []string {
		g := make([]string, n)
		for i := range g {
			g[i] = long(each)
		}
		return g
	}
	csrCases := []struct {
		name  string
		field string // in the message; "" when the request is within the limits
		edit  func(*signetv1.SignCertificateSigningRequestRequest)
	}{
		{"empty signer name", "signer_name is required", func(r *signetv1.SignCertificateSigningRequestRequest) { r.SignerName = "" }},
		{"signer name over 571 bytes", "signer_name", func(r *signetv1.SignCertificateSigningRequestRequest) { r.SignerName = "example.com/" + long(600) }},
		{"object UID over 128 bytes", "object.uid", func(r *signetv1.SignCertificateSigningRequestRequest) { r.Object.Uid = long(170 << 10) }},
		{"object UID with a control character", "object.uid", func(r *signetv1.SignCertificateSigningRequestRequest) { r.Object.Uid = "uid\x1b[31m" }},
		{"object UID with a space", "object.uid", func(r *signetv1.SignCertificateSigningRequestRequest) { r.Object.Uid = "a uid" }},
		{"object name over 253 bytes", "object.name", func(r *signetv1.SignCertificateSigningRequestRequest) { r.Object.Name = long(254) }},
		{"username over 1 KiB", "requester.username", func(r *signetv1.SignCertificateSigningRequestRequest) { r.Requester.Username = long(1025) }},
		{"user UID over 1 KiB", "requester.uid", func(r *signetv1.SignCertificateSigningRequestRequest) { r.Requester.Uid = long(1025) }},
		{"too many groups", "requester.groups has 1025 entries", func(r *signetv1.SignCertificateSigningRequestRequest) { r.Requester.Groups = groups(1025, 1) }},
		{"a group over 1 KiB", "requester.groups[1]", func(r *signetv1.SignCertificateSigningRequestRequest) {
			r.Requester.Groups = []string{"ok", long(1025)}
		}},
		{"groups over 64 KiB in all", "requester.groups and requester.extra", func(r *signetv1.SignCertificateSigningRequestRequest) {
			r.Requester.Groups = groups(65, 1024)
		}},
		{"too many extra keys", "requester.extra has 65 keys", func(r *signetv1.SignCertificateSigningRequestRequest) {
			r.Requester.Extra = map[string]*signetv1.ExtraValue{}
			for i := range 65 {
				r.Requester.Extra[long(i+1)] = &signetv1.ExtraValue{}
			}
		}},
		{"extra values over 64 KiB", "requester.groups and requester.extra", func(r *signetv1.SignCertificateSigningRequestRequest) {
			r.Requester.Extra = map[string]*signetv1.ExtraValue{"k": {Values: groups(70, 1024)}}
		}},
		{"too many usages", "usages has 33 entries", func(r *signetv1.SignCertificateSigningRequestRequest) { r.Usages = groups(33, 3) }},
		{"a usage over 64 bytes", "usages[0]", func(r *signetv1.SignCertificateSigningRequestRequest) { r.Usages = []string{long(65)} }},
		{"request over 64 KiB", "request is 307200 bytes long", func(r *signetv1.SignCertificateSigningRequestRequest) {
			r.Request = bytes.Repeat([]byte("x"), 300<<10)
		}},
		{"at the limits", "", func(r *signetv1.SignCertificateSigningRequestRequest) {
			r.Object.Uid = long(decision.MaxObjectUIDBytes)
			r.Object.Name = long(decision.MaxObjectNameBytes)
			r.Requester.Username = long(decision.MaxUserStringBytes)
			r.Requester.Groups = groups(decision.MaxGroups, 60)
		}},
	}
	for _, tc := range csrCases {
		req := signReq(signerA, "uid-"+strings.ReplaceAll(tc.name, " ", "-"), csr(t, "svc"), "digital signature")
		tc.edit(req)
		before := len(h.records(t))
		_, err := h.svc.SignCertificateSigningRequest(ctx, req)
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v, want issued", tc.name, err)
			}
		} else if msg := wantStatus(t, err, codes.InvalidArgument, "MALFORMED_REQUEST"); !strings.Contains(msg, tc.field) {
			t.Errorf("%s: message %q does not name %q", tc.name, msg, tc.field)
		}
		recs := h.records(t)[before:]
		if len(recs) != 1 {
			t.Errorf("%s: %d ledger records, want exactly one", tc.name, len(recs))
		} else if tc.field != "" && (recs[0].Decision != ledger.Refused || recs[0].Reason != "MALFORMED_REQUEST") {
			t.Errorf("%s: record %s %s, want refused MALFORMED_REQUEST", tc.name, recs[0].Decision, recs[0].Reason)
		}
	}

	podCases := []struct {
		name, field string
		edit        func(*signetv1.SignPodCertificateRequestRequest)
	}{
		{"namespace over 63 bytes", "pod.namespace", func(r *signetv1.SignPodCertificateRequestRequest) { r.Pod.Namespace = long(64) }},
		{"pod name over 253 bytes", "pod.pod_name", func(r *signetv1.SignPodCertificateRequestRequest) { r.Pod.PodName = long(254) }},
		{"pod UID over 128 bytes", "pod.pod_uid", func(r *signetv1.SignPodCertificateRequestRequest) { r.Pod.PodUid = long(129) }},
		{"node UID over 128 bytes", "pod.node_uid", func(r *signetv1.SignPodCertificateRequestRequest) { r.Pod.NodeUid = long(129) }},
		{"service account name over 253 bytes", "pod.service_account_name", func(r *signetv1.SignPodCertificateRequestRequest) {
			r.Pod.ServiceAccountName = long(254)
		}},
		{"stub over 10 KiB", "stub_pkcs10_request", func(r *signetv1.SignPodCertificateRequestRequest) {
			r.StubPkcs10Request = bytes.Repeat([]byte{0x30}, 10<<10+1)
		}},
		{"public key over 10 KiB", "pkix_public_key", func(r *signetv1.SignPodCertificateRequestRequest) {
			r.PkixPublicKey = bytes.Repeat([]byte{0x30}, 10<<10+1)
		}},
		{"proof of possession over 10 KiB", "proof_of_possession", func(r *signetv1.SignPodCertificateRequestRequest) {
			r.ProofOfPossession = bytes.Repeat([]byte{0x30}, 10<<10+1)
		}},
		{"annotations over 256 KiB", "unverified_user_annotations", func(r *signetv1.SignPodCertificateRequestRequest) {
			r.UnverifiedUserAnnotations = map[string]string{"example.com/a": long(256 << 10)}
		}},
	}
	for _, tc := range podCases {
		req := podReq(t, podSigner, "pcr-"+strings.ReplaceAll(tc.name, " ", "-"))
		tc.edit(req)
		before := len(h.records(t))
		_, err := h.svc.SignPodCertificateRequest(ctx, req)
		if msg := wantStatus(t, err, codes.InvalidArgument, "MALFORMED_REQUEST"); !strings.Contains(msg, tc.field) {
			t.Errorf("%s: message %q does not name %q", tc.name, msg, tc.field)
		}
		if n := len(h.records(t)) - before; n != 1 {
			t.Errorf("%s: %d ledger records, want exactly one", tc.name, n)
		}
	}
	if _, err := h.svc.SignCertificateSigningRequest(ctx, signReq(signerA, "after", csr(t, "svc"), "digital signature")); err != nil {
		t.Errorf("a valid request after the refusals: %v", err)
	}
}

// TestRefusedRecordIsBounded: whatever a caller sends (strings of 170 KiB, or within the
// limits but made of characters JSON escapes six times over), the refusal's ledger line stays
// under maxRefusedLine, and the clipped values still name their length.
func TestRefusedRecordIsBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOptions{})
	huge := strings.Repeat("<", 170<<10)
	escaped := func(n int) string { return strings.Repeat("<\x01", n/2) }
	identity := "spiffe://signet/" + strings.Repeat("a", 2000)
	ctx := h.asClient(t, identity)
	reqs := []*signetv1.SignCertificateSigningRequestRequest{
		// Oversized fields: refused at the edge.
		{SignerName: huge, Object: &signetv1.KubernetesObject{Uid: huge, Name: huge}, Requester: &signetv1.Requester{Username: huge}},
		{SignerName: signerA, Object: &signetv1.KubernetesObject{Uid: huge}, Requester: &signetv1.Requester{Username: huge}},
		// Within the limits, every byte escaped: refused as an unknown signer.
		{SignerName: escaped(decision.MaxSignerNameBytes), Object: &signetv1.KubernetesObject{Uid: strings.Repeat("<", decision.MaxObjectUIDBytes)},
			Requester: &signetv1.Requester{Username: escaped(decision.MaxUserStringBytes)}},
		// Within the limits and refused by the pipeline, so the record also has its idempotency
		// key (the UID again) and a message. Control characters are refused before the pipeline
		// (limits.go), so this one's username is made of '<' only, which JSON escapes as much.
		{SignerName: signerA, Request: []byte("not a CSR " + escaped(1000)), Object: &signetv1.KubernetesObject{Uid: strings.Repeat("<", decision.MaxObjectUIDBytes)},
			Requester: &signetv1.Requester{Username: strings.Repeat("<", decision.MaxUserStringBytes)}},
	}
	for i, req := range reqs {
		if _, err := h.svc.SignCertificateSigningRequest(ctx, req); err == nil {
			t.Fatalf("request %d was not refused", i)
		}
	}
	data, err := os.ReadFile(filepath.Join(h.dir, "ledger-000001.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\x00\n"), []byte("\n"))
	if len(lines) != len(reqs) {
		t.Fatalf("%d ledger lines, want %d (one per refusal)", len(lines), len(reqs))
	}
	longest := 0
	for i, l := range lines {
		longest = max(longest, len(l))
		if len(l) > maxRefusedLine {
			t.Errorf("record %d is %d bytes, more than %d", i+1, len(l), maxRefusedLine)
		}
	}
	t.Logf("longest refused record: %d bytes (bound %d)", longest, maxRefusedLine)
	recs := h.records(t)
	if got := recs[0].Signer; !strings.Contains(got, "[clipped: 174080 bytes, sha256 ") {
		t.Errorf("clipped signer %q does not name the length sent", got[:min(len(got), 80)])
	}
	if recs[3].IdempotencyKey == "" || recs[3].ObjectUID != reqs[3].Object.Uid {
		t.Errorf("pipeline refusal: object UID %q, key %q; want the UID whole and a key", recs[3].ObjectUID, recs[3].IdempotencyKey)
	}
}

// TestUnstorableRecordIsFinal: a certificate whose ledger record can never be stored (its line
// over the ledger's 1 MiB limit, here through a chain of 2,000 intermediates) is refused as
// MALFORMED_REQUEST, final, not LEDGER_UNAVAILABLE "retry later"; the refusal is recorded and
// the next request is served.
func TestUnstorableRecordIsFinal(t *testing.T) {
	t.Parallel()
	ca := testpki.CA(t)
	h := newHarness(t, harnessOptions{intermediates: slices.Repeat([]*x509.Certificate{ca.Cert}, 2000)})
	ctx := h.asClient(t, "watcher")
	_, err := h.svc.SignCertificateSigningRequest(ctx, signReq(signerA, "uid-huge", csr(t, "svc"), "digital signature"))
	if msg := wantStatus(t, err, codes.InvalidArgument, "MALFORMED_REQUEST"); !strings.Contains(msg, "cannot be stored") {
		t.Errorf("message %q does not say the record cannot be stored", msg)
	}
	issued, refused := h.decisions(t, "uid-huge")
	if len(issued) != 0 || len(refused) != 1 {
		t.Errorf("records: %d issued, %d refused; want one refusal", len(issued), len(refused))
	}
}

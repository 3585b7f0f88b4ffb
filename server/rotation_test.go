package server_test

import (
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/ledger"
)

// rotationServer is a server whose dev client has the admin role, restartable on the same
// configuration and ledger.
type rotationServer struct {
	t    *testing.T
	cfg  *config.Config
	dir  string
	s    *testServer
	stop func()
}

func newRotationServer(t *testing.T, delay time.Duration, modify func(*config.Config)) *rotationServer {
	t.Helper()
	cfg, dir := devConfig(t)
	cfg.Clients[0].Admin = true
	cfg.Signers[0].Rotation.MinPropagationDelay = &metav1.Duration{Duration: delay}
	if modify != nil {
		modify(cfg)
	}
	r := &rotationServer{t: t, cfg: cfg, dir: dir}
	r.s, r.stop = runServer(t, cfg, dir)
	return r
}

// restart stops the server and starts it again on the same configuration and ledger.
func (r *rotationServer) restart() {
	r.t.Helper()
	r.stop()
	r.s, r.stop = runServer(r.t, r.cfg, r.dir)
}

func (r *rotationServer) clients() (signetv1.SignerServiceClient, signetv1.AuthorityServiceClient) {
	conn := r.s.dial(r.t, r.s.clientTLS(r.t, r.s.devClient(r.t)))
	return signetv1.NewSignerServiceClient(conn), signetv1.NewAuthorityServiceClient(conn)
}

func (r *rotationServer) status() *signetv1.SignerAuthority {
	r.t.Helper()
	_, admin := r.clients()
	resp, err := admin.GetAuthority(callContext(r.t), &signetv1.GetAuthorityRequest{SignerNames: []string{devpki.DefaultSigner}})
	if err != nil {
		r.t.Fatalf("GetAuthority: %v", err)
	}
	return resp.GetSigners()[0]
}

// states maps each CA's fingerprint to its state.
func states(a *signetv1.SignerAuthority) map[string]signetv1.AnchorState {
	out := map[string]signetv1.AnchorState{}
	for _, ca := range a.GetCas() {
		out[ca.GetAnchor().GetFingerprint()] = ca.GetAnchor().GetState()
	}
	return out
}

func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// report tells the server that cluster published a bundle of certs.
func report(t *testing.T, client signetv1.SignerServiceClient, cluster string, certs ...*x509.Certificate) error {
	t.Helper()
	req := &signetv1.ReportTrustBundleRequest{SignerName: devpki.DefaultSigner, Cluster: cluster}
	h := sha256.New()
	for _, c := range certs {
		req.AnchorFingerprints = append(req.AnchorFingerprints, fingerprint(c))
		h.Write(c.Raw)
	}
	req.BundleHash = hex.EncodeToString(h.Sum(nil))
	_, err := client.ReportTrustBundle(callContext(t), req)
	return err
}

// TestRotationInStages takes a signer through stage, activate and retire over the API, with
// a restart in each stage: each step is refused with its reason until its gate opens, the
// state survives restarts, issuance switches CA only at activation, and the ledger holds every
// step.
func TestRotationInStages(t *testing.T) {
	t.Parallel()
	const delay = 2 * time.Second
	r := newRotationServer(t, delay, nil)
	old := parsePEMCerts(t, r.s.read(t, devpki.SignerCACert))[0]
	next := testpki.CA(t, func(c *x509.Certificate) { c.Subject = pkix.Name{CommonName: "next signer CA"} })
	keyPath := filepath.Join(t.TempDir(), "next.key")
	if err := os.WriteFile(keyPath, testpki.KeyPEM(t, next.Key), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, admin := r.clients()

	// Nothing staged: activation is refused.
	_, err := admin.ActivateCA(callContext(t), &signetv1.ActivateCARequest{SignerName: devpki.DefaultSigner})
	wantStatus(t, err, codes.FailedPrecondition, "ROTATION_REFUSED")
	// A certificate that is not a CA's, or a key that is not its key, cannot be staged.
	_, err = admin.StageCA(callContext(t), &signetv1.StageCARequest{SignerName: devpki.DefaultSigner, KeyUri: keyPath,
		CertificatePem: string(r.s.read(t, devpki.ServerCert))})
	wantStatus(t, err, codes.InvalidArgument, "INVALID_CA")
	_, err = admin.StageCA(callContext(t), &signetv1.StageCARequest{SignerName: devpki.DefaultSigner, KeyUri: keyPath,
		CertificatePem: string(testpki.CA(t).CertPEM())})
	wantStatus(t, err, codes.InvalidArgument, "INVALID_CA")

	// A cluster reports the bundle before the CA is staged: it is expected to publish it.
	if err := report(t, signer, "east", old); err != nil {
		t.Fatalf("report: %v", err)
	}
	staged, err := admin.StageCA(callContext(t), &signetv1.StageCARequest{SignerName: devpki.DefaultSigner, KeyUri: keyPath,
		CertificatePem: string(next.CertPEM())})
	if err != nil {
		t.Fatalf("StageCA: %v", err)
	}
	if got := states(staged.GetAuthority())[fingerprint(next.Cert)]; got != signetv1.AnchorState_ANCHOR_STATE_STAGED {
		t.Fatalf("the new CA is %v after staging", got)
	}
	anchors, err := signer.GetTrustAnchors(callContext(t), &signetv1.GetTrustAnchorsRequest{SignerName: devpki.DefaultSigner})
	if err != nil {
		t.Fatal(err)
	}
	if got := parsePEMCerts(t, []byte(anchors.GetTrustAnchorsPem())); len(got) != 2 || !got[0].Equal(old) || !got[1].Equal(next.Cert) {
		t.Fatalf("the bundle holds %d certificates after staging; want the active then the staged CA", len(got))
	}
	if a := anchors.GetAnchors(); len(a) != 2 || a[1].GetState() != signetv1.AnchorState_ANCHOR_STATE_STAGED || a[1].GetSince() == nil {
		t.Fatalf("anchors = %v; want the staged CA with its since", a)
	}
	if leaf := signOne(t, signer); leaf.CheckSignatureFrom(old) != nil {
		t.Fatal("a staged CA issued a leaf: issuance must stay with the active CA")
	}
	// A second CA cannot be staged while one is.
	_, err = admin.StageCA(callContext(t), &signetv1.StageCARequest{SignerName: devpki.DefaultSigner, KeyUri: keyPath + "x",
		CertificatePem: string(testpki.CA(t).CertPEM())})
	wantStatus(t, err, codes.FailedPrecondition, "ROTATION_REFUSED")

	// The cluster has not published the staged CA: activation waits for it, with the reason.
	_, err = admin.ActivateCA(callContext(t), &signetv1.ActivateCARequest{SignerName: devpki.DefaultSigner})
	wantStatus(t, err, codes.FailedPrecondition, "ROTATION_REFUSED")
	if !strings.Contains(err.Error(), `cluster "east" has not published the staged CA`) {
		t.Fatalf("refusal %v does not name the cluster", err)
	}
	r.restart()
	if got := states(r.status())[fingerprint(next.Cert)]; got != signetv1.AnchorState_ANCHOR_STATE_STAGED {
		t.Fatalf("after a restart the staged CA is %v", got)
	}
	signer, admin = r.clients()
	if err := report(t, signer, "east", old, next.Cert); err != nil {
		t.Fatalf("report: %v", err)
	}
	// Published, but the delay has not passed.
	_, err = admin.ActivateCA(callContext(t), &signetv1.ActivateCARequest{SignerName: devpki.DefaultSigner})
	wantStatus(t, err, codes.FailedPrecondition, "ROTATION_REFUSED")
	if !strings.Contains(err.Error(), "minimum propagation delay") {
		t.Fatalf("refusal %v does not name the delay", err)
	}
	st := r.status()
	if st.GetActivation().GetReady() || st.GetActivation().GetNotBefore() == nil || len(st.GetClusters()) != 1 || st.GetClusters()[0].GetStagedPublishedAt() == nil {
		t.Fatalf("status = %v; want the activation gate closed until a time, and east's publication", st)
	}
	// The proof of publication survives a restart.
	r.restart()
	if st := r.status(); len(st.GetClusters()) != 1 || st.GetClusters()[0].GetStagedPublishedAt() == nil {
		t.Fatalf("after a restart the clusters are %v; want east's publication of the staged CA", st.GetClusters())
	}
	time.Sleep(time.Until(st.GetActivation().GetNotBefore().AsTime()) + 100*time.Millisecond)
	signer, admin = r.clients()
	if _, err := admin.ActivateCA(callContext(t), &signetv1.ActivateCARequest{SignerName: devpki.DefaultSigner}); err != nil {
		t.Fatalf("ActivateCA after the delay: %v", err)
	}
	leaf := signOne(t, signer)
	if leaf.CheckSignatureFrom(next.Cert) != nil {
		t.Fatal("after activation the leaf is not signed by the new CA")
	}
	r.restart()
	signer, admin = r.clients()
	if leaf := signOne(t, signer); leaf.CheckSignatureFrom(next.Cert) != nil {
		t.Fatal("after a restart the leaf is not signed by the activated CA")
	}
	if got := states(r.status()); got[fingerprint(old)] != signetv1.AnchorState_ANCHOR_STATE_RETIRED || got[fingerprint(next.Cert)] != signetv1.AnchorState_ANCHOR_STATE_ACTIVE {
		t.Fatalf("states after activation and restart: %v", got)
	}

	// The old CA signed leaves that are still valid: retirement is refused, and force needs
	// a reason.
	_, err = admin.RetireCA(callContext(t), &signetv1.RetireCARequest{SignerName: devpki.DefaultSigner, Fingerprint: fingerprint(old)})
	wantStatus(t, err, codes.FailedPrecondition, "ROTATION_REFUSED")
	if !strings.Contains(err.Error(), "a leaf it signed is valid until") {
		t.Fatalf("refusal %v does not say which leaf holds the CA", err)
	}
	_, err = admin.RetireCA(callContext(t), &signetv1.RetireCARequest{SignerName: devpki.DefaultSigner, Fingerprint: fingerprint(old), Force: true})
	wantStatus(t, err, codes.FailedPrecondition, "ROTATION_REFUSED")
	_, err = admin.RetireCA(callContext(t), &signetv1.RetireCARequest{SignerName: devpki.DefaultSigner,
		SerialNumber: hex.EncodeToString(old.SerialNumber.Bytes()), Force: true, Reason: "old CA key compromised"})
	if err != nil {
		t.Fatalf("forced RetireCA: %v", err)
	}
	r.restart()
	signer, _ = r.clients()
	anchors, err = signer.GetTrustAnchors(callContext(t), &signetv1.GetTrustAnchorsRequest{SignerName: devpki.DefaultSigner})
	if err != nil {
		t.Fatal(err)
	}
	if got := parsePEMCerts(t, []byte(anchors.GetTrustAnchorsPem())); len(got) != 1 || !got[0].Equal(next.Cert) {
		t.Fatalf("after retirement and a restart the bundle holds %d certificates; want only the new CA", len(got))
	}
	// The configuration still lists the old CA as active: the recorded state wins.
	if !r.s.logs.Contains("the recorded rotation state") {
		t.Error("the server did not log that its configuration lists a CA the rotation moved on from")
	}

	wantLedger(t, r.cfg.Ledger.Dir)
}

// wantLedger checks the rotation's records: each step, the refused calls, the publication
// proof, and the forced retirement's grounds.
func wantLedger(t *testing.T, dir string) {
	t.Helper()
	var rotated, published, refused int
	var forced string
	err := ledger.Replay(dir, time.Time{}, func(r ledger.Record) error {
		switch {
		case r.Decision == ledger.Rotated:
			rotated++
			if strings.HasPrefix(r.Grounds, "forced:") {
				forced = r.Grounds
			}
		case r.Decision == ledger.Published:
			published++
		case r.Decision == ledger.Refused && (r.Reason == "ROTATION_REFUSED" || r.Reason == "INVALID_CA"):
			refused++
		case r.Decision == ledger.Issued && r.CA == "":
			t.Errorf("issued record %d does not name its CA", r.Seq)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rotated != 3 || published != 1 || refused != 8 {
		t.Errorf("ledger: %d rotated, %d published, %d refused rotation records; want 3, 1, 8", rotated, published, refused)
	}
	if !strings.Contains(forced, "old CA key compromised") || !strings.Contains(forced, "a leaf it signed is valid until") {
		t.Errorf("the forced retirement's grounds are %q; want the reason and what was bypassed", forced)
	}
}

// TestRotationNeedsAdmin: a client without the admin role can neither see nor change a
// signer's CAs, and a report from a cluster the configuration does not list is refused.
func TestRotationNeedsAdmin(t *testing.T) {
	t.Parallel()
	r := newRotationServer(t, time.Hour, func(cfg *config.Config) {
		cfg.Clients[0].Admin = false
		cfg.Signers[0].Rotation.Clusters = []string{"east", "west"}
	})
	signer, admin := r.clients()
	_, err := admin.GetAuthority(callContext(t), &signetv1.GetAuthorityRequest{SignerNames: []string{devpki.DefaultSigner}})
	wantStatus(t, err, codes.PermissionDenied, "ADMIN_REQUIRED")
	_, err = admin.ActivateCA(callContext(t), &signetv1.ActivateCARequest{SignerName: devpki.DefaultSigner, Force: true, Reason: "x"})
	wantStatus(t, err, codes.PermissionDenied, "ADMIN_REQUIRED")
	old := parsePEMCerts(t, r.s.read(t, devpki.SignerCACert))[0]
	if err := report(t, signer, "east", old); err != nil {
		t.Fatalf("a registered cluster's report: %v", err)
	}
	wantStatus(t, report(t, signer, "north", old), codes.FailedPrecondition, "ROTATION_REFUSED")
	wantStatus(t, report(t, signer, "Not A Label", old), codes.InvalidArgument, "MALFORMED_REQUEST")
}

// TestForcedReasonIsChecked: the reason of a forced step, which its record keeps, is refused
// with a control character in it (a NUL), or past 512 bytes, as a confirmation's.
func TestForcedReasonIsChecked(t *testing.T) {
	t.Parallel()
	r := newRotationServer(t, time.Hour, nil)
	_, admin := r.clients()
	for _, reason := range []string{"key lost\x00, see ticket", strings.Repeat("r", 513)} {
		_, err := admin.ActivateCA(callContext(t), &signetv1.ActivateCARequest{SignerName: devpki.DefaultSigner, Force: true, Reason: reason})
		wantStatus(t, err, codes.InvalidArgument, "MALFORMED_REQUEST")
		_, err = admin.RetireCA(callContext(t), &signetv1.RetireCARequest{SignerName: devpki.DefaultSigner, Fingerprint: "ab", Force: true, Reason: reason})
		wantStatus(t, err, codes.InvalidArgument, "MALFORMED_REQUEST")
	}
}

// TestRotationCallsAreRateLimited: refused rotation calls and reports spend the client's rate
// limit, so a client cannot fill the ledger with refusals faster than its limit allows.
func TestRotationCallsAreRateLimited(t *testing.T) {
	t.Parallel()
	r := newRotationServer(t, time.Hour, func(cfg *config.Config) {
		cfg.Clients[0].Admin = false
		cfg.Clients[0].RateLimit = &access.Rate{PerSecond: 0.01, Burst: 3}
	})
	_, admin := r.clients()
	limited := 0
	for range 10 {
		_, err := admin.ActivateCA(callContext(t), &signetv1.ActivateCARequest{SignerName: devpki.DefaultSigner})
		if status.Code(err) == codes.ResourceExhausted {
			limited++
			continue
		}
		wantStatus(t, err, codes.PermissionDenied, "ADMIN_REQUIRED")
	}
	if limited != 7 {
		t.Fatalf("%d of 10 calls rate limited; want 7 (burst 3)", limited)
	}
	refused := 0
	_ = ledger.Replay(r.cfg.Ledger.Dir, time.Time{}, func(rec ledger.Record) error {
		if rec.Decision == ledger.Refused {
			refused++
		}
		return nil
	})
	if refused != 3 {
		t.Fatalf("%d refusals recorded; want 3, one per call within the limit", refused)
	}
}

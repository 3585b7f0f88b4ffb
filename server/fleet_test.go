package server_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/attestation"
	"github.com/signet-pki/signet/attestation/nodetpm"
	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/pgtest"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/keystore/pemfile"
	"github.com/signet-pki/signet/ledgerproof"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/config"
)

const fleetOrigin = "signet.test/fleet"

// fleetServers starts n in-process servers on one new database of pg, from one dev PKI and
// one checkpoint key, their dev client an admin.
func fleetServers(t *testing.T, pg *pgtest.Server, db string, n int, modify func(*config.Config)) ([]*testServer, *config.Config) {
	t.Helper()
	if err := pg.CreateDatabase(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	cfg, dir := devConfig(t)
	cfg.Clients[0].Admin = true
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	keyPEM, err := pemfile.MarshalPrivateKeyPEM(priv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Ledger.Checkpoint.Key = filepath.Join(dir, "fleet-checkpoint.pem")
	if err := os.WriteFile(cfg.Ledger.Checkpoint.Key, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Ledger.Checkpoint.Origin = fleetOrigin
	cfg.State = config.State{Backend: config.BackendPostgres, Postgres: config.Postgres{DSN: pg.DSN(db), PasswordFile: pg.PasswordFile}}
	if modify != nil {
		modify(cfg)
	}
	cfg.Default()
	out := make([]*testServer, n)
	for i := range out {
		c := *cfg
		out[i], _ = runServer(t, &c, dir)
	}
	return out, cfg
}

func (s *testServer) clients(t *testing.T) (signetv1.SignerServiceClient, signetv1.AuthorityServiceClient, signetv1.LedgerServiceClient) {
	conn := s.dial(t, s.clientTLS(t, s.devClient(t)))
	return signetv1.NewSignerServiceClient(conn), signetv1.NewAuthorityServiceClient(conn), signetv1.NewLedgerServiceClient(conn)
}

// TestFleetOneAnswerPerObject: three servers on one database, each object's request sent to
// all three at once: every caller gets the same certificate, the journal holds one issuance
// per object, another request for an object is refused on any server, and every server
// proves the issuance against the fleet's one checkpoint.
func TestFleetOneAnswerPerObject(t *testing.T) {
	pg := pgtest.Start(t)
	servers, cfg := fleetServers(t, pg, "answers", 3, nil)
	const objects = 12
	var wg sync.WaitGroup
	got := make([][3][]byte, objects)
	errs := make(chan error, objects*3)
	for o := range objects {
		csr := testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{DNSNames: []string{"svc.example"}})
		req := signRequest(csr, fmt.Sprintf("fleet-object-%02d", o))
		for i, s := range servers {
			signer, _, _ := s.clients(t)
			wg.Go(func() {
				resp, err := signer.SignCertificateSigningRequest(callContext(t), req)
				if err != nil {
					errs <- fmt.Errorf("object %d on server %d: %w", o, i, err)
					return
				}
				got[o][i] = []byte(resp.GetCertificateChainPem())
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for o := range objects {
		if len(got[o][0]) == 0 || !bytes.Equal(got[o][0], got[o][1]) || !bytes.Equal(got[o][0], got[o][2]) {
			t.Errorf("object %d: the three servers answered different certificates", o)
		}
	}

	// Another CSR for an object already answered: a conflict on every server.
	other := testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{DNSNames: []string{"other.example"}})
	for i, s := range servers {
		signer, _, _ := s.clients(t)
		_, err := signer.SignCertificateSigningRequest(callContext(t), signRequest(other, "fleet-object-00"))
		if status.Code(err) != codes.AlreadyExists && status.Code(err) != codes.FailedPrecondition {
			t.Errorf("server %d: another request for an answered object: %v, want IDEMPOTENCY_CONFLICT", i, err)
		}
	}

	// One issuance per object, seen from any server, proved against the fleet's checkpoint.
	origin, verifier := fleetVerifier(t, cfg)
	for o := range objects {
		_, _, ledger := servers[o%3].clients(t)
		uid := fmt.Sprintf("fleet-object-%02d", o)
		recs, err := ledger.FindRecords(callContext(t), &signetv1.FindRecordsRequest{ObjectUid: uid})
		if err != nil {
			t.Fatal(err)
		}
		issued := 0
		for _, r := range recs.GetRecords() {
			if r.GetDecision() == "issued" {
				issued++
			}
		}
		if issued != 1 {
			t.Errorf("object %s: %d issued records in the fleet's journal, want 1", uid, issued)
		}
		proveOnFleet(t, ledger, uid, origin, verifier)
	}

	// Each server measured how long records waited for a checkpoint covering them.
	for i, s := range servers {
		if n := metricValue(t, scrapeServer(t, s), "signet_server_ledger_checkpoint_lag_seconds_count"); n < 1 {
			t.Errorf("server %d observed %v record-to-checkpoint waits, want some", i, n)
		}
	}

	// A witness asks the servers in turn: none serves a checkpoint older than one another
	// served before it, while records keep coming.
	signer, _, _ := servers[0].clients(t)
	var witnessed int64
	for i := range 40 {
		if i%4 == 0 {
			signOne(t, signer)
		}
		_, _, ledger := servers[i%3].clients(t)
		resp, err := ledger.GetCheckpoint(callContext(t), &signetv1.GetCheckpointRequest{})
		if err != nil {
			t.Fatal(err)
		}
		cp, err := ledgerproof.OpenCheckpoint(resp.GetSignedCheckpoint(), origin, verifier)
		if err != nil {
			t.Fatal(err)
		}
		if cp.Size < witnessed {
			t.Fatalf("server %d served a checkpoint of size %d after one of size %d was served: a witness would see the ledger shrink", i%3, cp.Size, witnessed)
		}
		witnessed = cp.Size
		time.Sleep(20 * time.Millisecond)
	}
}

// fleetVerifier is the checkpoint origin and verifier of cfg's checkpoint key.
func fleetVerifier(t *testing.T, cfg *config.Config) (string, interface {
	Name() string
	KeyHash() uint32
	Verify(msg, sig []byte) bool
}) {
	t.Helper()
	raw, err := os.ReadFile(cfg.Ledger.Checkpoint.Key)
	if err != nil {
		t.Fatal(err)
	}
	key, err := pemfile.ParsePrivateKeyPEM(raw)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ledgerproof.NewNoteVerifier(fleetOrigin, key.(ed25519.PrivateKey).Public())
	if err != nil {
		t.Fatal(err)
	}
	return fleetOrigin, v
}

// proveOnFleet asks for uid's inclusion proof until a checkpoint covers it, and verifies it.
func proveOnFleet(t *testing.T, ledger signetv1.LedgerServiceClient, uid, origin string, verifier interface {
	Name() string
	KeyHash() uint32
	Verify(msg, sig []byte) bool
}) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		inc, err := ledger.ProveInclusion(callContext(t), &signetv1.ProveInclusionRequest{ObjectUid: uid})
		if err != nil {
			if time.Now().Before(deadline) && (status.Code(err) == codes.Unavailable || status.Code(err) == codes.FailedPrecondition) {
				continue
			}
			t.Fatalf("ProveInclusion(%s): %v", uid, err)
		}
		b := ledgerproof.InclusionBundle{Index: int64(inc.GetSeq()) - 1, Leaf: inc.GetLeaf(), Proof: toHashes(t, inc.GetProof()), SignedCheckpoint: inc.GetSignedCheckpoint()}
		if _, err := b.Verify(origin, verifier); err != nil {
			t.Fatalf("inclusion proof of %s: %v", uid, err)
		}
		return
	}
}

// TestFleetRotationReachesEveryServer: a CA staged on server A is activated on server B, and
// server C issues from it within 2 s, with no reload; a step over a set a server has not seen
// cannot fork the set (each step syncs first, and the journal refuses a raced one).
func TestFleetRotationReachesEveryServer(t *testing.T) {
	pg := pgtest.Start(t)
	servers, _ := fleetServers(t, pg, "rotation", 3, func(c *config.Config) {
		c.Signers[0].Rotation.MinPropagationDelay = &metav1.Duration{Duration: time.Second}
	})
	a, b, c := servers[0], servers[1], servers[2]
	next := testpki.CA(t, func(c *x509.Certificate) { c.Subject = pkix.Name{CommonName: "fleet next CA"} })
	keyPath := filepath.Join(t.TempDir(), "next.key") // one path every server of this host opens
	if err := os.WriteFile(keyPath, testpki.KeyPEM(t, next.Key), 0o600); err != nil {
		t.Fatal(err)
	}
	signerA, adminA, _ := a.clients(t)
	signerB, adminB, _ := b.clients(t)
	signerC, _, _ := c.clients(t)
	old := parsePEMCerts(t, a.read(t, devpki.SignerCACert))[0]
	if _, err := adminA.StageCA(callContext(t), &signetv1.StageCARequest{SignerName: devpki.DefaultSigner, KeyUri: keyPath, CertificatePem: string(next.CertPEM())}); err != nil {
		t.Fatalf("StageCA on A: %v", err)
	}
	// The cluster reports to B (its watcher failed over): the publication counts fleet-wide.
	if err := report(t, signerB, "east", old, next.Cert); err != nil {
		t.Fatalf("report to B: %v", err)
	}
	time.Sleep(1100 * time.Millisecond) // the propagation delay
	if _, err := adminB.ActivateCA(callContext(t), &signetv1.ActivateCARequest{SignerName: devpki.DefaultSigner}); err != nil {
		t.Fatalf("ActivateCA on B: %v", err)
	}
	activated := time.Now()
	for {
		leaf := signOne(t, signerC)
		if leaf.CheckSignatureFrom(next.Cert) == nil {
			t.Logf("server C issued from the CA activated on B after %s", time.Since(activated).Round(time.Millisecond))
			break
		}
		if time.Since(activated) > 2*time.Second {
			t.Fatal("server C still issues from the previous CA 2 s after B activated the next one")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if leaf := signOne(t, signerA); leaf.CheckSignatureFrom(next.Cert) != nil {
		t.Error("server A does not issue from the activated CA")
	}
	// A's view is the fleet's: the old CA retired, the next active.
	resp, err := adminA.GetAuthority(callContext(t), &signetv1.GetAuthorityRequest{SignerNames: []string{devpki.DefaultSigner}})
	if err != nil {
		t.Fatal(err)
	}
	if got := states(resp.GetSigners()[0]); got[fingerprint(old)] != signetv1.AnchorState_ANCHOR_STATE_RETIRED || got[fingerprint(next.Cert)] != signetv1.AnchorState_ANCHOR_STATE_ACTIVE {
		t.Fatalf("A's states after B's activation: %v", got)
	}
}

// fleetAttestedConfig is attestedConfig with the ticket key every server of a fleet shares.
func fleetAttestedConfig(t *testing.T, node *nodetpm.TPM) func(*config.Config) {
	return func(c *config.Config) {
		attestedConfig(t, node)(c)
		c.Attestation.TicketKeyFile = filepath.Join(t.TempDir(), "ticket.key")
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		if err := os.WriteFile(c.Attestation.TicketKeyFile, key, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFleetAttestation: a node asks server A for its challenge, answers it to server B, and
// its request is signed by server C; the ticket, once spent there, is refused for another
// request on A; the EK C bound to the node is refused for another node on B.
func TestFleetAttestation(t *testing.T) {
	pg := pgtest.Start(t)
	node := nodeTPM(t)
	servers, _ := fleetServers(t, pg, "attest", 3, fleetAttestedConfig(t, node))
	a, b, c := servers[0], servers[1], servers[2]
	full := attestVia(t, node, "node-a", nil, nil, a, b)
	signerC, _, _ := c.clients(t)
	rsp, err := signerC.SignCertificateSigningRequest(callContext(t), kubeletClientRequest(tpmSigner, full, "fleet-uid-1"))
	if err != nil {
		t.Fatalf("server C signing a request attested through A and B: %v", err)
	}
	if leaf := parsePEMCerts(t, []byte(rsp.GetCertificateChainPem()))[0]; leaf.Subject.CommonName != "system:node:node-a" {
		t.Fatalf("issued CN %q", leaf.Subject.CommonName)
	}
	signerA, _, _ := a.clients(t)
	_, err = signerA.SignCertificateSigningRequest(callContext(t), kubeletClientRequest(tpmSigner, full, "fleet-uid-2"))
	wantStatus(t, err, codes.FailedPrecondition, "ATTESTATION_FAILED")
	if !strings.Contains(err.Error(), "used by another request") {
		t.Fatalf("the spent ticket on A: %v, want it refused as used", err)
	}
	other := attestVia(t, node, "node-b", nil, nil, b, b)
	signerB, _, _ := b.clients(t)
	_, err = signerB.SignCertificateSigningRequest(callContext(t), kubeletClientRequest(tpmSigner, other, "fleet-uid-3"))
	wantStatus(t, err, codes.FailedPrecondition, "ATTESTATION_FAILED")
	if !strings.Contains(err.Error(), `bound to node "node-a"`) {
		t.Fatalf("the EK bound on C, for another node on B: %v, want it refused as bound", err)
	}
}

// scrapeServer returns s's /metrics.
func scrapeServer(t *testing.T, s *testServer) string {
	t.Helper()
	resp, err := http.Get("http://" + s.srv.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// TestFleetDatabaseDown: with the fleet's database down a server refuses to sign with
// LEDGER_UNAVAILABLE (Unavailable: retry, nothing recorded, nothing final), its /readyz
// answers 503, and it signs again once the database is back, with no restart.
func TestFleetDatabaseDown(t *testing.T) {
	pg := pgtest.Start(t)
	servers, _ := fleetServers(t, pg, "down", 1, nil)
	s := servers[0]
	signer, _, _ := s.clients(t)
	signOne(t, signer)
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	csr := testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{DNSNames: []string{"svc.example"}})
	_, err := signer.SignCertificateSigningRequest(callContext(t), signRequest(csr, "down-1"))
	wantStatus(t, err, codes.Unavailable, "LEDGER_UNAVAILABLE")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + s.srv.HTTPAddr() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz did not answer 503 within 5 s of the database going down")
		}
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := signer.SignCertificateSigningRequest(callContext(t), signRequest(csr, "down-1"))
		if err == nil {
			break
		}
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			t.Fatalf("signing after the database came back: %v", err)
		}
	}
}

// TestFleetAttestationChallengeChangedInTheDatabase: a challenge changed where the fleet keeps
// it (here re-aimed at another node) is refused at activation: the servers seal what they
// store with the shared ticket key.
func TestFleetAttestationChallengeChangedInTheDatabase(t *testing.T) {
	pg := pgtest.Start(t)
	node := nodeTPM(t)
	servers, _ := fleetServers(t, pg, "sealed", 2, fleetAttestedConfig(t, node))
	keys, err := node.Keys()
	if err != nil {
		t.Fatal(err)
	}
	var ch attestation.Challenge
	if code, e := servers[0].post(t, "/attest/v1/challenge", attestation.ChallengeRequest{Node: "node-a", EKPublic: keys.EKPublic, AKPublic: keys.AKPublic}, &ch); code != http.StatusOK {
		t.Fatalf("challenge: %d %+v", code, e)
	}
	secret, err := node.Activate(keys, ch)
	if err != nil {
		t.Fatal(err)
	}
	if tag, err := pg.Pool(t, "sealed").Exec(context.Background(), `UPDATE attest_challenges SET node = 'node-z' WHERE id = $1`, ch.ID); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("changing the stored challenge: %v, %v", tag, err)
	}
	var act attestation.Activation
	code, e := servers[1].post(t, "/attest/v1/activate", attestation.ActivationRequest{ID: ch.ID, Secret: secret}, &act)
	if code != http.StatusForbidden || !strings.Contains(e.Message, "changed where the server kept it") {
		t.Fatalf("activating a changed challenge: %d %+v; want 403, the challenge refused as changed", code, e)
	}
}

package attestation_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2/transport"

	"github.com/signet-pki/signet/attestation"
	"github.com/signet-pki/signet/attestation/nodetpm"
	"github.com/signet-pki/signet/internal/tpmsimtest"
)

// sim is the process's TPM simulator (internal/tpmsimtest).
var sim transport.TPM

func TestMain(m *testing.M) {
	var err error
	if sim, err = tpmsimtest.Shared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// now is the tests' clock.
var now = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// server is the server side of the exchange, with the pure functions the signing server
// wires: its trust, its ticket key.
type server struct {
	trust     attestation.Trust
	ticketKey []byte
}

// newServer returns a server that trusts the simulator's EK by the allow-list.
func newServer(t *testing.T, node *nodetpm.TPM) *server {
	t.Helper()
	keys, err := node.Keys()
	if err != nil {
		t.Fatal(err)
	}
	fp, err := attestation.EKFingerprint(keys.EKPublic)
	if err != nil {
		t.Fatal(err)
	}
	return &server{trust: attestation.Trust{AllowedEKs: map[string]bool{fp: true}}, ticketKey: []byte("0123456789abcdef0123456789abcdef")}
}

// exchange runs the challenge and activation for nodeName and returns the activation.
func (s *server) exchange(t *testing.T, node *nodetpm.TPM, keys *nodetpm.Keys, nodeName string) attestation.Activation {
	t.Helper()
	k, err := attestation.CheckKeys(keys.EKCertificate, keys.EKPublic, keys.AKPublic, s.trust, now)
	if err != nil {
		t.Fatalf("CheckKeys: %v", err)
	}
	secret, ch, err := attestation.MakeChallenge(rand.Reader, k)
	if err != nil {
		t.Fatalf("MakeChallenge: %v", err)
	}
	got, err := node.Activate(keys, ch)
	if err != nil {
		t.Fatalf("Activate: %v", err)
	}
	if string(got) != string(secret) {
		t.Fatalf("the TPM decrypted %x, want %x", got, secret)
	}
	ticket, err := attestation.NewTicket(rand.Reader, k, nodeName, now, 5*time.Minute)
	if err != nil {
		t.Fatalf("NewTicket: %v", err)
	}
	return attestation.Activation{Ticket: ticket.Seal(s.ticketKey), Nonce: ticket.Nonce[:], Expires: ticket.Expires}
}

// opts are the verify options of s for nodeName at now.
func (s *server) opts(nodeName string) attestation.VerifyOptions {
	return attestation.VerifyOptions{Trust: s.trust, TicketKey: s.ticketKey, Node: nodeName, Now: now}
}

// kubeletCSR makes a kubelet client request for nodeName with a software P-256 key and,
// when providerID is not empty, the provider ID extension.
func kubeletCSR(t *testing.T, nodeName, providerID string) (*x509.CertificateRequest, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}}}
	if providerID != "" {
		ext, err := attestation.ProviderIDExtension(providerID)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.ExtraExtensions = []pkix.Extension{ext}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		t.Fatal(err)
	}
	return csr, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// spki is the DER SubjectPublicKeyInfo of csr's key.
func spki(t *testing.T, csr *x509.CertificateRequest) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(csr.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// attest runs the whole node side for nodeName: keys, exchange, certify, and returns the
// request PEM with its evidence, the parsed request and the activation.
func attest(t *testing.T, s *server, node *nodetpm.TPM, nodeName string) (*x509.CertificateRequest, []byte, attestation.Activation) {
	t.Helper()
	keys, err := node.Keys()
	if err != nil {
		t.Fatal(err)
	}
	act := s.exchange(t, node, keys, nodeName)
	csr, csrPEM := kubeletCSR(t, nodeName, "signet://test/"+nodeName)
	c, err := node.Certify(act.Nonce, spki(t, csr))
	if err != nil {
		t.Fatal(err)
	}
	full, err := attestation.Encode(csrPEM, nodetpm.Evidence(keys, act.Ticket, c))
	if err != nil {
		t.Fatal(err)
	}
	return csr, full, act
}

// verify splits full and verifies it against csr with opts.
func verify(full []byte, csr *x509.CertificateRequest, opts attestation.VerifyOptions) (attestation.NodeIdentity, error) {
	att, err := attestation.Split(full)
	if err != nil {
		return attestation.NodeIdentity{}, err
	}
	return attestation.Verify(att, csr, opts)
}

// attestationInput is the request and options one Verify call checks evidence against.
type attestationInput struct {
	csr  *x509.CertificateRequest
	opts attestation.VerifyOptions
}

// encode appends ev to csrPEM.
func encode(t *testing.T, csrPEM []byte, ev attestation.Evidence) []byte {
	t.Helper()
	full, err := attestation.Encode(csrPEM, ev)
	if err != nil {
		t.Fatal(err)
	}
	return full
}

// encodeAtt re-encodes a split request.
func encodeAtt(t *testing.T, _ *x509.CertificateRequest, att *attestation.Attested) []byte {
	t.Helper()
	return encode(t, att.Request, att.Evidence)
}

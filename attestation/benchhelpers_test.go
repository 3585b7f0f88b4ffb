package attestation_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-tpm/tpm2"

	"github.com/signet-pki/signet/attestation"
	"github.com/signet-pki/signet/attestation/nodetpm"
)

// benchNode is the node name of the benchmarks' evidence.
const benchNode = "bench-node"

// verifyFixture is one attested request made on the simulator, what the server checks it
// with, and the raw signature checks it contains, taken apart for the anchor.
type verifyFixture struct {
	// full is the request PEM with its evidence, as the server receives it.
	full []byte
	// opts are the server's options: the simulator's EK on the allow-list, the ticket key,
	// and a clock one minute into the ticket's life.
	opts attestation.VerifyOptions
	// raw are the three ECDSA P-256 checks Verify and the request's own check make.
	raw rawSignatures
}

// rawSignatures are the signature checks a verification contains, each a key, the SHA-256
// digest it signed and the signature, decoded from the evidence.
type rawSignatures struct {
	// certify: the AK over CertifyInfo (TPM2_Certify hashes CertifyInfo).
	akKey              *ecdsa.PublicKey
	certifyDigest      []byte
	certifyR, certifyS *big.Int
	// binding: the binding key over attestation.BindingDigest(nonce, the request's key).
	bindKey       *ecdsa.PublicKey
	bindingDigest []byte
	bindR, bindS  *big.Int
	// request: the request's key over its TBS (proof of possession), ASN.1 DER as x509 has it.
	csrKey    *ecdsa.PublicKey
	csrDigest []byte
	csrSig    []byte
}

// check runs the three checks: the anchor's whole work.
func (r *rawSignatures) check() bool {
	return ecdsa.Verify(r.akKey, r.certifyDigest, r.certifyR, r.certifyS) &&
		ecdsa.Verify(r.bindKey, r.bindingDigest, r.bindR, r.bindS) &&
		ecdsa.VerifyASN1(r.csrKey, r.csrDigest, r.csrSig)
}

// verifyRequest is the server's whole check of an attested request: split, parse the
// request, check its signature, verify the evidence.
func verifyRequest(full []byte, opts attestation.VerifyOptions) (attestation.NodeIdentity, error) {
	att, err := attestation.Split(full)
	if err != nil {
		return attestation.NodeIdentity{}, err
	}
	block, _ := pem.Decode(att.Request)
	if block == nil {
		return attestation.NodeIdentity{}, fmt.Errorf("no request block")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return attestation.NodeIdentity{}, err
	}
	if err := csr.CheckSignature(); err != nil {
		return attestation.NodeIdentity{}, err
	}
	return attestation.Verify(att, csr, opts)
}

var (
	benchFixtureOnce sync.Once
	benchFixture     *verifyFixture
	benchFixtureErr  error
)

// loadVerifyFixture makes the fixture once per process: the simulator is slow and shared.
func loadVerifyFixture() (*verifyFixture, error) {
	benchFixtureOnce.Do(func() { benchFixture, benchFixtureErr = newVerifyFixture() })
	return benchFixture, benchFixtureErr
}

// newVerifyFixture runs the node's side on the simulator (keys, challenge, activation,
// certify and bind) and the server's (trust, ticket) in software, then decodes the evidence
// for the raw checks and makes sure that both the full check and the raw ones pass.
func newVerifyFixture() (*verifyFixture, error) {
	node := nodetpm.New(sim)
	keys, err := node.Keys()
	if err != nil {
		return nil, fmt.Errorf("node keys: %w", err)
	}
	fp, err := attestation.EKFingerprint(keys.EKPublic)
	if err != nil {
		return nil, err
	}
	trust := attestation.Trust{AllowedEKs: map[string]bool{fp: true}}
	ticketKey := []byte("0123456789abcdef0123456789abcdef")
	k, err := attestation.CheckKeys(keys.EKCertificate, keys.EKPublic, keys.AKPublic, trust, now)
	if err != nil {
		return nil, fmt.Errorf("CheckKeys: %w", err)
	}
	secret, ch, err := attestation.MakeChallenge(rand.Reader, k)
	if err != nil {
		return nil, fmt.Errorf("MakeChallenge: %w", err)
	}
	got, err := node.Activate(keys, ch)
	if err != nil {
		return nil, fmt.Errorf("Activate: %w", err)
	}
	if string(got) != string(secret) {
		return nil, fmt.Errorf("the TPM decrypted %x, want %x", got, secret)
	}
	ticket, err := attestation.NewTicket(rand.Reader, k, benchNode, now, 5*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("NewTicket: %w", err)
	}
	csrKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ext, err := attestation.ProviderIDExtension("signet://bench/" + benchNode)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.CertificateRequest{}
	tmpl.Subject.CommonName = "system:node:" + benchNode
	tmpl.Subject.Organization = []string{"system:nodes"}
	tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, ext)
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, csrKey)
	if err != nil {
		return nil, err
	}
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return nil, err
	}
	spkiDER, err := x509.MarshalPKIXPublicKey(csr.PublicKey)
	if err != nil {
		return nil, err
	}
	c, err := node.Certify(ticket.Nonce[:], spkiDER)
	if err != nil {
		return nil, fmt.Errorf("Certify: %w", err)
	}
	ev := nodetpm.Evidence(keys, ticket.Seal(ticketKey), c)
	full, err := attestation.Encode(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), ev)
	if err != nil {
		return nil, err
	}
	f := &verifyFixture{
		full: full,
		opts: attestation.VerifyOptions{Trust: trust, TicketKey: ticketKey, Node: benchNode, Now: now.Add(time.Minute)},
	}

	// The anchor's inputs, decoded from the evidence as Verify decodes them.
	if f.raw.akKey, err = ecdsaKey(ev.AKPublic); err != nil {
		return nil, fmt.Errorf("the AK: %w", err)
	}
	if f.raw.bindKey, err = ecdsaKey(ev.KeyPublic); err != nil {
		return nil, fmt.Errorf("the binding key: %w", err)
	}
	if f.raw.certifyR, f.raw.certifyS, err = ecdsaSignature(ev.CertifySignature); err != nil {
		return nil, fmt.Errorf("the certification's signature: %w", err)
	}
	if f.raw.bindR, f.raw.bindS, err = ecdsaSignature(ev.BindingSignature); err != nil {
		return nil, fmt.Errorf("the binding signature: %w", err)
	}
	certifyDigest := sha256.Sum256(ev.CertifyInfo)
	f.raw.certifyDigest = certifyDigest[:]
	f.raw.bindingDigest = attestation.BindingDigest(ticket.Nonce[:], spkiDER)
	if csr.SignatureAlgorithm != x509.ECDSAWithSHA256 {
		return nil, fmt.Errorf("the request is signed with %v, want ECDSA with SHA-256", csr.SignatureAlgorithm)
	}
	f.raw.csrKey = csr.PublicKey.(*ecdsa.PublicKey)
	csrDigest := sha256.Sum256(csr.RawTBSCertificateRequest)
	f.raw.csrDigest, f.raw.csrSig = csrDigest[:], csr.Signature

	// Time nothing that does not pass.
	if _, err := verifyRequest(f.full, f.opts); err != nil {
		return nil, fmt.Errorf("the evidence does not verify: %w", err)
	}
	if !f.raw.check() {
		return nil, fmt.Errorf("the raw signature checks do not pass")
	}
	return f, nil
}

// ecdsaKey decodes a TPMT_PUBLIC and returns its ECDSA P-256 key.
func ecdsaKey(raw []byte) (*ecdsa.PublicKey, error) {
	pub, err := tpm2.Unmarshal[tpm2.TPMTPublic](raw)
	if err != nil {
		return nil, err
	}
	key, err := tpm2.Pub(*pub)
	if err != nil {
		return nil, err
	}
	k, ok := key.(*ecdsa.PublicKey)
	if !ok || k.Curve != elliptic.P256() {
		return nil, fmt.Errorf("a %T, want an ECDSA P-256 key", key)
	}
	return k, nil
}

// ecdsaSignature decodes a TPMT_SIGNATURE of ECDSA with SHA-256 into r and s.
func ecdsaSignature(raw []byte) (r, s *big.Int, err error) {
	sig, err := tpm2.Unmarshal[tpm2.TPMTSignature](raw)
	if err != nil {
		return nil, nil, err
	}
	e, err := sig.Signature.ECDSA()
	if err != nil {
		return nil, nil, err
	}
	if e.Hash != tpm2.TPMAlgSHA256 {
		return nil, nil, fmt.Errorf("hash 0x%04x, want SHA-256", uint16(e.Hash))
	}
	return new(big.Int).SetBytes(e.SignatureR.Buffer), new(big.Int).SetBytes(e.SignatureS.Buffer), nil
}

// processCPU is the process's user and system CPU time so far, from /proc/self/stat (Linux,
// in ticks of 10 ms), or false where there is no such file.
func processCPU() (time.Duration, bool) {
	raw, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	// The command name, field 2, is in parentheses and may hold spaces: count after it.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	// f[0] is field 3; utime and stime are fields 14 and 15, in USER_HZ (100) ticks.
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}

// Package issuance turns a certificate request into a signed certificate in one straight line:
// parse → policy → template → sign. It is pure: the CA key is a crypto.Signer, and time and
// randomness are injected.
package issuance

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"time"

	"k8s.io/utils/clock"
)

// CA is a loaded certificate authority: its certificate, the intermediates between it and the
// root (to append to every chain) and its private key.
type CA struct {
	Certificate   *x509.Certificate
	Intermediates []*x509.Certificate
	Key           crypto.Signer
}

// Validate checks at load time that the CA can issue: its key matches its certificate, the
// certificate is a CA (basic constraints CA:TRUE) and, when it has a key usage extension, that
// it includes certificate signing.
func (ca *CA) Validate() error {
	if ca == nil || ca.Certificate == nil || ca.Key == nil {
		return errors.New("CA certificate and key are both required")
	}
	pub, ok := ca.Key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(ca.Certificate.PublicKey) {
		return errors.New("the CA key does not match the CA certificate's public key")
	}
	if !ca.Certificate.BasicConstraintsValid || !ca.Certificate.IsCA {
		return errors.New("the CA certificate is not a CA (basic constraints CA:TRUE missing)")
	}
	if ca.Certificate.KeyUsage != 0 && ca.Certificate.KeyUsage&x509.KeyUsageCertSign == 0 {
		return errors.New("the CA certificate's key usage does not allow certificate signing")
	}
	return nil
}

// Issuer issues certificates for one signer name. It is safe for concurrent use.
type Issuer struct {
	name   string
	ca     *CA
	policy Policy
	clock  clock.PassiveClock
	rand   io.Reader
}

// IssuerOptions configures NewIssuer. Clock and Rand default to the real clock and
// crypto/rand.
type IssuerOptions struct {
	SignerName string
	CA         *CA
	Policy     Policy
	Clock      clock.PassiveClock
	Rand       io.Reader
}

// NewIssuer validates the CA and the policy and returns an Issuer.
func NewIssuer(opts IssuerOptions) (*Issuer, error) {
	if opts.SignerName == "" {
		return nil, errors.New("creating issuer: signer name is required")
	}
	if err := opts.CA.Validate(); err != nil {
		return nil, fmt.Errorf("creating issuer for %s: %w", opts.SignerName, err)
	}
	if opts.Policy == nil {
		return nil, fmt.Errorf("creating issuer for %s: a policy is required", opts.SignerName)
	}
	if v, ok := opts.Policy.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("creating issuer for %s: %w", opts.SignerName, err)
		}
	}
	i := &Issuer{name: opts.SignerName, ca: opts.CA, policy: opts.Policy, clock: opts.Clock, rand: opts.Rand}
	if i.clock == nil {
		i.clock = clock.RealClock{}
	}
	if i.rand == nil {
		i.rand = rand.Reader
	}
	return i, nil
}

// SignerName is the signer name the issuer serves.
func (i *Issuer) SignerName() string { return i.name }

// CACertificate is the certificate of the issuing CA.
func (i *Issuer) CACertificate() *x509.Certificate { return i.ca.Certificate }

// TrustAnchors returns the PEM-encoded certificate of the CA that verifies issued chains.
func (i *Issuer) TrustAnchors() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: i.ca.Certificate.Raw})
}

// Certificate is an issued certificate.
type Certificate struct {
	// Leaf is the parsed leaf certificate.
	Leaf *x509.Certificate
	// ChainPEM is the leaf followed by the CA's intermediates, PEM-encoded.
	ChainPEM []byte
}

// Issue runs the pipeline for one request:
//   - parse: ParseCSR (PEM, PKCS#10, proof of possession, key type and size);
//   - policy: usages, no CA request, lifetime (see Policy);
//   - template: subject and SANs re-encoded from the request, key usage and extended key usage
//     from the requested usages only, no other requested extension, CA:FALSE, a random
//     128-bit serial, NotBefore backdated by Backdate, NotAfter as kube-controller-manager
//     computes it and never past the CA's NotAfter;
//   - sign: with the CA key, then check the result chains to the CA.
//
// Refusals wrap one of the sentinel errors in errors.go.
func (i *Issuer) Issue(req Request) (*Certificate, error) {
	if req.SignerName != i.name {
		return nil, fmt.Errorf("%w: signer name %q is served by another issuer", ErrPolicyViolation, req.SignerName)
	}
	csr, err := ParseCSR(req.PEM)
	if err != nil {
		return nil, err
	}
	d, _, err := i.policy.Evaluate(csr, req)
	if err != nil {
		return nil, err
	}
	tmpl, err := i.template(csr, d)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(i.rand, tmpl, i.ca.Certificate, csr.PublicKey, i.ca.Key)
	if err != nil {
		return nil, fmt.Errorf("signing certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing issued certificate: %w", err)
	}
	if err := leaf.CheckSignatureFrom(i.ca.Certificate); err != nil {
		return nil, fmt.Errorf("checking issued certificate: %w", err)
	}
	var chain bytes.Buffer
	_ = pem.Encode(&chain, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	for _, c := range i.ca.Intermediates {
		_ = pem.Encode(&chain, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return &Certificate{Leaf: leaf, ChainPEM: chain.Bytes()}, nil
}

// template builds the leaf certificate for a request the policy has allowed.
func (i *Issuer) template(csr *x509.CertificateRequest, d Decision) (*x509.Certificate, error) {
	serial, err := i.serial()
	if err != nil {
		return nil, err
	}
	now := i.clock.Now()
	caNotAfter := i.ca.Certificate.NotAfter
	if !now.Before(caNotAfter) {
		return nil, fmt.Errorf("the CA certificate expired at %s", caNotAfter.UTC().Format(time.RFC3339))
	}
	notAfter := now.Add(d.Lifetime)
	if d.Lifetime >= ShortLifetime {
		notAfter = notAfter.Add(-Backdate)
	}
	if notAfter.After(caNotAfter) {
		notAfter = caNotAfter
	}
	return &x509.Certificate{
		SerialNumber:          serial,
		Subject:               csr.Subject,
		DNSNames:              csr.DNSNames,
		IPAddresses:           csr.IPAddresses,
		EmailAddresses:        csr.EmailAddresses,
		URIs:                  csr.URIs,
		NotBefore:             now.Add(-Backdate),
		NotAfter:              notAfter,
		KeyUsage:              d.KeyUsage,
		ExtKeyUsage:           d.ExtKeyUsage,
		BasicConstraintsValid: true,
		IsCA:                  false,
	}, nil
}

// serial returns 128 random bits behind a fixed 0x01 byte, so every serial is positive, has
// exactly 129 bits and encodes in 17 octets (RFC 5280 allows up to 20).
func (i *Issuer) serial() (*big.Int, error) {
	b := make([]byte, 17)
	if _, err := io.ReadFull(i.rand, b[1:]); err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	b[0] = 0x01
	return new(big.Int).SetBytes(b), nil
}

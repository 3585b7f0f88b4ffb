// Package issuance turns a certificate request into a signed certificate in one straight line:
// parse → policy → template → lint → sign → verify. It is pure: the CA key is a crypto.Signer,
// and time and randomness are injected.
//
// Two kinds of request enter the line: a CertificateSigningRequest (Issue: a PEM PKCS#10
// request, spec.usages, spec.expirationSeconds, the requester) and a PodCertificateRequest
// (IssuePod: a pod identity and the pod's key). They differ in parsing, in the policy's
// rules and in the validity rule; template, lint, sign and verify are shared. Each signer's
// policy serves one kind, and the other kind is refused before it is parsed.
package issuance

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/url"
	"slices"
	"time"

	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/server/certsign"
	"github.com/signet-pki/signet/server/lint"
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
	caFP   string // hex SHA-256 of the CA certificate's DER
	policy Policy
	lint   *lint.Gate
	clock  clock.PassiveClock
	rand   io.Reader
}

// IssuerOptions configures NewIssuer. Clock and Rand default to the real clock and
// crypto/rand.
type IssuerOptions struct {
	SignerName string
	CA         *CA
	Policy     Policy
	// Lint is the pre-issuance lint gate; nil issues without linting.
	Lint  *lint.Gate
	Clock clock.PassiveClock
	Rand  io.Reader
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
	sum := sha256.Sum256(opts.CA.Certificate.Raw)
	i := &Issuer{name: opts.SignerName, ca: opts.CA, caFP: hex.EncodeToString(sum[:]), policy: opts.Policy, lint: opts.Lint, clock: opts.Clock, rand: opts.Rand}
	if i.lint != nil {
		if err := i.lint.Prepare(opts.CA.Certificate); err != nil {
			return nil, fmt.Errorf("creating issuer for %s: %w", opts.SignerName, err)
		}
	}
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
	// CA is the lower-case hex SHA-256 of the DER of the signing CA's certificate.
	CA string
	// AcceptedFindings are the lint gate's findings that the signer's profile accepts by
	// design (lint.Options.Accept): counted and logged at debug level, never stopping issuance.
	AcceptedFindings []lint.Finding
	// Grounds is the policy decision's Grounds: the rule that admitted the request when it is
	// not the ordinary one (empty otherwise).
	Grounds string
	// LintFindings are the lint gate's Warn and Notice results for the certificate, as
	// "lint_name: details" (warnings first, each kind sorted): they do not stop issuance, and
	// the service logs them with it.
	LintFindings []string
}

// Issue runs the pipeline for one request from a CertificateSigningRequest:
//   - kind: the signer's policy must serve CertificateSigningRequests (ErrPolicyViolation);
//   - parse: ParseCSR (PEM, PKCS#10, proof of possession, key type and size);
//   - policy: the signer's profile (see Policy);
//   - template: subject and SANs re-encoded from the request, key usage and extended key usage
//     from the requested usages only, no other requested extension, CA:FALSE, a random
//     serial (0x01 then 128 random bits), NotBefore backdated by Backdate, NotAfter as kube-controller-manager
//     computes it and never past the CA's NotAfter;
//   - lint (when the issuer has a lint gate): the to-be-signed certificate Go encodes for the
//     template under the CA is linted before anything is signed; any Error or Fatal lint
//     refuses issuance;
//   - sign: the CA key signs the linted bytes themselves (certsign.Sign, which verifies the
//     signature unless the key is Go's own ECDSA or RSA implementation);
//   - verify: the leaf names the CA as issuer, carries the request's key, CA:FALSE and exactly
//     the extensions the template asked for.
//
// Refusals wrap one of the sentinel errors in errors.go, or lint.ErrLintFailed.
func (i *Issuer) Issue(req Request) (*Certificate, error) {
	p, err := i.prepare(req)
	if err != nil {
		return nil, err
	}
	return i.sign(p)
}

// sign signs a prepared template with the CA key, checks the result and returns it with its
// chain.
func (i *Issuer) sign(p *prepared) (*Certificate, error) {
	der, err := certsign.Sign(i.rand, p.tbs, i.ca.Key, i.ca.Certificate)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing issued certificate: %w", err)
	}
	if err := i.verify(leaf, p); err != nil {
		return nil, fmt.Errorf("checking issued certificate: %w", err)
	}
	var chain bytes.Buffer
	_ = pem.Encode(&chain, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	for _, c := range i.ca.Intermediates {
		_ = pem.Encode(&chain, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return &Certificate{Leaf: leaf, ChainPEM: chain.Bytes(), CA: i.caFP, Grounds: p.decision.Grounds, LintFindings: p.findings, AcceptedFindings: p.accepted}, nil
}

// prepared is a request that passed every step before signing.
type prepared struct {
	pub      crypto.PublicKey
	decision Decision
	rules    []RuleResult
	tmpl     *x509.Certificate
	tbs      []byte // the DER TBSCertificate of tmpl under the CA: linted, then signed
	findings []string
	accepted []lint.Finding
}

// leafNames are the subject and SANs of a leaf certificate.
type leafNames struct {
	subject pkix.Name
	dns     []string
	ips     []net.IP
	emails  []string
	uris    []*url.URL
}

// prepare runs kind, parse, policy, template and lint for a CertificateSigningRequest. On a
// kind or policy refusal the returned prepared still carries the rules evaluated, for Explain.
func (i *Issuer) prepare(req Request) (*prepared, error) {
	if p, err := i.admit(req.SignerName, KindCertificateSigningRequest); err != nil {
		return p, err
	}
	csr, err := ParseCSR(req.PEM)
	if err != nil {
		return nil, err
	}
	p := &prepared{pub: csr.PublicKey}
	p.decision, p.rules, err = i.policy.Evaluate(csr, req)
	if err != nil {
		return p, err
	}
	notBefore, notAfter, err := i.csrValidity(p.decision.Lifetime)
	if err != nil {
		return p, err
	}
	names := leafNames{subject: csr.Subject, dns: csr.DNSNames, ips: csr.IPAddresses, emails: csr.EmailAddresses, uris: csr.URIs}
	return p, i.finish(p, names, notBefore, notAfter)
}

// admit refuses a request addressed to another signer, or of a kind the signer's policy does
// not serve; the latter with a prepared holding the failed kind rule, for Explain.
func (i *Issuer) admit(signerName string, kind Kind) (*prepared, error) {
	if signerName != i.name {
		return nil, fmt.Errorf("%w: signer name %q is served by another issuer", ErrPolicyViolation, signerName)
	}
	served := i.policy.Kind()
	if served == kind {
		return nil, nil
	}
	err := fmt.Errorf("%w: signer %q serves %ss only (profile %s), not %ss", ErrPolicyViolation, i.name, served, i.policy.Name(), kind)
	rule := RuleResult{Rule: fmt.Sprintf("kind: the signer serves %ss", served), Detail: fmt.Sprintf("the request comes from a %s", kind)}
	return &prepared{rules: []RuleResult{rule}}, err
}

// finish builds the template of p for names, valid from notBefore to notAfter, and runs the
// lint gate on it.
func (i *Issuer) finish(p *prepared, names leafNames, notBefore, notAfter time.Time) error {
	var err error
	if p.tmpl, err = i.template(names, p.decision, notBefore, notAfter); err != nil {
		return err
	}
	if p.tbs, err = certsign.EncodeTBS(p.tmpl, i.ca.Certificate, p.pub); err != nil {
		return err
	}
	if i.lint != nil {
		res, err := i.lint.CheckTBS(p.tbs, i.ca.Certificate)
		if err != nil {
			return err
		}
		p.findings = slices.Concat(res.Warnings, res.Notices)
		p.accepted = res.Accepted
	}
	return nil
}

// verify checks a freshly signed leaf against what was prepared for it.
func (i *Issuer) verify(leaf *x509.Certificate, p *prepared) error {
	// certsign.Sign signed p.tbs itself, the bytes the lint gate passed, so there is no second
	// encoding to compare, and it verified the signature where a signer can get it wrong (see
	// its package doc); the key is the CA certificate's (CA.Validate). What remains is that
	// the encoded template says what was asked: the leaf names the CA as issuer, carries the
	// request's key, CA:FALSE and exactly the extensions the template asks for.
	if !bytes.Equal(leaf.RawIssuer, i.ca.Certificate.RawSubject) {
		return errors.New("the certificate's issuer is not the CA's subject")
	}
	if pub, ok := p.pub.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(leaf.PublicKey) {
		return errors.New("the certificate's key is not the request's key")
	}
	if !leaf.BasicConstraintsValid || leaf.IsCA {
		return errors.New("the certificate is not CA:FALSE")
	}
	// The extensions the template asks for, and no other (x509.ParseCertificate has refused
	// duplicates already).
	var buf [5]asn1.ObjectIdentifier
	want := append(buf[:0], oidBasicConstraints)
	if p.tmpl.KeyUsage != 0 {
		want = append(want, oidKeyUsage)
	}
	if len(p.tmpl.ExtKeyUsage) > 0 {
		want = append(want, oidExtKeyUsage)
	}
	if len(p.tmpl.DNSNames)+len(p.tmpl.IPAddresses)+len(p.tmpl.URIs)+len(p.tmpl.EmailAddresses) > 0 {
		want = append(want, oidSubjectAltName)
	}
	if len(i.ca.Certificate.SubjectKeyId) > 0 {
		want = append(want, oidAuthorityKeyID)
	}
	if len(leaf.Extensions) != len(want) {
		return fmt.Errorf("the certificate has %d extensions, want %d", len(leaf.Extensions), len(want))
	}
	for _, ext := range leaf.Extensions {
		if !slices.ContainsFunc(want, ext.Id.Equal) {
			return fmt.Errorf("the certificate carries unexpected extension %s", ext.Id)
		}
	}
	return nil
}

// Explanation is the outcome of a dry run.
type Explanation struct {
	// Rules are the rules evaluated, in order, ending with the lint gate when it ran.
	Rules []RuleResult
	// Lifetime is the lifetime the certificate would have (before backdating).
	Lifetime time.Duration
	// Err is the refusal a sign call would return, nil when the request would be signed.
	Err error
}

// Explain runs kind, parse, policy, template and lint without signing, and reports every rule.
func (i *Issuer) Explain(req Request) Explanation {
	p, err := i.prepare(req)
	return i.explain(p, err, "request: one PEM PKCS#10 request, signed by its own key, with a supported key")
}

// explain assembles the Explanation of a prepare run; parseRule names the parse step, reported
// as failed when the run stopped there.
func (i *Issuer) explain(p *prepared, err error, parseRule string) Explanation {
	var e Explanation
	if p != nil {
		e.Rules = p.rules
		e.Lifetime = p.decision.Lifetime
	}
	switch {
	case p == nil:
		e.Rules = append(e.Rules, RuleResult{Rule: parseRule, Detail: err.Error()})
	case p.tmpl != nil && i.lint != nil:
		r := RuleResult{Rule: "lint: no zlint error on the certificate", Passed: err == nil, Detail: "passed"}
		if err != nil {
			r.Detail = err.Error()
		}
		e.Rules = append(e.Rules, r)
	}
	e.Err = err
	return e
}

// csrValidity returns the validity of a certificate for a CertificateSigningRequest with
// lifetime, as kube-controller-manager computes it: NotBefore backdated by Backdate, NotAfter
// lifetime after the signing time, brought in by Backdate for lifetimes of ShortLifetime or
// more, and never past the CA's NotAfter. An expired CA is an (internal) error.
func (i *Issuer) csrValidity(lifetime time.Duration) (notBefore, notAfter time.Time, err error) {
	now, caNotAfter, err := i.signingTime()
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	notAfter = now.Add(lifetime)
	if lifetime >= ShortLifetime {
		notAfter = notAfter.Add(-Backdate)
	}
	if notAfter.After(caNotAfter) {
		notAfter = caNotAfter
	}
	return now.Add(-Backdate), notAfter, nil
}

// signingTime returns the clock's time and the CA's NotAfter, or an (internal) error if the CA
// certificate has expired.
func (i *Issuer) signingTime() (now, caNotAfter time.Time, err error) {
	now, caNotAfter = i.clock.Now(), i.ca.Certificate.NotAfter
	if !now.Before(caNotAfter) {
		return time.Time{}, time.Time{}, fmt.Errorf("the CA certificate expired at %s", caNotAfter.UTC().Format(time.RFC3339))
	}
	return now, caNotAfter, nil
}

// template builds the leaf certificate for names under decision d: its key usages, CA:FALSE,
// a fresh serial and the given validity. No requested extension is ever copied.
func (i *Issuer) template(n leafNames, d Decision, notBefore, notAfter time.Time) (*x509.Certificate, error) {
	serial, err := i.serial()
	if err != nil {
		return nil, err
	}
	return &x509.Certificate{
		SerialNumber:          serial,
		Subject:               n.subject,
		DNSNames:              n.dns,
		IPAddresses:           n.ips,
		EmailAddresses:        n.emails,
		URIs:                  n.uris,
		NotBefore:             notBefore,
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

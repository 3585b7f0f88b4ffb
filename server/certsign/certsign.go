// Package certsign turns a certificate template into a signed certificate in two steps that
// can be told apart: EncodeTBS gives the exact to-be-signed bytes (for the lint gate to check
// before any key signs), and Sign signs those very bytes with the CA key and assembles the
// certificate, so the template is encoded once and what was linted is what is signed.
//
// x509.CreateCertificate does both steps in one call and then verifies the new signature with
// the CA's public key, "to ensure the crypto.Signer behaved correctly". Sign keeps that check
// for every signer whose output is not already checked or safe by construction: keys held by a
// device or another process (HSM, TPM, any crypto.Signer this package does not know) and
// Ed25519 (deterministic: a signature computed with a fault can reveal the key). It skips it
// for Go's own software keys: crypto/rsa checks every signature it makes against the public
// key before returning it (the defence against RSA-CRT faults), and crypto/ecdsa draws a fresh
// hedged nonce for every signature, so a faulty one reveals nothing; verifying an ECDSA P-256
// signature costs about twice making it, and was the largest single cost of an issuance after
// the lint gate.
package certsign

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"fmt"
	"io"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"

	"github.com/signet-pki/signet/keystore"
)

// errTBSCaptured stops x509.CreateCertificate once it has encoded the to-be-signed certificate.
var errTBSCaptured = errors.New("to-be-signed certificate captured, nothing signed")

// tbsCapture is the crypto.Signer handed to x509.CreateCertificate to obtain the exact
// to-be-signed bytes it would sign, with no signature made by any key. It reports the CA's own
// public key, so Go picks the signature algorithm it would pick for the CA key, and it
// implements crypto.MessageSigner, so Go hands it the whole TBSCertificate (not a digest) and
// it can stop there.
type tbsCapture struct {
	pub crypto.PublicKey
	tbs []byte
}

func (c *tbsCapture) Public() crypto.PublicKey { return c.pub }

// SignMessage keeps msg, the DER TBSCertificate, and refuses to sign.
func (c *tbsCapture) SignMessage(_ io.Reader, msg []byte, _ crypto.SignerOpts) ([]byte, error) {
	c.tbs = msg // CreateCertificate drops its reference when signing fails
	return nil, errTBSCaptured
}

// Sign is never called: crypto.SignMessage prefers SignMessage.
func (c *tbsCapture) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return nil, errTBSCaptured
}

// EncodeTBS returns the DER TBSCertificate that x509.CreateCertificate(rand, tmpl, caCert, pub,
// <CA key>) would sign: Go encodes it in full before any signature is made. tmpl must carry
// its serial number (Go would otherwise draw a random one per call).
func EncodeTBS(tmpl, caCert *x509.Certificate, pub crypto.PublicKey) ([]byte, error) {
	switch {
	case tmpl == nil:
		return nil, errors.New("encoding certificate: template is required")
	case caCert == nil:
		return nil, errors.New("encoding certificate: CA certificate is required")
	case pub == nil:
		return nil, errors.New("encoding certificate: subject public key is required")
	case tmpl.SerialNumber == nil:
		return nil, errors.New("encoding certificate: the template has no serial number")
	}
	c := &tbsCapture{pub: caCert.PublicKey}
	_, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, pub, c)
	if !errors.Is(err, errTBSCaptured) {
		if err == nil {
			err = errors.New("x509.CreateCertificate made a signature without the signer")
		}
		return nil, fmt.Errorf("encoding certificate: %w", err)
	}
	if c.tbs == nil {
		// A crypto/x509 that signs digests instead of messages would end up here.
		return nil, errors.New("encoding certificate: x509.CreateCertificate did not hand over the to-be-signed certificate")
	}
	return c.tbs, nil
}

// Assemble wraps tbs and a signature value into a DER Certificate: SEQUENCE { tbs, the
// signature algorithm identifier copied from tbs, BIT STRING signature }.
func Assemble(tbs, signature []byte) ([]byte, error) {
	alg, err := signatureAlgorithmElement(tbs)
	if err != nil {
		return nil, err
	}
	return assemble(tbs, alg, signature)
}

// assemble is Assemble with tbs's signature algorithm element already read.
func assemble(tbs, alg, signature []byte) ([]byte, error) {
	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddBytes(tbs)
		b.AddBytes(alg)
		b.AddASN1BitString(signature)
	})
	return b.Bytes()
}

// Sign signs tbs (from EncodeTBS for caCert) with key, the private key of caCert, and returns
// the DER certificate. The signature algorithm is the one tbs names; it must be one Go picks
// for the key type (ECDSA with SHA-256/384/512, RSA PKCS #1 v1.5 with SHA-256/384/512,
// Ed25519). The new signature is verified with caCert's public key unless key is Go's own
// ECDSA or RSA implementation (see the package doc).
func Sign(rand io.Reader, tbs []byte, key crypto.Signer, caCert *x509.Certificate) ([]byte, error) {
	if key == nil || caCert == nil {
		return nil, errors.New("signing certificate: CA key and certificate are required")
	}
	alg, err := signatureAlgorithmElement(tbs)
	if err != nil {
		return nil, fmt.Errorf("signing certificate: %w", err)
	}
	sa, err := algorithmFor(alg, key.Public())
	if err != nil {
		return nil, fmt.Errorf("signing certificate: %w", err)
	}
	sig, err := crypto.SignMessage(key, rand, tbs, sa.hash)
	if err != nil {
		return nil, fmt.Errorf("signing certificate: %w", err)
	}
	if NeedsCheck(key) {
		if err := caCert.CheckSignature(sa.algo, tbs, sig); err != nil {
			return nil, fmt.Errorf("signing certificate: the signature returned by the CA key is invalid: %w", err)
		}
	}
	der, err := assemble(tbs, alg, sig)
	if err != nil {
		return nil, fmt.Errorf("signing certificate: %w", err)
	}
	return der, nil
}

// NeedsCheck reports whether Sign verifies a signature made by key: false only for Go's
// software ECDSA and RSA keys, bare or behind a keystore.SoftwareKey (a file key).
func NeedsCheck(key crypto.Signer) bool {
	if sk, ok := key.(keystore.SoftwareKey); ok {
		key = sk.Software()
	}
	switch key.(type) {
	case *ecdsa.PrivateKey, *rsa.PrivateKey:
		return false
	default:
		return true
	}
}

// sigAlg is a signature algorithm Sign supports.
type sigAlg struct {
	oid  asn1.ObjectIdentifier
	algo x509.SignatureAlgorithm
	hash crypto.Hash
	key  func(crypto.PublicKey) bool
}

func isECDSA(k crypto.PublicKey) bool   { _, ok := k.(*ecdsa.PublicKey); return ok }
func isRSA(k crypto.PublicKey) bool     { _, ok := k.(*rsa.PublicKey); return ok }
func isEd25519(k crypto.PublicKey) bool { _, ok := k.(ed25519.PublicKey); return ok }

// sigAlgs are the algorithms x509.CreateCertificate picks by default for a CA key (ECDSA by
// curve, RSA PKCS #1 v1.5 with SHA-256) and their stronger-hash variants.
var sigAlgs = []sigAlg{
	{asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 2}, x509.ECDSAWithSHA256, crypto.SHA256, isECDSA},
	{asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 3}, x509.ECDSAWithSHA384, crypto.SHA384, isECDSA},
	{asn1.ObjectIdentifier{1, 2, 840, 10045, 4, 3, 4}, x509.ECDSAWithSHA512, crypto.SHA512, isECDSA},
	{asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 11}, x509.SHA256WithRSA, crypto.SHA256, isRSA},
	{asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 12}, x509.SHA384WithRSA, crypto.SHA384, isRSA},
	{asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 13}, x509.SHA512WithRSA, crypto.SHA512, isRSA},
	{asn1.ObjectIdentifier{1, 3, 101, 112}, x509.PureEd25519, 0, isEd25519},
}

// algorithmFor finds the algorithm of the AlgorithmIdentifier element alg and checks that it
// suits pub.
func algorithmFor(alg []byte, pub crypto.PublicKey) (sigAlg, error) {
	in := cryptobyte.String(alg)
	var body cryptobyte.String
	var oid asn1.ObjectIdentifier
	if !in.ReadASN1(&body, cbasn1.SEQUENCE) || !body.ReadASN1ObjectIdentifier(&oid) {
		return sigAlg{}, errors.New("malformed signature algorithm in the to-be-signed certificate")
	}
	for _, a := range sigAlgs {
		if a.oid.Equal(oid) {
			if !a.key(pub) {
				return sigAlg{}, fmt.Errorf("signature algorithm %s does not suit a %T CA key", a.algo, pub)
			}
			return a, nil
		}
	}
	return sigAlg{}, fmt.Errorf("unsupported signature algorithm %s", oid)
}

// signatureAlgorithmElement returns the DER AlgorithmIdentifier in the signature field of a
// TBSCertificate: SEQUENCE { [0] version OPTIONAL, serialNumber, signature, ... }.
func signatureAlgorithmElement(tbs []byte) ([]byte, error) {
	in := cryptobyte.String(tbs)
	var body, alg cryptobyte.String
	if !in.ReadASN1(&body, cbasn1.SEQUENCE) || !in.Empty() ||
		!body.SkipOptionalASN1(cbasn1.Tag(0).Constructed().ContextSpecific()) ||
		!body.SkipASN1(cbasn1.INTEGER) ||
		!body.ReadASN1Element(&alg, cbasn1.SEQUENCE) {
		return nil, errors.New("malformed to-be-signed certificate")
	}
	return alg, nil
}

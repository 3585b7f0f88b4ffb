package lint

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/big"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

// errTBSCaptured stops x509.CreateCertificate once it has encoded the to-be-signed certificate.
var errTBSCaptured = errors.New("to-be-signed certificate captured, nothing signed")

// tbsCapture is the crypto.Signer handed to x509.CreateCertificate to obtain the exact
// to-be-signed bytes it would sign, with no signature made by any key. It reports the CA's own
// public key, so Go picks the signature algorithm it will pick for the real signature, and it
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

// encodeTBS returns the DER TBSCertificate that x509.CreateCertificate(rand, tmpl, caCert, pub,
// <CA key>) signs. Go encodes it in full before any signature is made, so these are the very
// bytes the CA key will be asked to sign for the same template.
func encodeTBS(tmpl, caCert *x509.Certificate, pub crypto.PublicKey) ([]byte, error) {
	c := &tbsCapture{pub: caCert.PublicKey}
	_, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, pub, c)
	if !errors.Is(err, errTBSCaptured) {
		if err == nil {
			err = errors.New("x509.CreateCertificate made a signature without the signer")
		}
		return nil, err
	}
	if c.tbs == nil {
		// A crypto/x509 that signs digests instead of messages would end up here.
		return nil, errors.New("x509.CreateCertificate did not hand over the to-be-signed certificate")
	}
	return c.tbs, nil
}

// lintCertificate wraps tbs into a Certificate with a placeholder signature of the shape the CA
// key makes: the algorithm identifier copied from the TBS, and a signature value of the real
// length and encoding that no key made. Lints see everything the real certificate will carry
// except the signature value, which they cannot check without the issuer's key anyway (the one
// lint that tries, against fixed public keys, never runs: alwaysExcluded).
func lintCertificate(tbs []byte, placeholder []byte) ([]byte, error) {
	in := cryptobyte.String(tbs)
	var body, alg cryptobyte.String
	if !in.ReadASN1(&body, cbasn1.SEQUENCE) ||
		!body.SkipOptionalASN1(cbasn1.Tag(0).Constructed().ContextSpecific()) ||
		!body.SkipASN1(cbasn1.INTEGER) ||
		!body.ReadASN1Element(&alg, cbasn1.SEQUENCE) {
		return nil, errors.New("malformed to-be-signed certificate")
	}
	var b cryptobyte.Builder
	b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddBytes(tbs)
		b.AddBytes(alg)
		b.AddASN1BitString(placeholder)
	})
	return b.Bytes()
}

// placeholderSignature returns a signature value with the length and encoding a signature by
// pub's private key has, for the lints that look at the signature's shape (Mozilla's ECDSA
// encoding lint infers the curve from its length): ECDSA a DER (r, s) with r = s = n-1, the
// longest encoding for the curve; RSA the modulus length; Ed25519 64 bytes. It fails for key
// types and curves the gate does not support.
func placeholderSignature(pub crypto.PublicKey) ([]byte, error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
		default:
			return nil, fmt.Errorf("unsupported CA key: ECDSA curve %s", curveName(k.Curve))
		}
		nMinus1 := new(big.Int).Sub(k.Curve.Params().N, big.NewInt(1))
		var b cryptobyte.Builder
		b.AddASN1(cbasn1.SEQUENCE, func(b *cryptobyte.Builder) {
			b.AddASN1BigInt(nMinus1)
			b.AddASN1BigInt(nMinus1)
		})
		return b.Bytes()
	case *rsa.PublicKey:
		if k.N == nil {
			return nil, errors.New("unsupported CA key: RSA key without a modulus")
		}
		sig := make([]byte, (k.N.BitLen()+7)/8)
		sig[len(sig)-1] = 1 // a value below the modulus, like any signature
		return sig, nil
	case ed25519.PublicKey:
		return make([]byte, ed25519.SignatureSize), nil
	default:
		return nil, fmt.Errorf("unsupported CA key type %T", pub)
	}
}

func curveName(c elliptic.Curve) string {
	if c == nil || c.Params() == nil {
		return "unknown"
	}
	return c.Params().Name
}

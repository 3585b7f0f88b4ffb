package lint

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"math/big"

	"golang.org/x/crypto/cryptobyte"
	cbasn1 "golang.org/x/crypto/cryptobyte/asn1"
)

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

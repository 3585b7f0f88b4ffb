//go:build cgo

package pkcs11

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"

	cryptoki "github.com/miekg/pkcs11"
)

// hashInfo is what signing needs to know of a hash: the DER prefix of its PKCS #1 v1.5
// DigestInfo, and its PKCS#11 mechanism and MGF1 generator for PSS.
type hashInfo struct {
	digestInfo []byte
	mech, mgf  uint
}

// hashes are the hashes a signature may be made over.
var hashes = map[crypto.Hash]hashInfo{
	crypto.SHA256: {
		[]byte{0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20},
		cryptoki.CKM_SHA256, cryptoki.CKG_MGF1_SHA256,
	},
	crypto.SHA384: {
		[]byte{0x30, 0x41, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02, 0x05, 0x00, 0x04, 0x30},
		cryptoki.CKM_SHA384, cryptoki.CKG_MGF1_SHA384,
	},
	crypto.SHA512: {
		[]byte{0x30, 0x51, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03, 0x05, 0x00, 0x04, 0x40},
		cryptoki.CKM_SHA512, cryptoki.CKG_MGF1_SHA512,
	},
}

// mechanism returns the PKCS#11 mechanism and the data to sign for a signature over digest
// with opts by a key whose public key is pub:
//   - ECDSA: CKM_ECDSA over the digest;
//   - RSA PKCS #1 v1.5: CKM_RSA_PKCS over the DigestInfo (the hash's prefix, then the digest);
//   - RSA PSS (opts is *rsa.PSSOptions): CKM_RSA_PKCS_PSS with MGF1 over the same hash and a
//     salt as long as the hash for rsa.PSSSaltLengthEqualsHash and rsa.PSSSaltLengthAuto, or
//     the length given.
//
// The hash must be SHA-256, SHA-384 or SHA-512 and the digest as long as it.
func mechanism(pub crypto.PublicKey, digest []byte, opts crypto.SignerOpts) (*cryptoki.Mechanism, []byte, error) {
	if opts == nil {
		return nil, nil, errors.New("no hash given (opts is nil)")
	}
	h := opts.HashFunc()
	info, ok := hashes[h]
	if !ok {
		return nil, nil, fmt.Errorf("hash %v is not supported (want SHA-256, SHA-384 or SHA-512)", h)
	}
	if len(digest) != h.Size() {
		return nil, nil, fmt.Errorf("digest is %d bytes, but %v digests are %d", len(digest), h, h.Size())
	}
	pss, isPSS := opts.(*rsa.PSSOptions)
	switch pub := pub.(type) {
	case *ecdsa.PublicKey:
		if isPSS {
			return nil, nil, errors.New("PSS options given for an ECDSA key")
		}
		return cryptoki.NewMechanism(cryptoki.CKM_ECDSA, nil), digest, nil
	case *rsa.PublicKey:
		if !isPSS {
			data := append(append([]byte{}, info.digestInfo...), digest...)
			return cryptoki.NewMechanism(cryptoki.CKM_RSA_PKCS, nil), data, nil
		}
		salt := pss.SaltLength
		maxSalt := (pub.N.BitLen()-1+7)/8 - h.Size() - 2
		switch {
		case salt == rsa.PSSSaltLengthEqualsHash || salt == rsa.PSSSaltLengthAuto:
			salt = h.Size()
		case salt < 0 || salt > maxSalt:
			return nil, nil, fmt.Errorf("PSS salt length %d is out of range (0 to %d for this key and hash)", pss.SaltLength, maxSalt)
		}
		params := cryptoki.NewPSSParams(info.mech, info.mgf, uint(salt))
		return cryptoki.NewMechanism(cryptoki.CKM_RSA_PKCS_PSS, params), digest, nil
	default:
		return nil, nil, fmt.Errorf("public key type %T cannot sign", pub)
	}
}

// ecdsaDER converts the raw r||s of CKM_ECDSA into the ASN.1 DER ECDSA-Sig-Value that
// crypto.Signer returns for ECDSA keys.
func ecdsaDER(pub *ecdsa.PublicKey, raw []byte) ([]byte, error) {
	size := (pub.Curve.Params().BitSize + 7) / 8
	if len(raw) != 2*size {
		return nil, fmt.Errorf("the token returned an ECDSA signature of %d bytes, want %d", len(raw), 2*size)
	}
	return asn1.Marshal(struct{ R, S *big.Int }{
		new(big.Int).SetBytes(raw[:size]),
		new(big.Int).SetBytes(raw[size:]),
	})
}

package tpm

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"math/big"

	"github.com/google/go-tpm/tpm2"

	"github.com/signet-pki/signet/keystore/keyerr"
)

// srkTemplate is the storage root key: the ECC P-256 storage key of the TCG provisioning
// guidance in the owner hierarchy, with an empty unique field as the openssl tpm2 provider and
// tpm2-tss-engine create it, so that the same blob files load in both. CreatePrimary derives it
// from the owner seed, so it is the same key every time until the TPM is cleared.
var srkTemplate = func() tpm2.TPMTPublic {
	t := tpm2.ECCSRKTemplate
	t.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{})
	return t
}()

// signingAttributes are those of the keys Generate creates: an unrestricted signing key that
// never leaves this TPM, whose secret the TPM generated, usable with an empty password, and
// outside dictionary-attack lockout (there is no password to guess).
var signingAttributes = tpm2.TPMAObject{
	FixedTPM:            true,
	FixedParent:         true,
	SensitiveDataOrigin: true,
	UserWithAuth:        true,
	NoDA:                true,
	SignEncrypt:         true,
}

// keyTemplate returns the public template of a new signing key of the named algorithm (P-256
// when ""). The scheme is TPM_ALG_NULL: each TPM2_Sign chooses ECDSA, RSASSA or RSAPSS and the
// hash.
func keyTemplate(algorithm string) (tpm2.TPMTPublic, error) {
	t := tpm2.TPMTPublic{NameAlg: tpm2.TPMAlgSHA256, ObjectAttributes: signingAttributes}
	switch algorithm {
	case keyerr.P256, "", keyerr.P384:
		curve := tpm2.TPMECCNistP256
		if algorithm == keyerr.P384 {
			curve = tpm2.TPMECCNistP384
		}
		t.Type = tpm2.TPMAlgECC
		t.Parameters = tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{
			Symmetric: tpm2.TPMTSymDefObject{Algorithm: tpm2.TPMAlgNull},
			Scheme:    tpm2.TPMTECCScheme{Scheme: tpm2.TPMAlgNull},
			CurveID:   curve,
			KDF:       tpm2.TPMTKDFScheme{Scheme: tpm2.TPMAlgNull},
		})
		t.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{})
	case keyerr.RSA2048, keyerr.RSA3072:
		bits := tpm2.TPMKeyBits(2048)
		if algorithm == keyerr.RSA3072 {
			bits = 3072
		}
		t.Type = tpm2.TPMAlgRSA
		t.Parameters = tpm2.NewTPMUPublicParms(tpm2.TPMAlgRSA, &tpm2.TPMSRSAParms{
			Symmetric: tpm2.TPMTSymDefObject{Algorithm: tpm2.TPMAlgNull},
			Scheme:    tpm2.TPMTRSAScheme{Scheme: tpm2.TPMAlgNull},
			KeyBits:   bits,
		})
		t.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgRSA, &tpm2.TPM2BPublicKeyRSA{})
	default:
		return t, fmt.Errorf("algorithm %q: want %s, %s, %s or %s", algorithm, keyerr.P256, keyerr.P384, keyerr.RSA2048, keyerr.RSA3072)
	}
	return t, nil
}

// keyInfo is what Open and List learn from a key's public area.
type keyInfo struct {
	public    crypto.PublicKey
	algorithm string        // keyerr.P256 …
	scheme    tpm2.TPMAlgID // the key's own scheme: TPMAlgNull, or the one scheme it allows
	hash      tpm2.TPMAlgID // the hash of that scheme, when it is not TPMAlgNull
	attrs     tpm2.TPMAObject
}

// errNotSigningKey marks a public area that is not a key this backend signs with.
var errNotSigningKey = errors.New("not an unrestricted signing key")

// inspect checks that pub is an unrestricted signing key of a supported algorithm usable with
// an empty password, and converts its public key.
func inspect(pub *tpm2.TPMTPublic) (keyInfo, error) {
	info := keyInfo{attrs: pub.ObjectAttributes}
	if !pub.ObjectAttributes.SignEncrypt || pub.ObjectAttributes.Restricted {
		return info, errNotSigningKey
	}
	if !pub.ObjectAttributes.UserWithAuth {
		return info, errors.New("the key needs a policy session to sign (userWithAuth is clear), which this backend does not support")
	}
	switch pub.Type {
	case tpm2.TPMAlgECC:
		return inspectECC(pub, info)
	case tpm2.TPMAlgRSA:
		return inspectRSA(pub, info)
	default:
		return info, fmt.Errorf("key type %s: want ECC or RSA", algName(pub.Type))
	}
}

func inspectECC(pub *tpm2.TPMTPublic, info keyInfo) (keyInfo, error) {
	parms, err := pub.Parameters.ECCDetail()
	if err != nil {
		return info, fmt.Errorf("reading ECC parameters: %w", err)
	}
	var curve elliptic.Curve
	switch parms.CurveID {
	case tpm2.TPMECCNistP256:
		curve, info.algorithm = elliptic.P256(), keyerr.P256
	case tpm2.TPMECCNistP384:
		curve, info.algorithm = elliptic.P384(), keyerr.P384
	default:
		return info, fmt.Errorf("ECC curve %s: want %s or %s", curveName(parms.CurveID), keyerr.P256, keyerr.P384)
	}
	if info.scheme, info.hash, err = eccScheme(parms.Scheme); err != nil {
		return info, err
	}
	point, err := pub.Unique.ECC()
	if err != nil {
		return info, fmt.Errorf("reading the %s public key: %w", info.algorithm, err)
	}
	size := (curve.Params().BitSize + 7) / 8
	if len(point.X.Buffer) > size || len(point.Y.Buffer) > size {
		return info, fmt.Errorf("the %s public key is malformed", info.algorithm)
	}
	uncompressed := make([]byte, 1+2*size)
	uncompressed[0] = 4
	new(big.Int).SetBytes(point.X.Buffer).FillBytes(uncompressed[1 : 1+size])
	new(big.Int).SetBytes(point.Y.Buffer).FillBytes(uncompressed[1+size:])
	key, err := ecdsa.ParseUncompressedPublicKey(curve, uncompressed)
	if err != nil {
		return info, fmt.Errorf("the %s public key is not a point on the curve: %w", info.algorithm, err)
	}
	info.public = key
	return info, nil
}

func eccScheme(s tpm2.TPMTECCScheme) (tpm2.TPMAlgID, tpm2.TPMAlgID, error) {
	switch s.Scheme {
	case tpm2.TPMAlgNull:
		return s.Scheme, 0, nil
	case tpm2.TPMAlgECDSA:
		d, err := s.Details.ECDSA()
		if err != nil {
			return 0, 0, fmt.Errorf("reading the key's ECDSA scheme: %w", err)
		}
		return s.Scheme, d.HashAlg, nil
	default:
		return 0, 0, fmt.Errorf("the key's scheme %s is not ECDSA", algName(s.Scheme))
	}
}

func inspectRSA(pub *tpm2.TPMTPublic, info keyInfo) (keyInfo, error) {
	parms, err := pub.Parameters.RSADetail()
	if err != nil {
		return info, fmt.Errorf("reading RSA parameters: %w", err)
	}
	switch parms.KeyBits {
	case 2048:
		info.algorithm = keyerr.RSA2048
	case 3072:
		info.algorithm = keyerr.RSA3072
	default:
		return info, fmt.Errorf("RSA-%d: want %s or %s", parms.KeyBits, keyerr.RSA2048, keyerr.RSA3072)
	}
	switch parms.Scheme.Scheme {
	case tpm2.TPMAlgNull:
		info.scheme = tpm2.TPMAlgNull
	case tpm2.TPMAlgRSASSA, tpm2.TPMAlgRSAPSS:
		info.scheme = parms.Scheme.Scheme
		if info.scheme == tpm2.TPMAlgRSASSA {
			d, err := parms.Scheme.Details.RSASSA()
			if err != nil {
				return info, fmt.Errorf("reading the key's RSA scheme: %w", err)
			}
			info.hash = d.HashAlg
		} else {
			d, err := parms.Scheme.Details.RSAPSS()
			if err != nil {
				return info, fmt.Errorf("reading the key's RSA scheme: %w", err)
			}
			info.hash = d.HashAlg
		}
	default:
		return info, fmt.Errorf("the key's scheme %s is not RSASSA or RSAPSS", algName(parms.Scheme.Scheme))
	}
	n, err := pub.Unique.RSA()
	if err != nil {
		return info, fmt.Errorf("reading the %s public key: %w", info.algorithm, err)
	}
	if len(n.Buffer) != int(parms.KeyBits)/8 || n.Buffer[0]&0x80 == 0 {
		return info, fmt.Errorf("the %s public key's modulus is malformed", info.algorithm)
	}
	e := int(parms.Exponent)
	if e == 0 {
		e = 65537 // the TPM's default exponent
	}
	if e < 3 || e%2 == 0 {
		return info, fmt.Errorf("the %s public key's exponent %d is malformed", info.algorithm, e)
	}
	info.public = &rsa.PublicKey{N: new(big.Int).SetBytes(n.Buffer), E: e}
	return info, nil
}

// algName names the TPM algorithms errors mention.
func algName(alg tpm2.TPMAlgID) string {
	switch alg {
	case tpm2.TPMAlgRSA:
		return "RSA"
	case tpm2.TPMAlgECC:
		return "ECC"
	case tpm2.TPMAlgKeyedHash:
		return "keyed hash"
	case tpm2.TPMAlgSymCipher:
		return "symmetric cipher"
	case tpm2.TPMAlgRSASSA:
		return "RSASSA"
	case tpm2.TPMAlgRSAPSS:
		return "RSAPSS"
	case tpm2.TPMAlgECDSA:
		return "ECDSA"
	case tpm2.TPMAlgECDAA:
		return "ECDAA"
	case tpm2.TPMAlgECSchnorr:
		return "EC-Schnorr"
	case tpm2.TPMAlgSM2:
		return "SM2"
	case tpm2.TPMAlgSHA1:
		return "SHA-1"
	case tpm2.TPMAlgSHA256:
		return "SHA-256"
	case tpm2.TPMAlgSHA384:
		return "SHA-384"
	case tpm2.TPMAlgSHA512:
		return "SHA-512"
	default:
		return fmt.Sprintf("algorithm 0x%04x", uint16(alg))
	}
}

// curveName names the TPM's ECC curves.
func curveName(c tpm2.TPMECCCurve) string {
	switch c {
	case tpm2.TPMECCNistP192:
		return "P-192"
	case tpm2.TPMECCNistP224:
		return "P-224"
	case tpm2.TPMECCNistP521:
		return "P-521"
	case tpm2.TPMECCBNP256:
		return "BN P-256"
	case tpm2.TPMECCBNP638:
		return "BN P-638"
	case tpm2.TPMECCSM2P256:
		return "SM2 P-256"
	default:
		return fmt.Sprintf("0x%04x", uint16(c))
	}
}

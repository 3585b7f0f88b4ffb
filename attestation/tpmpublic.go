package attestation

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"math/big"

	"github.com/google/go-tpm/tpm2"
)

// tpmPublic is a TPMT_PUBLIC as the node sent it: its bytes (which its TPM name hashes), the
// decoded structure and its key.
type tpmPublic struct {
	raw  []byte
	pub  *tpm2.TPMTPublic
	key  crypto.PublicKey // *rsa.PublicKey or *ecdsa.PublicKey, checked
	name []byte
}

// decode unmarshals a TPMT_PUBLIC for check, refusing trailing bytes and any encoding that
// does not re-encode to the same bytes (so that the name the server computes is the name the
// TPM computed), and returns it with its key and its name (nameAlg || H(bytes)). The key must
// be RSA of 2048 to 4096 bits or ECC on P-256 or P-384 with a point on the curve.
func decode(check Check, raw []byte) (p *tpmPublic, err error) {
	defer func() {
		// go-tpm decodes by reflection; a hostile structure must not take the server down.
		if r := recover(); r != nil {
			p, err = nil, refuse(check, "the TPM public area does not decode")
		}
	}()
	pub, err := tpm2.Unmarshal[tpm2.TPMTPublic](raw)
	if err != nil {
		return nil, refuse(check, "the TPM public area does not decode: %v", err)
	}
	if !bytes.Equal(tpm2.Marshal(pub), raw) {
		return nil, refuse(check, "the TPM public area is not in its canonical encoding")
	}
	h, err := pub.NameAlg.Hash()
	if err != nil || (pub.NameAlg != tpm2.TPMAlgSHA256 && pub.NameAlg != tpm2.TPMAlgSHA384) {
		return nil, refuse(check, "name algorithm 0x%04x; want SHA-256 or SHA-384", uint16(pub.NameAlg))
	}
	key, err := publicKey(pub)
	if err != nil {
		return nil, refuse(check, "%v", err)
	}
	d := h.New()
	d.Write(raw)
	name := binary.BigEndian.AppendUint16(nil, uint16(pub.NameAlg))
	return &tpmPublic{raw: raw, pub: pub, key: key, name: d.Sum(name)}, nil
}

// publicKey converts the key of pub, checking it: RSA 2048 to 4096 bits, or an ECC point on
// P-256 or P-384.
func publicKey(pub *tpm2.TPMTPublic) (crypto.PublicKey, error) {
	switch pub.Type {
	case tpm2.TPMAlgRSA:
		parms, err := pub.Parameters.RSADetail()
		if err != nil {
			return nil, fmt.Errorf("RSA parameters: %v", err)
		}
		n, err := pub.Unique.RSA()
		if err != nil {
			return nil, fmt.Errorf("RSA modulus: %v", err)
		}
		k, _ := tpm2.RSAPub(parms, n)
		if bits := k.N.BitLen(); bits < 2048 || bits > 4096 || k.E < 3 || k.E%2 == 0 {
			return nil, fmt.Errorf("RSA key of %d bits with exponent %d; want 2048 to 4096 bits", bits, k.E)
		}
		return k, nil
	case tpm2.TPMAlgECC:
		parms, err := pub.Parameters.ECCDetail()
		if err != nil {
			return nil, fmt.Errorf("ECC parameters: %v", err)
		}
		if parms.CurveID != tpm2.TPMECCNistP256 && parms.CurveID != tpm2.TPMECCNistP384 {
			return nil, fmt.Errorf("ECC curve 0x%04x; want P-256 or P-384", uint16(parms.CurveID))
		}
		pt, err := pub.Unique.ECC()
		if err != nil {
			return nil, fmt.Errorf("ECC point: %v", err)
		}
		k, err := tpm2.ECDSAPub(parms, pt)
		if err != nil {
			return nil, fmt.Errorf("ECC point: %v", err)
		}
		if _, err := k.ECDH(); err != nil {
			return nil, fmt.Errorf("the ECC point is not on the curve")
		}
		return k, nil
	default:
		return nil, fmt.Errorf("key type 0x%04x; want RSA or ECC", uint16(pub.Type))
	}
}

// fingerprint is the SHA-256 of a public key's PKIX DER: how the allow-list and the
// EK-to-node bindings name an EK.
func fingerprint(key crypto.PublicKey) ([32]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(der), nil
}

// attributes lists the object attributes a key must have (true) or must not have (false).
type attributes map[string]bool

// checkAttributes refuses a public area whose attributes differ from want, naming the first
// attribute that does.
func checkAttributes(check Check, p *tpmPublic, want attributes, why string) error {
	a := p.pub.ObjectAttributes
	have := map[string]bool{
		"fixedTPM": a.FixedTPM, "fixedParent": a.FixedParent, "sensitiveDataOrigin": a.SensitiveDataOrigin,
		"restricted": a.Restricted, "sign": a.SignEncrypt, "decrypt": a.Decrypt,
	}
	for _, attr := range []string{"fixedTPM", "fixedParent", "sensitiveDataOrigin", "restricted", "sign", "decrypt"} {
		w, ok := want[attr]
		if !ok || have[attr] == w {
			continue
		}
		if w {
			return refuse(check, "the key lacks the %s attribute (%s)", attr, why)
		}
		return refuse(check, "the key has the %s attribute (%s)", attr, why)
	}
	return nil
}

// verifySignature checks a TPMT_SIGNATURE (RSASSA, RSAPSS or ECDSA, with SHA-256 or SHA-384)
// by key over message, which the TPM hashed with the signature's hash algorithm (as
// TPM2_Certify does).
func verifySignature(key crypto.PublicKey, message, sigBytes []byte) error {
	return verifyTPMSignature(key, sigBytes, func(alg tpm2.TPMIAlgHash) (crypto.Hash, []byte, error) {
		switch alg {
		case tpm2.TPMAlgSHA256:
			s := sha256.Sum256(message)
			return crypto.SHA256, s[:], nil
		case tpm2.TPMAlgSHA384:
			h := crypto.SHA384.New()
			h.Write(message)
			return crypto.SHA384, h.Sum(nil), nil
		}
		return 0, nil, fmt.Errorf("signature hash 0x%04x; want SHA-256 or SHA-384", uint16(alg))
	})
}

// verifyDigestSignature checks a TPMT_SIGNATURE by key over a SHA-256 digest given to the TPM
// to sign (TPM2_Sign).
func verifyDigestSignature(key crypto.PublicKey, digest, sigBytes []byte) error {
	return verifyTPMSignature(key, sigBytes, func(alg tpm2.TPMIAlgHash) (crypto.Hash, []byte, error) {
		if alg != tpm2.TPMAlgSHA256 || len(digest) != sha256.Size {
			return 0, nil, fmt.Errorf("signature hash 0x%04x; want SHA-256", uint16(alg))
		}
		return crypto.SHA256, digest, nil
	})
}

// verifyTPMSignature decodes a TPMT_SIGNATURE and verifies it with key over the digest that
// digest returns for the signature's hash algorithm.
func verifyTPMSignature(key crypto.PublicKey, sigBytes []byte, digest func(tpm2.TPMIAlgHash) (crypto.Hash, []byte, error)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the TPM signature does not decode")
		}
	}()
	sig, err := tpm2.Unmarshal[tpm2.TPMTSignature](sigBytes)
	if err != nil {
		return fmt.Errorf("the TPM signature does not decode: %v", err)
	}
	if !bytes.Equal(tpm2.Marshal(sig), sigBytes) {
		return fmt.Errorf("the TPM signature has bytes after it")
	}
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		s, err := sig.Signature.ECDSA()
		if err != nil {
			return fmt.Errorf("an ECC key's signature is not ECDSA")
		}
		_, d, err := digest(s.Hash)
		if err != nil {
			return err
		}
		r, ss := new(big.Int).SetBytes(s.SignatureR.Buffer), new(big.Int).SetBytes(s.SignatureS.Buffer)
		if !ecdsa.Verify(k, d, r, ss) {
			return fmt.Errorf("the ECDSA signature does not verify")
		}
		return nil
	case *rsa.PublicKey:
		if s, err := sig.Signature.RSASSA(); err == nil {
			h, d, err := digest(s.Hash)
			if err != nil {
				return err
			}
			if rsa.VerifyPKCS1v15(k, h, d, s.Sig.Buffer) != nil {
				return fmt.Errorf("the RSASSA signature does not verify")
			}
			return nil
		}
		if s, err := sig.Signature.RSAPSS(); err == nil {
			h, d, err := digest(s.Hash)
			if err != nil {
				return err
			}
			if rsa.VerifyPSS(k, h, d, s.Sig.Buffer, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto}) != nil {
				return fmt.Errorf("the RSAPSS signature does not verify")
			}
			return nil
		}
		return fmt.Errorf("an RSA key's signature is neither RSASSA nor RSAPSS")
	}
	return fmt.Errorf("key type %T cannot sign", key)
}

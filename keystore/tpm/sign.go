package tpm

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"

	"github.com/google/go-tpm/tpm2"

	"github.com/signet-pki/signet/keystore/keyerr"
)

// signRequest is a checked signing request: the TPM scheme and the caller's options.
type signRequest struct {
	scheme tpm2.TPMTSigScheme
	hash   crypto.Hash
	pss    *rsa.PSSOptions // non-nil for RSAPSS
}

// request checks the digest and options against the key and chooses the TPM scheme.
func (k *Key) request(digest []byte, opts crypto.SignerOpts) (signRequest, error) {
	req := signRequest{hash: opts.HashFunc()}
	var hashAlg tpm2.TPMAlgID
	switch req.hash {
	case crypto.SHA256:
		hashAlg = tpm2.TPMAlgSHA256
	case crypto.SHA384:
		hashAlg = tpm2.TPMAlgSHA384
	case crypto.SHA512:
		hashAlg = tpm2.TPMAlgSHA512
	case 0:
		return req, errors.New("no hash: TPM2_Sign signs a digest of SHA-256, SHA-384 or SHA-512, which opts.HashFunc() must name")
	default:
		return req, fmt.Errorf("hash %v: want SHA-256, SHA-384 or SHA-512", req.hash)
	}
	if len(digest) != req.hash.Size() {
		return req, fmt.Errorf("digest of %d bytes for %v, which makes %d", len(digest), req.hash, req.hash.Size())
	}
	alg := tpm2.TPMAlgECDSA
	if _, ok := k.info.public.(*rsa.PublicKey); ok {
		alg = tpm2.TPMAlgRSASSA
		if pss, ok := opts.(*rsa.PSSOptions); ok {
			alg, req.pss = tpm2.TPMAlgRSAPSS, pss
		}
	}
	if k.info.scheme != tpm2.TPMAlgNull && (k.info.scheme != alg || k.info.hash != hashAlg) {
		return req, fmt.Errorf("the key allows only %s with %s, not %s with %s", algName(k.info.scheme), algName(k.info.hash), algName(alg), algName(hashAlg))
	}
	req.scheme = tpm2.TPMTSigScheme{
		Scheme:  alg,
		Details: tpm2.NewTPMUSigScheme(alg, &tpm2.TPMSSchemeHash{HashAlg: hashAlg}),
	}
	return req, nil
}

// verifyError is a TPM signature that does not verify with the key's public key.
type verifyError struct{ reason string }

func (e *verifyError) Error() string { return e.reason }

// finish encodes the TPM's signature as crypto.Signer returns it and verifies it with the
// public key, so that no signature of another key (or a faulty device) is ever returned.
func (k *Key) finish(sig tpm2.TPMTSignature, digest []byte, req signRequest) ([]byte, error) {
	switch pub := k.info.public.(type) {
	case *ecdsa.PublicKey:
		s, err := sig.Signature.ECDSA()
		if err != nil {
			return nil, fmt.Errorf("reading the TPM's signature: %w", err)
		}
		der, err := asn1.Marshal(struct{ R, S *big.Int }{
			new(big.Int).SetBytes(s.SignatureR.Buffer),
			new(big.Int).SetBytes(s.SignatureS.Buffer),
		})
		if err != nil {
			return nil, fmt.Errorf("encoding the TPM's signature: %w", err)
		}
		if !ecdsa.VerifyASN1(pub, digest, der) {
			return nil, unverified()
		}
		return der, nil
	case *rsa.PublicKey:
		get := sig.Signature.RSASSA
		if req.pss != nil {
			get = sig.Signature.RSAPSS
		}
		s, err := get()
		if err != nil {
			return nil, fmt.Errorf("reading the TPM's signature: %w", err)
		}
		if req.pss == nil {
			if rsa.VerifyPKCS1v15(pub, req.hash, digest, s.Sig.Buffer) != nil {
				return nil, unverified()
			}
			return s.Sig.Buffer, nil
		}
		if rsa.VerifyPSS(pub, req.hash, digest, s.Sig.Buffer, req.pss) != nil {
			if rsa.VerifyPSS(pub, req.hash, digest, s.Sig.Buffer, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto}) == nil {
				return nil, fmt.Errorf("the TPM's RSA-PSS salt length (%s) is not the %s asked for", saltLength(pub, req.hash, digest, s.Sig.Buffer), describeSalt(req.pss.SaltLength))
			}
			return nil, unverified()
		}
		return s.Sig.Buffer, nil
	default:
		return nil, fmt.Errorf("unsupported public key type %T", pub)
	}
}

func unverified() error {
	return &verifyError{reason: keyerr.ErrUnavailable.Error() + ": the TPM's signature does not verify with the key's public key"}
}

// Unwrap makes a verifyError a keyerr.ErrUnavailable: the device, not the request, is at fault.
func (e *verifyError) Unwrap() error { return keyerr.ErrUnavailable }

// saltLength finds the salt length of a PSS signature among the two a TPM uses: the hash's
// length and the largest that fits.
func saltLength(pub *rsa.PublicKey, hash crypto.Hash, digest, sig []byte) string {
	largest := (pub.N.BitLen()-1+7)/8 - hash.Size() - 2
	for _, n := range []int{hash.Size(), largest} {
		if rsa.VerifyPSS(pub, hash, digest, sig, &rsa.PSSOptions{SaltLength: n}) == nil {
			return fmt.Sprintf("%d bytes", n)
		}
	}
	return "neither the hash's length nor the largest"
}

func describeSalt(n int) string {
	switch n {
	case rsa.PSSSaltLengthEqualsHash:
		return "hash's length"
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

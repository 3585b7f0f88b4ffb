package tpm

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"math"

	"github.com/google/go-tpm/tpm2"

	"github.com/signet-pki/signet/keystore/keyerr"
)

// importedAttributes are those of an imported key. TPM2_Import refuses fixedTPM and
// fixedParent (the key was made outside this TPM, so neither can be true of it), and
// sensitiveDataOrigin would claim the TPM made the secret. encryptedDuplication is clear: it
// would demand an inner wrapper, and it governs a duplication that cannot happen anyway (see
// Import). The rest is as for generated keys: an unrestricted signing key usable with an
// empty password, outside dictionary-attack lockout.
var importedAttributes = tpm2.TPMAObject{
	UserWithAuth: true,
	NoDA:         true,
	SignEncrypt:  true,
}

// Import moves the private key key (an *ecdsa.PrivateKey on P-256 or P-384, or an
// *rsa.PrivateKey of 2048 or 3072 bits, which the TPM may lack) into the TPM uri names, and
// returns its canonical URI, which Open opens. It does not check the key against a
// certificate: keystore.Import does, through Open.
//
// The key is wrapped in software for the storage root key Open and Generate use (go-tpm's
// CreateDuplicate: an outer wrapper whose seed is encrypted to the SRK's public key, no inner
// wrapper), given to TPM2_Import, and the private area the TPM returns, sealed by the SRK, is
// loaded once to check that the TPM accepts it. For a blob= URI it is then written in the
// key file format Open reads (mode 0600; an existing file is never replaced); for a handle=
// URI the loaded key is made persistent there (owner range; a taken handle is refused).
// Nothing is written or made persistent when any step fails.
//
// What differs from a generated key, and why: fixedTPM, fixedParent and sensitiveDataOrigin
// are clear, because the TPM did not make the key and TPM2_Import refuses the first two. The
// TPM still holds the key as it holds its own: the blob file is sealed by this TPM's SRK,
// which only this TPM (until it is cleared) can derive, so the file is of no use elsewhere;
// and the key has an empty authPolicy, which no policy session can satisfy, so
// TPM2_Duplicate (which only a policy session authorizes) cannot take the key out of the
// TPM again. The private key remains wherever else it was kept: the caller must destroy the
// file it came from.
func Import(ctx context.Context, uri string, key crypto.Signer, opts Options) (string, error) {
	loc, err := parseURI(uri)
	if err != nil {
		return "", err
	}
	loc = loc.absolute()
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("importing key %s: %w", uri, err)
	}
	pub, sensitive, err := importAreas(key)
	if err != nil {
		return fail(err)
	}
	if err := checkTarget(loc); err != nil {
		return fail(err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	t, err := openTransport(loc, opts)
	if err != nil {
		return fail(err)
	}
	k := &Key{loc: loc, tpm: t, handle: loc.handle}
	defer k.Close()
	if err := k.importKey(pub, sensitive); err != nil {
		return fail(err)
	}
	return loc.String(), nil
}

// importKey imports the key under the storage root key, loads it, and writes the blob or
// makes it persistent. The storage root key is flushed on return; the caller's Close
// flushes a loaded blob key.
func (k *Key) importKey(pub tpm2.TPMTPublic, sensitive tpm2.TPMTSensitive) error {
	if k.loc.handle != 0 {
		_, err := tpm2.ReadPublic{ObjectHandle: k.loc.handle}.Execute(k.tpm)
		switch {
		case err == nil:
			return fmt.Errorf("%s: the handle holds a key already; refusing to replace it", k.loc.keyName())
		case !isHandleGone(err):
			return tpmError(fmt.Sprintf("reading %s on %s", k.loc.keyName(), k.loc.tpmName()), err)
		}
	}
	info, err := inspect(&pub)
	if err != nil {
		return fmt.Errorf("the imported key: %w", err)
	}
	k.info = info
	srk, flush, err := createSRK(k.tpm)
	if err != nil {
		return err
	}
	defer flush()
	srkPublic, err := tpm2.ReadPublic{ObjectHandle: srk.Handle}.Execute(k.tpm)
	if err != nil {
		return tpmError("reading the storage root key", err)
	}
	srkArea, err := srkPublic.OutPublic.Contents()
	if err != nil {
		return fmt.Errorf("reading the storage root key: %w", err)
	}
	encapsulation, err := tpm2.ImportEncapsulationKey(srkArea)
	if err != nil {
		return fmt.Errorf("the storage root key: %w", err)
	}
	name, err := tpm2.ObjectName(&pub)
	if err != nil {
		return fmt.Errorf("naming the key: %w", err)
	}
	duplicate, seed, err := tpm2.CreateDuplicate(rand.Reader, encapsulation, name.Buffer, tpm2.Marshal(sensitive))
	if err != nil {
		return fmt.Errorf("wrapping the key for the storage root key: %w", err)
	}
	public := tpm2.New2B(pub)
	imported, err := tpm2.Import{
		ParentHandle: srk,
		ObjectPublic: public,
		Duplicate:    tpm2.TPM2BPrivate{Buffer: duplicate},
		InSymSeed:    tpm2.TPM2BEncryptedSecret{Buffer: seed},
		Symmetric:    tpm2.TPMTSymDef{Algorithm: tpm2.TPMAlgNull},
	}.Execute(k.tpm)
	switch {
	case isUnavailable(err):
		return tpmError(fmt.Sprintf("importing the %s key", info.algorithm), err)
	case err != nil:
		return fmt.Errorf("importing the %s key: the TPM refuses it: %w", info.algorithm, err)
	}
	loaded, err := tpm2.Load{ParentHandle: srk, InPrivate: imported.OutPrivate, InPublic: public}.Execute(k.tpm)
	if err != nil {
		return loadError(k.loc, err)
	}
	k.handle, k.name, k.loaded = loaded.ObjectHandle, loaded.Name, true
	if k.loc.blob != "" {
		k.blob = &keyFile{parent: tpm2.TPMRHOwner, emptyAuth: true, public: public, private: imported.OutPrivate}
		return writeKeyFile(k.loc.blob, *k.blob)
	}
	_, err = tpm2.EvictControl{
		Auth:             tpm2.TPMRHOwner,
		ObjectHandle:     tpm2.NamedHandle{Handle: loaded.ObjectHandle, Name: loaded.Name},
		PersistentHandle: k.loc.handle,
	}.Execute(k.tpm)
	_, _ = tpm2.FlushContext{FlushHandle: loaded.ObjectHandle}.Execute(k.tpm)
	k.loaded = false
	switch {
	case errors.Is(err, tpm2.TPMRCNVDefined):
		return fmt.Errorf("%s: the handle holds a key already; refusing to replace it", k.loc.keyName())
	case err != nil:
		return tpmError("making the key persistent at "+k.loc.keyName(), err)
	}
	k.handle = k.loc.handle
	return nil
}

// importAreas returns the public and sensitive areas of key as TPM2_Import takes them, with
// the attributes of importedAttributes, the TPM_ALG_NULL scheme (each TPM2_Sign chooses, as
// for generated keys) and a random obfuscation value; keys the backend cannot sign with are
// refused with the reason.
func importAreas(key crypto.Signer) (tpm2.TPMTPublic, tpm2.TPMTSensitive, error) {
	pub := tpm2.TPMTPublic{NameAlg: tpm2.TPMAlgSHA256, ObjectAttributes: importedAttributes}
	sensitive := tpm2.TPMTSensitive{SeedValue: tpm2.TPM2BDigest{Buffer: make([]byte, 32)}}
	if _, err := rand.Read(sensitive.SeedValue.Buffer); err != nil {
		return pub, sensitive, err
	}
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		curve := tpm2.TPMECCNistP256
		switch k.Curve {
		case elliptic.P256():
		case elliptic.P384():
			curve = tpm2.TPMECCNistP384
		default:
			return pub, sensitive, fmt.Errorf("ECC curve %s: want %s or %s", k.Curve.Params().Name, keyerr.P256, keyerr.P384)
		}
		point, err := k.PublicKey.Bytes() // 04 || X || Y, each as long as the curve's field
		if err != nil {
			return pub, sensitive, fmt.Errorf("the ECC public key: %w", err)
		}
		d, err := k.Bytes()
		if err != nil {
			return pub, sensitive, fmt.Errorf("the ECC private key: %w", err)
		}
		size := (len(point) - 1) / 2
		pub.Type = tpm2.TPMAlgECC
		pub.Parameters = tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{
			Symmetric: tpm2.TPMTSymDefObject{Algorithm: tpm2.TPMAlgNull},
			Scheme:    tpm2.TPMTECCScheme{Scheme: tpm2.TPMAlgNull},
			CurveID:   curve,
			KDF:       tpm2.TPMTKDFScheme{Scheme: tpm2.TPMAlgNull},
		})
		pub.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{
			X: tpm2.TPM2BECCParameter{Buffer: point[1 : 1+size]},
			Y: tpm2.TPM2BECCParameter{Buffer: point[1+size:]},
		})
		sensitive.SensitiveType = tpm2.TPMAlgECC
		sensitive.Sensitive = tpm2.NewTPMUSensitiveComposite(tpm2.TPMAlgECC, &tpm2.TPM2BECCParameter{Buffer: d})
		return pub, sensitive, nil
	case *rsa.PrivateKey:
		return rsaImportAreas(k, pub, sensitive)
	case ed25519.PrivateKey:
		return pub, sensitive, errors.New("Ed25519 keys cannot be imported: TPM 2.0 signs with ECDSA (P-256, P-384) and RSA keys; keep an Ed25519 CA in an encrypted key file")
	default:
		return pub, sensitive, fmt.Errorf("%T keys cannot be imported (want an ECDSA or RSA private key)", key)
	}
}

// rsaImportAreas fills the areas of an RSA key: the modulus in the public area, one prime in
// the sensitive area (the TPM computes the rest), which must be exactly half the modulus's
// length with its top bit set, as the TPM requires.
func rsaImportAreas(k *rsa.PrivateKey, pub tpm2.TPMTPublic, sensitive tpm2.TPMTSensitive) (tpm2.TPMTPublic, tpm2.TPMTSensitive, error) {
	bits := k.N.BitLen()
	if bits != 2048 && bits != 3072 {
		return pub, sensitive, fmt.Errorf("RSA-%d: want %s or %s", bits, keyerr.RSA2048, keyerr.RSA3072)
	}
	if len(k.Primes) != 2 {
		return pub, sensitive, fmt.Errorf("an RSA key of %d primes cannot be imported (a TPM holds two)", len(k.Primes))
	}
	if err := k.Validate(); err != nil {
		return pub, sensitive, fmt.Errorf("the RSA key is inconsistent: %w", err)
	}
	var prime []byte
	for _, p := range k.Primes {
		if b := p.Bytes(); len(b) == bits/16 && b[0]&0x80 != 0 {
			prime = b
			break
		}
	}
	if prime == nil {
		return pub, sensitive, fmt.Errorf("the RSA key's primes are not both %d bits long, which a TPM requires", bits/2)
	}
	if k.E < 7 || k.E%2 == 0 || int64(k.E) > math.MaxUint32 {
		return pub, sensitive, fmt.Errorf("RSA public exponent %d: a TPM takes odd exponents of 7 and more", k.E)
	}
	exponent := uint32(k.E)
	if exponent == 65537 {
		exponent = 0 // the TPM's default, as generated keys have it
	}
	pub.Type = tpm2.TPMAlgRSA
	pub.Parameters = tpm2.NewTPMUPublicParms(tpm2.TPMAlgRSA, &tpm2.TPMSRSAParms{
		Symmetric: tpm2.TPMTSymDefObject{Algorithm: tpm2.TPMAlgNull},
		Scheme:    tpm2.TPMTRSAScheme{Scheme: tpm2.TPMAlgNull},
		KeyBits:   tpm2.TPMKeyBits(bits),
		Exponent:  exponent,
	})
	pub.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgRSA, &tpm2.TPM2BPublicKeyRSA{Buffer: k.N.FillBytes(make([]byte, bits/8))})
	sensitive.SensitiveType = tpm2.TPMAlgRSA
	sensitive.Sensitive = tpm2.NewTPMUSensitiveComposite(tpm2.TPMAlgRSA, &tpm2.TPM2BPrivateKeyRSA{Buffer: prime})
	return pub, sensitive, nil
}

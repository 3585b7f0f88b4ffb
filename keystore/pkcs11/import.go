//go:build cgo

package pkcs11

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"math/big"
	"slices"

	cryptoki "github.com/miekg/pkcs11"
)

// Import creates the private key key (an *ecdsa.PrivateKey on P-256 or P-384, or an
// *rsa.PrivateKey of 2048 to 4096 bits with two primes) as an object of the token uri names,
// with C_CreateObject, and returns the key's canonical URI, which Open opens. It does not
// check the key against a certificate: keystore.Import does, through Open.
//
// The URI names the token, the PIN and the label (object=, required); the CKA_ID is its id=,
// else 16 random bytes. Import refuses, before creating anything, an object of any class that
// has that label or id already, and keys this backend cannot sign with (Ed25519, other curves
// and sizes, multi-prime RSA).
//
// It creates two token objects, both labelled and identified alike, as Generate does: the
// private key, with CKA_TOKEN, CKA_PRIVATE, CKA_SENSITIVE and CKA_SIGN true, and
// CKA_EXTRACTABLE, CKA_DECRYPT, CKA_UNWRAP and CKA_DERIVE false (an EC key from CKA_EC_PARAMS
// and CKA_VALUE; an RSA key from its modulus, both exponents, both primes, the CRT exponents
// and the coefficient); and its public key (CKA_VERIFY true, CKA_ENCRYPT and CKA_WRAP false),
// where Open reads an EC key's point. A sensitive, non-extractable key is one the token never
// reveals nor wraps out again. The token itself records that the key was made outside it:
// CKA_ALWAYS_SENSITIVE and CKA_NEVER_EXTRACTABLE are false, and CKA_LOCAL is false. The
// key's components pass through this process's memory and the PKCS#11 API in the clear, as
// they did when the file was read; the copy on disk is the caller's to destroy.
func Import(ctx context.Context, uri string, key crypto.Signer, opts Options) (string, error) {
	made, err := importKey(ctx, uri, key, opts)
	if err != nil {
		return "", fmt.Errorf("importing PKCS#11 key: %w", err)
	}
	return made, nil
}

func importKey(ctx context.Context, uri string, key crypto.Signer, opts Options) (string, error) {
	privAttrs, pubAttrs, err := importTemplate(key)
	if err != nil {
		return "", err
	}
	u, pin, err := parse(ctx, uri, opts)
	if err != nil {
		return "", err
	}
	if !u.hasObject || u.object == "" {
		return "", errors.New("the URI names no label for the imported key: add object=<label>")
	}
	if !u.hasID {
		u.id = make([]byte, 16)
		if _, err := rand.Read(u.id); err != nil {
			return "", err
		}
		u.hasID = true
	}
	mod, tok, sh, err := start(u, pin, true)
	if err != nil {
		return "", err
	}
	defer func() {
		_ = mod.ctx.CloseSession(sh)
		_ = mod.release()
	}()
	if err := refuseExisting(mod, sh, u, tok.info.Label); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	common := []*cryptoki.Attribute{
		cryptoki.NewAttribute(cryptoki.CKA_TOKEN, true),
		cryptoki.NewAttribute(cryptoki.CKA_LABEL, u.object),
		cryptoki.NewAttribute(cryptoki.CKA_ID, u.id),
	}
	priv := append(slices.Clone(common),
		cryptoki.NewAttribute(cryptoki.CKA_CLASS, cryptoki.CKO_PRIVATE_KEY),
		cryptoki.NewAttribute(cryptoki.CKA_PRIVATE, true),
		cryptoki.NewAttribute(cryptoki.CKA_SENSITIVE, true),
		cryptoki.NewAttribute(cryptoki.CKA_EXTRACTABLE, false),
		cryptoki.NewAttribute(cryptoki.CKA_SIGN, true),
		cryptoki.NewAttribute(cryptoki.CKA_DECRYPT, false),
		cryptoki.NewAttribute(cryptoki.CKA_UNWRAP, false),
		cryptoki.NewAttribute(cryptoki.CKA_DERIVE, false),
	)
	pub := append(slices.Clone(common),
		cryptoki.NewAttribute(cryptoki.CKA_CLASS, cryptoki.CKO_PUBLIC_KEY),
		cryptoki.NewAttribute(cryptoki.CKA_PRIVATE, false),
		cryptoki.NewAttribute(cryptoki.CKA_VERIFY, true),
		cryptoki.NewAttribute(cryptoki.CKA_ENCRYPT, false),
		cryptoki.NewAttribute(cryptoki.CKA_WRAP, false),
	)
	ph, err := mod.ctx.CreateObject(sh, append(priv, privAttrs...))
	if err != nil {
		return "", classify(fmt.Sprintf("creating the private key object on token %q", tok.info.Label), err)
	}
	if _, err := mod.ctx.CreateObject(sh, append(pub, pubAttrs...)); err != nil {
		// Without its public key object an EC key cannot be opened: leave nothing half made.
		_ = mod.ctx.DestroyObject(sh, ph)
		return "", classify(fmt.Sprintf("creating the public key object on token %q", tok.info.Label), err)
	}
	return u.canonical(tok.info.Label, u.object, u.id), nil
}

// importTemplate returns the attributes of key's private and public key objects that carry
// the key itself (type, curve or modulus, and the secret), refusing what this backend cannot
// sign with.
func importTemplate(key crypto.Signer) (priv, pub []*cryptoki.Attribute, err error) {
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		return ecImportTemplate(k)
	case *rsa.PrivateKey:
		return rsaImportTemplate(k)
	case ed25519.PrivateKey:
		return nil, nil, errors.New("Ed25519 keys cannot be imported: this backend signs with ECDSA (P-256, P-384) and RSA keys only; keep an Ed25519 CA in an encrypted key file")
	default:
		return nil, nil, fmt.Errorf("%T keys cannot be imported (want an ECDSA or RSA private key)", key)
	}
}

func ecImportTemplate(k *ecdsa.PrivateKey) (priv, pub []*cryptoki.Attribute, err error) {
	i := -1
	for j, c := range curves {
		if c.curve == k.Curve {
			i = j
		}
	}
	if i < 0 {
		return nil, nil, fmt.Errorf("EC curve %s is not supported (want P-256 or P-384)", k.Curve.Params().Name)
	}
	point, err := k.PublicKey.Bytes() // uncompressed
	if err != nil {
		return nil, nil, fmt.Errorf("the EC public key: %w", err)
	}
	d, err := k.Bytes() // the scalar, as long as the curve's order
	if err != nil {
		return nil, nil, fmt.Errorf("the EC private key: %w", err)
	}
	params := curves[i].params
	priv = []*cryptoki.Attribute{
		cryptoki.NewAttribute(cryptoki.CKA_KEY_TYPE, cryptoki.CKK_EC),
		cryptoki.NewAttribute(cryptoki.CKA_EC_PARAMS, params),
		cryptoki.NewAttribute(cryptoki.CKA_VALUE, d),
	}
	pub = []*cryptoki.Attribute{
		cryptoki.NewAttribute(cryptoki.CKA_KEY_TYPE, cryptoki.CKK_EC),
		cryptoki.NewAttribute(cryptoki.CKA_EC_PARAMS, params),
		// PKCS#11 2.40: the DER encoding of an OCTET STRING holding the point, which
		// parseECPoint reads back.
		cryptoki.NewAttribute(cryptoki.CKA_EC_POINT, mustMarshal(point)),
	}
	return priv, pub, nil
}

func rsaImportTemplate(k *rsa.PrivateKey) (priv, pub []*cryptoki.Attribute, err error) {
	if bits := k.N.BitLen(); bits < 2048 || bits > 4096 {
		return nil, nil, fmt.Errorf("RSA keys of %d bits are not supported (want 2048 to 4096)", bits)
	}
	if len(k.Primes) != 2 {
		return nil, nil, fmt.Errorf("an RSA key of %d primes cannot be imported (PKCS#11 holds two)", len(k.Primes))
	}
	if err := k.Validate(); err != nil {
		return nil, nil, fmt.Errorf("the RSA key is inconsistent: %w", err)
	}
	p, q := k.Primes[0], k.Primes[1]
	one := big.NewInt(1)
	dp := new(big.Int).Mod(k.D, new(big.Int).Sub(p, one))
	dq := new(big.Int).Mod(k.D, new(big.Int).Sub(q, one))
	qinv := new(big.Int).ModInverse(q, p)
	if qinv == nil {
		return nil, nil, errors.New("the RSA key is inconsistent: its primes are not coprime")
	}
	e := big.NewInt(int64(k.E)).Bytes()
	priv = []*cryptoki.Attribute{
		cryptoki.NewAttribute(cryptoki.CKA_KEY_TYPE, cryptoki.CKK_RSA),
		cryptoki.NewAttribute(cryptoki.CKA_MODULUS, k.N.Bytes()),
		cryptoki.NewAttribute(cryptoki.CKA_PUBLIC_EXPONENT, e),
		cryptoki.NewAttribute(cryptoki.CKA_PRIVATE_EXPONENT, k.D.Bytes()),
		cryptoki.NewAttribute(cryptoki.CKA_PRIME_1, p.Bytes()),
		cryptoki.NewAttribute(cryptoki.CKA_PRIME_2, q.Bytes()),
		cryptoki.NewAttribute(cryptoki.CKA_EXPONENT_1, dp.Bytes()),
		cryptoki.NewAttribute(cryptoki.CKA_EXPONENT_2, dq.Bytes()),
		cryptoki.NewAttribute(cryptoki.CKA_COEFFICIENT, qinv.Bytes()),
	}
	pub = []*cryptoki.Attribute{
		cryptoki.NewAttribute(cryptoki.CKA_KEY_TYPE, cryptoki.CKK_RSA),
		cryptoki.NewAttribute(cryptoki.CKA_MODULUS, k.N.Bytes()),
		cryptoki.NewAttribute(cryptoki.CKA_PUBLIC_EXPONENT, e),
	}
	return priv, pub, nil
}

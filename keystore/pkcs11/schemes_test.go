//go:build cgo

package pkcs11_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/asn1"
	"fmt"
	"strings"
	"testing"

	cryptoki "github.com/miekg/pkcs11"

	"github.com/signet-pki/signet/internal/softhsmtest"
	"github.com/signet-pki/signet/keystore/keyerr"
	"github.com/signet-pki/signet/keystore/pkcs11"
)

// TestSignatureSchemes: every hash and RSA padding a CA may ask for, signed on the token and
// verified by Go: ECDSA over SHA-256/384/512 digests, RSA PKCS #1 v1.5 and PSS with each hash
// and each salt option.
func TestSignatureSchemes(t *testing.T) {
	tok := softhsmtest.New(t)
	ec, _ := generate(t, tok, "ec", keyerr.P256)
	rsaKey, _ := generate(t, tok, "rsa", keyerr.RSA2048)
	ecPub, rsaPub := ec.Public().(*ecdsa.PublicKey), rsaKey.Public().(*rsa.PublicKey)
	msg := []byte("signet")
	d256, d384, d512 := sha256.Sum256(msg), sha512.Sum384(msg), sha512.Sum512(msg)
	for _, d := range []struct {
		h      crypto.Hash
		digest []byte
	}{{crypto.SHA256, d256[:]}, {crypto.SHA384, d384[:]}, {crypto.SHA512, d512[:]}} {
		sig, err := ec.Sign(rand.Reader, d.digest, d.h)
		if err != nil || !ecdsa.VerifyASN1(ecPub, d.digest, sig) {
			t.Errorf("ECDSA %v: %v, or the signature does not verify", d.h, err)
		}
		sig, err = rsaKey.Sign(rand.Reader, d.digest, d.h)
		if err != nil || rsa.VerifyPKCS1v15(rsaPub, d.h, d.digest, sig) != nil {
			t.Errorf("RSA PKCS #1 v1.5 %v: %v, or the signature does not verify", d.h, err)
		}
		for _, salt := range []int{rsa.PSSSaltLengthEqualsHash, rsa.PSSSaltLengthAuto, 20} {
			opts := &rsa.PSSOptions{Hash: d.h, SaltLength: salt}
			sig, err := rsaKey.Sign(rand.Reader, d.digest, opts)
			if err != nil {
				t.Errorf("RSA PSS %v salt %d: %v", d.h, salt, err)
				continue
			}
			want := salt
			if salt <= 0 {
				want = d.h.Size()
			}
			if err := rsa.VerifyPSS(rsaPub, d.h, d.digest, sig, &rsa.PSSOptions{Hash: d.h, SaltLength: want}); err != nil {
				t.Errorf("RSA PSS %v salt %d: the signature does not verify with salt length %d: %v", d.h, salt, want, err)
			}
		}
	}
	if _, err := ec.Sign(rand.Reader, d256[:20], crypto.SHA256); err == nil || !strings.Contains(err.Error(), "digest is 20 bytes") {
		t.Errorf("a short digest: %v, want it refused", err)
	}
}

// TestAlwaysAuthenticate: a key that needs a login for each signature (CKA_ALWAYS_AUTHENTICATE,
// as a PIV signature key does) signs, concurrently too.
func TestAlwaysAuthenticate(t *testing.T) {
	tok := softhsmtest.New(t)
	createAlwaysAuthKey(t, tok, "piv")
	key := open(t, tok.URI("piv"), pkcs11.Options{})
	errs := make(chan error, 8)
	for range 8 {
		go func() { errs <- signs(key) }()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// ecParams is the CKA_EC_PARAMS of the named curve oid.
func ecParams(t *testing.T, oid asn1.ObjectIdentifier) *cryptoki.Attribute {
	t.Helper()
	der, err := asn1.Marshal(oid)
	if err != nil {
		t.Fatal(err)
	}
	return cryptoki.NewAttribute(cryptoki.CKA_EC_PARAMS, der)
}

// createAlwaysAuthKey makes a P-256 key pair labelled label with CKA_ALWAYS_AUTHENTICATE set.
func createAlwaysAuthKey(t *testing.T, tok *softhsmtest.Token, label string) {
	t.Helper()
	createKey(t, tok, label, cryptoki.CKM_EC_KEY_PAIR_GEN,
		[]*cryptoki.Attribute{ecParams(t, asn1.ObjectIdentifier{1, 2, 840, 10045, 3, 1, 7})},
		[]*cryptoki.Attribute{cryptoki.NewAttribute(cryptoki.CKA_ALWAYS_AUTHENTICATE, true)})
}

// createKey makes a key pair labelled label with mechanism mech and the extra public and
// private attributes given, through a PKCS#11 context of its own, finalized before it returns
// (so no key of the backend may be open).
func createKey(t *testing.T, tok *softhsmtest.Token, label string, mech uint, public, private []*cryptoki.Attribute) {
	t.Helper()
	ctx, slot := tok.Outside(t)
	defer func() { _ = ctx.Finalize() }()
	sh, err := ctx.OpenSession(slot, cryptoki.CKF_SERIAL_SESSION|cryptoki.CKF_RW_SESSION)
	if err != nil {
		t.Fatal(err)
	}
	if err := ctx.Login(sh, cryptoki.CKU_USER, tok.PIN); err != nil {
		t.Fatal(err)
	}
	id := []byte(fmt.Sprintf("id-%s", label))
	_, _, err = ctx.GenerateKeyPair(sh, []*cryptoki.Mechanism{cryptoki.NewMechanism(mech, nil)},
		append([]*cryptoki.Attribute{
			cryptoki.NewAttribute(cryptoki.CKA_TOKEN, true),
			cryptoki.NewAttribute(cryptoki.CKA_LABEL, label),
			cryptoki.NewAttribute(cryptoki.CKA_ID, id),
		}, public...),
		append([]*cryptoki.Attribute{
			cryptoki.NewAttribute(cryptoki.CKA_TOKEN, true),
			cryptoki.NewAttribute(cryptoki.CKA_PRIVATE, true),
			cryptoki.NewAttribute(cryptoki.CKA_SENSITIVE, true),
			cryptoki.NewAttribute(cryptoki.CKA_SIGN, true),
			cryptoki.NewAttribute(cryptoki.CKA_LABEL, label),
			cryptoki.NewAttribute(cryptoki.CKA_ID, id),
		}, private...))
	if err != nil {
		t.Fatalf("C_GenerateKeyPair: %v", err)
	}
	if err := ctx.CloseSession(sh); err != nil {
		t.Fatal(err)
	}
}

// TestUnsupportedKeys: a key of a curve or size the backend does not sign with is refused by
// Open with an error naming object=, and listed as unsupported.
func TestUnsupportedKeys(t *testing.T) {
	tok := softhsmtest.New(t)
	createKey(t, tok, "p521", cryptoki.CKM_EC_KEY_PAIR_GEN,
		[]*cryptoki.Attribute{ecParams(t, asn1.ObjectIdentifier{1, 3, 132, 0, 35})}, nil)
	createKey(t, tok, "rsa1024", cryptoki.CKM_RSA_PKCS_KEY_PAIR_GEN, []*cryptoki.Attribute{
		cryptoki.NewAttribute(cryptoki.CKA_MODULUS_BITS, 1024),
		cryptoki.NewAttribute(cryptoki.CKA_PUBLIC_EXPONENT, []byte{1, 0, 1}),
	}, nil)
	for _, tc := range []struct{ label, want string }{
		{"p521", "EC curve 1.3.132.0.35 is not supported"},
		{"rsa1024", "RSA keys of 1024 bits are not supported"},
	} {
		key, err := pkcs11.Open(context.Background(), tok.URI(tc.label), pkcs11.Options{})
		if err == nil {
			_ = key.Close()
			t.Errorf("Open %s succeeded", tc.label)
			continue
		}
		checkError(t, err, tok.PIN, fmt.Sprintf("object=%q", tc.label), tc.want)
	}
	entries, err := pkcs11.List(context.Background(), "pkcs11:token=signet-test?module-path="+tok.Module+"&pin-source="+tok.PINFile, pkcs11.Options{})
	if err != nil || len(entries) != 2 {
		t.Fatalf("List = %+v, %v; want 2 entries", entries, err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Algorithm, "unsupported: ") || e.Public != nil || e.Label == "" || len(e.ID) == 0 {
			t.Errorf("entry %+v: want an unsupported key with its label and id and no public key", e)
		}
	}
}

// TestGeneratedKeyAttributes: Generate makes a token private key that may sign and never
// leaves the token; it refuses an unknown algorithm and a URI without a label.
func TestGeneratedKeyAttributes(t *testing.T) {
	tok := softhsmtest.New(t)
	generate(t, tok, "ca", keyerr.P384)
	ctx, slot := tok.Outside(t) // shares the login of the open key: same process
	sh, err := ctx.OpenSession(slot, cryptoki.CKF_SERIAL_SESSION)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ctx.CloseSession(sh) }()
	if err := ctx.FindObjectsInit(sh, []*cryptoki.Attribute{
		cryptoki.NewAttribute(cryptoki.CKA_CLASS, cryptoki.CKO_PRIVATE_KEY),
		cryptoki.NewAttribute(cryptoki.CKA_LABEL, "ca"),
	}); err != nil {
		t.Fatal(err)
	}
	found, _, err := ctx.FindObjects(sh, 2)
	_ = ctx.FindObjectsFinal(sh)
	if err != nil || len(found) != 1 {
		t.Fatalf("finding the private key: %v, %d found", err, len(found))
	}
	for _, want := range []struct {
		attr  uint
		name  string
		value bool
	}{
		{cryptoki.CKA_TOKEN, "CKA_TOKEN", true}, {cryptoki.CKA_PRIVATE, "CKA_PRIVATE", true},
		{cryptoki.CKA_SENSITIVE, "CKA_SENSITIVE", true}, {cryptoki.CKA_EXTRACTABLE, "CKA_EXTRACTABLE", false},
		{cryptoki.CKA_SIGN, "CKA_SIGN", true}, {cryptoki.CKA_DECRYPT, "CKA_DECRYPT", false},
		{cryptoki.CKA_ALWAYS_SENSITIVE, "CKA_ALWAYS_SENSITIVE", true}, {cryptoki.CKA_NEVER_EXTRACTABLE, "CKA_NEVER_EXTRACTABLE", true},
	} {
		attrs, err := ctx.GetAttributeValue(sh, found[0], []*cryptoki.Attribute{cryptoki.NewAttribute(want.attr, nil)})
		if err != nil {
			t.Errorf("%s: %v", want.name, err)
			continue
		}
		if got := len(attrs[0].Value) == 1 && attrs[0].Value[0] != 0; got != want.value {
			t.Errorf("%s = %t, want %t", want.name, got, want.value)
		}
	}
	if _, err := ctx.GetAttributeValue(sh, found[0], []*cryptoki.Attribute{cryptoki.NewAttribute(cryptoki.CKA_VALUE, nil)}); err == nil {
		t.Error("the private key's CKA_VALUE can be read")
	}

	if err := generateErr(t, tok.URI("other"), "Ed25519", pkcs11.Options{}); err == nil || !strings.Contains(err.Error(), `algorithm "Ed25519" is not supported`) {
		t.Errorf("Generate Ed25519: %v, want it refused", err)
	}
	noLabel := strings.Replace(tok.URI("x"), "object=x;", "", 1)
	if err := generateErr(t, noLabel, keyerr.P256, pkcs11.Options{}); err == nil || !strings.Contains(err.Error(), "object=") {
		t.Errorf("Generate without object=: %v, want an error naming object=", err)
	}
}

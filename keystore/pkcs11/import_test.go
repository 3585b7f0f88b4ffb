//go:build cgo

package pkcs11_test

import (
	"crypto"
	"crypto/rsa"
	"errors"
	"math/big"
	"strings"
	"testing"

	cryptoki "github.com/miekg/pkcs11"

	"github.com/signet-pki/signet/internal/softhsmtest"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/keystore/pkcs11"
)

// TestImport: P-256, P-384 and RSA-2048 keys imported into SoftHSM2 open by the canonical URI,
// with the imported public key, and sign; the private key objects are sensitive,
// non-extractable token objects that may sign and nothing else, whose secret the token
// refuses to show, and which the token records as made outside it; their public key objects
// exist.
func TestImport(t *testing.T) {
	tok := softhsmtest.New(t)
	for _, kt := range []testpki.KeyType{testpki.P256, testpki.P384, testpki.RSA2048} {
		t.Run(string(kt), func(t *testing.T) {
			key := testpki.Key(t, kt)
			uri, err := pkcs11.Import(t.Context(), tok.URI("imported "+string(kt)), key, pkcs11.Options{})
			if err != nil {
				t.Fatalf("Import: %v", err)
			}
			if !strings.Contains(uri, ";id=%") || !strings.Contains(uri, "object=imported%20"+string(kt)+";") {
				t.Errorf("canonical URI %q lacks the label or the id", uri)
			}
			opened := open(t, uri, pkcs11.Options{})
			if !samePublic(t, opened.Public(), key.Public()) {
				t.Fatal("the imported key opens with another public key")
			}
			if err := signs(opened); err != nil {
				t.Errorf("the imported key does not sign: %v", err)
			}
			checkImportedAttributes(t, tok, "imported "+string(kt), kt == testpki.RSA2048)
		})
	}
}

// checkImportedAttributes reads the objects labelled label through a second PKCS#11 context,
// as another application would, while the key is open (and so the token logged in).
func checkImportedAttributes(t *testing.T, tok *softhsmtest.Token, label string, isRSA bool) {
	t.Helper()
	ctx, slot := tok.Outside(t)
	sh, err := ctx.OpenSession(slot, cryptoki.CKF_SERIAL_SESSION)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ctx.CloseSession(sh) }()
	find := func(class uint) cryptoki.ObjectHandle {
		t.Helper()
		if err := ctx.FindObjectsInit(sh, []*cryptoki.Attribute{
			cryptoki.NewAttribute(cryptoki.CKA_CLASS, class), cryptoki.NewAttribute(cryptoki.CKA_LABEL, label),
		}); err != nil {
			t.Fatal(err)
		}
		found, _, err := ctx.FindObjects(sh, 2)
		_ = ctx.FindObjectsFinal(sh)
		if err != nil || len(found) != 1 {
			t.Fatalf("objects of class %d labelled %q: %v, %v; want one", class, label, found, err)
		}
		return found[0]
	}
	priv := find(cryptoki.CKO_PRIVATE_KEY)
	find(cryptoki.CKO_PUBLIC_KEY)
	for attr, want := range map[uint]bool{
		cryptoki.CKA_TOKEN: true, cryptoki.CKA_PRIVATE: true, cryptoki.CKA_SENSITIVE: true, cryptoki.CKA_SIGN: true,
		cryptoki.CKA_EXTRACTABLE: false, cryptoki.CKA_DECRYPT: false, cryptoki.CKA_UNWRAP: false, cryptoki.CKA_DERIVE: false,
		// The token knows the key came from outside: it was not always sensitive.
		cryptoki.CKA_ALWAYS_SENSITIVE: false, cryptoki.CKA_NEVER_EXTRACTABLE: false, cryptoki.CKA_LOCAL: false,
	} {
		attrs, err := ctx.GetAttributeValue(sh, priv, []*cryptoki.Attribute{cryptoki.NewAttribute(attr, nil)})
		if err != nil {
			t.Errorf("reading attribute %#x: %v", attr, err)
			continue
		}
		if got := len(attrs[0].Value) == 1 && attrs[0].Value[0] != 0; got != want {
			t.Errorf("attribute %#x = %v, want %v", attr, got, want)
		}
	}
	secret := uint(cryptoki.CKA_VALUE)
	if isRSA {
		secret = cryptoki.CKA_PRIVATE_EXPONENT
	}
	_, err = ctx.GetAttributeValue(sh, priv, []*cryptoki.Attribute{cryptoki.NewAttribute(secret, nil)})
	if !errors.Is(err, cryptoki.Error(cryptoki.CKR_ATTRIBUTE_SENSITIVE)) {
		t.Errorf("reading the private key's secret: %v, want CKR_ATTRIBUTE_SENSITIVE", err)
	}
}

// TestImportRefusals: an existing label or id, a URI without a label, and keys the backend
// cannot sign with (Ed25519, P-521, RSA-1024, three-prime RSA) are refused, and a refused
// import leaves the token as it was.
func TestImportRefusals(t *testing.T) {
	tok := softhsmtest.New(t)
	_, existing := generate(t, tok, "taken", "")
	ctx := t.Context()
	threePrimes := threePrimeKey(t)
	for _, tc := range []struct {
		name, uri string
		key       crypto.Signer
		errHas    string
	}{
		{"existing label", tok.URI("taken"), testpki.Key(t, testpki.P256), `object="taken"`},
		{"existing id", strings.Replace(tok.URI("fresh"), ";type=", ";id="+idOf(t, existing)+";type=", 1), testpki.Key(t, testpki.P256), "already has an object with this id"},
		{"no label", strings.Replace(tok.URI("x"), "object=x;", "", 1), testpki.Key(t, testpki.P256), "add object=<label>"},
		{"Ed25519", tok.URI("ed"), testpki.Key(t, testpki.Ed25519), "Ed25519 keys cannot be imported"},
		{"P-521", tok.URI("p521"), testpki.Key(t, testpki.P521), "P-521 is not supported"},
		{"RSA-1024", tok.URI("rsa1024"), testpki.Key(t, testpki.RSA1024), "RSA keys of 1024 bits are not supported"},
		{"three primes", tok.URI("rsa3p"), threePrimes, "3 primes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pkcs11.Import(ctx, tc.uri, tc.key, pkcs11.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("Import = %v, want an error containing %q", err, tc.errHas)
			}
		})
	}
	entries, err := pkcs11.List(ctx, "pkcs11:token="+tok.Label+"?module-path="+tok.Module+"&pin-source="+tok.PINFile, pkcs11.Options{})
	if err != nil || len(entries) != 1 || entries[0].Label != "taken" {
		t.Errorf("after the refusals the token lists %+v (%v), want the one generated key", entries, err)
	}
}

// threePrimeKey returns an RSA-2048 key that claims three primes, which neither PKCS#11 nor
// a TPM can hold (the count is refused before anything else is looked at).
func threePrimeKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k := testpki.Key(t, testpki.RSA2048).(*rsa.PrivateKey)
	return &rsa.PrivateKey{PublicKey: k.PublicKey, D: k.D, Primes: []*big.Int{k.Primes[0], k.Primes[1], big.NewInt(3)}}
}

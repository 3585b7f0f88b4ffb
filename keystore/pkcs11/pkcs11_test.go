//go:build cgo

package pkcs11_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"strings"
	"testing"

	"github.com/signet-pki/signet/internal/softhsmtest"
	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/keystore/keyerr"
	"github.com/signet-pki/signet/keystore/keystoretest"
	"github.com/signet-pki/signet/keystore/pkcs11"
)

// The tests in this package are not parallel: softhsmtest sets SOFTHSM2_CONF, and the module
// reads it when it is initialized (once per process while any key is open).

// generate creates a key labelled object on tok and returns it with its canonical URI; the key
// is closed at the end of the test. Every key a test opens must be closed by its end: the
// module stays initialized, on the test's token directory, while one is open.
func generate(t *testing.T, tok *softhsmtest.Token, object, algorithm string) (*pkcs11.Key, string) {
	t.Helper()
	return generateURI(t, tok.URI(object), algorithm, pkcs11.Options{})
}

// generateURI creates the key uri names; the key is closed at the end of the test.
func generateURI(t *testing.T, uri, algorithm string, opts pkcs11.Options) (*pkcs11.Key, string) {
	t.Helper()
	key, uri, err := pkcs11.Generate(context.Background(), uri, algorithm, opts)
	if err != nil {
		t.Fatalf("Generate %s: %v", algorithm, err)
	}
	t.Cleanup(func() { _ = key.Close() })
	return key, uri
}

// generateErr runs Generate where it must fail and returns its error (closing the key should
// it succeed, so that the module is not left initialized for the next test).
func generateErr(t *testing.T, uri, algorithm string, opts pkcs11.Options) error {
	t.Helper()
	key, _, err := pkcs11.Generate(context.Background(), uri, algorithm, opts)
	if err == nil {
		_ = key.Close()
	}
	return err
}

// open opens uri; the key is closed at the end of the test.
func open(t *testing.T, uri string, opts pkcs11.Options) *pkcs11.Key {
	t.Helper()
	key, err := pkcs11.Open(context.Background(), uri, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = key.Close() })
	return key
}

// TestConformance runs the keystore conformance suite on keys of every algorithm, each
// generated on its own token and opened by its URI.
func TestConformance(t *testing.T) {
	for _, alg := range []string{keyerr.P256, keyerr.P384, keyerr.RSA2048, keyerr.RSA3072, keyerr.RSA4096} {
		t.Run(alg, func(t *testing.T) {
			tok := softhsmtest.New(t)
			gen, _ := generate(t, tok, "ca", alg)
			if err := gen.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			keystoretest.Run(t, func(t *testing.T) keystore.Key {
				key, err := pkcs11.Open(context.Background(), tok.URI("ca"), pkcs11.Options{})
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				if _, ok := any(key).(keystore.SoftwareKey); ok {
					t.Errorf("a PKCS#11 key is a keystore.SoftwareKey")
				}
				return key
			})
		})
	}
}

// TestGenerateAndList: a generated key is listed with its canonical URI, algorithm and public
// key; the canonical URI opens the same key; a second key with the same label or id is refused.
func TestGenerateAndList(t *testing.T) {
	tok := softhsmtest.New(t)
	ctx := context.Background()
	ec, ecURI := generate(t, tok, "ec ca/1", keyerr.P384)
	rsaKey, rsaURI := generate(t, tok, "rsa", keyerr.RSA2048)
	for _, uri := range []string{ecURI, rsaURI} {
		if !strings.HasPrefix(uri, "pkcs11:token=signet-test;object=") || !strings.Contains(uri, ";id=%") ||
			!strings.Contains(uri, ";type=private?module-path="+tok.Module+"&pin-source="+tok.PINFile) {
			t.Errorf("canonical URI %q lacks token, object, id, type or the query given", uri)
		}
		if strings.Contains(uri, tok.PIN) {
			t.Errorf("canonical URI %q contains the PIN", uri)
		}
	}
	if !strings.Contains(ecURI, "object=ec%20ca%2F1;") {
		t.Errorf("canonical URI %q does not percent-encode the label", ecURI)
	}

	entries, err := pkcs11.List(ctx, "pkcs11:token=signet-test?module-path="+tok.Module+"&pin-source="+tok.PINFile, pkcs11.Options{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	want := []struct {
		label, alg, uri string
		pub             crypto.PublicKey
	}{{"ec ca/1", keyerr.P384, ecURI, ec.Public()}, {"rsa", keyerr.RSA2048, rsaURI, rsaKey.Public()}}
	if len(entries) != len(want) {
		t.Fatalf("List returned %d entries, want %d: %+v", len(entries), len(want), entries)
	}
	for i, w := range want {
		e := entries[i]
		if e.Label != w.label || e.Algorithm != w.alg || e.URI != w.uri || len(e.ID) != 16 || !samePublic(t, e.Public, w.pub) {
			t.Errorf("entry %d = {%q %q %q id %x}, want {%q %q %q} with a 16-byte id and the generated public key", i, e.Label, e.Algorithm, e.URI, e.ID, w.label, w.alg, w.uri)
		}
		key := open(t, e.URI, pkcs11.Options{})
		if !samePublic(t, key.Public(), w.pub) {
			t.Errorf("the canonical URI %q opens another key", e.URI)
		}
	}
	narrowed, err := pkcs11.List(ctx, tok.URI("rsa"), pkcs11.Options{})
	if err != nil || len(narrowed) != 1 || narrowed[0].Label != "rsa" {
		t.Errorf("List with object=rsa = %+v, %v; want the rsa key alone", narrowed, err)
	}

	if err := generateErr(t, tok.URI("rsa"), keyerr.P256, pkcs11.Options{}); err == nil || !strings.Contains(err.Error(), `object="rsa"`) {
		t.Errorf("Generate on an existing label: %v, want an error naming object=", err)
	}
	idURI := strings.Replace(tok.URI("fresh"), ";type=", ";id="+idOf(t, rsaURI)+";type=", 1)
	if err := generateErr(t, idURI, keyerr.P256, pkcs11.Options{}); err == nil || !strings.Contains(err.Error(), "id=") {
		t.Errorf("Generate on an existing id: %v, want an error naming id=", err)
	}
	withID := strings.Replace(tok.URI("given-id"), ";type=", ";id=%01%ff;type=", 1)
	_, uri := generateURI(t, withID, "", pkcs11.Options{})
	if !strings.Contains(uri, ";id=%01%FF;") {
		t.Errorf("Generate with id=%%01%%ff returned %q", uri)
	}
	if got, err := pkcs11.List(ctx, uri, pkcs11.Options{}); err != nil || len(got) != 1 || !bytes.Equal(got[0].ID, []byte{1, 0xff}) || got[0].Algorithm != keyerr.P256 {
		t.Errorf("List(%q) = %+v, %v; want one P-256 key with id 01ff", uri, got, err)
	}
}

// idOf returns the id= attribute of uri.
func idOf(t *testing.T, uri string) string {
	t.Helper()
	_, rest, ok := strings.Cut(uri, ";id=")
	if !ok {
		t.Fatalf("%q has no id", uri)
	}
	id, _, _ := strings.Cut(rest, ";")
	return id
}

func samePublic(t *testing.T, a, b crypto.PublicKey) bool {
	t.Helper()
	if a == nil || b == nil {
		return false
	}
	da, err := x509.MarshalPKIXPublicKey(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := x509.MarshalPKIXPublicKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(da, db)
}

// verifies reports whether sig is key's signature over digest (SHA-256, PKCS #1 v1.5 for RSA).
func verifies(pub crypto.PublicKey, digest, sig []byte) bool {
	switch pub := pub.(type) {
	case *ecdsa.PublicKey:
		return ecdsa.VerifyASN1(pub, digest, sig)
	case *rsa.PublicKey:
		return rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest, sig) == nil
	}
	return false
}

// signs signs a fresh digest with key and reports an error unless the signature verifies.
func signs(key crypto.Signer) error {
	msg := make([]byte, 16)
	_, _ = rand.Read(msg)
	digest := sha256.Sum256(msg)
	sig, err := key.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		return err
	}
	if !verifies(key.Public(), digest[:], sig) {
		return errWrongSignature
	}
	return nil
}

type constError string

func (e constError) Error() string { return string(e) }

const errWrongSignature = constError("the signature does not verify")

// Package keystoretest is the conformance suite of keystore backends: every backend's tests
// run Run on keys of each type it supports, so that the file, PKCS#11 and TPM backends are
// held to the same behaviour.
package keystoretest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"sync"
	"testing"

	"github.com/signet-pki/signet/keystore"
)

// Run checks a backend's key: open returns a fresh key of the backend (closed by Run). It
// checks that the public key is of a supported type, that signatures verify with it for every
// scheme the type has (ECDSA with SHA-256 and SHA-384; RSA PKCS #1 v1.5 and PSS; Ed25519), that
// concurrent signing is safe, and that Close succeeds.
func Run(t *testing.T, open func(t *testing.T) keystore.Key) {
	t.Helper()
	t.Run("signatures verify", func(t *testing.T) {
		key := open(t)
		defer closeKey(t, key)
		for _, s := range schemes(t, key.Public()) {
			sig, err := key.Sign(rand.Reader, s.digest, s.opts)
			if err != nil {
				t.Fatalf("%s: Sign: %v", s.name, err)
			}
			if !s.verify(sig) {
				t.Errorf("%s: the signature does not verify with the key's public key", s.name)
			}
		}
	})
	t.Run("concurrent signing", func(t *testing.T) {
		key := open(t)
		defer closeKey(t, key)
		s := schemes(t, key.Public())[0]
		var wg sync.WaitGroup
		errs := make(chan string, 64)
		for range 16 {
			wg.Go(func() {
				for range 4 {
					sig, err := key.Sign(rand.Reader, s.digest, s.opts)
					if err != nil {
						errs <- err.Error()
						return
					}
					if !s.verify(sig) {
						errs <- "a signature made concurrently does not verify"
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	})
}

func closeKey(t *testing.T, key keystore.Key) {
	t.Helper()
	if err := key.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// scheme is one way to sign with a key type, and how to check the result.
type scheme struct {
	name   string
	digest []byte
	opts   crypto.SignerOpts
	verify func(sig []byte) bool
}

// schemes returns the schemes of pub's type; it fails the test for an unsupported type.
func schemes(t *testing.T, pub crypto.PublicKey) []scheme {
	t.Helper()
	msg := []byte("signet keystore conformance")
	h256 := sha256.Sum256(msg)
	h384 := sha512.Sum384(msg)
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		return []scheme{
			{"ECDSA SHA-256", h256[:], crypto.SHA256, func(sig []byte) bool { return ecdsa.VerifyASN1(k, h256[:], sig) }},
			{"ECDSA SHA-384", h384[:], crypto.SHA384, func(sig []byte) bool { return ecdsa.VerifyASN1(k, h384[:], sig) }},
		}
	case *rsa.PublicKey:
		pss := &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: crypto.SHA256}
		return []scheme{
			{"RSA PKCS #1 v1.5 SHA-256", h256[:], crypto.SHA256, func(sig []byte) bool {
				return rsa.VerifyPKCS1v15(k, crypto.SHA256, h256[:], sig) == nil
			}},
			{"RSA PSS SHA-256", h256[:], pss, func(sig []byte) bool { return rsa.VerifyPSS(k, crypto.SHA256, h256[:], sig, pss) == nil }},
		}
	case ed25519.PublicKey:
		return []scheme{{"Ed25519", msg, crypto.Hash(0), func(sig []byte) bool { return ed25519.Verify(k, msg, sig) }}}
	default:
		t.Fatalf("public key type %T is not one a CA key may have", pub)
		return nil
	}
}

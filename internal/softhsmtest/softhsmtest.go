// Package softhsmtest creates real SoftHSM2 tokens for tests of the PKCS#11 keystore backend and
// of what uses it (the server, signetctl), with internal/softhsm.
//
// New makes the token in the test's temporary directory and points SOFTHSM2_CONF at it with
// t.Setenv, so a test that uses it cannot be parallel (t.Setenv panics in a parallel test),
// and SoftHSM reads that variable when the module is initialized: every key opened on a token
// must be closed before the test ends, or the next test's module keeps the old token directory.
// New checks at the end of the test that no key is left open on the module, and fails the
// test if one is. A missing SoftHSM2 fails the test with the command that installs it; it
// never skips.
package softhsmtest

import (
	"testing"

	"github.com/signet-pki/signet/internal/softhsm"
)

// Token is an initialized SoftHSM2 token in a test's temporary directory.
type Token struct {
	*softhsm.Token
}

// New creates a fresh token labelled "signet-test" with random user and SO PINs in
// t.TempDir(), and sets SOFTHSM2_CONF for the rest of the test (so the test cannot be
// parallel).
func New(t testing.TB) *Token {
	t.Helper()
	tok, err := softhsm.Init(t.TempDir(), "signet-test")
	if err != nil {
		t.Fatalf("softhsmtest: %v", err)
	}
	t.Setenv("SOFTHSM2_CONF", tok.ConfPath)
	t.Cleanup(func() { checkFinalized(t, tok.Module, tok.Label) }) // runs after the cleanups the test adds later
	return &Token{tok}
}

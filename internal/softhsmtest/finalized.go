//go:build cgo

package softhsmtest

import (
	"errors"
	"testing"

	"github.com/miekg/pkcs11"
)

// checkFinalized fails the test when the module is still initialized in this process: a key
// on the token was not closed, and the module would go on reading this test's (deleted) token
// directory in the next test. It finalizes the module, so that the next tests work.
func checkFinalized(t testing.TB, module, label string) {
	ctx := pkcs11.New(module)
	if ctx == nil {
		return
	}
	defer ctx.Destroy()
	err := ctx.Initialize()
	if err != nil && !errors.Is(err, pkcs11.Error(pkcs11.CKR_CRYPTOKI_ALREADY_INITIALIZED)) {
		return
	}
	_ = ctx.Finalize()
	if err != nil {
		t.Errorf("softhsmtest: the SoftHSM2 module is still initialized at the end of the test: close every PKCS#11 key the test opened on token %q", label)
	}
}

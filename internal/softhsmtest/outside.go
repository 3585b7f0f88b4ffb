//go:build cgo

package softhsmtest

import (
	"errors"
	"testing"

	"github.com/miekg/pkcs11"
)

// Outside returns a second PKCS#11 context on the token's module and the token's slot, as
// another library in the process would hold: the module's state is per process, so what it
// does (close every session, finalize the module) happens to the keys under test too. It is
// destroyed when the test ends.
func (tok *Token) Outside(t testing.TB) (*pkcs11.Ctx, uint) {
	t.Helper()
	ctx := pkcs11.New(tok.Module)
	if ctx == nil {
		t.Fatalf("softhsmtest: loading %s", tok.Module)
	}
	t.Cleanup(ctx.Destroy)
	if err := ctx.Initialize(); err != nil {
		var e pkcs11.Error
		if !errors.As(err, &e) || e != pkcs11.CKR_CRYPTOKI_ALREADY_INITIALIZED {
			t.Fatalf("softhsmtest: C_Initialize: %v", err)
		}
	}
	slots, err := ctx.GetSlotList(true)
	if err != nil {
		t.Fatalf("softhsmtest: C_GetSlotList: %v", err)
	}
	for _, slot := range slots {
		if info, err := ctx.GetTokenInfo(slot); err == nil && info.Label == tok.Label {
			return ctx, slot
		}
	}
	t.Fatalf("softhsmtest: no slot holds token %q", tok.Label)
	return nil, 0
}

// LoggedOut reports whether a new session on slot of ctx (Outside's) is a public one: no
// context in the process is logged in to the token. The session is closed again.
func LoggedOut(t testing.TB, ctx *pkcs11.Ctx, slot uint) bool {
	t.Helper()
	sh, err := ctx.OpenSession(slot, pkcs11.CKF_SERIAL_SESSION)
	if err != nil {
		t.Errorf("softhsmtest: C_OpenSession: %v", err)
		return false
	}
	defer func() { _ = ctx.CloseSession(sh) }()
	info, err := ctx.GetSessionInfo(sh)
	if err != nil {
		t.Errorf("softhsmtest: C_GetSessionInfo: %v", err)
		return false
	}
	return info.State == pkcs11.CKS_RO_PUBLIC_SESSION
}

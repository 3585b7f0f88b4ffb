package pkcs11

import (
	"crypto"
	"errors"
)

// ErrNoCgo is returned by every function of a binary built without cgo (CGO_ENABLED=0):
// PKCS#11 modules are C shared libraries, loaded through cgo.
var ErrNoCgo = errors.New("the PKCS#11 keystore backend needs cgo: this binary was built with CGO_ENABLED=0; rebuild it with CGO_ENABLED=1 and a C compiler")

// Options are the caller's choices that a URI cannot make for itself.
type Options struct {
	// AllowPINValue accepts pin-value= in a URI. Off by default; only tests and the demo set it
	// (the server config has an explicit flag). Without it a pin-value URI is refused with an
	// error saying so.
	AllowPINValue bool
}

// Entry is a private key on a token, as List reports it.
type Entry struct {
	// URI is the key's canonical URI: token, object, id and type=private, with the query of
	// the URI given to List.
	URI   string
	Label string // CKA_LABEL
	ID    []byte // CKA_ID
	// Algorithm is one of keyerr's names (P-256, RSA-2048, ...), "RSA-<bits>" for another
	// size, or "unsupported: <why>" for a key this backend cannot sign with (Public is nil).
	Algorithm string
	Public    crypto.PublicKey
}

//go:build cgo

package pkcs11

import (
	"errors"
	"fmt"

	cryptoki "github.com/miekg/pkcs11"

	"github.com/signet-pki/signet/keystore/keyerr"
)

// ckr returns the PKCS#11 return value in err, and false when err carries none.
func ckr(err error) (cryptoki.Error, bool) {
	var e cryptoki.Error
	ok := errors.As(err, &e)
	return e, ok
}

// is reports whether err carries one of the return values codes.
func is(err error, codes ...uint) bool {
	e, ok := ckr(err)
	if !ok {
		return false
	}
	for _, c := range codes {
		if uint(e) == c {
			return true
		}
	}
	return false
}

// sessionGone reports whether err says the session is no longer there (closed from outside,
// or the token reset it): the operation may succeed on a fresh session.
func sessionGone(err error) bool {
	return is(err, cryptoki.CKR_SESSION_HANDLE_INVALID, cryptoki.CKR_SESSION_CLOSED)
}

// stateLost reports whether err says the session lost its login or the key's handle (SoftHSM
// drops private objects' handles when the user is logged out, as happens when the last session
// closes): the operation may succeed on a session that logs in and finds the key again.
func stateLost(err error) bool {
	return is(err, cryptoki.CKR_USER_NOT_LOGGED_IN, cryptoki.CKR_KEY_HANDLE_INVALID, cryptoki.CKR_OBJECT_HANDLE_INVALID)
}

// notInitialized reports whether err says the module was finalized underneath us: every
// session and object handle of that initialization is meaningless now.
func notInitialized(err error) bool {
	return is(err, cryptoki.CKR_CRYPTOKI_NOT_INITIALIZED)
}

// deviceFailure reports whether err is a failure of the device, module or its state rather than
// of the request: retrying later (after keystore re-opens the key) may succeed.
func deviceFailure(err error) bool {
	return sessionGone(err) || stateLost(err) || is(err,
		cryptoki.CKR_CRYPTOKI_NOT_INITIALIZED,
		cryptoki.CKR_DEVICE_REMOVED,
		cryptoki.CKR_DEVICE_ERROR,
		cryptoki.CKR_DEVICE_MEMORY,
		cryptoki.CKR_HOST_MEMORY,
		cryptoki.CKR_TOKEN_NOT_PRESENT,
		cryptoki.CKR_SESSION_COUNT,
		cryptoki.CKR_GENERAL_ERROR,
	)
}

// classify wraps err (a failed PKCS#11 call, described by what) so that a device failure
// wraps keyerr.ErrUnavailable and anything else does not.
func classify(what string, err error) error {
	if deviceFailure(err) {
		return fmt.Errorf("%s: %w: %w", what, keyerr.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// loginError describes a failed C_Login. It names where the PIN came from (pinRef) and never
// the PIN.
func loginError(err error, pinRef, tokenLabel string) error {
	switch {
	case is(err, cryptoki.CKR_PIN_INCORRECT, cryptoki.CKR_PIN_LEN_RANGE, cryptoki.CKR_PIN_INVALID):
		return fmt.Errorf("%s: PIN incorrect for token %q: %w", pinRef, tokenLabel, err)
	case is(err, cryptoki.CKR_PIN_LOCKED):
		return fmt.Errorf("%s: the user PIN of token %q is locked (too many wrong PINs); the security officer must unlock it: %w", pinRef, tokenLabel, err)
	case is(err, cryptoki.CKR_PIN_EXPIRED):
		return fmt.Errorf("%s: the user PIN of token %q has expired; set a new one: %w", pinRef, tokenLabel, err)
	case is(err, cryptoki.CKR_USER_PIN_NOT_INITIALIZED):
		return fmt.Errorf("token %q has no user PIN yet (initialize it): %w", tokenLabel, err)
	default:
		return classify(fmt.Sprintf("logging in to token %q", tokenLabel), err)
	}
}

// Package pkcs11 is the keystore backend of CA keys on PKCS#11 tokens (HSMs, smart cards,
// SoftHSM2), named by RFC 7512 URIs. Open opens a key as a crypto.Signer, Generate creates one
// inside a token, List lists a token's private keys.
//
// # Why miekg/pkcs11 and not crypto11
//
// The package is built directly on github.com/miekg/pkcs11, the thin cgo binding of the
// PKCS#11 C API, rather than on github.com/ThalesGroup/crypto11 (itself built on it). Two
// things Signet needs are out of crypto11's reach: the raw CKR_* return values, to tell a
// failure of the device (CKR_DEVICE_ERROR, CKR_SESSION_HANDLE_INVALID, ...: transient, wrapped
// in keyerr.ErrUnavailable so that the server answers "try again" and keystore re-opens the
// key) from a configuration error (CKR_PIN_INCORRECT, no such object: final); and
// re-initializing a module that was finalized underneath us, which a crypto11 context, holding
// its own initialization and session pool, cannot do cleanly.
//
// # URIs
//
//	pkcs11:<path attributes, ';'-separated>?<query attributes, '&'-separated>
//
// for example
//
//	pkcs11:token=signet;object=kube-ca;type=private?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/etc/signet/hsm.pin
//
// Values are percent-encoded (RFC 3986): %XX for any byte, and always for ';', '?', '&', '%'
// and, in the path, '/'. Path attributes:
//   - token: the token label; manufacturer, model, serial: the token's; slot-id: the slot
//     number (decimal). At least one must be given, and exactly one token must match.
//   - object: the key's CKA_LABEL. id: its CKA_ID, as percent-encoded bytes (id=%01%a2).
//     Open needs at least one of them, and exactly one private key must match.
//   - type: only private (the private key of a key pair) is accepted.
//
// Query attributes:
//   - module-path (required): the PKCS#11 module, a shared library.
//   - pin-source: the file holding the user PIN, as file:/path, file:///path or a plain path;
//     a trailing newline is ignored.
//   - pin-value: the PIN itself, refused unless Options.AllowPINValue is set (tests and the
//     demo): a PIN in a URI shows wherever the URI does.
//
// Unknown and duplicate attributes are refused, naming them, so that a typo cannot quietly
// select another key; so are the RFC's module-name, library-* and slot-description/-manufacturer,
// which this backend does not support.
//
// # Behaviour
//
// Keys are ECDSA on P-256 or P-384 (CKM_ECDSA; the raw r||s becomes ASN.1 DER) or RSA of 2048
// to 4096 bits (PKCS #1 v1.5 as CKM_RSA_PKCS over the DigestInfo, PSS as CKM_RSA_PKCS_PSS with
// MGF1 over the same hash), over SHA-256, SHA-384 or SHA-512 digests. Open checks with one
// signature that the public key it found (the private key's attributes for RSA, the public key
// object with the same id, or label, for ECDSA) belongs to the private key. A key marked
// CKA_ALWAYS_AUTHENTICATE (a PIV signature key, say) gets the context-specific login it needs
// before each signature.
//
// Each module is loaded and initialized once per process and shared, with a reference count,
// by every Key on it (several keys on one token work); the last Close finalizes and unloads it.
// Each Key lends up to 8 sessions (fewer when the token says so) to concurrent Sign calls.
// The user logs in once per token: sessions share the login, and a new session logs in again
// when the login went away with the last session.
//
// Errors name the URI attribute at fault (module-path, token=, object=/id=, pin-source or
// pin-value) and never contain the PIN. A failure of the device wraps keyerr.ErrUnavailable:
// a session closed from outside is dropped and the signature retried once on a fresh session;
// a second failure, a module finalized underneath (CKR_CRYPTOKI_NOT_INITIALIZED), a removed
// token or a device error are returned. A key whose module was finalized stays unusable (its
// handles belong to the old initialization); Open on the same URI initializes the module again
// and gives a working key. Re-opening and timeouts are keystore's, not this package's, and it
// logs nothing.
//
// The backend needs cgo (a module is a C shared library); in a binary built with
// CGO_ENABLED=0 every function fails with ErrNoCgo, which says so.
//
// Limitations: a PIN is checked only by the login that logs the process in to the token;
// while another key (or another PKCS#11 user) of the process is logged in to the same token,
// C_Login answers CKR_USER_ALREADY_LOGGED_IN whatever the PIN, so a wrong PIN is noticed only
// by a fresh process. A module that another library of the process initialized is used but not
// finalized by this package; if that library finalizes it, keys here fail as above.
package pkcs11

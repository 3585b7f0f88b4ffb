// Package keyerr holds the errors every keystore backend shares. It imports nothing of
// Signet's, so that the backends (which keystore imports) and the server can both use it.
package keyerr

import "errors"

// ErrUnavailable marks a failure of the device rather than of the request: the PKCS#11
// session or module went away, the token was removed, the TPM connection broke or the device
// is busy. A backend wraps it into such errors (fmt.Errorf("...: %w", keyerr.ErrUnavailable)
// or errors.Join); the server answers them as transient (KEY_UNAVAILABLE, gRPC Unavailable),
// and keystore re-opens the key by its URI in the background. Errors a retry cannot fix
// (wrong PIN, missing object, unsupported key type) must not wrap it.
var ErrUnavailable = errors.New("key unavailable")

// Algorithm names accepted by the backends' key generation, as signetctl keys create takes
// them with --algorithm.
const (
	P256    = "P-256"
	P384    = "P-384"
	RSA2048 = "RSA-2048"
	RSA3072 = "RSA-3072"
	RSA4096 = "RSA-4096"
)

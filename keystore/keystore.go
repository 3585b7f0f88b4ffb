// Package keystore opens CA keys as crypto.Signer values. Each backend is a subpackage, and
// keystoretest is the conformance suite every backend's tests run.
//
// A key is named by a URI:
//   - file:///path/to/key.pem or a plain path: a PEM private key on disk (PKCS#8, SEC 1 EC or
//     PKCS#1 RSA), never encrypted; protect it with file permissions (backend keystore/pemfile).
//   - pkcs11:... (RFC 7512) and tpm:... are reserved for the HSM and TPM backends.
package keystore

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/signet-pki/signet/keystore/pemfile"
)

// ErrUnsupportedURI is returned by Open for a URI scheme this build cannot open.
var ErrUnsupportedURI = errors.New("unsupported key URI")

// Key is a CA private key. It is safe for concurrent use.
type Key interface {
	crypto.Signer
	// Close releases the key's resources (sessions, handles). The key is unusable afterwards.
	Close() error
}

// SoftwareKey is a Key whose signatures Go computes from a private key in memory (a file
// key): Software returns that key. certsign does not verify the signatures of Go's own ECDSA
// and RSA keys, which cannot be wrong the way a device's can; a hardware key must not
// implement it.
type SoftwareKey interface {
	Key
	Software() crypto.Signer
}

// Open opens the key named by uri. See the package doc for the accepted forms.
func Open(ctx context.Context, uri string) (Key, error) {
	path, isFile, err := filePath(uri)
	if err != nil {
		return nil, err
	}
	if isFile {
		key, err := pemfile.Open(path)
		if err != nil {
			return nil, err
		}
		return key, nil
	}
	scheme, _, _ := strings.Cut(uri, ":")
	switch scheme {
	case "pkcs11", "tpm":
		return nil, fmt.Errorf("opening key %q: %w: the %s backend is not in this build yet", uri, ErrUnsupportedURI, scheme)
	default:
		return nil, fmt.Errorf("opening key %q: %w: scheme %q (want file, pkcs11 or tpm)", uri, ErrUnsupportedURI, scheme)
	}
}

// FilePath returns the file a key URI names, and false when the URI names no file (an HSM or
// TPM key, or a malformed file URI).
func FilePath(uri string) (string, bool) {
	path, ok, err := filePath(uri)
	return path, ok && err == nil
}

func filePath(uri string) (string, bool, error) {
	scheme, _, ok := strings.Cut(uri, ":")
	if !ok || len(scheme) == 1 || strings.HasPrefix(uri, "/") || strings.HasPrefix(uri, ".") {
		// A plain path (or a Windows drive letter, which has a one-letter scheme).
		return uri, true, nil
	}
	if scheme != "file" {
		return "", false, nil
	}
	u, err := url.Parse(uri)
	if err != nil {
		return "", false, fmt.Errorf("parsing key URI %q: %w", uri, err)
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", false, fmt.Errorf("opening key %q: file URI must not name a remote host", uri)
	}
	if u.Path != "" {
		return u.Path, true, nil
	}
	return u.Opaque, true, nil
}

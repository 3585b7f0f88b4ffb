// Package keystore opens CA keys as crypto.Signer values. Each backend is a subpackage, and
// keystoretest is the conformance suite every backend's tests run.
//
// A key is named by a URI:
//
//		file:///etc/signet/ca.key                                  PEM key file (keystore/pemfile)
//		/etc/signet/ca.key                                         the same, as a plain path
//		file:///etc/signet/ca.key?passphrase-file=/etc/signet/ca.pass   encrypted PKCS#8
//		pkcs11:token=signet;object=kube-ca;type=private?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/etc/signet/hsm.pin
//		tpm:handle=0x81000100                                      persistent TPM key on /dev/tpmrm0
//		tpm:blob=/var/lib/signet/ca.tpmkey?socket=/run/swtpm/sock  TPM key blob, on swtpm
//
//	  - file: a PEM private key on disk (PKCS#8, SEC 1 EC or PKCS#1 RSA), or an encrypted
//	    PKCS#8 key ("ENCRYPTED PRIVATE KEY", PBES2) whose passphrase is read from the file that
//	    passphrase-file= names. The key file and the passphrase file must be readable by their
//	    owner only (chmod 600), as ssh requires of private keys.
//	  - pkcs11: an RFC 7512 URI of a key on a PKCS#11 token (keystore/pkcs11 has the grammar):
//	    token=, object= and/or id=, type=private; module-path=, pin-source=file:... (pin-value=
//	    only with Options.AllowPINValue).
//	  - tpm: a TPM 2.0 key (keystore/tpm has the grammar): handle=0x81xxxxxx (persistent) or
//	    blob=path (a "TSS2 PRIVATE KEY" file sealed under the storage root key), on the device
//	    /dev/tpmrm0, another device=, or swtpm's socket=.
//
// An HSM or TPM key is opened as a *Device: every signature is bounded by a timeout, a device
// that goes away fails calls with ErrUnavailable (keyerr) while the key is re-opened by its
// URI in the background, and the key is never a SoftwareKey, so server/certsign verifies
// each of its signatures against the CA certificate before a certificate leaves. Generate
// makes a key inside a device and List lists what a device holds (signetctl keys).
package keystore

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-tpm/tpm2/transport"

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

// Options are how Open opens a key.
type Options struct {
	// AllowPINValue accepts a PKCS#11 URI's pin-value= attribute. Off by default: a PIN written
	// into a configuration file is a PIN anyone who reads the file has; tests and the demo
	// set it (the server config's keys.allowPINValue).
	AllowPINValue bool
	// Timeout bounds each signature of an HSM or TPM key (DefaultTimeout when zero). A call
	// that takes longer fails as unavailable and the key is re-opened.
	Timeout time.Duration
	// Observe, when set, is told of every signature: the backend, the outcome and how long it
	// took (server metrics).
	Observe func(Operation)
	// TPM, when set, is the TPM every tpm: URI is opened on instead of the device or socket it
	// names: tests run the in-process simulator through it.
	TPM func() (transport.TPMCloser, error)
}

// DefaultTimeout bounds a hardware signature when Options.Timeout is zero: far above what an
// HSM or TPM needs (milliseconds), short enough that a hung device is noticed.
const DefaultTimeout = 10 * time.Second

// Backend names, as Backend and the metrics report them.
const (
	BackendFile   = "file"
	BackendPKCS11 = "pkcs11"
	BackendTPM    = "tpm"
)

// Open opens the key named by uri. See the package doc for the accepted forms. An HSM or TPM
// key comes back as a *Device, which bounds every call by a timeout, verifies nothing itself
// (certsign verifies every signature of a key that is not a SoftwareKey) and re-opens the key
// in the background when the device fails.
func Open(ctx context.Context, uri string, opts Options) (Key, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	path, isFile, err := filePath(uri)
	if err != nil {
		return nil, err
	}
	if isFile {
		pass, err := passphraseFile(uri)
		if err != nil {
			return nil, err
		}
		key, err := pemfile.Open(path, pemfile.Options{PassphraseFile: pass})
		if err != nil {
			return nil, err
		}
		return observed(key, opts.Observe), nil
	}
	scheme, _, _ := strings.Cut(uri, ":")
	open, ok := backends[scheme]
	if !ok {
		return nil, fmt.Errorf("opening key %q: %w: scheme %q (want file, pkcs11 or tpm)", redact(uri), ErrUnsupportedURI, scheme)
	}
	return openDevice(ctx, scheme, uri, opts, func(ctx context.Context) (Key, error) { return open(ctx, uri, opts) })
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
	for name := range u.Query() {
		if name != "passphrase-file" {
			return "", false, fmt.Errorf("opening key file %s: unknown attribute %q (a file URI takes only passphrase-file)", u.Path, name)
		}
	}
	if u.Path != "" {
		return u.Path, true, nil
	}
	return u.Opaque, true, nil
}

// passphraseFile is a file URI's passphrase-file attribute: the file holding the passphrase
// of an encrypted PKCS#8 key. A plain path has none.
func passphraseFile(uri string) (string, error) {
	if !strings.HasPrefix(uri, "file:") {
		return "", nil
	}
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("parsing key URI %q: %w", uri, err)
	}
	q := u.Query()
	if len(q["passphrase-file"]) > 1 {
		return "", fmt.Errorf("opening key %q: passphrase-file is given twice", uri)
	}
	return q.Get("passphrase-file"), nil
}

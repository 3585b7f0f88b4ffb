package configcheck

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/x509"
	"errors"
	"io/fs"
	"net/url"
	"strconv"
	"strings"

	"github.com/signet-pki/signet/keystore"
)

// key checks the key named by uri under field. A file key is opened as the server opens it
// (keystore.Open: the owner-only mode rule, the passphrase file of an encrypted PKCS#8 key)
// and must match cert when there is one (a CA's key whose certificate is not usable is
// checked alone); a checkpoint key must be Ed25519 or P-256. PKCS#11 and TPM keys are
// checked by their URI only.
func (c *checker) key(field, uri string, cert *x509.Certificate, checkpoint bool) {
	scheme, _, _ := strings.Cut(uri, ":")
	switch {
	case scheme == "pkcs11":
		c.pkcs11(field, uri)
		return
	case scheme == "tpm":
		c.tpm(field, uri)
		return
	}
	path, isFile := keystore.FilePath(uri)
	switch {
	case !isFile && scheme != "file":
		c.fail(field, "%q is not a key URI: want a path, file:, pkcs11: or tpm:", keystore.Redact(uri))
		return
	case isFile && !c.readable(field, path):
		return
	}
	// For a file (or a malformed file: URI, which Open refuses as the server would) Open reads
	// and parses; it talks to no device.
	k, err := keystore.Open(context.Background(), uri, keystore.Options{})
	if err != nil {
		if errors.Is(err, fs.ErrPermission) && strings.Contains(err.Error(), "passphrase-file") {
			c.note(field, "%s is an encrypted key whose passphrase file this user cannot read: its match with the certificate is not checked", path)
			return
		}
		c.fail(field, "%s", redactedError(uri, err))
		return
	}
	defer k.Close()
	pub := k.Public()
	if checkpoint && !checkpointKeyType(pub) {
		c.fail(field, "%s is an %s, want an Ed25519 or ECDSA P-256 key for checkpoints", path, keyType(pub))
	}
	if cert == nil {
		return
	}
	if eq, ok := pub.(interface{ Equal(crypto.PublicKey) bool }); !ok || !eq.Equal(cert.PublicKey) {
		c.fail(field, "%s does not match the certificate (%s): the key's public key (%s) is not the certificate's", path, cert.Subject, keyType(pub))
	}
}

// redactedError is err's message, with uri redacted where it appears (a pin-value).
func redactedError(uri string, err error) string {
	return strings.ReplaceAll(err.Error(), uri, keystore.Redact(uri))
}

// checkpointKeyType reports whether pub may sign checkpoints (ledgerproof's note signer).
func checkpointKeyType(pub crypto.PublicKey) bool {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return true
	case *ecdsa.PublicKey:
		return k.Curve == elliptic.P256()
	}
	return false
}

// keyType names the type of a public key for messages.
func keyType(pub crypto.PublicKey) string {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return "Ed25519 key"
	case *ecdsa.PublicKey:
		return "ECDSA " + k.Curve.Params().Name + " key"
	default:
		if a, ok := pub.(interface{ Size() int }); ok {
			return "RSA key of " + strconv.Itoa(a.Size()*8) + " bits"
		}
	}
	return "key of an unknown type"
}

// pkcs11 checks a PKCS#11 URI's syntax as far as this package can without the module: a
// module-path naming a readable file, a pin-source naming a readable file, a pin-value only
// when keys.allowPINValue is set.
func (c *checker) pkcs11(field, uri string) {
	rest := strings.TrimPrefix(uri, "pkcs11:")
	_, query, _ := strings.Cut(rest, "?")
	attrs := map[string]string{}
	for _, a := range strings.Split(query, "&") {
		if a == "" {
			continue
		}
		name, value, _ := strings.Cut(a, "=")
		v, err := url.PathUnescape(value)
		if err != nil {
			c.fail(field, "attribute %q: malformed percent-encoding", name)
			return
		}
		attrs[name] = v
	}
	module, ok := attrs["module-path"]
	if !ok || module == "" {
		c.fail(field, "module-path is missing: name the PKCS#11 module (module-path=/path/to/module.so)")
	} else {
		c.readable(field+" module-path", module)
	}
	_, hasValue := attrs["pin-value"]
	source, hasSource := attrs["pin-source"]
	switch {
	case hasValue && hasSource:
		c.fail(field, "both pin-source and pin-value are given: keep one")
	case hasValue && !c.keys.AllowPINValue:
		c.fail(field, "pin-value: a PIN in the URI is refused unless keys.allowPINValue is set; put the PIN in a file only the server can read and use pin-source=file:/path/to/pin")
	case hasSource:
		path := strings.TrimPrefix(source, "file:")
		if p, ok := strings.CutPrefix(path, "//"); ok {
			path = p
		}
		c.readable(field+" pin-source", path)
	case !hasValue:
		c.fail(field, "the URI gives no PIN: add pin-source=file:/path/to/pin")
	}
}

// tpm checks a tpm: URI's blob file, when it names one.
func (c *checker) tpm(field, uri string) {
	rest := strings.TrimPrefix(uri, "tpm:")
	keyPart, _, _ := strings.Cut(rest, "?")
	name, value, ok := strings.Cut(keyPart, "=")
	switch {
	case keyPart == "":
	case !ok || (name != "handle" && name != "blob"):
		c.fail(field, "%q is not handle=0x81… or blob=/path", keyPart)
	case name == "blob":
		path, err := url.PathUnescape(value)
		if err != nil || path == "" {
			c.fail(field, "blob= names no file")
			return
		}
		c.readable(field+" blob", path)
	}
}

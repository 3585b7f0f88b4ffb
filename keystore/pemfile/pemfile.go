// Package pemfile is the keystore backend of CA keys in PEM files: keystore.Open hands it the
// path of a file: URI or a plain path.
package pemfile

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/youmark/pkcs8"
)

// Key is a private key loaded from a PEM file. Go's software keys are safe for concurrent use,
// so it needs no lock. It implements keystore.Key and keystore.SoftwareKey.
type Key struct {
	crypto.Signer
}

// Close does nothing: a file key holds no resources.
func (Key) Close() error { return nil }

// Software returns the Go private key (keystore.SoftwareKey), so that certsign can tell Go's
// own ECDSA and RSA implementations, which need no check of their signatures, from others.
func (k Key) Software() crypto.Signer { return k.Signer }

// ErrKeyFileMode is returned by Open for a key or passphrase file that group or others may
// access.
var ErrKeyFileMode = errors.New("key file is accessible by group or others")

// Options are how a file key is opened.
type Options struct {
	// PassphraseFile is the file holding the passphrase of an encrypted PKCS#8 key ("ENCRYPTED
	// PRIVATE KEY"), its trailing newline ignored. The passphrase is never taken from the
	// command line or the configuration itself, and never appears in an error.
	PassphraseFile string
}

// Open reads and parses the PEM private key file at path, decrypting it with the passphrase
// in opts.PassphraseFile when it is an encrypted PKCS#8 key. A key or passphrase file that
// group or others may read, write or execute is refused, as ssh refuses such private keys: a
// CA key readable by other users of the host is a CA key anyone on it can copy.
func Open(path string, opts Options) (Key, error) {
	data, err := readPrivate(path)
	if err != nil {
		return Key{}, err
	}
	block, _ := pem.Decode(data)
	if block != nil && block.Type == encryptedType {
		if opts.PassphraseFile == "" {
			return Key{}, fmt.Errorf("key file %s is an encrypted PKCS#8 key: name the file holding its passphrase with passphrase-file= (file:///path/to/key?passphrase-file=/path/to/passphrase)", path)
		}
		signer, err := decrypt(block.Bytes, opts.PassphraseFile)
		if err != nil {
			return Key{}, fmt.Errorf("opening key file %s: %w", path, err)
		}
		return Key{signer}, nil
	}
	if opts.PassphraseFile != "" {
		return Key{}, fmt.Errorf("passphrase-file: key file %s is not encrypted (want an %q PEM block); drop passphrase-file or encrypt the key", path, encryptedType)
	}
	signer, err := ParsePrivateKeyPEM(data)
	if err != nil {
		return Key{}, fmt.Errorf("parsing key file %s: %w", path, err)
	}
	return Key{signer}, nil
}

// encryptedType is the PEM type of an encrypted PKCS#8 key (RFC 5958, RFC 7468).
const encryptedType = "ENCRYPTED PRIVATE KEY"

// readPrivate reads a file only its owner may access.
func readPrivate(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading key file: %w", err)
	}
	if mode := info.Mode().Perm(); mode&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %#o; make it readable by its owner only (chmod 600 %s)", ErrKeyFileMode, path, mode, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading key file: %w", err)
	}
	return data, nil
}

// decrypt decrypts an encrypted PKCS#8 key (PBES2 with PBKDF2 or scrypt, AES or 3DES) with
// the passphrase in passFile. youmark/pkcs8 does the decryption; a wrong passphrase is told
// apart from a damaged key where the library allows.
func decrypt(der []byte, passFile string) (crypto.Signer, error) {
	pass, err := readPrivate(passFile)
	if err != nil {
		return nil, fmt.Errorf("passphrase-file: %w", err)
	}
	pass = bytes.TrimRight(pass, "\r\n")
	if len(pass) == 0 {
		return nil, fmt.Errorf("passphrase-file: %s is empty", passFile)
	}
	key, _, err := pkcs8.ParsePrivateKey(der, pass)
	if err != nil {
		if strings.Contains(err.Error(), "incorrect password") {
			return nil, fmt.Errorf("passphrase-file: the passphrase in %s does not decrypt the key", passFile)
		}
		return nil, fmt.Errorf("decrypting PKCS#8 key: %w", err)
	}
	return supported(key)
}

// ParsePrivateKeyPEM parses the first PEM block of data as an unencrypted private key in
// PKCS#8, SEC 1 ("EC PRIVATE KEY") or PKCS#1 ("RSA PRIVATE KEY") form. It accepts ECDSA,
// Ed25519 and RSA keys. A leading "EC PARAMETERS" block, as written by
// `openssl ecparam -genkey`, is skipped.
func ParsePrivateKeyPEM(data []byte) (crypto.Signer, error) {
	block, rest := pem.Decode(data)
	if block != nil && block.Type == "EC PARAMETERS" {
		block, _ = pem.Decode(rest)
	}
	if block == nil {
		return nil, errors.New("no PEM block found")
	}
	if _, encrypted := block.Headers["DEK-Info"]; encrypted {
		return nil, errors.New("encrypted PEM keys are not supported")
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("PEM block type %q is not a private key", block.Type)
	}
	if err != nil {
		return nil, err
	}
	return supported(key)
}

// supported returns key as a crypto.Signer if it is of a type a CA key may have.
func supported(key any) (crypto.Signer, error) {
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		return k, nil
	case *rsa.PrivateKey:
		return k, nil
	case ed25519.PrivateKey:
		return k, nil
	default:
		return nil, fmt.Errorf("unsupported private key type %T", key)
	}
}

// MarshalPrivateKeyPEM encodes key as a PKCS#8 "PRIVATE KEY" PEM block.
func MarshalPrivateKeyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshalling private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

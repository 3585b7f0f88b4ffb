// Package pemfile is the keystore backend of CA keys in PEM files: keystore.Open hands it the
// path of a file: URI or a plain path.
package pemfile

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
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

// ErrKeyFileMode is returned by Open for a key file that group or others may access.
var ErrKeyFileMode = errors.New("key file is accessible by group or others")

// Open reads and parses the PEM private key file at path. A file that group or others may
// read, write or execute is refused, as ssh refuses such private keys: a CA key readable by
// other users of the host is a CA key anyone on it can copy.
func Open(path string) (Key, error) {
	info, err := os.Stat(path)
	if err != nil {
		return Key{}, fmt.Errorf("reading key file: %w", err)
	}
	if mode := info.Mode().Perm(); mode&0o077 != 0 {
		return Key{}, fmt.Errorf("%w: %s has mode %#o; make it readable by its owner only (chmod 600 %s)", ErrKeyFileMode, path, mode, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("reading key file: %w", err)
	}
	signer, err := ParsePrivateKeyPEM(data)
	if err != nil {
		return Key{}, fmt.Errorf("parsing key file %s: %w", path, err)
	}
	return Key{signer}, nil
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

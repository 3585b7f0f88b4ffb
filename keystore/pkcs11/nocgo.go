//go:build !cgo

package pkcs11

import (
	"context"
	"crypto"
	"errors"
	"io"
)

// Key is a private key on a PKCS#11 token; without cgo there is none.
type Key struct{}

// Open fails with ErrNoCgo.
func Open(context.Context, string, Options) (*Key, error) {
	return nil, errors.Join(errors.New("opening PKCS#11 key"), ErrNoCgo)
}

// Generate fails with ErrNoCgo.
func Generate(context.Context, string, string, Options) (*Key, string, error) {
	return nil, "", errors.Join(errors.New("generating PKCS#11 key"), ErrNoCgo)
}

// List fails with ErrNoCgo.
func List(context.Context, string, Options) ([]Entry, error) {
	return nil, errors.Join(errors.New("listing PKCS#11 keys"), ErrNoCgo)
}

// Public returns nil.
func (*Key) Public() crypto.PublicKey { return nil }

// Sign fails with ErrNoCgo.
func (*Key) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) { return nil, ErrNoCgo }

// Close does nothing.
func (*Key) Close() error { return nil }

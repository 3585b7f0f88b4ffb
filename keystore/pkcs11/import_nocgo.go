//go:build !cgo

package pkcs11

import (
	"context"
	"crypto"
	"errors"
)

// Import fails with ErrNoCgo.
func Import(context.Context, string, crypto.Signer, Options) (string, error) {
	return "", errors.Join(errors.New("importing PKCS#11 key"), ErrNoCgo)
}

//go:build !cgo

package pkcs11_test

import (
	"context"
	"errors"
	"testing"

	"github.com/signet-pki/signet/keystore/pkcs11"
)

// TestNoCgo: without cgo every entry point says why it cannot work.
func TestNoCgo(t *testing.T) {
	const uri = "pkcs11:token=t;object=ca?module-path=/m.so&pin-source=/p"
	if _, err := pkcs11.Open(context.Background(), uri, pkcs11.Options{}); !errors.Is(err, pkcs11.ErrNoCgo) {
		t.Errorf("Open: %v, want ErrNoCgo", err)
	}
	if _, _, err := pkcs11.Generate(context.Background(), uri, "", pkcs11.Options{}); !errors.Is(err, pkcs11.ErrNoCgo) {
		t.Errorf("Generate: %v, want ErrNoCgo", err)
	}
	if _, err := pkcs11.List(context.Background(), uri, pkcs11.Options{}); !errors.Is(err, pkcs11.ErrNoCgo) {
		t.Errorf("List: %v, want ErrNoCgo", err)
	}
}

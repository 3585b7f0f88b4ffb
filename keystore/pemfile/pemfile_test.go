package pemfile_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/keystore/keystoretest"
	"github.com/signet-pki/signet/keystore/pemfile"
)

// TestConformance runs the keystore conformance suite on file keys of every supported type,
// opened through keystore.Open as the server opens them.
func TestConformance(t *testing.T) {
	for _, kt := range []testpki.KeyType{testpki.P256, testpki.P384, testpki.RSA2048, testpki.Ed25519} {
		t.Run(string(kt), func(t *testing.T) {
			keystoretest.Run(t, func(t *testing.T) keystore.Key {
				data, err := pemfile.MarshalPrivateKeyPEM(testpki.Key(t, kt))
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(t.TempDir(), "ca.key")
				if err := os.WriteFile(path, data, 0o600); err != nil {
					t.Fatal(err)
				}
				key, err := keystore.Open(context.Background(), "file://"+path)
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := key.(keystore.SoftwareKey); !ok {
					t.Errorf("a file key is not a keystore.SoftwareKey")
				}
				return key
			})
		})
	}
}

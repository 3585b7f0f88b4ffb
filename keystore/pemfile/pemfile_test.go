package pemfile_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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
				key, err := keystore.Open(context.Background(), "file://"+path, keystore.Options{})
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

// TestOpenRefusesKeysOthersCanRead: a key file group or others may access is refused with a
// reason that says how to fix it; the owner-only modes open.
func TestOpenRefusesKeysOthersCanRead(t *testing.T) {
	t.Parallel()
	data, err := pemfile.MarshalPrivateKeyPEM(testpki.Key(t, testpki.P256))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o400, true}, {0o640, false}, {0o644, false}, {0o604, false}, {0o660, false}} {
		path := filepath.Join(t.TempDir(), "ca.key")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		_, err := pemfile.Open(path, pemfile.Options{})
		switch {
		case tc.ok && err != nil:
			t.Errorf("mode %#o: %v", tc.mode, err)
		case !tc.ok && (!errors.Is(err, pemfile.ErrKeyFileMode) || !strings.Contains(err.Error(), "chmod 600 "+path)):
			t.Errorf("mode %#o: Open = %v, want ErrKeyFileMode saying how to fix it", tc.mode, err)
		}
	}
}

package pemfile_test

import (
	"context"
	"crypto"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/youmark/pkcs8"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/keystore/keystoretest"
	"github.com/signet-pki/signet/keystore/pemfile"
)

const passphrase = "correct horse battery staple"

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// writePrivate writes data to name in dir, readable by its owner only.
func writePrivate(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// encryptWithOpenSSL encrypts a PKCS#8 key as an operator would: openssl pkcs8 -topk8 with
// PBES2 (cipher as given: aes-256-cbc or des3) and its default KDF, PBKDF2 with HMAC-SHA256.
func encryptWithOpenSSL(t *testing.T, dir string, key crypto.Signer, cipher, passFile string) string {
	t.Helper()
	plain, err := pemfile.MarshalPrivateKeyPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	in := writePrivate(t, dir, "plain-"+cipher+".pem", plain)
	out := filepath.Join(dir, "ca-"+cipher+".key")
	cmd := exec.Command("openssl", "pkcs8", "-topk8", "-v2", cipher, "-in", in, "-out", out, "-passout", "file:"+passFile)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("openssl pkcs8: %v\n%s", err, b)
	}
	if err := os.Chmod(out, 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEncryptedKeys: encrypted PKCS#8 keys, written by openssl (AES-256-CBC, 3DES) and by
// youmark/pkcs8 (scrypt KDF), open with the passphrase from a file and pass the conformance
// suite; the passphrase file may end in a newline, as an editor writes it.
func TestEncryptedKeys(t *testing.T) {
	dir := t.TempDir()
	passFile := writePrivate(t, dir, "passphrase", []byte(passphrase+"\n"))
	for _, tc := range []struct {
		name    string
		keyType testpki.KeyType
		write   func(t *testing.T, key crypto.Signer) string
	}{
		{"openssl aes-256-cbc P-256", testpki.P256, func(t *testing.T, key crypto.Signer) string {
			return encryptWithOpenSSL(t, t.TempDir(), key, "aes-256-cbc", passFile)
		}},
		{"openssl des3 RSA-2048", testpki.RSA2048, func(t *testing.T, key crypto.Signer) string {
			return encryptWithOpenSSL(t, t.TempDir(), key, "des3", passFile)
		}},
		{"scrypt P-384", testpki.P384, func(t *testing.T, key crypto.Signer) string {
			der, err := pkcs8.MarshalPrivateKey(key, []byte(passphrase), &pkcs8.Opts{
				Cipher: pkcs8.AES256CBC, KDFOpts: pkcs8.ScryptOpts{CostParameter: 1 << 14, BlockSize: 8, ParallelizationParameter: 1, SaltSize: 16},
			})
			if err != nil {
				t.Fatal(err)
			}
			return writePrivate(t, t.TempDir(), "ca.key", pemBlock("ENCRYPTED PRIVATE KEY", der))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := testpki.Key(t, tc.keyType)
			path := tc.write(t, key)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), "ENCRYPTED PRIVATE KEY") {
				t.Fatalf("%s is not an encrypted PKCS#8 key:\n%s", path, data)
			}
			uri := "file://" + path + "?passphrase-file=" + passFile
			keystoretest.Run(t, func(t *testing.T) keystore.Key {
				k, err := keystore.Open(context.Background(), uri, keystore.Options{})
				if err != nil {
					t.Fatalf("Open(%s): %v", uri, err)
				}
				if !k.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(key.Public()) {
					t.Fatal("the decrypted key is not the key that was encrypted")
				}
				return k
			})
		})
	}
}

// TestEncryptedKeyErrors: each mistake is refused naming what is wrong, and the passphrase
// never appears in an error.
func TestEncryptedKeyErrors(t *testing.T) {
	dir := t.TempDir()
	passFile := writePrivate(t, dir, "passphrase", []byte(passphrase))
	wrongFile := writePrivate(t, dir, "wrong", []byte("not the passphrase"))
	emptyFile := writePrivate(t, dir, "empty", []byte("\n"))
	openFile := writePrivate(t, dir, "world-readable", []byte(passphrase))
	if err := os.Chmod(openFile, 0o644); err != nil {
		t.Fatal(err)
	}
	encrypted := encryptWithOpenSSL(t, dir, testpki.Key(t, testpki.P256), "aes-256-cbc", passFile)
	plain, err := pemfile.MarshalPrivateKeyPEM(testpki.Key(t, testpki.P256))
	if err != nil {
		t.Fatal(err)
	}
	plainPath := writePrivate(t, dir, "plain.key", plain)
	for _, tc := range []struct {
		name, uri string
		want      []string
		wantIs    error
	}{
		{"no passphrase file", "file://" + encrypted, []string{"encrypted PKCS#8", "passphrase-file="}, nil},
		{"wrong passphrase", "file://" + encrypted + "?passphrase-file=" + wrongFile, []string{"passphrase-file", "does not decrypt", wrongFile}, nil},
		{"empty passphrase", "file://" + encrypted + "?passphrase-file=" + emptyFile, []string{"passphrase-file", "empty"}, nil},
		{"missing passphrase file", "file://" + encrypted + "?passphrase-file=" + filepath.Join(dir, "nope"), []string{"passphrase-file", "nope"}, os.ErrNotExist},
		{"passphrase file others can read", "file://" + encrypted + "?passphrase-file=" + openFile, []string{"passphrase-file", "chmod 600"}, pemfile.ErrKeyFileMode},
		{"passphrase for a plain key", "file://" + plainPath + "?passphrase-file=" + passFile, []string{"passphrase-file", "not encrypted"}, nil},
		{"unknown attribute", "file://" + encrypted + "?passphrase=" + passphrase, []string{"unknown attribute", "passphrase-file"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, err := keystore.Open(context.Background(), tc.uri, keystore.Options{})
			if err == nil {
				_ = key.Close()
				t.Fatalf("Open(%s) succeeded", tc.uri)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %v is not %v", err, tc.wantIs)
			}
			if strings.Contains(err.Error(), passphrase) {
				t.Errorf("error %q shows the passphrase", err)
			}
		})
	}
}

package keystore_test

import (
	"context"
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/keystore/pemfile"
	"github.com/signet-pki/signet/server/certsign"
)

// writeKey writes PEM blocks to key.pem in a fresh folder and returns its path.
func writeKey(t *testing.T, blocks ...*pem.Block) string {
	t.Helper()
	var data []byte
	for _, b := range blocks {
		data = append(data, pem.EncodeToMemory(b)...)
	}
	path := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func pkcs8(t *testing.T, key crypto.Signer) *pem.Block {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &pem.Block{Type: "PRIVATE KEY", Bytes: der}
}

func sec1(t *testing.T, key crypto.Signer) *pem.Block {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	return &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}
}

func pkcs1(key crypto.Signer) *pem.Block {
	return &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key.(*rsa.PrivateKey))}
}

// checkSigns signs a digest with key and verifies the signature with want's public key.
func checkSigns(t *testing.T, key crypto.Signer, want crypto.Signer) {
	t.Helper()
	if !want.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(key.Public()) {
		t.Fatal("opened key's public key differs from the one written")
	}
	msg := []byte("signet keystore test")
	digest := sha256.Sum256(msg)
	switch pub := want.Public().(type) {
	case ed25519.PublicKey:
		sig, err := key.Sign(rand.Reader, msg, crypto.Hash(0))
		if err != nil {
			t.Fatalf("Sign: %v", err)
		}
		if !ed25519.Verify(pub, msg, sig) {
			t.Fatal("Ed25519 signature does not verify")
		}
	case *ecdsa.PublicKey:
		sig, err := key.Sign(rand.Reader, digest[:], crypto.SHA256)
		if err != nil {
			t.Fatalf("Sign: %v", err)
		}
		if !ecdsa.VerifyASN1(pub, digest[:], sig) {
			t.Fatal("ECDSA signature does not verify")
		}
	case *rsa.PublicKey:
		sig, err := key.Sign(rand.Reader, digest[:], crypto.SHA256)
		if err != nil {
			t.Fatalf("Sign: %v", err)
		}
		if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig); err != nil {
			t.Fatalf("RSA signature does not verify: %v", err)
		}
	default:
		t.Fatalf("unexpected key type %T", pub)
	}
}

func TestOpenFileKeys(t *testing.T) {
	t.Parallel()
	p256 := testpki.Key(t, testpki.P256)
	p384 := testpki.Key(t, testpki.P384)
	ed := testpki.Key(t, testpki.Ed25519)
	rsaKey := testpki.Key(t, testpki.RSA2048)
	ecParams := &pem.Block{Type: "EC PARAMETERS", Bytes: []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07}}
	tests := []struct {
		name string
		key  crypto.Signer
		path string
	}{
		{"PKCS#8 P-256", p256, writeKey(t, pkcs8(t, p256))},
		{"PKCS#8 Ed25519", ed, writeKey(t, pkcs8(t, ed))},
		{"PKCS#8 RSA", rsaKey, writeKey(t, pkcs8(t, rsaKey))},
		{"SEC 1 P-384", p384, writeKey(t, sec1(t, p384))},
		{"SEC 1 after EC PARAMETERS (openssl ecparam -genkey)", p256, writeKey(t, ecParams, sec1(t, p256))},
		{"PKCS#1 RSA", rsaKey, writeKey(t, pkcs1(rsaKey))},
	}
	for _, tt := range tests {
		for _, form := range []struct{ name, uri string }{
			{"path", tt.path},
			{"file URI", "file://" + tt.path},
			{"file URI on localhost", "file://localhost" + tt.path},
		} {
			t.Run(tt.name+"/"+form.name, func(t *testing.T) {
				t.Parallel()
				key, err := keystore.Open(context.Background(), form.uri, keystore.Options{})
				if err != nil {
					t.Fatalf("Open(%q): %v", form.uri, err)
				}
				t.Cleanup(func() {
					if err := key.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
				})
				checkSigns(t, key, tt.key)
				// Go's own ECDSA and RSA keys are recognised through the file key, so
				// issuance skips the verification they do not need; Ed25519 keeps it.
				_, isEd := tt.key.(ed25519.PrivateKey)
				if got := certsign.NeedsCheck(key); got != isEd {
					t.Errorf("certsign.NeedsCheck(file key) = %v, want %v", got, isEd)
				}
			})
		}
	}
}

func TestOpenRelativePath(t *testing.T) {
	// Not parallel: changes the working directory.
	key := testpki.Key(t, testpki.P256)
	path := writeKey(t, pkcs8(t, key))
	t.Chdir(filepath.Dir(path))
	for _, uri := range []string{"key.pem", "./key.pem"} {
		k, err := keystore.Open(context.Background(), uri, keystore.Options{})
		if err != nil {
			t.Fatalf("Open(%q): %v", uri, err)
		}
		checkSigns(t, k, key)
	}
}

func TestOpenUnsupportedURIs(t *testing.T) {
	t.Parallel()
	for _, uri := range []string{
		"https://keys.example.com/ca",
		"awskms:key-id=1234",
	} {
		t.Run(uri, func(t *testing.T) {
			t.Parallel()
			key, err := keystore.Open(context.Background(), uri, keystore.Options{})
			if key != nil || !errors.Is(err, keystore.ErrUnsupportedURI) {
				t.Fatalf("Open(%q) = %v, %v; want ErrUnsupportedURI", uri, key, err)
			}
			scheme, _, _ := strings.Cut(uri, ":")
			if !strings.Contains(err.Error(), scheme) {
				t.Errorf("error %q does not name the scheme %q", err, scheme)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.pem")
	cert := testpki.CA(t)
	tests := []struct {
		name     string
		uri      string
		wantIs   error
		wantMsgs []string
	}{
		{"missing file", missing, fs.ErrNotExist, []string{"reading key file", missing}},
		{"missing file URI", "file://" + missing, fs.ErrNotExist, []string{missing}},
		{"remote file URI", "file://keyhost/etc/ca.key", nil, []string{"remote host"}},
		{"not PEM", writeFile(t, "plain.txt", []byte("hello")), nil, []string{"no PEM block"}},
		{"certificate, not a key", writeFile(t, "ca.crt", cert.CertPEM()), nil, []string{`"CERTIFICATE" is not a private key`, "ca.crt"}},
		{"encrypted PEM", writeKey(t, &pem.Block{Type: "RSA PRIVATE KEY", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-256-CBC,00"}, Bytes: []byte{1}}), nil, []string{"encrypted"}},
		{"garbage DER", writeKey(t, &pem.Block{Type: "PRIVATE KEY", Bytes: []byte("garbage")}), nil, []string{"parsing key file"}},
		{"X25519 key (cannot sign)", writeKey(t, x25519(t)), nil, []string{"unsupported private key type"}},
		{"SEC 1 block holding PKCS#8", writeKey(t, &pem.Block{Type: "EC PRIVATE KEY", Bytes: pkcs8(t, testpki.Key(t, testpki.P256)).Bytes}), nil, []string{"parsing key file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key, err := keystore.Open(context.Background(), tt.uri, keystore.Options{})
			if key != nil || err == nil {
				t.Fatalf("Open(%q) = %v, %v; want an error", tt.uri, key, err)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %v is not %v", err, tt.wantIs)
			}
			if errors.Is(err, keystore.ErrUnsupportedURI) {
				t.Errorf("error %v claims an unsupported URI", err)
			}
			for _, m := range tt.wantMsgs {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
}

func x25519(t *testing.T) *pem.Block {
	t.Helper()
	key, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &pem.Block{Type: "PRIVATE KEY", Bytes: der}
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMarshalPrivateKeyPEMRoundTrip(t *testing.T) {
	t.Parallel()
	for _, kt := range []testpki.KeyType{testpki.P256, testpki.P521, testpki.Ed25519, testpki.RSA2048} {
		t.Run(string(kt), func(t *testing.T) {
			t.Parallel()
			key := testpki.Key(t, kt)
			data, err := pemfile.MarshalPrivateKeyPEM(key)
			if err != nil {
				t.Fatalf("MarshalPrivateKeyPEM: %v", err)
			}
			if block, _ := pem.Decode(data); block == nil || block.Type != "PRIVATE KEY" {
				t.Fatalf("MarshalPrivateKeyPEM wrote %q, want a PRIVATE KEY block", data)
			}
			back, err := pemfile.ParsePrivateKeyPEM(data)
			if err != nil {
				t.Fatalf("ParsePrivateKeyPEM: %v", err)
			}
			checkSigns(t, back, key)
		})
	}
}

package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/keystore/keystoretest"
)

const filePassphrase = "correct horse battery staple"

// passphraseFile writes a passphrase file (0600, with the trailing newline an editor adds)
// into a new folder and returns its path.
func passphraseFile(t *testing.T, pass string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pass")
	if err := os.WriteFile(path, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKeysCreateFile: keys create --uri file: writes an encrypted PKCS#8 key, mode 0600, of
// each algorithm; the printed URI is what the server opens (keystore.Open, the passphrase from
// the file the URI names), the key behind it is the printed public key and passes the
// keystore conformance suite (it signs, the signatures verify); openssl decrypts the file
// with the same passphrase, and refuses another.
func TestKeysCreateFile(t *testing.T) {
	t.Parallel()
	pass := passphraseFile(t, filePassphrase)
	wrong := passphraseFile(t, "not the passphrase")
	for alg, check := range map[string]func(crypto.PublicKey) bool{
		"P-256":    func(k crypto.PublicKey) bool { e, ok := k.(*ecdsa.PublicKey); return ok && e.Curve == elliptic.P256() },
		"p384":     func(k crypto.PublicKey) bool { e, ok := k.(*ecdsa.PublicKey); return ok && e.Curve == elliptic.P384() },
		"RSA-3072": func(k crypto.PublicKey) bool { r, ok := k.(*rsa.PublicKey); return ok && r.N.BitLen() == 3072 },
		"ed25519":  func(k crypto.PublicKey) bool { _, ok := k.(ed25519.PublicKey); return ok },
	} {
		t.Run(alg, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "ca.key")
			code, out, errOut := runCmd("keys", "create", "--uri", "file://"+path, "--passphrase-file", pass, "--algorithm", alg)
			if code != 0 {
				t.Fatalf("keys create: exit %d: %s", code, errOut)
			}
			uri, pub := uriOf(t, out), publicKeyOf(t, out)
			if want := "file://" + path + "?passphrase-file=" + pass; uri != want {
				t.Errorf("printed URI %q, want %q", uri, want)
			}
			if !check(pub) {
				t.Errorf("the printed public key is a %T, not %s", pub, alg)
			}
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().Perm() != 0o600 {
				t.Errorf("key file mode %v, want 0600", info.Mode().Perm())
			}
			data := readFile(t, path)
			if !bytes.HasPrefix(data, []byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\n")) || bytes.Contains(data, []byte("BEGIN PRIVATE KEY")) {
				t.Errorf("the key file is not an encrypted PKCS#8 key:\n%s", data)
			}
			if strings.Contains(out+errOut, filePassphrase) || strings.Contains(out+errOut, "PRIVATE KEY") {
				t.Errorf("the output shows the passphrase or a private key:\n%s%s", out, errOut)
			}
			keystoretest.Run(t, func(t *testing.T) keystore.Key {
				key, err := keystore.Open(context.Background(), uri, keystore.Options{})
				if err != nil {
					t.Fatalf("keystore.Open(%s): %v", uri, err)
				}
				if !key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) {
					t.Fatal("the key file holds another key than the one printed")
				}
				return key
			})
			wrongURI := "file://" + path + "?passphrase-file=" + wrong
			if key, err := keystore.Open(context.Background(), wrongURI, keystore.Options{}); err == nil {
				key.Close()
				t.Error("the key opens with another passphrase")
			} else if !strings.Contains(err.Error(), "does not decrypt") {
				t.Errorf("wrong passphrase: %v, want it to say the passphrase does not decrypt the key", err)
			}
			if key, err := keystore.Open(context.Background(), "file://"+path, keystore.Options{}); err == nil {
				key.Close()
				t.Error("the key opens without a passphrase")
			}
			if b, err := exec.Command("openssl", "pkey", "-in", path, "-passin", "file:"+pass, "-noout").CombinedOutput(); err != nil {
				t.Errorf("openssl cannot decrypt the key file: %v\n%s", err, b)
			}
			if exec.Command("openssl", "pkey", "-in", path, "-passin", "file:"+wrong, "-noout").Run() == nil {
				t.Error("openssl decrypts the key file with another passphrase")
			}
		})
	}
}

// TestKeysCreateFilePaths: a plain relative path and the passphrase file in the URI work too;
// the printed URI is absolute, escapes what needs escaping, and opens.
func TestKeysCreateFilePaths(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	pass := passphraseFile(t, filePassphrase)
	code, out, errOut := runCmd("keys", "create", "--uri", "ca.key", "--passphrase-file", pass)
	if code != 0 {
		t.Fatalf("a relative path: exit %d: %s", code, errOut)
	}
	if uri := uriOf(t, out); uri != "file://"+filepath.Join(dir, "ca.key")+"?passphrase-file="+pass {
		t.Errorf("printed URI %q, want the absolute path", uri)
	}
	spaced := filepath.Join(dir, "my ca.key")
	code, out, errOut = runCmd("keys", "create", "--uri", "file://"+spaced+"?passphrase-file="+pass, "--passphrase-file", pass, "--algorithm", "P-384")
	if code != 0 {
		t.Fatalf("passphrase-file in the URI and the flag: exit %d: %s", code, errOut)
	}
	uri := uriOf(t, out)
	if !strings.Contains(uri, "my%20ca.key") {
		t.Errorf("printed URI %q does not escape the space", uri)
	}
	key, err := keystore.Open(context.Background(), uri, keystore.Options{})
	if err != nil {
		t.Fatalf("opening the printed URI: %v", err)
	}
	key.Close()
}

// TestKeysCreateFileRefusals: no passphrase file, an empty or group-readable one, two
// different ones, an existing key file, an unknown algorithm and --passphrase-file for a
// device are refused with a message naming the problem, and no key file is left behind (an
// existing one is left as it was).
func TestKeysCreateFileRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pass := passphraseFile(t, filePassphrase)
	empty := passphraseFile(t, "")
	open := passphraseFile(t, filePassphrase)
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(dir, "existing.key")
	if err := os.WriteFile(existing, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	key := func(name string) string { return filepath.Join(dir, name) }
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
		file string // must not exist afterwards
	}{
		{"no passphrase file", []string{"--uri", "file://" + key("a.key")}, 2, []string{"--passphrase-file: required", "encrypted"}, key("a.key")},
		{"plain path without passphrase file", []string{"--uri", key("b.key")}, 2, []string{"--passphrase-file: required"}, key("b.key")},
		{"missing passphrase file", []string{"--uri", key("c.key"), "--passphrase-file", key("nope")}, 2, []string{"--passphrase-file", "nope"}, key("c.key")},
		{"empty passphrase", []string{"--uri", key("d.key"), "--passphrase-file", empty}, 2, []string{"--passphrase-file", "empty"}, key("d.key")},
		{"group-readable passphrase file", []string{"--uri", key("e.key"), "--passphrase-file", open}, 2, []string{"chmod 600 " + open}, key("e.key")},
		{"two passphrase files", []string{"--uri", "file://" + key("f.key") + "?passphrase-file=" + empty, "--passphrase-file", pass}, 2, []string{"differ"}, key("f.key")},
		{"unknown attribute", []string{"--uri", "file://" + key("g.key") + "?passphrase=" + filePassphrase}, 2, []string{"unknown attribute"}, key("g.key")},
		{"unknown algorithm", []string{"--uri", key("h.key"), "--passphrase-file", pass, "--algorithm", "P-521"}, 1, []string{"P-521", "Ed25519"}, key("h.key")},
		{"existing key file", []string{"--uri", "file://" + existing, "--passphrase-file", pass}, 1, []string{"refusing to overwrite " + existing}, ""},
		{"passphrase for a device", []string{"--uri", "tpm:blob=" + key("i.tpmkey"), "--passphrase-file", pass}, 2, []string{"--passphrase-file is for file keys"}, key("i.tpmkey")},
	} {
		code, out, errOut := runCmd(append([]string{"keys", "create"}, tc.args...)...)
		if code != tc.code || out != "" {
			t.Errorf("%s: exit %d, stdout %q; want exit %d and nothing printed", tc.name, code, out, tc.code)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: stderr %q does not say %q", tc.name, errOut, w)
			}
		}
		if strings.Contains(errOut, filePassphrase) {
			t.Errorf("%s: stderr shows the passphrase: %q", tc.name, errOut)
		}
		if tc.file != "" {
			if _, err := os.Stat(tc.file); err == nil {
				t.Errorf("%s: %s was written", tc.name, tc.file)
			}
		}
	}
	if got := readFile(t, existing); string(got) != "mine" {
		t.Errorf("the refused create changed the existing file: %q", got)
	}
}

// TestCAInitLifetime: ca init --lifetime takes days as pki init --ca-validity does, and a Go
// duration, with a file key made by keys create; a bad lifetime is a usage error naming the
// flag.
func TestCAInitLifetime(t *testing.T) {
	t.Parallel()
	pass := passphraseFile(t, filePassphrase)
	path := filepath.Join(t.TempDir(), "ca.key")
	code, out, errOut := runCmd("keys", "create", "--uri", path, "--passphrase-file", pass)
	if code != 0 {
		t.Fatalf("keys create: exit %d: %s", code, errOut)
	}
	uri := uriOf(t, out)
	for lifetime, want := range map[string]time.Duration{"3650d": 3650 * 24 * time.Hour, "87600h": 87600 * time.Hour, "": 3650 * 24 * time.Hour} {
		args := []string{"ca", "init", "--key", uri, "--subject", "CN=Kubernetes client CA"}
		if lifetime != "" {
			args = append(args, "--lifetime", lifetime)
		}
		code, out, errOut := runCmd(args...)
		if code != 0 {
			t.Errorf("ca init --lifetime %q: exit %d: %s", lifetime, code, errOut)
			continue
		}
		cert := parseCertPEM(t, out)
		if got := cert.NotAfter.Sub(cert.NotBefore); got != want {
			t.Errorf("ca init --lifetime %q: valid for %s, want %s", lifetime, got, want)
		}
	}
	for _, bad := range []string{"3650 d", "-1d", "0d", "ten years", "999999d"} {
		code, out, errOut := runCmd("ca", "init", "--key", uri, "--subject", "CN=x", "--lifetime", bad)
		if code != 2 || out != "" || !strings.Contains(errOut, `"--lifetime"`) || !strings.Contains(errOut, `"`+bad+`"`) {
			t.Errorf("ca init --lifetime %q: exit %d, stdout %q, stderr %q; want exit 2 naming the flag and the value", bad, code, out, errOut)
		}
	}
}

// parseCertPEM parses the one CERTIFICATE block of out.
func parseCertPEM(t *testing.T, out string) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode([]byte(out))
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("no CERTIFICATE block in:\n%s", out)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

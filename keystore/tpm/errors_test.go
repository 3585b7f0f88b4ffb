package tpm_test

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/signet-pki/signet/keystore/keyerr"
	"github.com/signet-pki/signet/keystore/tpm"
)

// TestOpenErrors: a key that cannot be opened is refused with an error naming the part of
// the URI at fault; only failures to reach the TPM wrap keyerr.ErrUnavailable.
func TestOpenErrors(t *testing.T) {
	t.Parallel()
	env := swTPM(t)
	dir := t.TempDir()
	blobURI := env.generate(t, "blob="+filepath.Join(dir, "good.tpmkey"), keyerr.P256)
	good, err := os.ReadFile(filepath.Join(dir, "good.tpmkey"))
	if err != nil {
		t.Fatal(err)
	}
	persistKey(t, env.raw, 0x81000301, tpm2.ECCSRKTemplate)

	write := func(name string, data []byte, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	block, _ := pem.Decode(good)
	tampered := bytes.Clone(block.Bytes)
	tampered[len(tampered)-5] ^= 0xFF // inside the sealed private part
	otherBlob := filepath.Join(dir, "other.tpmkey")
	swTPM(t).generate(t, "blob="+otherBlob, keyerr.P256)
	notSocket := write("not-a-socket", nil, 0o600)

	for _, tc := range []struct {
		name, uri, errHas string
		unavailable       bool
	}{
		{"missing socket", "tpm:handle=0x81000100?socket=" + filepath.Join(dir, "missing.sock"), "socket=" + filepath.Join(dir, "missing.sock"), true},
		{"not a socket", "tpm:handle=0x81000100?socket=" + notSocket, "socket=" + notSocket + ": not a socket", false},
		{"missing device", "tpm:handle=0x81000100?device=" + filepath.Join(dir, "tpm0"), "device=" + filepath.Join(dir, "tpm0"), true},
		{"missing blob", env.uri("blob=" + filepath.Join(dir, "missing.tpmkey")), "blob=" + filepath.Join(dir, "missing.tpmkey") + ": no such file", false},
		{"garbage blob", env.uri("blob=" + write("garbage", []byte("not a key"), 0o600)), "blob=" + filepath.Join(dir, "garbage") + ": no PEM block", false},
		{"PKCS #8 key as blob", env.uri("blob=" + write("pkcs8", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), 0o600)), `is not "TSS2 PRIVATE KEY"`, false},
		{"truncated blob", env.uri("blob=" + write("truncated", pem.EncodeToMemory(&pem.Block{Type: "TSS2 PRIVATE KEY", Bytes: block.Bytes[:40]}), 0o600)), "blob=" + filepath.Join(dir, "truncated") + ": parsing TSS2 PRIVATE KEY", false},
		{"tampered blob", env.uri("blob=" + write("tampered", pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: tampered}), 0o600)), "blob=" + filepath.Join(dir, "tampered") + ": the TPM refuses the blob", false},
		{"blob of another TPM", env.uri("blob=" + otherBlob), "blob=" + otherBlob + ": the TPM refuses the blob", false},
		{"blob others can read", env.uri("blob=" + write("open", good, 0o644)), "chmod 600 " + filepath.Join(dir, "open"), false},
		{"empty handle", env.uri("handle=0x81000300"), "handle=0x81000300: no key at this handle", false},
		{"storage key at handle", env.uri("handle=0x81000301"), "handle=0x81000301: not an unrestricted signing key", false},
		{"no key", env.uri(""), "names no key", false},
		{"unknown attribute", blobURI + "&pin=1234", `unknown attribute "pin"`, false},
		{"repeated attribute", blobURI + "&socket=/x", `attribute "socket" given 2 times`, false},
	} {
		k, err := tpm.Open(t.Context(), tc.uri, tpm.Options{})
		if err == nil {
			_ = k.Close()
			t.Errorf("%s: Open(%s) succeeded", tc.name, tc.uri)
			continue
		}
		t.Logf("%s: %v", tc.name, err)
		if !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("%s: Open error %q does not contain %q", tc.name, err, tc.errHas)
		}
		if isUnavailable(err) != tc.unavailable {
			t.Errorf("%s: Open error %q: wraps keyerr.ErrUnavailable = %v, want %v", tc.name, err, !tc.unavailable, tc.unavailable)
		}
	}

	// A transport that cannot be opened is a device failure.
	_, err = tpm.Open(t.Context(), "tpm:handle=0x81000100", tpm.Options{Transport: func() (transport.TPMCloser, error) {
		return nil, errors.New("no simulator")
	}})
	if !isUnavailable(err) || !strings.Contains(err.Error(), "no simulator") {
		t.Errorf("Open with a failing Transport = %v, want keyerr.ErrUnavailable with the cause", err)
	}
}

// TestSignRefuses: Sign checks the hash, the digest and the PSS salt length before it returns
// a signature, and a closed key refuses to sign.
func TestSignRefuses(t *testing.T) {
	env := simTPM(t)
	rsaKey := env.open(t, env.generate(t, "blob="+blobPath(t), keyerr.RSA2048))
	ecKey := env.open(t, env.generate(t, "handle=0x81000400", keyerr.P256))
	h512 := sha512.Sum512([]byte("x"))
	h1 := sha1.Sum([]byte("x"))
	for _, tc := range []struct {
		name   string
		key    *tpm.Key
		digest []byte
		opts   crypto.SignerOpts
		errHas string
	}{
		{"short digest", ecKey, digest()[:31], crypto.SHA256, "digest of 31 bytes"},
		{"digest of another hash", ecKey, digest(), crypto.SHA384, "digest of 32 bytes for SHA-384"},
		{"SHA-1", ecKey, h1[:], crypto.SHA1, "hash SHA-1"},
		{"no hash", ecKey, digest(), crypto.Hash(0), "no hash"},
		{"PSS salt the TPM does not use", rsaKey, digest(), &rsa.PSSOptions{SaltLength: 20, Hash: crypto.SHA256}, "salt length (32 bytes) is not the 20 bytes asked for"},
	} {
		_, err := tc.key.Sign(nil, tc.digest, tc.opts)
		t.Logf("%s: %v", tc.name, err)
		if err == nil || !strings.Contains(err.Error(), tc.errHas) || isUnavailable(err) {
			t.Errorf("%s: Sign = %v, want an error containing %q", tc.name, err, tc.errHas)
		}
	}
	// What the TPM can do, it does.
	for _, tc := range []struct {
		name   string
		key    *tpm.Key
		digest []byte
		opts   crypto.SignerOpts
	}{
		{"ECDSA SHA-512", ecKey, h512[:], crypto.SHA512},
		{"PSS salt as long as the hash", rsaKey, digest(), &rsa.PSSOptions{SaltLength: 32, Hash: crypto.SHA256}},
		{"PSS salt of any length", rsaKey, digest(), &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto, Hash: crypto.SHA256}},
	} {
		if _, err := tc.key.Sign(nil, tc.digest, tc.opts); err != nil {
			t.Errorf("%s: Sign: %v", tc.name, err)
		}
	}

	k := env.open(t, ecKey.URI())
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if _, err := k.Sign(nil, digest(), crypto.SHA256); !isUnavailable(err) || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Sign after Close = %v, want keyerr.ErrUnavailable saying the key is closed", err)
	}
}

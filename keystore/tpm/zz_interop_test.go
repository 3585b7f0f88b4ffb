package tpm_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/swtpmtest"
	"github.com/signet-pki/signet/keystore/keyerr"
	"github.com/signet-pki/signet/keystore/tpm"
)

func TestInteropOpenSSL(t *testing.T) {
	sw := swtpmtest.Start(t)
	dir := t.TempDir()
	ours := filepath.Join(dir, "ours.pem")
	k, _, err := tpm.Generate(t.Context(), sw.URI("blob="+ours), keyerr.P256, tpm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pub := k.Public().(*ecdsa.PublicKey)
	k.Close()
	sw.Stop()

	// swtpm on TCP, same state, for the openssl tpm2 provider.
	cmd := exec.Command("swtpm", "socket", "--tpm2", "--tpmstate", "dir="+sw.StateDir,
		"--server", "type=tcp,port=23211", "--ctrl", "type=tcp,port=23212", "--flags", "not-need-init,startup-clear")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	time.Sleep(300 * time.Millisecond)
	env := append(os.Environ(), "TPM2OPENSSL_TCTI=swtpm:host=127.0.0.1,port=23211")
	run := func(args ...string) []byte {
		c := exec.Command("openssl", args...)
		c.Env = env
		out, err := c.CombinedOutput()
		t.Logf("openssl %v:\n%s", args, out)
		if err != nil {
			t.Fatalf("openssl: %v", err)
		}
		return out
	}
	// 1. openssl reads and signs with our blob.
	run("pkey", "-provider", "tpm2", "-provider", "default", "-in", ours, "-pubout", "-out", filepath.Join(dir, "ours.pub"))
	pemPub, _ := os.ReadFile(filepath.Join(dir, "ours.pub"))
	b, _ := pem.Decode(pemPub)
	p, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil || !p.(*ecdsa.PublicKey).Equal(pub) {
		t.Fatalf("openssl's public key of our blob differs: %v", err)
	}
	msg := filepath.Join(dir, "msg")
	os.WriteFile(msg, []byte("hello"), 0o600)
	run("pkeyutl", "-provider", "tpm2", "-provider", "default", "-propquery", "?provider=tpm2", "-sign", "-inkey", ours, "-rawin", "-digest", "sha256", "-in", msg, "-out", filepath.Join(dir, "sig"))
	sig, _ := os.ReadFile(filepath.Join(dir, "sig"))
	d := sha256.Sum256([]byte("hello"))
	if !ecdsa.VerifyASN1(pub, d[:], sig) {
		t.Fatal("openssl's signature with our blob does not verify")
	}
	// 2. openssl makes a blob; we read it.
	theirs := filepath.Join(dir, "theirs.pem")
	run("genpkey", "-provider", "tpm2", "-provider", "default", "-propquery", "?provider=tpm2", "-algorithm", "EC", "-pkeyopt", "group:P-256", "-out", theirs)
	os.Chmod(theirs, 0o600)
	t.Logf("%s", must(os.ReadFile(theirs)))
	run("pkey", "-provider", "tpm2", "-provider", "default", "-in", theirs, "-pubout", "-out", filepath.Join(dir, "theirs.pub"))
	cmd.Process.Kill()
	cmd.Wait()
	sw.Restart(t)
	tk, err := tpm.Open(t.Context(), sw.URI("blob="+theirs), tpm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	s2, err := tk.Sign(nil, d[:], crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	pemPub, _ = os.ReadFile(filepath.Join(dir, "theirs.pub"))
	b, _ = pem.Decode(pemPub)
	p, _ = x509.ParsePKIXPublicKey(b.Bytes)
	if !ecdsa.VerifyASN1(p.(*ecdsa.PublicKey), d[:], s2) {
		t.Fatal("our signature with openssl's blob does not verify with openssl's public key")
	}
	t.Log("interop OK both ways")
}

func must(b []byte, err error) []byte { return b }

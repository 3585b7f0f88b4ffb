package main

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signet-pki/signet/internal/softhsmtest"
	"github.com/signet-pki/signet/internal/swtpmtest"
	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/server/issuance"
)

// publicKeyOf parses the PUBLIC KEY block keys create printed.
func publicKeyOf(t *testing.T, out string) crypto.PublicKey {
	t.Helper()
	block, _ := pem.Decode([]byte(out[strings.Index(out, "-----BEGIN"):]))
	if block == nil || block.Type != "PUBLIC KEY" {
		t.Fatalf("no PUBLIC KEY block in:\n%s", out)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// uriOf is the "uri: " line keys create printed.
func uriOf(t *testing.T, out string) string {
	t.Helper()
	for line := range strings.Lines(out) {
		if u, ok := strings.CutPrefix(strings.TrimSpace(line), "uri: "); ok {
			return u
		}
	}
	t.Fatalf("no uri line in:\n%s", out)
	return ""
}

// caLifecycle is what an operator does with a device: create a key inside it, list it, make
// the root and an intermediate request with it; the root is one the server takes for the key
// (it matches, it is a CA), and nothing printed shows the PIN.
func caLifecycle(t *testing.T, createURI, listURI, secret string) {
	t.Helper()
	code, out, errOut := runCmd("keys", "create", "--uri", createURI, "--algorithm", "P-384")
	if code != 0 {
		t.Fatalf("keys create: exit %d: %s", code, errOut)
	}
	uri, pub := uriOf(t, out), publicKeyOf(t, out)
	if !strings.Contains(out, "P-384") {
		t.Errorf("keys create does not say the algorithm:\n%s", out)
	}
	code, list, errOut := runCmd("keys", "list", "--uri", listURI)
	if code != 0 || !strings.Contains(list, uri) || !strings.Contains(list, "P-384") {
		t.Errorf("keys list: exit %d, output:\n%s%s\nwant the new key %s", code, list, errOut, uri)
	}
	certPath := filepath.Join(t.TempDir(), "ca.crt")
	code, _, errOut = runCmd("ca", "init", "--key", uri, "--subject", "CN=Kubernetes client CA,O=Example", "--out", certPath)
	if code != 0 {
		t.Fatalf("ca init: exit %d: %s", code, errOut)
	}
	data, err := os.ReadFile(certPath)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) {
		t.Error("the root's public key is not the created key")
	}
	key, err := keystore.Open(context.Background(), uri, keystore.Options{})
	if err != nil {
		t.Fatalf("opening the printed URI: %v", err)
	}
	defer key.Close()
	if err := (&issuance.CA{Certificate: cert, Key: key}).Validate(); err != nil {
		t.Errorf("the server would refuse the root with its key: %v", err)
	}
	code, csrOut, errOut := runCmd("ca", "csr", "--key", uri, "--subject", "CN=Kubernetes intermediate")
	if code != 0 {
		t.Fatalf("ca csr: exit %d: %s", code, errOut)
	}
	block, _ = pem.Decode([]byte(csrOut))
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil || csr.CheckSignature() != nil || csr.Subject.CommonName != "Kubernetes intermediate" {
		t.Errorf("ca csr printed a request that does not parse or verify: %v", err)
	}
	if secret != "" {
		for _, o := range []string{out, list, errOut, csrOut} {
			if strings.Contains(o, secret) {
				t.Errorf("output shows the PIN:\n%s", o)
			}
		}
	}
}

// TestCALifecycleOnSoftHSM runs create, list, ca init and ca csr on a real SoftHSM2 token,
// the PIN given both ways: from a file, and as pin-value with --allow-pin-value (redacted in
// everything printed).
func TestCALifecycleOnSoftHSM(t *testing.T) {
	tok := softhsmtest.New(t)
	module, _, _ := strings.Cut(strings.SplitN(tok.URI("x"), "?", 2)[1], "&")
	token := "pkcs11:token=" + tok.Label + "?" + module
	caLifecycle(t, tok.URI("kube-ca"), token+"&pin-source="+tok.PINFile, tok.PIN)

	withValue := "pkcs11:token=" + tok.Label + ";object=other-ca?" + module + "&pin-value=" + tok.PIN
	code, out, errOut := runCmd("keys", "create", "--uri", withValue)
	if code != 1 || !strings.Contains(errOut, "pin-value") || strings.Contains(errOut+out, tok.PIN) {
		t.Errorf("pin-value without --allow-pin-value: exit %d, stderr %q; want exit 1 naming pin-value without the PIN", code, errOut)
	}
	code, out, errOut = runCmd("keys", "create", "--allow-pin-value", "--uri", withValue)
	if code != 0 || strings.Contains(out+errOut, tok.PIN) || !strings.Contains(out, "pin-value=REDACTED") {
		t.Errorf("pin-value with --allow-pin-value: exit %d, output %q %q; want success with the PIN redacted", code, out, errOut)
	}
}

// TestCALifecycleOnSwtpm runs create, list, ca init and ca csr on swtpm, a key blob and a
// persistent handle (a blob is a file, so listing the TPM shows the handle only; listing the
// blob's URI shows its key).
func TestCALifecycleOnSwtpm(t *testing.T) {
	tpm := swtpmtest.Start(t)
	blob := tpm.URI("blob=" + filepath.Join(t.TempDir(), "kube-ca.tpmkey"))
	caLifecycle(t, blob, blob, "")
	caLifecycle(t, tpm.URI("handle=0x81000123"), tpm.URI(""), "")
}

// TestCAInitNeedsCommonName: a subject without CN is a usage error.
func TestCAInitNeedsCommonName(t *testing.T) {
	code, _, errOut := runCmd("ca", "init", "--key", "x", "--subject", "O=no common name")
	if code != 2 || !strings.Contains(errOut, "CN is required") {
		t.Errorf("ca init without CN: exit %d, stderr %q", code, errOut)
	}
}

func TestCanonicalAlgorithm(t *testing.T) {
	for in, want := range map[string]string{
		"P-256": "P-256", "ecdsa-p256": "P-256", "prime256v1": "P-256", "ECDSA_P384": "P-384", "secp384r1": "P-384",
		"rsa-2048": "RSA-2048", "RSA3072": "RSA-3072", "rsa4096": "RSA-4096", "ed25519": "Ed25519", "Ed-25519": "Ed25519", "x25519": "x25519",
	} {
		if got := canonicalAlgorithm(in); got != want {
			t.Errorf("canonicalAlgorithm(%q) = %q, want %q", in, got, want)
		}
	}
}

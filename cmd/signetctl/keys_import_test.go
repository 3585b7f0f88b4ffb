package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/youmark/pkcs8"

	"github.com/signet-pki/signet/internal/softhsmtest"
	"github.com/signet-pki/signet/internal/swtpmtest"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/server/issuance"
)

// runImport runs "signetctl keys import args..." as run runs a command line, with
// keysImportCommand added to the keys group when keys.go does not register it (yet), and
// returns the exit code, stdout and stderr.
func runImport(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	root := newRootCommand(streams{in: bytes.NewReader(nil), out: &out, err: &errOut})
	for _, group := range root.Commands() {
		if group.Name() != "keys" {
			continue
		}
		registered := false
		for _, sub := range group.Commands() {
			registered = registered || sub.Name() == "import"
		}
		if !registered {
			group.AddCommand(keysImportCommand())
		}
	}
	root.SetArgs(append([]string{"keys", "import"}, args...))
	cmd, err := root.ExecuteContextC(context.Background())
	if err == nil {
		return 0, out.String(), errOut.String()
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		ee = usageError(cmd, "%v", err).(*exitError)
	}
	ee.print(&errOut, cmd)
	return ee.code, out.String(), errOut.String()
}

// importCAFiles writes an existing CA as kubeadm leaves it: ca.crt, and ca.key (mode 0600) in the
// PEM form block makes of the key.
func importCAFiles(t *testing.T, kt testpki.KeyType, block func(*testing.T, crypto.Signer) *pem.Block) (ca *testpki.Authority, keyFile, certFile string) {
	t.Helper()
	ca = testpki.CAOf(t, kt, func(c *x509.Certificate) { c.Subject = pkix.Name{CommonName: "kubernetes"} })
	dir := t.TempDir()
	keyFile, certFile = filepath.Join(dir, "ca.key"), filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block(t, ca.Key)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	return ca, keyFile, certFile
}

// importEncryptedBlock returns key as an encrypted PKCS#8 block under passphrase.
func importEncryptedBlock(passphrase string) func(*testing.T, crypto.Signer) *pem.Block {
	return func(t *testing.T, key crypto.Signer) *pem.Block {
		t.Helper()
		der, err := pkcs8.MarshalPrivateKey(key, []byte(passphrase), &pkcs8.Opts{
			Cipher:  pkcs8.AES256CBC,
			KDFOpts: pkcs8.PBKDF2Opts{SaltSize: 16, IterationCount: 10000, HMACHash: crypto.SHA256},
		})
		if err != nil {
			t.Fatal(err)
		}
		return &pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der}
	}
}

// writeImportSecret writes data to a new file of mode 0600 and returns its path.
func writeImportSecret(t *testing.T, name, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkImported checks keys import's report: the URI it prints opens a key the server takes
// for the CA (issuance.CA.Validate) and that signs a leaf verifying with the original
// certificate; the report says to destroy the key file with shred -u, and shows neither the
// key nor a PIN.
func checkImported(t *testing.T, out string, ca *testpki.Authority, keyFile string, secrets ...string) string {
	t.Helper()
	uri := uriOf(t, out)
	for _, want := range []string{"imported the ", "CN=kubernetes", "Next:", "key: ", "shred -u " + keyFile} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(der)
	for _, secret := range append(secrets, "PRIVATE KEY", b64[len(b64)/2:len(b64)/2+16]) {
		if strings.Contains(out, secret) {
			t.Errorf("the report shows %q:\n%s", secret, out)
		}
	}
	key, err := keystore.Open(context.Background(), uri, keystore.Options{})
	if err != nil {
		t.Fatalf("opening the printed URI: %v", err)
	}
	defer key.Close()
	if err := (&issuance.CA{Certificate: ca.Cert, Key: key}).Validate(); err != nil {
		t.Errorf("the server would refuse the CA with the imported key: %v", err)
	}
	leafKey := testpki.Key(t, testpki.P256)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "system:node:node-a"},
		NotBefore: testpki.NotBefore, NotAfter: testpki.NotAfter,
	}, ca.Cert, leafKey.Public(), key)
	if err != nil {
		t.Fatalf("signing with the imported key: %v", err)
	}
	leaf, _ := x509.ParseCertificate(leafDER)
	if err := leaf.CheckSignatureFrom(ca.Cert); err != nil {
		t.Errorf("a certificate signed by the imported key does not verify with the original CA certificate: %v", err)
	}
	return uri
}

// TestKeysImportSoftHSM: kubeadm's P-256 CA key (SEC 1) and an RSA-2048 one (PKCS#1) go into
// a SoftHSM2 token; the report is right and shows no PIN; importing to the same label again is
// refused; -o json carries the same facts.
func TestKeysImportSoftHSM(t *testing.T) {
	tok := softhsmtest.New(t)
	for _, kt := range []testpki.KeyType{testpki.P256, testpki.RSA2048} {
		ca, keyFile, certFile := importCAFiles(t, kt, importTypedBlock)
		label := "kube-ca-" + string(kt)
		code, out, errOut := runImport("--from", keyFile, "--certificate", certFile, "--uri", tok.URI(label))
		if code != 0 {
			t.Fatalf("keys import %s: exit %d: %s", kt, code, errOut)
		}
		checkImported(t, out, ca, keyFile, tok.PIN)
		if !strings.Contains(out, "imported the "+string(kt)+" key") || !strings.Contains(out, "into the pkcs11 device") {
			t.Errorf("the report does not name the algorithm and device:\n%s", out)
		}

		code, _, errOut = runImport("--from", keyFile, "--certificate", certFile, "--uri", tok.URI(label))
		if code != 1 || !strings.Contains(errOut, "already has an object") {
			t.Errorf("importing to the same label again: exit %d, stderr %q; want exit 1 and a refusal", code, errOut)
		}
	}
	ca, keyFile, certFile := importCAFiles(t, testpki.P384, importPKCS8Block)
	code, out, errOut := runImport("--from", keyFile, "--certificate", certFile, "--uri", tok.URI("json"), "-o", "json")
	if code != 0 {
		t.Fatalf("keys import -o json: exit %d: %s", code, errOut)
	}
	var got importedKey
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if got.Algorithm != "P-384" || got.Device != "pkcs11" || got.Certificate != ca.Cert.Subject.String() || got.From != keyFile ||
		!strings.HasPrefix(got.URI, "pkcs11:token=") || len(got.Next) != 3 || !strings.Contains(got.Next[2], "shred -u "+keyFile) {
		t.Errorf("-o json = %+v", got)
	}
}

// TestKeysImportSwtpm: an RSA-2048 key in an encrypted PKCS#8 file goes into swtpm as a blob
// with the right passphrase file, and a P-256 key at a persistent handle; the wrong
// passphrase, or none, is refused before the TPM is touched, saying what to fix.
func TestKeysImportSwtpm(t *testing.T) {
	tpm := swtpmtest.Start(t)
	const passphrase = "correct horse battery staple"
	ca, keyFile, certFile := importCAFiles(t, testpki.RSA2048, importEncryptedBlock(passphrase))
	blob := filepath.Join(t.TempDir(), "kube-ca.tpmkey")

	wrong := writeImportSecret(t, "wrong.pass", "not the passphrase\n")
	code, out, errOut := runImport("--from", keyFile, "--passphrase-file", wrong, "--certificate", certFile, "--uri", tpm.URI("blob="+blob))
	if code != 2 || out != "" || !strings.Contains(errOut, "does not decrypt the key") || !strings.Contains(errOut, wrong) {
		t.Errorf("wrong passphrase: exit %d, stdout %q, stderr %q; want exit 2 saying the passphrase file does not decrypt the key", code, out, errOut)
	}
	code, _, errOut = runImport("--from", keyFile, "--certificate", certFile, "--uri", tpm.URI("blob="+blob))
	if code != 2 || !strings.Contains(errOut, "--passphrase-file") {
		t.Errorf("no passphrase: exit %d, stderr %q; want exit 2 asking for --passphrase-file", code, errOut)
	}
	if _, err := os.Stat(blob); err == nil {
		t.Fatal("a refused import wrote the blob")
	}

	right := writeImportSecret(t, "ca.pass", passphrase+"\n")
	code, out, errOut = runImport("--from", keyFile, "--passphrase-file", right, "--certificate", certFile, "--uri", tpm.URI("blob="+blob))
	if code != 0 {
		t.Fatalf("keys import: exit %d: %s", code, errOut)
	}
	checkImported(t, out, ca, keyFile, passphrase)
	if !strings.Contains(out, "shred -u "+keyFile+" "+right) || !strings.Contains(out, "into the tpm device") {
		t.Errorf("the report does not say to destroy the passphrase file too, or names no device:\n%s", out)
	}

	ec, ecKey, ecCert := importCAFiles(t, testpki.P256, importTypedBlock)
	code, out, errOut = runImport("--from", ecKey, "--certificate", ecCert, "--uri", tpm.URI("handle=0x81000110"))
	if code != 0 {
		t.Fatalf("keys import to a handle: exit %d: %s", code, errOut)
	}
	checkImported(t, out, ec, ecKey)
}

// TestKeysImportRefusals: a key that is not the certificate's, a certificate that is not a
// CA's, a file URI, a key file others may read, a certificate file of several certificates,
// and missing flags or files are refused with what to fix, and nothing is written to the
// device.
func TestKeysImportRefusals(t *testing.T) {
	tpm := swtpmtest.Start(t)
	blob := filepath.Join(t.TempDir(), "ca.tpmkey")
	target := tpm.URI("blob=" + blob)
	_, keyFile, certFile := importCAFiles(t, testpki.P256, importTypedBlock)
	_, _, otherCert := importCAFiles(t, testpki.P256, importTypedBlock)
	_, _, rsaCert := importCAFiles(t, testpki.RSA2048, importTypedBlock)
	bundle := filepath.Join(t.TempDir(), "bundle.crt")
	certPEM, _ := os.ReadFile(certFile)
	otherPEM, _ := os.ReadFile(otherCert)
	if err := os.WriteFile(bundle, append(certPEM, otherPEM...), 0o644); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(t.TempDir(), "open.key")
	keyPEM, _ := os.ReadFile(keyFile)
	if err := os.WriteFile(open, keyPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		errHas []string
	}{
		{"another CA's certificate", []string{"--from", keyFile, "--certificate", otherCert, "--uri", target}, 1,
			[]string{"the key in " + keyFile + " is not the key of the certificate in " + otherCert, "give the CA certificate that goes with the key"}},
		{"an RSA CA's certificate", []string{"--from", keyFile, "--certificate", rsaCert, "--uri", target}, 1, []string{"is not the key of the certificate"}},
		{"a key file others may read", []string{"--from", open, "--certificate", certFile, "--uri", target}, 2, []string{"--from", "chmod 600 " + open}},
		{"a certificate bundle", []string{"--from", keyFile, "--certificate", bundle, "--uri", target}, 2, []string{"holds 2 certificates"}},
		{"a file URI", []string{"--from", keyFile, "--certificate", certFile, "--uri", "file:///etc/signet/ca.key"}, 2, []string{"names a file", "pkcs11:", "tpm:"}},
		{"a plain path", []string{"--from", keyFile, "--certificate", certFile, "--uri", "/etc/signet/ca.key"}, 2, []string{"names a file"}},
		{"no certificate", []string{"--from", keyFile, "--uri", target}, 2, []string{"certificate"}},
		{"no key file", []string{"--from", filepath.Join(t.TempDir(), "missing.key"), "--certificate", certFile, "--uri", target}, 2, []string{"--from", "no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runImport(tc.args...)
			if code != tc.code || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d", code, out, errOut, tc.code)
			}
			for _, want := range tc.errHas {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr %q lacks %q", errOut, want)
				}
			}
		})
	}
	// A leaf certificate for the key itself: the key matches, the certificate is no CA's.
	leafForKey := filepath.Join(t.TempDir(), "own-leaf.crt")
	ca, ownKey, _ := importCAFiles(t, testpki.P256, importTypedBlock)
	if err := os.WriteFile(leafForKey, testpki.CertPEM(ca.Sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: "leaf"}}, ca.Key.Public())), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runImport("--from", ownKey, "--certificate", leafForKey, "--uri", target)
	if code != 1 || !strings.Contains(errOut, "not a CA certificate") || !strings.Contains(errOut, "give the CA's certificate") {
		t.Errorf("a leaf certificate: exit %d, stderr %q; want exit 1 saying it is not a CA's", code, errOut)
	}
	if _, err := os.Stat(blob); err == nil {
		t.Error("a refused import wrote the blob")
	}
}

// importTypedBlock returns key as kubeadm writes it: PKCS#1 "RSA PRIVATE KEY" or SEC 1 "EC PRIVATE
// KEY".
func importTypedBlock(t *testing.T, key crypto.Signer) *pem.Block {
	t.Helper()
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}
	case *ecdsa.PrivateKey:
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}
	}
	t.Fatalf("no traditional form for %T", key)
	return nil
}

// importPKCS8Block returns key as a PKCS#8 "PRIVATE KEY" block.
func importPKCS8Block(t *testing.T, key crypto.Signer) *pem.Block {
	t.Helper()
	block, _ := pem.Decode(testpki.KeyPEM(t, key))
	return block
}

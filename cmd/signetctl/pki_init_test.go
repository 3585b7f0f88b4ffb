package main

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/signet-pki/signet/internal/tlspki"
	"github.com/signet-pki/signet/server/access"
)

// TestPKIInit: pki init makes two CAs, a server certificate that verifies for server auth
// under each name and address, a client certificate that verifies for client auth and that
// the server's access.Identity maps to the identity asked for; keys are 0600 in a 0700
// folder; the Secret manifest on stdout decodes strictly as a kubernetes.io/tls Secret whose
// three keys are the files; nothing secret is on stderr.
func TestPKIInit(t *testing.T) {
	t.Parallel()
	dir, out, errOut := pkiInit(t, "--server-name", "signet.internal.example.com,localhost", "--server-ip", "127.0.0.1",
		"--server-ip", "::1", "--watcher-identity", testIdentity, "--cluster", "prod-eu-1", "--namespace", "signet", "--secret-name", "watcher-mtls")
	checkPKIFiles(t, dir)
	checkPKICertificates(t, dir)
	checkPKISecret(t, dir, out)
	checkNothingSecretPrinted(t, dir, out, errOut)
	for _, want := range []string{"clientCAFile: /etc/signet/tls/clients-ca.crt", "identity: " + testIdentity, "certFile: /etc/signet/tls/server.crt",
		"clusterName prod-eu-1", "signet/watcher-mtls", "it holds the watcher's private key"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the summary lacks %q:\n%s", want, errOut)
		}
	}
}

// checkPKIFiles: the folder is 0700 and holds exactly the PKI's files, keys 0600, the rest 0644.
func checkPKIFiles(t *testing.T, dir string) {
	t.Helper()
	if info, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	} else if info.Mode().Perm() != 0o700 {
		t.Errorf("the folder has mode %v, want 0700", info.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		info, _ := e.Info()
		want := os.FileMode(0o644)
		if strings.HasSuffix(e.Name(), ".key") {
			want = 0o600
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", e.Name(), info.Mode().Perm(), want)
		}
	}
	if want := slices.Sorted(slices.Values(tlspki.Files())); !slices.Equal(names, want) {
		t.Errorf("the folder holds %v, want %v", names, want)
	}
}

// checkPKICertificates: random serials, key identifiers, lifetimes, P-256 keys and signatures
// of the four certificates; CAs for leaves only; keys that match; then checkPKIChains.
func checkPKICertificates(t *testing.T, dir string) {
	t.Helper()
	path := func(name string) string { return filepath.Join(dir, name) }
	serverCA, clientCA := certFile(t, path(tlspki.ServerCACert)), certFile(t, path(tlspki.ClientCACert))
	server, watcher := certFile(t, path(tlspki.ServerCert)), certFile(t, path(tlspki.WatcherCert))
	now := time.Now()
	for _, c := range []struct {
		cert     *x509.Certificate
		issuer   *x509.Certificate
		lifetime time.Duration
	}{
		{serverCA, serverCA, tlspki.DefaultCAValidity}, {clientCA, clientCA, tlspki.DefaultCAValidity},
		{server, serverCA, tlspki.DefaultValidity}, {watcher, clientCA, tlspki.DefaultValidity},
	} {
		name := c.cert.Subject.CommonName
		if c.cert.SerialNumber.Sign() <= 0 || c.cert.SerialNumber.BitLen() > 128 || c.cert.SerialNumber.BitLen() < 64 {
			t.Errorf("%s: serial %x is not a random 128-bit number", name, c.cert.SerialNumber)
		}
		if len(c.cert.SubjectKeyId) != 20 {
			t.Errorf("%s: subject key identifier %x, want 20 bytes", name, c.cert.SubjectKeyId)
		}
		if c.cert != c.issuer && !bytes.Equal(c.cert.AuthorityKeyId, c.issuer.SubjectKeyId) {
			t.Errorf("%s: authority key identifier %x, want the CA's %x", name, c.cert.AuthorityKeyId, c.issuer.SubjectKeyId)
		}
		if got := c.cert.NotAfter.Sub(c.cert.NotBefore); got != c.lifetime+5*time.Minute {
			t.Errorf("%s: valid for %s, want %s and the 5m backdate", name, got, c.lifetime)
		}
		if c.cert.NotBefore.After(now) || now.Sub(c.cert.NotBefore) > 6*time.Minute {
			t.Errorf("%s: NotBefore %s, want about five minutes ago", name, c.cert.NotBefore)
		}
		if _, ok := c.cert.PublicKey.(*ecdsa.PublicKey); !ok || c.cert.PublicKey.(*ecdsa.PublicKey).Curve != elliptic.P256() {
			t.Errorf("%s: key %T, want P-256", name, c.cert.PublicKey)
		}
		if err := c.cert.CheckSignatureFrom(c.issuer); err != nil {
			t.Errorf("%s: not signed by %s: %v", name, c.issuer.Subject.CommonName, err)
		}
	}
	serials := map[string]bool{}
	for _, c := range []*x509.Certificate{serverCA, clientCA, server, watcher} {
		serials[c.SerialNumber.String()] = true
	}
	if len(serials) != 4 {
		t.Error("serial numbers repeat")
	}
	for _, ca := range []*x509.Certificate{serverCA, clientCA} {
		if !ca.IsCA || !ca.BasicConstraintsValid || !ca.MaxPathLenZero || ca.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign {
			t.Errorf("%s: CA %v, path length 0 %v, key usage %v; want a CA for leaves only", ca.Subject.CommonName, ca.IsCA, ca.MaxPathLenZero, ca.KeyUsage)
		}
	}
	if serverCA.PublicKey.(*ecdsa.PublicKey).Equal(clientCA.PublicKey) {
		t.Error("the two CAs share a key")
	}
	checkPKIChains(t, serverCA, clientCA, server, watcher)
	for _, pair := range [][2]string{{tlspki.ServerCert, tlspki.ServerKey}, {tlspki.WatcherCert, tlspki.WatcherKey}} {
		if _, err := tls.LoadX509KeyPair(path(pair[0]), path(pair[1])); err != nil {
			t.Errorf("%s and %s: %v", pair[0], pair[1], err)
		}
	}
}

// checkPKIChains: the server certificate verifies for server auth under every name and
// address, from the server CA only; the watcher's for client auth from the client CA only,
// and access.Identity maps it to testIdentity.
func checkPKIChains(t *testing.T, serverCA, clientCA, server, watcher *x509.Certificate) {
	t.Helper()
	for _, name := range []string{"signet.internal.example.com", "localhost", "127.0.0.1", "::1"} {
		if err := verifies(server, serverCA, x509.ExtKeyUsageServerAuth, name); err != nil {
			t.Errorf("server certificate for %s: %v", name, err)
		}
	}
	if server.Subject.CommonName != "signet.internal.example.com" || len(server.URIs) != 0 || server.IsCA {
		t.Errorf("server certificate: CN %q, URIs %v, CA %v", server.Subject.CommonName, server.URIs, server.IsCA)
	}
	if verifies(server, serverCA, x509.ExtKeyUsageClientAuth, "") == nil {
		t.Error("the server certificate verifies for client auth")
	}
	if verifies(server, clientCA, x509.ExtKeyUsageServerAuth, "localhost") == nil {
		t.Error("the server certificate verifies against the client CA")
	}
	// The watcher's certificate: client auth from the client CA only, the identity asked for.
	if err := verifies(watcher, clientCA, x509.ExtKeyUsageClientAuth, ""); err != nil {
		t.Errorf("watcher certificate: %v", err)
	}
	if verifies(watcher, clientCA, x509.ExtKeyUsageServerAuth, "") == nil || verifies(watcher, serverCA, x509.ExtKeyUsageClientAuth, "") == nil {
		t.Error("the watcher certificate verifies for server auth or against the server CA")
	}
	if got := access.Identity(watcher); got != testIdentity {
		t.Errorf("access.Identity(watcher certificate) = %q, want %q", got, testIdentity)
	}
	if len(watcher.URIs) != 1 || len(watcher.DNSNames)+len(watcher.IPAddresses)+len(watcher.EmailAddresses) != 0 || watcher.IsCA {
		t.Errorf("watcher certificate SANs: URIs %v, DNS %v, IP %v; want the identity only", watcher.URIs, watcher.DNSNames, watcher.IPAddresses)
	}
}

// checkPKISecret: the manifest decodes strictly as the kubernetes.io/tls Secret signet/watcher-mtls
// whose three keys are the watcher's certificate and key and the server CA.
func checkPKISecret(t *testing.T, dir, manifest string) {
	t.Helper()
	path := func(name string) string { return filepath.Join(dir, name) }
	s := decodeSecret(t, []byte(manifest))
	if s.Type != corev1.SecretTypeTLS || s.Namespace != "signet" || s.Name != "watcher-mtls" {
		t.Errorf("Secret %s/%s of type %s, want signet/watcher-mtls of type kubernetes.io/tls", s.Namespace, s.Name, s.Type)
	}
	if keys := slices.Sorted(maps.Keys(s.Data)); !slices.Equal(keys, []string{"ca.crt", "tls.crt", "tls.key"}) {
		t.Errorf("Secret keys %v, want ca.crt, tls.crt, tls.key", keys)
	}
	for key, file := range map[string]string{"tls.crt": tlspki.WatcherCert, "tls.key": tlspki.WatcherKey, "ca.crt": tlspki.ServerCACert} {
		if !bytes.Equal(s.Data[key], readFile(t, path(file))) {
			t.Errorf("Secret %s is not %s", key, file)
		}
	}
	if s.Annotations[tlspki.AnnotationIdentity] != testIdentity {
		t.Errorf("Secret annotations %v", s.Annotations)
	}
}

// checkNothingSecretPrinted: stderr holds no key in any form; stdout only the watcher's key,
// inside the Secret.
func checkNothingSecretPrinted(t *testing.T, dir, out, errOut string) {
	t.Helper()
	path := func(name string) string { return filepath.Join(dir, name) }
	for _, key := range []string{tlspki.ServerCAKey, tlspki.ClientCAKey, tlspki.ServerKey, tlspki.WatcherKey} {
		data := readFile(t, path(key))
		block, _ := pem.Decode(data)
		for _, form := range []string{string(data), base64.StdEncoding.EncodeToString(data), base64.StdEncoding.EncodeToString(block.Bytes)} {
			if strings.Contains(errOut, form) || (key != tlspki.WatcherKey && strings.Contains(out, form)) {
				t.Errorf("the output shows %s", key)
			}
		}
	}
	if strings.Contains(out+errOut, "PRIVATE KEY-----") {
		t.Error("a PEM private key is printed")
	}
}

// TestPKIInitAlgorithms: --algorithm takes every spelling keys create takes and makes every
// key with it.
func TestPKIInitAlgorithms(t *testing.T) {
	t.Parallel()
	for alg, check := range map[string]func(crypto.PublicKey) bool{
		"p384":     func(k crypto.PublicKey) bool { e, ok := k.(*ecdsa.PublicKey); return ok && e.Curve == elliptic.P384() },
		"RSA-3072": func(k crypto.PublicKey) bool { r, ok := k.(*rsa.PublicKey); return ok && r.N.BitLen() == 3072 },
	} {
		dir, _, _ := pkiInit(t, "--server-name", "localhost", "--watcher-identity", testIdentity, "--algorithm", alg)
		for _, name := range []string{tlspki.ServerCACert, tlspki.ClientCACert, tlspki.ServerCert, tlspki.WatcherCert} {
			if cert := certFile(t, filepath.Join(dir, name)); !check(cert.PublicKey) {
				t.Errorf("--algorithm %s: %s has a %T key", alg, name, cert.PublicKey)
			}
		}
		if rsaCert := certFile(t, filepath.Join(dir, tlspki.ServerCert)); alg == "RSA-3072" && rsaCert.KeyUsage&x509.KeyUsageKeyEncipherment == 0 {
			t.Error("an RSA server certificate without key encipherment")
		}
	}
}

// TestPKIInitRefusesOverwrite: a second init into the same folder, or onto an existing
// --secret-file, changes nothing and exits 1, naming what exists; --force replaces it all.
func TestPKIInitRefusesOverwrite(t *testing.T) {
	t.Parallel()
	args := []string{"--server-name", "localhost", "--watcher-identity", testIdentity}
	dir, _, _ := pkiInit(t, args...)
	before := readFile(t, filepath.Join(dir, tlspki.ClientCAKey))
	code, out, errOut := runCmd(append([]string{"pki", "init", "--dir", dir}, args...)...)
	if code != 1 || out != "" || !strings.Contains(errOut, "refusing to overwrite") || !strings.Contains(errOut, tlspki.ClientCAKey) {
		t.Errorf("second init: exit %d, stdout %q, stderr %q; want exit 1 naming the files", code, out, errOut)
	}
	if !bytes.Equal(before, readFile(t, filepath.Join(dir, tlspki.ClientCAKey))) {
		t.Error("the refused init changed the CA key")
	}
	secret := filepath.Join(t.TempDir(), "secret.yaml")
	if err := os.WriteFile(secret, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(t.TempDir(), "fresh")
	code, _, errOut = runCmd(append([]string{"pki", "init", "--dir", fresh, "--secret-file", secret}, args...)...)
	if code != 1 || !strings.Contains(errOut, secret) {
		t.Errorf("existing --secret-file: exit %d, stderr %q", code, errOut)
	}
	if _, err := os.Stat(fresh); err == nil {
		t.Error("the refused init created the folder")
	}
	code, out, errOut = runCmd(append([]string{"pki", "init", "--dir", dir, "--secret-file", secret, "--force"}, args...)...)
	if code != 0 || out != "" {
		t.Fatalf("--force: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if bytes.Equal(before, readFile(t, filepath.Join(dir, tlspki.ClientCAKey))) {
		t.Error("--force kept the CA key")
	}
	if s := decodeSecret(t, readFile(t, secret)); !bytes.Equal(s.Data["tls.key"], readFile(t, filepath.Join(dir, tlspki.WatcherKey))) {
		t.Error("--secret-file does not hold the new watcher key")
	}
	if info, _ := os.Stat(secret); info.Mode().Perm() != 0o600 {
		t.Errorf("--secret-file mode %v, want 0600", info.Mode().Perm())
	}
}

// TestPKIInitIntoExistingFolder: an existing empty folder is used as it is; one open to group
// or others gets a warning.
func TestPKIInitIntoExistingFolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCmd("pki", "init", "--dir", dir, "--server-name", "localhost", "--watcher-identity", testIdentity)
	if code != 0 || !strings.Contains(errOut, "warning: "+dir+" is open to group or others (mode 0755)") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
	if info, err := os.Stat(filepath.Join(dir, tlspki.ClientCAKey)); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the CA key in an open folder: %v", err)
	}
}

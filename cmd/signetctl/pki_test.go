package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/internal/tlspki"
	"github.com/signet-pki/signet/server/access"
)

// testIdentity is the watcher identity the pki tests ask for.
const testIdentity = "spiffe://prod.example.com/ns/signet-system/sa/signet-watcher"

// pkiInit runs pki init into a new folder with args added and fails the test unless it
// succeeds. It returns the folder, stdout and stderr.
func pkiInit(t *testing.T, args ...string) (dir, stdout, stderr string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "pki")
	code, out, errOut := runCmd(append([]string{"pki", "init", "--dir", dir}, args...)...)
	if code != 0 {
		t.Fatalf("pki init %v: exit %d, stderr:\n%s", args, code, errOut)
	}
	return dir, out, errOut
}

// certFile parses the one certificate of a PEM file.
func certFile(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	cert, err := tlspki.ReadCertificate(path)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// readFile reads path or fails the test.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// decodeSecret decodes a manifest strictly (unknown or duplicate fields fail) as a Secret.
func decodeSecret(t *testing.T, manifest []byte) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := yaml.UnmarshalStrict(manifest, &s); err != nil {
		t.Fatalf("the manifest is not a Secret: %v\n%s", err, manifest)
	}
	if s.APIVersion != "v1" || s.Kind != "Secret" {
		t.Errorf("apiVersion/kind = %s/%s, want v1/Secret", s.APIVersion, s.Kind)
	}
	return &s
}

// verifies reports whether cert verifies against the single root ca for usage (and, for a
// server certificate, the name).
func verifies(cert, ca *x509.Certificate, usage x509.ExtKeyUsage, name string) error {
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	_, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

// TestPKIRenew: renew --watcher and --server keep subject, SANs, identity and usages, and
// change key and serial; the files are replaced (no temporary file left), the lifetime is the
// old one unless --validity says otherwise, and the new Secret holds the new files.
func TestPKIRenew(t *testing.T) {
	t.Parallel()
	dir, _, _ := pkiInit(t, "--server-name", "signet.example.com", "--server-ip", "10.0.0.5", "--watcher-identity", testIdentity,
		"--validity", "30d", "--namespace", "signet", "--secret-name", "watcher-mtls")
	path := func(name string) string { return filepath.Join(dir, name) }
	for _, tc := range []struct {
		flag, cert, key, ca string
		validity            []string
		lifetime            time.Duration
	}{
		{"--watcher", tlspki.WatcherCert, tlspki.WatcherKey, tlspki.ClientCACert, nil, 30 * 24 * time.Hour},
		{"--server", tlspki.ServerCert, tlspki.ServerKey, tlspki.ServerCACert, []string{"--validity", "36h"}, 36 * time.Hour},
	} {
		old, oldKey := certFile(t, path(tc.cert)), readFile(t, path(tc.key))
		secretFile := filepath.Join(t.TempDir(), "secret.yaml")
		args := append([]string{"pki", "renew", "--dir", dir, tc.flag}, tc.validity...)
		if tc.flag == "--watcher" {
			args = append(args, "--secret-file", secretFile)
		}
		code, out, errOut := runCmd(args...)
		if code != 0 || out != "" || !strings.Contains(errOut, "Renewed") {
			t.Fatalf("renew %s: exit %d, stdout %q, stderr:\n%s", tc.flag, code, out, errOut)
		}
		renewed := certFile(t, path(tc.cert))
		if renewed.SerialNumber.Cmp(old.SerialNumber) == 0 || bytes.Equal(oldKey, readFile(t, path(tc.key))) ||
			renewed.PublicKey.(*ecdsa.PublicKey).Equal(old.PublicKey) {
			t.Errorf("renew %s kept the serial or the key", tc.flag)
		}
		if !bytes.Equal(renewed.RawSubject, old.RawSubject) || !slices.Equal(renewed.DNSNames, old.DNSNames) ||
			!slices.EqualFunc(renewed.IPAddresses, old.IPAddresses, net.IP.Equal) || !slices.Equal(renewed.ExtKeyUsage, old.ExtKeyUsage) ||
			access.Identity(renewed) != access.Identity(old) || len(renewed.URIs) != len(old.URIs) {
			t.Errorf("renew %s changed the subject, SANs or usages: %v %v %v", tc.flag, renewed.Subject, renewed.DNSNames, renewed.URIs)
		}
		if got := renewed.NotAfter.Sub(renewed.NotBefore); got != tc.lifetime+5*time.Minute {
			t.Errorf("renew %s: valid for %s, want %s", tc.flag, got, tc.lifetime)
		}
		if _, err := tls.LoadX509KeyPair(path(tc.cert), path(tc.key)); err != nil {
			t.Errorf("renew %s: %v", tc.flag, err)
		}
		usage := x509.ExtKeyUsageClientAuth
		if tc.flag == "--server" {
			usage = x509.ExtKeyUsageServerAuth
		}
		if err := verifies(renewed, certFile(t, path(tc.ca)), usage, ""); err != nil {
			t.Errorf("renew %s: %v", tc.flag, err)
		}
		if tc.flag == "--watcher" {
			s := decodeSecret(t, readFile(t, secretFile))
			if s.Namespace != "signet" || s.Name != "watcher-mtls" || !bytes.Equal(s.Data["tls.crt"], readFile(t, path(tc.cert))) ||
				!bytes.Equal(s.Data["tls.key"], readFile(t, path(tc.key))) || !bytes.Equal(s.Data["ca.crt"], readFile(t, path(tlspki.ServerCACert))) {
				t.Errorf("the renewed Secret %s/%s does not hold the new files", s.Namespace, s.Name)
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(tlspki.Files()) {
		t.Errorf("the folder holds %d files after renewals, want %d (no temporary files)", len(entries), len(tlspki.Files()))
	}
	// To standard output without --secret-file.
	code, out, errOut := runCmd("pki", "renew", "--dir", dir, "--watcher")
	if code != 0 || !bytes.Equal(decodeSecret(t, []byte(out)).Data["tls.crt"], readFile(t, path(tlspki.WatcherCert))) || strings.Contains(errOut, "PRIVATE KEY") {
		t.Errorf("renew to stdout: exit %d, stderr %q", code, errOut)
	}
}

// TestPKIRenewRefusals: a folder without the PKI, or with a key others may read, is unusable
// input (exit 2); a certificate its CA did not issue is refused (exit 1), and nothing changes.
func TestPKIRenewRefusals(t *testing.T) {
	t.Parallel()
	if code, _, errOut := runCmd("pki", "renew", "--dir", t.TempDir(), "--watcher"); code != 2 || !strings.Contains(errOut, tlspki.ClientCACert) {
		t.Errorf("empty folder: exit %d, stderr %q", code, errOut)
	}
	dir, _, _ := pkiInit(t, "--server-name", "localhost", "--watcher-identity", testIdentity)
	if err := os.Chmod(filepath.Join(dir, tlspki.ServerCAKey), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd("pki", "renew", "--dir", dir, "--server"); code != 2 || !strings.Contains(errOut, "chmod 600") {
		t.Errorf("readable CA key: exit %d, stderr %q", code, errOut)
	}
	stranger := testpki.CA(t).Sign(t, &x509.Certificate{}, testpki.Key(t, testpki.P256).Public())
	if err := os.WriteFile(filepath.Join(dir, tlspki.WatcherCert), testpki.CertPEM(stranger), 0o644); err != nil {
		t.Fatal(err)
	}
	key := readFile(t, filepath.Join(dir, tlspki.WatcherKey))
	code, out, errOut := runCmd("pki", "renew", "--dir", dir, "--watcher")
	if code != 1 || out != "" || !strings.Contains(errOut, "was not issued by "+tlspki.ClientCACert) {
		t.Errorf("foreign certificate: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if !bytes.Equal(key, readFile(t, filepath.Join(dir, tlspki.WatcherKey))) {
		t.Error("the refused renewal replaced the key")
	}
}

// TestPKIUsageErrors: missing or bad flags exit 2 with a message naming the flag, print
// nothing on stdout and write nothing.
func TestPKIUsageErrors(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "pki")
	ok := []string{"--dir", dir, "--server-name", "localhost", "--watcher-identity", testIdentity}
	init := func(extra ...string) []string { return append(append([]string{"pki", "init"}, ok...), extra...) }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pki", "init", "--dir", dir, "--watcher-identity", testIdentity}, "--server-name: required"},
		{[]string{"pki", "init", "--dir", dir, "--server-name", "localhost"}, "--watcher-identity: required"},
		{[]string{"pki", "init", "--server-name", "localhost", "--watcher-identity", testIdentity}, "--dir: required"},
		{init("--watcher-identity", "signet-watcher"), "must be an absolute URI with a host"},
		{init("--watcher-identity", "spiffe://prod.example.com/ns/a b"), "is not written as certificates render it"},
		{init("--watcher-identity", "spiffe://prod.example.com/ns/x?y=1"), "must not have a query"},
		{init("--watcher-identity", "spiffe://Prod.example.com/ns/x"), "SPIFFE trust domain"},
		{init("--watcher-identity", "spiffe://prod.example.com"), "a SPIFFE ID needs a path"},
		{init("--watcher-identity", "spiffe://prod.example.com/ns/../x"), "dot segments"},
		{init("--watcher-identity", "spiffe://user@prod.example.com/x"), "user information"},
		{init("--server-name", "10.0.0.1"), "give it with --server-ip"},
		{init("--server-name", "Signet.example.com"), "must be lower case"},
		{init("--server-name", "bad_name"), "--server-name \"bad_name\""},
		{init("--server-ip", "10.0.0.300"), "--server-ip \"10.0.0.300\": is not an IP address"},
		{init("--algorithm", "DSA"), "--algorithm \"DSA\": want one of P-256"},
		{init("--validity", "ninety"), `"--validity" flag: "ninety" is neither whole days`},
		{init("--validity", "10m"), "--validity 10m: below the 1h minimum"},
		{init("--validity", "0d"), "not positive"},
		{init("--validity", "400d", "--ca-validity", "365d"), "--ca-validity 365d: must be longer than --validity 400d"},
		{init("--cluster", "Prod_EU"), "--cluster \"Prod_EU\""},
		{init("--namespace", "a.b"), "--namespace \"a.b\""},
		{init("extra"), "unknown command"},
		{[]string{"pki", "renew", "--dir", dir}, "exactly one of --watcher and --server"},
		{[]string{"pki", "renew", "--dir", dir, "--watcher", "--server"}, "exactly one of --watcher and --server"},
		{[]string{"pki", "renew", "--watcher"}, "--dir: required"},
		{[]string{"pki", "renew", "--dir", dir, "--server", "--secret-file", "s.yaml"}, "--secret-file is for --watcher"},
		{[]string{"pki", "renew", "--dir", dir, "--watcher", "--validity", "30m"}, "below the 1h minimum"},
		{[]string{"pki"}, "missing command: one of init, issue, renew"},
		{[]string{"pki", "ini"}, "did you mean init?"},
	} {
		code, out, errOut := runCmd(tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("a usage error created the folder")
	}
}

// TestPKIHelpAndCompletion: pki is in the help and the shell completion, with its
// subcommands and the completions of its flags.
func TestPKIHelpAndCompletion(t *testing.T) {
	t.Parallel()
	if code, out, _ := runCmd("help"); code != 0 || !strings.Contains(out, "pki ") {
		t.Errorf("help: exit %d, lacks pki:\n%s", code, out)
	}
	code, out, _ := runCmd("pki", "--help")
	if code != 0 || !strings.Contains(out, "init") || !strings.Contains(out, "renew") || !strings.Contains(out, "Examples:") {
		t.Errorf("pki --help: exit %d:\n%s", code, out)
	}
	code, out, _ = runCmd("pki", "init", "--help")
	if code != 0 || !strings.Contains(out, "CONTAINS THE WATCHER'S PRIVATE KEY") || !strings.Contains(out, "Two CAs") && !strings.Contains(out, "server CA") {
		t.Errorf("pki init --help does not warn about the private key in the manifest:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", ""}, []string{"pki\t"}},
		{[]string{"__complete", "pki", ""}, []string{"init\t", "renew\t"}},
		{[]string{"__complete", "pki", "init", "--algorithm", ""}, []string{"P-256", "P-384", "RSA-3072", ":4"}},
		{[]string{"__complete", "pki", "renew", "--dir", ""}, []string{":16"}},
		{[]string{"__complete", "pki", "renew", "--"}, []string{"--watcher", "--server", "--secret-file"}},
	} {
		code, out, _ := runCmd(tc.args...)
		for _, w := range tc.want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("%q: exit %d, lacks %q:\n%s", tc.args, code, w, out)
			}
		}
	}
	if code, out, _ := runCmd("completion", "bash"); code != 0 || !strings.Contains(out, "signetctl") {
		t.Errorf("completion bash: exit %d", code)
	}
}

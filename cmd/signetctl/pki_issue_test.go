package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/tlspki"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/servertest"
)

// pkiIssue runs pki issue in dir with args added and fails the test unless it succeeds. It
// returns stdout (the clients entry) and stderr (the summary).
func pkiIssue(t *testing.T, dir string, args ...string) (stdout, stderr string) {
	t.Helper()
	code, out, errOut := runCmd(append([]string{"pki", "issue", "--dir", dir}, args...)...)
	if code != 0 {
		t.Fatalf("pki issue %v: exit %d, stderr:\n%s", args, code, errOut)
	}
	return out, errOut
}

// TestPKIIssue: pki issue makes NAME.crt (0644) and NAME.key (0600) in the folder: a client
// certificate from the client CA, for client auth only, with pki init's serial, key
// identifiers, lifetime and backdate, whose identity (access.Identity, as the server reads it)
// is NAME, or --identity as its only URI SAN. It prints the clients entry, with admin: true
// only for --admin, and no key anywhere.
func TestPKIIssue(t *testing.T) {
	t.Parallel()
	dir, _, _ := pkiInit(t, "--server-name", "localhost", "--watcher-identity", testIdentity)
	serverCA, clientCA := certFile(t, filepath.Join(dir, tlspki.ServerCACert)), certFile(t, filepath.Join(dir, tlspki.ClientCACert))
	const opsIdentity = "spiffe://prod.example.com/ops/ca-admin"
	for _, tc := range []struct {
		args                []string
		name, identity, alg string
		admin               bool
		lifetime            time.Duration
	}{
		{[]string{"--client", "admin", "--admin"}, "admin", "admin", "P-256", true, tlspki.DefaultValidity},
		{[]string{"--client", "kube-webhook"}, "kube-webhook", "kube-webhook", "P-256", false, tlspki.DefaultValidity},
		{[]string{"--client", "ops", "--identity", opsIdentity, "--admin", "--validity", "30d", "--algorithm", "rsa3072"}, "ops", opsIdentity, "RSA-3072", true, 30 * 24 * time.Hour},
		{[]string{"--client", "short.lived", "--validity", "1h30m", "--algorithm", "P-384"}, "short.lived", "short.lived", "P-384", false, 90 * time.Minute},
	} {
		before := time.Now()
		out, errOut := pkiIssue(t, dir, tc.args...)
		certPath, keyPath := filepath.Join(dir, tc.name+".crt"), filepath.Join(dir, tc.name+".key")
		for path, mode := range map[string]os.FileMode{certPath: 0o644, keyPath: 0o600} {
			if info, err := os.Stat(path); err != nil || info.Mode().Perm() != mode {
				t.Errorf("%s: %v, mode %v; want mode %v", path, err, info.Mode().Perm(), mode)
			}
		}
		cert := certFile(t, certPath)
		if err := verifies(cert, clientCA, x509.ExtKeyUsageClientAuth, ""); err != nil {
			t.Errorf("%s: does not chain to the client CA for client auth: %v", tc.name, err)
		}
		if verifies(cert, clientCA, x509.ExtKeyUsageServerAuth, "") == nil || verifies(cert, serverCA, x509.ExtKeyUsageClientAuth, "") == nil {
			t.Errorf("%s: verifies for server auth or from the server CA", tc.name)
		}
		if got := access.Identity(cert); got != tc.identity {
			t.Errorf("%s: access.Identity = %q, want %q", tc.name, got, tc.identity)
		}
		if cert.Subject.CommonName != tc.name || cert.IsCA || len(cert.DNSNames)+len(cert.IPAddresses)+len(cert.EmailAddresses) != 0 {
			t.Errorf("%s: CN %q, CA %v, SANs %v %v", tc.name, cert.Subject.CommonName, cert.IsCA, cert.DNSNames, cert.IPAddresses)
		}
		if wantURIs := map[bool]int{true: 1, false: 0}[tc.identity != tc.name]; len(cert.URIs) != wantURIs {
			t.Errorf("%s: URI SANs %v, want %d", tc.name, cert.URIs, wantURIs)
		}
		if got := cert.NotAfter.Sub(cert.NotBefore); got != tc.lifetime+5*time.Minute {
			t.Errorf("%s: valid for %s, want %s and the 5m backdate", tc.name, got, tc.lifetime)
		}
		if cert.NotBefore.After(before) || before.Sub(cert.NotBefore) > 6*time.Minute {
			t.Errorf("%s: NotBefore %s, want about five minutes ago", tc.name, cert.NotBefore)
		}
		if cert.SerialNumber.Sign() <= 0 || cert.SerialNumber.BitLen() > 128 || cert.SerialNumber.BitLen() < 64 ||
			len(cert.SubjectKeyId) != 20 || !bytes.Equal(cert.AuthorityKeyId, clientCA.SubjectKeyId) {
			t.Errorf("%s: serial %x, SKID %x, AKID %x", tc.name, cert.SerialNumber, cert.SubjectKeyId, cert.AuthorityKeyId)
		}
		switch k := cert.PublicKey.(type) {
		case *rsa.PublicKey:
			if tc.alg != "RSA-3072" || k.N.BitLen() != 3072 || cert.KeyUsage != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment {
				t.Errorf("%s: RSA-%d key, usage %v; want %s", tc.name, k.N.BitLen(), cert.KeyUsage, tc.alg)
			}
		case *ecdsa.PublicKey:
			if "P-"+fmt.Sprint(k.Curve.Params().BitSize) != tc.alg || cert.KeyUsage != x509.KeyUsageDigitalSignature {
				t.Errorf("%s: %s key, usage %v; want %s", tc.name, k.Curve.Params().Name, cert.KeyUsage, tc.alg)
			}
		}
		if _, err := tls.LoadX509KeyPair(certPath, keyPath); err != nil {
			t.Errorf("%s: the key is not the certificate's: %v", tc.name, err)
		}
		if !strings.Contains(out, "clients:\n  - identity: \""+tc.identity+"\"\n    signers: [\"*\"]") {
			t.Errorf("%s: stdout lacks the clients entry:\n%s", tc.name, out)
		}
		if got := strings.Contains(out, "\n    admin: true"); got != tc.admin {
			t.Errorf("%s: admin: true printed %v, want %v:\n%s", tc.name, got, tc.admin, out)
		}
		if !strings.Contains(errOut, "identity "+tc.identity) || !strings.Contains(errOut, "--tls-cert "+certPath) {
			t.Errorf("%s: the summary does not say the identity and how to use the files:\n%s", tc.name, errOut)
		}
		if strings.Contains(out+errOut, "PRIVATE KEY") || strings.Contains(out+errOut, strings.TrimSpace(string(readFile(t, keyPath)))) {
			t.Errorf("%s: a private key is printed", tc.name)
		}
	}
}

// TestPKIIssueRefuses: an existing NAME.crt or NAME.key is not replaced (exit 1, naming it)
// unless --force; pki init's names, bad names and identities, a bad --validity and a folder
// without a client CA are refused naming the flag or file, and write nothing; a lifetime past
// the CA's is cut to it, with a warning.
func TestPKIIssueRefuses(t *testing.T) {
	t.Parallel()
	dir, _, _ := pkiInit(t, "--server-name", "localhost", "--watcher-identity", testIdentity, "--ca-validity", "365d")
	pkiIssue(t, dir, "--client", "admin")
	certPath, keyPath := filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	cert, key := readFile(t, certPath), readFile(t, keyPath)
	code, out, errOut := runCmd("pki", "issue", "--dir", dir, "--client", "admin", "--admin")
	if code != 1 || out != "" || !strings.Contains(errOut, "refusing to overwrite") || !strings.Contains(errOut, certPath) || !strings.Contains(errOut, keyPath) {
		t.Errorf("second issue: exit %d, stdout %q, stderr %q; want exit 1 naming both files", code, out, errOut)
	}
	if !bytes.Equal(cert, readFile(t, certPath)) || !bytes.Equal(key, readFile(t, keyPath)) {
		t.Error("the refused issue changed the files")
	}
	if err := os.Remove(certPath); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd("pki", "issue", "--dir", dir, "--client", "admin"); code != 1 || !strings.Contains(errOut, keyPath) {
		t.Errorf("with the key alone left: exit %d, stderr %q", code, errOut)
	}
	out, _ = pkiIssue(t, dir, "--client", "admin", "--admin", "--force")
	if bytes.Equal(key, readFile(t, keyPath)) {
		t.Error("--force kept the key")
	}
	if !strings.Contains(out, "admin: true") {
		t.Errorf("--force --admin: stdout lacks admin: true:\n%s", out)
	}

	initFiles := readFile(t, filepath.Join(dir, tlspki.WatcherCert))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--client", "watcher", "--force"}, "pki renew"},
		{[]string{"--client", "clients-ca"}, "pki renew"},
		{[]string{"--client", "Admin"}, `--client "Admin"`},
		{[]string{"--client", "../admin"}, `--client "../admin"`},
		{[]string{"--client", strings.Repeat("a", 65)}, "64 characters"},
		{[]string{}, "--client: required"},
		{[]string{"--client", "ops", "--identity", "ops-admin"}, `--identity "ops-admin"`},
		{[]string{"--client", "ops", "--identity", "spiffe://Prod.example.com/ops"}, "SPIFFE trust domain"},
		{[]string{"--client", "ops", "--validity", "3650 d"}, `"--validity"`},
		{[]string{"--client", "ops", "--validity", "30m"}, "--validity 30m: below the 1h minimum"},
		{[]string{"--client", "ops", "--algorithm", "Ed25519"}, `--algorithm "Ed25519"`},
	} {
		code, out, errOut := runCmd(append([]string{"pki", "issue", "--dir", dir}, tc.args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("pki issue %v: exit %d, stdout %q, stderr %q; want exit 2 saying %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if !bytes.Equal(initFiles, readFile(t, filepath.Join(dir, tlspki.WatcherCert))) {
		t.Error("a refused issue replaced watcher.crt")
	}
	if _, err := os.Stat(filepath.Join(dir, "ops.key")); err == nil {
		t.Error("a refused issue wrote ops.key")
	}
	missing := filepath.Join(t.TempDir(), "nope")
	if code, _, errOut := runCmd("pki", "issue", "--dir", missing, "--client", "ops"); code != 2 || !strings.Contains(errOut, "nope") {
		t.Errorf("a missing folder: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCmd("pki", "issue", "--client", "ops"); code != 2 || !strings.Contains(errOut, "--dir: required") {
		t.Errorf("without --dir: exit %d, stderr %q", code, errOut)
	}

	_, errOut = pkiIssue(t, dir, "--client", "long", "--validity", "3650d")
	long, ca := certFile(t, filepath.Join(dir, "long.crt")), certFile(t, filepath.Join(dir, tlspki.ClientCACert))
	if !long.NotAfter.Equal(ca.NotAfter) || !strings.Contains(errOut, "warning: cut short to the expiry of the client CA") {
		t.Errorf("3650d from a 365d CA: NotAfter %s (CA %s), stderr:\n%s", long.NotAfter, ca.NotAfter, errOut)
	}
}

// TestPKIIssueWithSignetServer runs a real signet-server on the PKI of pki init, whose clients
// are the entries pki issue printed, pasted as they are: the --admin client reads a signer's
// CA set (an admin-only call), the other client is refused that (ADMIN_REQUIRED) but is
// served, and a client issued from the same CA that the config does not list is refused at the
// TLS handshake.
func TestPKIIssueWithSignetServer(t *testing.T) {
	t.Parallel()
	dir, _, _ := pkiInit(t, "--server-name", "signet.internal.example.com", "--server-ip", "127.0.0.1", "--watcher-identity", testIdentity)
	adminEntry, _ := pkiIssue(t, dir, "--client", "admin", "--admin")
	opsEntry, _ := pkiIssue(t, dir, "--client", "ops", "--identity", "spiffe://prod.example.com/ops/reader")
	pkiIssue(t, dir, "--client", "stranger")

	var clients strings.Builder
	for _, entry := range []string{adminEntry, opsEntry} {
		for line := range strings.Lines(entry) {
			if strings.HasPrefix(line, "  ") {
				clients.WriteString(line)
			}
		}
	}
	cfg := fmt.Sprintf(`apiVersion: signet.dev/v1alpha1
kind: ServerConfiguration
tls:
  certFile: %[1]s/server.crt
  keyFile: %[1]s/server.key
  clientCAFile: %[1]s/clients-ca.crt
clients:
%[2]sledger:
  dir: ledger
signers:
`, dir, clients.String()) + fmt.Sprintf(watcherClientSigner, dir, testIdentity)
	path := filepath.Join(t.TempDir(), "server.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := config.Load(path)
	if err != nil {
		t.Fatalf("the server config with the printed clients entries: %v\n%s", err, cfg)
	}
	loaded.HTTP.Address = "127.0.0.1:0"
	srv := servertest.Start(t, loaded, slog.New(slog.NewTextHandler(io.Discard, nil)))
	as := func(name string) []string {
		return []string{"--server", srv.Addr, "--tls-ca", filepath.Join(dir, tlspki.ServerCACert),
			"--tls-cert", filepath.Join(dir, name+".crt"), "--tls-key", filepath.Join(dir, name+".key")}
	}
	const signer = "signet.dev/watcher-client"
	if code, out, errOut := runCmd(append([]string{"ca", "status", "--signer", signer}, as("admin")...)...); code != 0 || !strings.HasPrefix(out, signer+"\n  CAs:\n") {
		t.Errorf("ca status as the --admin client: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if code, _, errOut := runCmd(append([]string{"ca", "status", "--signer", signer}, as("ops")...)...); code != 1 || !strings.Contains(errOut, "ADMIN_REQUIRED") {
		t.Errorf("ca status as a client without admin: exit %d, stderr:\n%s", code, errOut)
	}
	if code, out, errOut := runCmd(append([]string{"signers"}, as("ops")...)...); code != 0 || !strings.Contains(out, signer) {
		t.Errorf("signers as the ops client: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	if code, _, errOut := runCmd(append([]string{"signers"}, as("stranger")...)...); code != 2 || !strings.Contains(errOut, `refused client identity "stranger"`) {
		t.Errorf("signers as a client the config does not list: exit %d, stderr:\n%s", code, errOut)
	}
}

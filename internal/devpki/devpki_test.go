package devpki_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/issuance"
)

var now = time.Date(2030, time.March, 1, 8, 0, 0, 0, time.UTC)

// ensure creates a dev state in a fresh folder and returns the folder and the config path.
func ensure(t *testing.T, opts devpki.Options) (string, string) {
	t.Helper()
	opts.Dir = filepath.Join(t.TempDir(), "state")
	if opts.Now.IsZero() {
		opts.Now = now
	}
	path, err := devpki.Ensure(opts)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if want := filepath.Join(opts.Dir, devpki.ConfigFile); path != want {
		t.Fatalf("Ensure returned %q, want %q", path, want)
	}
	return opts.Dir, path
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("%s does not hold exactly one CERTIFICATE block", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestEnsureFileModes(t *testing.T) {
	t.Parallel()
	dir, _ := ensure(t, devpki.Options{})
	want := map[string]os.FileMode{
		devpki.ConfigFile:   0o600,
		devpki.SignerCAKey:  0o600,
		"tls-ca.key":        0o600,
		"server.key":        0o600,
		devpki.ClientKey:    0o600,
		devpki.SignerCACert: 0o644,
		devpki.TLSCACert:    0o644,
		devpki.ServerCert:   0o644,
		devpki.ClientCert:   0o644,
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(want) {
		t.Errorf("state folder holds %d files, want %d", len(entries), len(want))
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		mode, ok := want[e.Name()]
		switch {
		case !ok:
			t.Errorf("unexpected file %s", e.Name())
		case mode == 0o600 && info.Mode().Perm() != 0o600:
			t.Errorf("%s has mode %v, want 0600", e.Name(), info.Mode().Perm())
		case info.Mode().Perm()&0o022 != 0:
			t.Errorf("%s is writable by others: %v", e.Name(), info.Mode().Perm())
		}
	}
	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o700 {
		t.Errorf("state folder has mode %v, want 0700", info.Mode().Perm())
	}
}

func TestEnsureConfigLoadsAndWorks(t *testing.T) {
	t.Parallel()
	dir, path := ensure(t, devpki.Options{SignerName: "example.com/dev", Address: "127.0.0.1:19443"})
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	if cfg.GRPC.Address != "127.0.0.1:19443" || cfg.GRPC.Reflection {
		t.Errorf("grpc = %+v, want the address asked for and no reflection", cfg.GRPC)
	}
	if len(cfg.Signers) != 1 || cfg.Signers[0].Name != "example.com/dev" {
		t.Fatalf("signers = %+v, want one example.com/dev", cfg.Signers)
	}
	for field, got := range map[string]string{
		"tls.certFile":           cfg.TLS.CertFile,
		"tls.keyFile":            cfg.TLS.KeyFile,
		"tls.clientCAFile":       cfg.TLS.ClientCAFile,
		"signers[0].key":         cfg.Signers[0].Key,
		"signers[0].certificate": cfg.Signers[0].Certificate,
	} {
		if filepath.Dir(got) != dir {
			t.Errorf("%s = %q, want a file in %s", field, got, dir)
		}
		if _, err := os.Stat(got); err != nil {
			t.Errorf("%s: %v", field, err)
		}
	}
	// The signer CA must pass the same load-time checks as signet-server's.
	key, err := keystore.Open(context.Background(), cfg.Signers[0].Key, keystore.Options{})
	if err != nil {
		t.Fatalf("opening signer key: %v", err)
	}
	ca := &issuance.CA{Certificate: readCert(t, cfg.Signers[0].Certificate), Key: key}
	if err := ca.Validate(); err != nil {
		t.Errorf("signer CA does not validate: %v", err)
	}
	if !ca.Certificate.NotBefore.Before(now) || !ca.Certificate.NotAfter.After(now.Add(364*24*time.Hour)) {
		t.Errorf("signer CA valid %s..%s, want about a year from %s", ca.Certificate.NotBefore, ca.Certificate.NotAfter, now)
	}
}

func TestEnsureDefaults(t *testing.T) {
	t.Parallel()
	_, path := ensure(t, devpki.Options{})
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	if cfg.GRPC.Address != config.DefaultGRPCAddress || cfg.Signers[0].Name != devpki.DefaultSigner {
		t.Errorf("address %q, signer %q; want %q and %q", cfg.GRPC.Address, cfg.Signers[0].Name, config.DefaultGRPCAddress, devpki.DefaultSigner)
	}
}

func TestEnsureTwiceChangesNothing(t *testing.T) {
	t.Parallel()
	dir, path := ensure(t, devpki.Options{})
	snapshot := func() map[string][]byte {
		files := map[string][]byte{}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = data
		}
		return files
	}
	before := snapshot()
	again, err := devpki.Ensure(devpki.Options{Dir: dir, SignerName: "example.com/other", Now: now.Add(48 * time.Hour)})
	if err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	if again != path {
		t.Errorf("second Ensure returned %q, want %q", again, path)
	}
	after := snapshot()
	if len(after) != len(before) {
		t.Fatalf("second Ensure changed the file set: %d files, then %d", len(before), len(after))
	}
	for name, data := range before {
		if !bytes.Equal(after[name], data) {
			t.Errorf("second Ensure rewrote %s", name)
		}
	}
}

func TestEnsureTLSCertificates(t *testing.T) {
	t.Parallel()
	dir, _ := ensure(t, devpki.Options{})
	tlsCA := readCert(t, filepath.Join(dir, devpki.TLSCACert))
	signerCA := readCert(t, filepath.Join(dir, devpki.SignerCACert))
	server := readCert(t, filepath.Join(dir, devpki.ServerCert))
	client := readCert(t, filepath.Join(dir, devpki.ClientCert))
	roots := x509.NewCertPool()
	roots.AddCert(tlsCA)
	for _, name := range []string{"localhost", "127.0.0.1"} {
		if _, err := server.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("server certificate not valid for %s under the TLS CA: %v", name, err)
		}
	}
	if !server.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("server IP SANs = %v, want 127.0.0.1 first", server.IPAddresses)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate not valid for client auth under the TLS CA: %v", err)
	}
	if client.Subject.CommonName != devpki.ClientName {
		t.Errorf("client CN = %q, want %q", client.Subject.CommonName, devpki.ClientName)
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("client certificate is also valid as a server certificate")
	}
	signerRoots := x509.NewCertPool()
	signerRoots.AddCert(signerCA)
	if _, err := server.Verify(x509.VerifyOptions{Roots: signerRoots, CurrentTime: now}); err == nil {
		t.Error("server certificate chains to the signer CA; the TLS and signer CAs must be distinct")
	}
}

// TestClientTLSConfig: the dev client configuration presents the client certificate and
// trusts exactly the TLS CA, so it verifies the dev server certificate for localhost.
func TestClientTLSConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := devpki.Ensure(devpki.Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	cfg, err := devpki.ClientTLSConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Certificates) != 1 || cfg.MinVersion != tls.VersionTLS13 {
		t.Fatalf("config has %d certificates, min version %x", len(cfg.Certificates), cfg.MinVersion)
	}
	data, err := os.ReadFile(filepath.Join(dir, devpki.ServerCert))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	server, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.Verify(x509.VerifyOptions{Roots: cfg.RootCAs, DNSName: cfg.ServerName}); err != nil {
		t.Errorf("the dev server certificate does not verify with the client configuration: %v", err)
	}
	if _, err := devpki.ClientTLSConfig(t.TempDir()); err == nil {
		t.Error("ClientTLSConfig of an empty folder succeeded")
	}
}

// TestEnsurePodIdentitySigner: with a pod-identity signer name, the configuration serves it
// second, with the pod-identity profile and a CA of its own (valid for issuing, key file
// private), and leaves the first signer as it is; without one there is none.
func TestEnsurePodIdentitySigner(t *testing.T) {
	t.Parallel()
	dir, path := ensure(t, devpki.Options{PodIdentitySigner: devpki.DefaultPodIdentitySigner})
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	if len(cfg.Signers) != 2 || cfg.Signers[0].Name != devpki.DefaultSigner || cfg.Signers[0].Profile.Name != "custom" {
		t.Fatalf("signers = %+v, want the dev signer first, unchanged", cfg.Signers)
	}
	pod := cfg.Signers[1]
	if pod.Name != devpki.DefaultPodIdentitySigner || pod.Profile.Name != "pod-identity" || pod.Profile.PodIdentity == nil || pod.Profile.PodIdentity.TrustDomain != "cluster.local" {
		t.Fatalf("second signer = %+v, want %s with the pod-identity profile for cluster.local", pod, devpki.DefaultPodIdentitySigner)
	}
	if pod.Key != filepath.Join(dir, devpki.PodIdentityCAKey) || pod.Certificate != filepath.Join(dir, devpki.PodIdentityCACert) {
		t.Errorf("pod-identity CA files %s, %s; want its own files in %s", pod.Key, pod.Certificate, dir)
	}
	key, err := keystore.Open(context.Background(), pod.Key, keystore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ca := &issuance.CA{Certificate: readCert(t, pod.Certificate), Key: key}
	if err := ca.Validate(); err != nil {
		t.Errorf("pod-identity CA does not validate: %v", err)
	}
	if ca.Certificate.Equal(readCert(t, cfg.Signers[0].Certificate)) {
		t.Error("the pod-identity signer shares the dev signer's CA")
	}
	if info, err := os.Stat(pod.Key); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("pod-identity CA key: %v, mode %v; want 0600", err, info.Mode().Perm())
	}

	_, plain := ensure(t, devpki.Options{})
	if cfg, err := config.Load(plain); err != nil || len(cfg.Signers) != 1 {
		t.Errorf("without a pod-identity signer: %v, %d signers; want 1", err, len(cfg.Signers))
	}
	if _, err := devpki.Ensure(devpki.Options{Dir: t.TempDir(), SignerName: "example.com/x", PodIdentitySigner: "example.com/x"}); err == nil {
		t.Error("Ensure accepted the same name for both signers")
	}
}

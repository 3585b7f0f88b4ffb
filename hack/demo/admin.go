package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/keystore/pemfile"
)

// The demo's admin client: a second client certificate from the dev TLS CA, whose identity
// (its CN) may administer the demo signer (signetctl ca status|stage|activate|retire), so that
// the watcher's identity does not have to.
const (
	adminIdentity = "signet-demo-admin"
	adminCert     = "admin.crt"
	adminKey      = "admin.key"
	adminLifetime = 30 * 24 * time.Hour
)

// prepareDevState makes the dev PKI and configuration in state as `signet-server --dev`
// would on its first start (the server then reuses them), and adds the demo's admin client:
// its certificate and key in state (adminCert, adminKey) and a clients entry with admin: true
// for signerName.
func prepareDevState(state, addr string) error {
	cfgPath, err := devpki.Ensure(devpki.Options{Dir: state, SignerName: signerName, PodIdentitySigner: devpki.DefaultPodIdentitySigner, Address: addr})
	if err != nil {
		return err
	}
	if err := issueAdminClient(state); err != nil {
		return fmt.Errorf("making the demo's admin client certificate: %w", err)
	}
	return addAdminClient(cfgPath)
}

// issueAdminClient writes a client certificate for adminIdentity, issued by the dev TLS CA in
// state, and its P-256 key (mode 0600).
func issueAdminClient(state string) error {
	caPEM, err := os.ReadFile(filepath.Join(state, devpki.TLSCACert))
	if err != nil {
		return err
	}
	block, _ := pem.Decode(caPEM)
	if block == nil {
		return fmt.Errorf("no PEM certificate in %s", devpki.TLSCACert)
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("parsing %s: %w", devpki.TLSCACert, err)
	}
	caKeyPEM, err := os.ReadFile(filepath.Join(state, devpki.TLSCAKey))
	if err != nil {
		return err
	}
	caKey, err := pemfile.ParsePrivateKeyPEM(caKeyPEM)
	if err != nil {
		return fmt.Errorf("parsing %s: %w", devpki.TLSCAKey, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	now := time.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: adminIdentity, Organization: []string{"Signet development"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(adminLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, key.Public(), caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(state, adminKey), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(state, adminCert), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// addAdminClient adds adminIdentity to the clients of the server configuration at path, as an
// admin of signerName only.
func addAdminClient(path string) error {
	header := "# Written by signet-server --dev, with hack/demo's admin client (" + adminIdentity + ") added.\n"
	return editServerConfig(path, header, func(cfg map[string]any) error {
		clients, _ := cfg["clients"].([]any)
		for _, c := range clients {
			if m, ok := c.(map[string]any); ok && m["identity"] == adminIdentity {
				return nil
			}
		}
		cfg["clients"] = append(clients, map[string]any{"identity": adminIdentity, "signers": []any{signerName}, "admin": true})
		return nil
	})
}

// editServerConfig reads the server configuration at path as YAML, applies edit, and writes
// it back (0600) under header.
func editServerConfig(path, header string, edit func(cfg map[string]any) error) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the server config: %w", err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("parsing the server config %s: %w", path, err)
	}
	if err := edit(cfg); err != nil {
		return fmt.Errorf("rewriting the server config %s: %w", path, err)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("writing the server config: %w", err)
	}
	if err := os.WriteFile(path, append([]byte(header), out...), 0o600); err != nil {
		return fmt.Errorf("writing the server config: %w", err)
	}
	return nil
}

// Package devpki creates the throwaway PKI behind `signet-server --dev`: a signer CA, a TLS CA,
// a server certificate for localhost and a client certificate, plus a configuration file that
// uses them; optionally a second signer with its own CA that serves PodCertificateRequests. It exists so a newcomer can run Signet with nothing else; never use it for a
// real cluster.
package devpki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/signet-pki/signet/keystore/pemfile"
)

// File names inside the state folder.
const (
	ConfigFile    = "config.yaml"
	SignerCACert  = "signer-ca.crt"
	SignerCAKey   = "signer-ca.key"
	TLSCACert     = "tls-ca.crt"
	TLSCAKey      = "tls-ca.key"
	ServerCert    = "server.crt"
	serverKey     = "server.key"
	ClientCert    = "client.crt"
	ClientKey     = "client.key"
	caLifetime    = 365 * 24 * time.Hour
	leafLifetime  = 90 * 24 * time.Hour
	ClientName    = "signet-watcher"
	DefaultSigner = "signet.dev/dev"
	// PodIdentityCACert and PodIdentityCAKey are the CA of the pod-identity signer.
	PodIdentityCACert = "pod-identity-ca.crt"
	PodIdentityCAKey  = "pod-identity-ca.key"
	// DefaultPodIdentitySigner is the pod-identity signer `signet-server --dev` serves.
	DefaultPodIdentitySigner = "signet.dev/pod-identity"
)

// The configuration file's header and the server's default gRPC address, as server/config
// defines them: devpki writes the file as text and does not import the server's
// configuration; its tests load what Ensure writes with server/config, which keeps them equal.
const (
	configAPIVersion = "signet.dev/v1alpha1"
	configKind       = "ServerConfiguration"
	defaultAddress   = "127.0.0.1:8443"
)

// Options configures Ensure.
type Options struct {
	// Dir is the state folder; it is created with mode 0700.
	Dir string
	// SignerName is the signer served by the generated configuration. Default signet.dev/dev.
	SignerName string
	// PodIdentitySigner, when set, is a second signer of the generated configuration: the
	// pod-identity profile (PodCertificateRequests; SPIFFE IDs in the trust domain
	// cluster.local), with its own CA, so that pod identities and the first signer's
	// certificates do not share a trust anchor. Empty: none (signet-server --dev sets
	// DefaultPodIdentitySigner).
	PodIdentitySigner string
	// Address is the gRPC listen address written into the configuration.
	Address string
	// Now is the issuing time. Default time.Now().
	Now time.Time
}

// Ensure returns the path of the configuration file in opts.Dir, creating the PKI and the file
// first if the folder has no configuration yet. An existing configuration is never changed.
func Ensure(opts Options) (string, error) {
	if opts.SignerName == "" {
		opts.SignerName = DefaultSigner
	}
	if opts.Address == "" {
		opts.Address = defaultAddress
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	if opts.PodIdentitySigner == opts.SignerName {
		return "", fmt.Errorf("creating dev PKI: the pod-identity signer %q must differ from the signer name", opts.PodIdentitySigner)
	}
	cfgPath := filepath.Join(opts.Dir, ConfigFile)
	if _, err := os.Stat(cfgPath); err == nil {
		return cfgPath, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("checking dev state: %w", err)
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return "", fmt.Errorf("creating dev state folder: %w", err)
	}
	if err := create(opts); err != nil {
		return "", fmt.Errorf("creating dev PKI in %s: %w", opts.Dir, err)
	}
	return cfgPath, nil
}

func create(opts Options) error {
	signerCA, err := newCA("Signet dev signer CA ("+opts.SignerName+")", opts.Now)
	if err != nil {
		return err
	}
	tlsCA, err := newCA("Signet dev TLS CA", opts.Now)
	if err != nil {
		return err
	}
	server, err := tlsCA.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "signet-server"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, opts.Now)
	if err != nil {
		return err
	}
	client, err := tlsCA.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: ClientName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, opts.Now)
	if err != nil {
		return err
	}
	pairs := []pairFiles{
		{signerCA, SignerCACert, SignerCAKey},
		{tlsCA, TLSCACert, TLSCAKey},
		{server, ServerCert, serverKey},
		{client, ClientCert, ClientKey},
	}
	cfg := fmt.Sprintf(configTemplate, configAPIVersion, configKind, opts.Address, ServerCert, serverKey, TLSCACert, ClientName, opts.SignerName, SignerCAKey, SignerCACert)
	if opts.PodIdentitySigner != "" {
		podCA, err := newCA("Signet dev pod identity CA ("+opts.PodIdentitySigner+")", opts.Now)
		if err != nil {
			return err
		}
		pairs = append(pairs, pairFiles{podCA, PodIdentityCACert, PodIdentityCAKey})
		cfg += fmt.Sprintf(podSignerTemplate, opts.PodIdentitySigner, PodIdentityCAKey, PodIdentityCACert)
	}
	for _, kp := range pairs {
		if err := kp.pair.write(opts.Dir, kp.cert, kp.key); err != nil {
			return err
		}
	}
	// Written last: its presence marks a complete state folder.
	return writeFile(filepath.Join(opts.Dir, ConfigFile), []byte(cfg), 0o600)
}

// configTemplate is the dev configuration; its verbs are the API version, kind, gRPC address,
// server certificate and key, TLS CA, client identity, signer name, signer key and certificate.
const configTemplate = `# Generated by signet-server --dev. Development only: the keys below are unprotected.
apiVersion: %s
kind: %s
grpc:
  address: %q
tls:
  certFile: %s
  keyFile: %s
  clientCAFile: %s
clients:
  - identity: %s
    signers: ["*"]
ledger:
  dir: ledger
signers:
  - name: %s
    key: %s
    certificate: %s
    profile:
      # A permissive profile for trying Signet: any subject and SAN, leaf usages only,
      # system:masters still refused. Real signers pick a kubernetes.io profile or a
      # custom profile that names exactly what it issues.
      name: custom
      custom:
        subject: {commonNames: ["**"], organizations: ["**"], allowOtherAttributes: true}
        sans: {dns: ["**"], ip: ["0.0.0.0/0", "::/0"], uri: ["spiffe://**", "https://**"], email: ["**@**"]}
        usages:
          allowed: [signing, digital signature, content commitment, key encipherment, key agreement, data encipherment, encipher only, decipher only, any, server auth, client auth, code signing, email protection, s/mime, ipsec end system, ipsec tunnel, ipsec user, timestamping, ocsp signing, microsoft sgc, netscape sgc]
`

// podSignerTemplate appends the pod-identity signer; its verbs are the signer name, key and
// certificate.
const podSignerTemplate = `  - name: %s
    key: %s
    certificate: %s
    profile:
      # PodCertificateRequests only: spiffe://cluster.local/ns/<namespace>/sa/<service account>.
      name: pod-identity
      podIdentity: {trustDomain: cluster.local}
`

// pairFiles is a key pair and the names of its certificate and key files.
type pairFiles struct {
	pair      *keyPair
	cert, key string
}

type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func newCA(cn string, now time.Time) (*keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"Signet development"}},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return sign(tmpl, nil, now, caLifetime)
}

func (ca *keyPair) issue(tmpl *x509.Certificate, now time.Time) (*keyPair, error) {
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	return sign(tmpl, ca, now, leafLifetime)
}

// sign creates a P-256 key and a certificate for it, signed by parent (self-signed if nil).
func sign(tmpl *x509.Certificate, parent *keyPair, now time.Time, lifetime time.Duration) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating serial: %w", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(lifetime)
	issuerCert, issuerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		issuerCert, issuerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuerCert, key.Public(), issuerKey)
	if err != nil {
		return nil, fmt.Errorf("creating certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	return &keyPair{cert: cert, key: key}, nil
}

func (kp *keyPair) write(dir, certName, keyName string) error {
	keyPEM, err := pemfile.MarshalPrivateKeyPEM(kp.key)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, keyName), keyPEM, 0o600); err != nil {
		return err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.cert.Raw})
	return writeFile(filepath.Join(dir, certName), certPEM, 0o644)
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Base(path), err)
	}
	return nil
}

// ClientTLSConfig is the mTLS client configuration for the dev server whose state is in dir:
// the client certificate, the TLS CA as the only root, TLS 1.3, server name "localhost".
func ClientTLSConfig(dir string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, ClientCert), filepath.Join(dir, ClientKey))
	if err != nil {
		return nil, fmt.Errorf("loading the dev client certificate: %w", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, TLSCACert))
	if err != nil {
		return nil, fmt.Errorf("reading the dev TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in %s", filepath.Join(dir, TLSCACert))
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "localhost"}, nil
}

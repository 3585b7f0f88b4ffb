package controlplane

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// certAuthn is the apiserver's client-certificate authenticator (envtest.Authn): a CA of its
// own issues each user's certificate (common name = username, organizations = groups), and
// the apiserver's --client-ca-file holds that CA followed by extra, so that clients whose
// certificates other CAs issue (a kubelet's, signed by Signet) authenticate too. envtest's
// own authenticator trusts its CA only, and lives in an internal package.
type certAuthn struct {
	extra []byte // PEM certificates appended to the client CA bundle

	mu     sync.Mutex
	file   string
	caCert *x509.Certificate
	caKey  crypto.Signer
	serial int64
}

var _ envtest.Authn = (*certAuthn)(nil)

// newCertAuthn creates the authenticator's CA. extra must be PEM certificates (or empty).
func newCertAuthn(extra []byte) (*certAuthn, error) {
	if err := checkExtra(extra); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating client CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "signet-testcluster client CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating client CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing client CA: %w", err)
	}
	return &certAuthn{extra: extra, caCert: cert, caKey: key, serial: 1}, nil
}

// Configure points --client-ca-file at the bundle in workDir.
func (a *certAuthn) Configure(workDir string, args *envtest.Arguments) error {
	a.file = filepath.Join(workDir, "client-ca-bundle.crt")
	args.Set("client-ca-file", a.file)
	return nil
}

// checkExtra refuses extra client CAs that are not PEM certificates (empty is fine).
func checkExtra(extra []byte) error {
	if len(bytes.TrimSpace(extra)) != 0 {
		if block, _ := pem.Decode(extra); block == nil || block.Type != "CERTIFICATE" {
			return errors.New("extra client CAs: not PEM certificates")
		}
	}
	return nil
}

// Start writes the bundle: the authenticator's CA, then the extra CAs.
func (a *certAuthn) Start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.writeLocked()
}

// setExtra replaces the extra CAs and rewrites the bundle in place, as an operator edits a
// running kube-apiserver's --client-ca-file.
func (a *certAuthn) setExtra(extra []byte) error {
	if err := checkExtra(extra); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.extra = extra
	return a.writeLocked()
}

// writeLocked writes the bundle file; a.mu is held.
func (a *certAuthn) writeLocked() error {
	if a.file == "" {
		return errors.New("client CA bundle: Start called before Configure")
	}
	bundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.caCert.Raw})
	bundle = append(bundle, a.extra...)
	if err := os.WriteFile(a.file, bundle, 0o600); err != nil {
		return fmt.Errorf("writing client CA bundle: %w", err)
	}
	return nil
}

// AddUser issues a client certificate for user and returns baseCfg authenticating with it.
func (a *certAuthn) AddUser(user envtest.User, baseCfg *rest.Config) (*rest.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating key for %s: %w", user.Name, err)
	}
	a.mu.Lock()
	a.serial++
	serial := a.serial
	a.mu.Unlock()
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: user.Name, Organization: user.Groups},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     a.caCert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.caCert, key.Public(), a.caKey)
	if err != nil {
		return nil, fmt.Errorf("issuing client certificate for %s: %w", user.Name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding key for %s: %w", user.Name, err)
	}
	cfg := rest.CopyConfig(baseCfg)
	cfg.CertData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	cfg.KeyData = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return cfg, nil
}

// Stop does nothing: the bundle lives in the apiserver's work folder, removed with it.
func (a *certAuthn) Stop() error { return nil }

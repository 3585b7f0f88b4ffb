package tlspki

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/signet-pki/signet/internal/atomicfile"
	"github.com/signet-pki/signet/keystore/pemfile"
)

// Leaf names a leaf certificate of the PKI folder.
type Leaf int

// The leaves Renew renews.
const (
	// Watcher is the watcher's client certificate, issued by the client CA.
	Watcher Leaf = iota
	// Server is the server's certificate, issued by the server CA.
	Server
)

// files are the leaf's certificate and key file names and its CA's.
func (l Leaf) files() (cert, key, caCert, caKey string) {
	if l == Server {
		return ServerCert, ServerKey, ServerCACert, ServerCAKey
	}
	return WatcherCert, WatcherKey, ClientCACert, ClientCAKey
}

// String is "the server's certificate" or "the watcher's client certificate".
func (l Leaf) String() string {
	if l == Server {
		return "the server's certificate"
	}
	return "the watcher's client certificate"
}

// RenewOptions configure Renew.
type RenewOptions struct {
	// Validity is the new certificate's lifetime; 0 keeps the old certificate's.
	Validity time.Duration
	// Now is the issuing time. Default time.Now().
	Now time.Time
}

// Renewal is what Renew did.
type Renewal struct {
	// Old is the replaced certificate.
	Old *x509.Certificate
	// New is the new certificate with its key.
	New *KeyPair
	// CA is the CA that issued New.
	CA *KeyPair
	// Clamped reports that New ends with its CA, before the lifetime asked for.
	Clamped bool
}

// Renew issues leaf again from its CA in dir: a new key of the same algorithm, a new
// serial, the same subject, SANs (and so the same client identity) and extended key usages,
// for opts.Validity (default: the old certificate's lifetime) but never past the CA. It
// replaces the key file, then the certificate file, each atomically. It refuses a folder
// whose old certificate was not issued by the CA there, and an expired CA.
func Renew(dir string, leaf Leaf, opts RenewOptions) (*Renewal, error) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	certName, keyName, caCert, caKey := leaf.files()
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("renewing %s: the PKI folder: %w", leaf, err)
	}
	ca, err := readPair(dir, caCert, caKey)
	if err != nil {
		return nil, fmt.Errorf("renewing %s: %w", leaf, err)
	}
	// The old key is not needed (and may not match if a renewal was interrupted between
	// its two renames): the certificate alone says what to issue again.
	old, err := ReadCertificate(filepath.Join(dir, certName))
	if err != nil {
		return nil, fmt.Errorf("renewing %s: %w", leaf, err)
	}
	if err := old.CheckSignatureFrom(ca.Cert); err != nil {
		return nil, fmt.Errorf("renewing %s: %s was not issued by %s (%v)", leaf, certName, caCert, err)
	}
	alg, err := algorithmOf(old.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("renewing %s: %s: %w", leaf, certName, err)
	}
	validity := opts.Validity
	if validity == 0 {
		validity = old.NotAfter.Sub(old.NotBefore) - backdate
	}
	if validity < MinValidity {
		return nil, fmt.Errorf("renewing %s: validity %s is below the %s minimum", leaf, FormatLifetime(validity), FormatLifetime(MinValidity))
	}
	tmpl := &x509.Certificate{
		RawSubject:  old.RawSubject, // the subject exactly as it was encoded
		Subject:     old.Subject,    // for messages
		DNSNames:    slices.Clone(old.DNSNames),
		IPAddresses: slices.Clone(old.IPAddresses),
		URIs:        slices.Clone(old.URIs),
		ExtKeyUsage: slices.Clone(old.ExtKeyUsage),
	}
	renewed, clamped, err := ca.issue(tmpl, alg, opts.Now, validity)
	if err != nil {
		return nil, fmt.Errorf("renewing %s: %w", leaf, err)
	}
	keyPEM, err := pemfile.MarshalPrivateKeyPEM(renewed.Key)
	if err != nil {
		return nil, fmt.Errorf("renewing %s: %w", leaf, err)
	}
	if err := atomicfile.Write(filepath.Join(dir, keyName), keyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("renewing %s: %w", leaf, err)
	}
	if err := atomicfile.Write(filepath.Join(dir, certName), CertPEM(renewed.Cert), 0o644); err != nil {
		return nil, fmt.Errorf("renewing %s: %w", leaf, err)
	}
	return &Renewal{Old: old, New: renewed, CA: ca, Clamped: clamped}, nil
}

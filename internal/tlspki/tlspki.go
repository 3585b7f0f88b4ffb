// Package tlspki makes the production TLS PKI between signet-server and signet-watcher
// (signetctl pki init) and renews its leaf certificates (signetctl pki renew): two CAs, the
// server's certificate, the watcher's client certificate, and the Kubernetes Secret the
// watcher mounts.
//
// Two CAs, each signing one kind of certificate:
//   - the server CA signs only the server's certificate; it is the watcher's ca.crt, so
//     nothing else it trusts can pose as the server;
//   - the client CA signs only client certificates; it is the server's tls.clientCAFile.
//
// Keeping them apart means the client CA can mint client identities (more watchers, admin
// clients, or a Signet signer that renews the watcher through Signet itself) without ever
// being able to mint a certificate the watcher accepts as the server, whatever its profile
// says; and each CA can be rotated on its own.
//
// Certificates carry random 128-bit serials, subject and authority key identifiers, a
// NotBefore backdated by five minutes for clock skew, and never outlive their CA. Keys are
// new for every certificate; key files are written 0600, every file atomically (a temporary
// file renamed into place).
package tlspki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/signet-pki/signet/keystore/keyerr"
)

// File names inside the PKI folder.
const (
	ServerCACert = "server-ca.crt"
	ServerCAKey  = "server-ca.key"
	ClientCACert = "clients-ca.crt"
	ClientCAKey  = "clients-ca.key"
	ServerCert   = "server.crt"
	ServerKey    = "server.key"
	WatcherCert  = "watcher.crt"
	WatcherKey   = "watcher.key"
	// RecordFile records what pki renew needs besides the certificates: the cluster and the
	// Secret's namespace and name. It holds no secret.
	RecordFile = "signet-pki.yaml"
)

// Defaults of Options.
const (
	// DefaultValidity is the lifetime of the server and client certificates: 90 days, as
	// cert-manager issues by default; the expiry alerts warn 14 days ahead.
	DefaultValidity = 90 * 24 * time.Hour
	// DefaultCAValidity is the lifetime of the CAs: ten years, as kubeadm's CAs and
	// signetctl ca init's roots.
	DefaultCAValidity = 3650 * 24 * time.Hour
	// DefaultAlgorithm is the algorithm of every key.
	DefaultAlgorithm = keyerr.P256
	// DefaultNamespace and DefaultSecretName are where deploy/watcher mounts the Secret from.
	DefaultNamespace  = "signet-system"
	DefaultSecretName = "signet-watcher-tls"
	// DefaultCluster is the watcher's default clusterName.
	DefaultCluster = "default"
	// WatcherCommonName is the common name of the watcher's client certificate; the
	// identity the server reads is its URI SAN.
	WatcherCommonName = "signet-watcher"
	// MinValidity is the shortest lifetime of a leaf certificate.
	MinValidity = time.Hour
	// backdate is how far NotBefore lies before the issuing time, for clock skew (as
	// kube-controller-manager's signer).
	backdate = 5 * time.Minute
)

// Algorithms lists the key algorithms, in the order help texts show them.
var Algorithms = []string{keyerr.P256, keyerr.P384, keyerr.RSA2048, keyerr.RSA3072, keyerr.RSA4096}

// KeyPair is a certificate and its private key.
type KeyPair struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// newKey generates a key of algorithm alg (one of Algorithms).
func newKey(alg string) (crypto.Signer, error) {
	var (
		key crypto.Signer
		err error
	)
	switch alg {
	case keyerr.P256:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case keyerr.P384:
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case keyerr.RSA2048:
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case keyerr.RSA3072:
		key, err = rsa.GenerateKey(rand.Reader, 3072)
	case keyerr.RSA4096:
		key, err = rsa.GenerateKey(rand.Reader, 4096)
	default:
		return nil, fmt.Errorf("generating key: unknown algorithm %q (want one of %s)", alg, strings.Join(Algorithms, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("generating %s key: %w", alg, err)
	}
	return key, nil
}

// algorithmOf names the algorithm of pub as Algorithms does.
func algorithmOf(pub crypto.PublicKey) (string, error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return keyerr.P256, nil
		case elliptic.P384():
			return keyerr.P384, nil
		}
	case *rsa.PublicKey:
		switch k.N.BitLen() {
		case 2048:
			return keyerr.RSA2048, nil
		case 3072:
			return keyerr.RSA3072, nil
		case 4096:
			return keyerr.RSA4096, nil
		}
	}
	return "", fmt.Errorf("unsupported public key %T", pub)
}

// leafKeyUsage is the key usage of a leaf with key: digital signature, and key encipherment
// for RSA (TLS 1.2 RSA key exchange), as cert-manager sets by default.
func leafKeyUsage(key crypto.Signer) x509.KeyUsage {
	if _, ok := key.Public().(*rsa.PublicKey); ok {
		return x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	}
	return x509.KeyUsageDigitalSignature
}

// newCA makes a self-signed CA named cn with a new alg key, valid for validity from now:
// CA:TRUE, path length 0 (it signs leaves only), certificate and CRL signing.
func newCA(cn, alg string, now time.Time, validity time.Duration) (*KeyPair, error) {
	key, err := newKey(alg)
	if err != nil {
		return nil, fmt.Errorf("making CA %q: %w", cn, err)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"Signet"}},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return sign(tmpl, key, nil, now, now.Add(validity))
}

// issue signs a leaf from tmpl (subject, SANs, extended key usage) for a new alg key, valid
// from now for validity but never past the CA's NotAfter; clamped reports a shortened
// lifetime.
func (ca *KeyPair) issue(tmpl *x509.Certificate, alg string, now time.Time, validity time.Duration) (kp *KeyPair, clamped bool, err error) {
	key, err := newKey(alg)
	if err != nil {
		return nil, false, err
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter, clamped = ca.Cert.NotAfter, true
	}
	if !notAfter.After(now) {
		return nil, false, fmt.Errorf("the CA %q expired at %s", ca.Cert.Subject.CommonName, ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	tmpl.KeyUsage = leafKeyUsage(key)
	tmpl.BasicConstraintsValid = true
	tmpl.IsCA = false
	kp, err = sign(tmpl, key, ca, now, notAfter)
	return kp, clamped, err
}

// sign completes tmpl (serial, validity, subject key identifier) and signs it for key's
// public key with parent, or self-signed when parent is nil. The result is parsed back and
// its signature checked.
func sign(tmpl *x509.Certificate, key crypto.Signer, parent *KeyPair, now, notAfter time.Time) (*KeyPair, error) {
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	skid, err := subjectKeyID(key.Public())
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.SubjectKeyId = skid
	tmpl.NotBefore = now.Add(-backdate).UTC().Truncate(time.Second)
	tmpl.NotAfter = notAfter.UTC().Truncate(time.Second)
	issuerCert, issuerKey := tmpl, key
	if parent != nil {
		issuerCert, issuerKey = parent.Cert, parent.Key
		tmpl.AuthorityKeyId = parent.Cert.SubjectKeyId
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuerCert, key.Public(), issuerKey)
	if err != nil {
		return nil, fmt.Errorf("signing certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	signer := cert
	if parent != nil {
		signer = parent.Cert
	}
	if err := cert.CheckSignatureFrom(signer); err != nil {
		return nil, fmt.Errorf("checking certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// newSerial is a random positive serial number below 2^128.
func newSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("generating serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

// subjectKeyID is the subject key identifier of pub by RFC 7093 method 1: the leftmost 160
// bits of the SHA-256 hash of the subjectPublicKey bit string.
func subjectKeyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encoding public key: %w", err)
	}
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(der, &spki); err != nil {
		return nil, fmt.Errorf("decoding public key: %w", err)
	}
	sum := sha256.Sum256(spki.PublicKey.Bytes)
	return sum[:20], nil
}

// serverTemplate is the server certificate for names and ips: the first name as common
// name, every name and address as SAN, server auth only.
func serverTemplate(names []string, ips []net.IP) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: names[0]},
		DNSNames:    names,
		IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
}

// watcherTemplate is the watcher's client certificate: common name WatcherCommonName, the
// identity as its only URI SAN (what access.Identity reads), client auth only.
func watcherTemplate(identity *url.URL) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: WatcherCommonName},
		URIs:        []*url.URL{identity},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

// ErrExist is returned by Write for files that exist when overwriting is not allowed.
var ErrExist = errors.New("files exist")

// Package cacert makes the certificates of a CA whose key lives in an HSM or TPM: a
// self-signed root (signetctl ca init) or a certificate request for an intermediate that an
// offline root signs (signetctl ca csr). The key only ever signs; it is never read.
package cacert

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// Options describe the CA certificate.
type Options struct {
	// Subject is the CA's distinguished name.
	Subject pkix.Name
	// Lifetime is how long a root is valid, from now (backdated by a minute for clock skew).
	Lifetime time.Duration
	// MaxPathLen is the number of intermediate CAs allowed below this one: 0 (the default)
	// for a CA that signs leaves only, as a signer's CA does.
	MaxPathLen int
}

// SelfSigned makes a self-signed root CA certificate for key, signed by key: CA:TRUE with
// the path length of opts, key usage certificate and CRL signing (and digital signature),
// a random 128-bit serial, and the subject key identifier Go derives from the public key.
// The signature is checked against the public key before the certificate is returned, so a
// faulty device cannot produce a root that does not verify.
func SelfSigned(key crypto.Signer, opts Options) (*x509.Certificate, error) {
	if opts.Lifetime <= 0 {
		return nil, errors.New("making a root CA certificate: the lifetime must be positive")
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("making a root CA certificate: serial: %w", err)
	}
	now := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               opts.Subject,
		NotBefore:             now,
		NotAfter:              now.Add(opts.Lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            opts.MaxPathLen,
		MaxPathLenZero:        opts.MaxPathLen == 0,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("making a root CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("making a root CA certificate: %w", err)
	}
	if err := cert.CheckSignatureFrom(cert); err != nil {
		return nil, fmt.Errorf("making a root CA certificate: the key's signature does not verify: %w", err)
	}
	return cert, nil
}

// Request makes a PKCS #10 request, signed by key, for an intermediate CA certificate with
// opts.Subject; the offline root that signs it sets the CA extensions.
func Request(key crypto.Signer, opts Options) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: opts.Subject}, key)
	if err != nil {
		return nil, fmt.Errorf("making a CA certificate request: %w", err)
	}
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return nil, fmt.Errorf("making a CA certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("making a CA certificate request: the key's signature does not verify: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// ParseSubject parses a distinguished name written as comma-separated attribute=value pairs,
// most significant last or first as the operator likes: CN, O, OU, C, ST, L (case
// insensitive), for example "CN=Kubernetes CA,O=Example". A comma inside a value is written
// "\,". At least CN is required.
func ParseSubject(s string) (pkix.Name, error) {
	var n pkix.Name
	for _, part := range splitEscaped(s) {
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || v == "" {
			return pkix.Name{}, fmt.Errorf("subject %q: %q is not attribute=value", s, part)
		}
		switch strings.ToUpper(k) {
		case "CN":
			if n.CommonName != "" {
				return pkix.Name{}, fmt.Errorf("subject %q: CN is given twice", s)
			}
			n.CommonName = v
		case "O":
			n.Organization = append(n.Organization, v)
		case "OU":
			n.OrganizationalUnit = append(n.OrganizationalUnit, v)
		case "C":
			n.Country = append(n.Country, v)
		case "ST":
			n.Province = append(n.Province, v)
		case "L":
			n.Locality = append(n.Locality, v)
		default:
			return pkix.Name{}, fmt.Errorf("subject %q: unknown attribute %q (want CN, O, OU, C, ST or L)", s, k)
		}
	}
	if n.CommonName == "" {
		return pkix.Name{}, fmt.Errorf("subject %q: CN is required", s)
	}
	return n, nil
}

// splitEscaped splits s at commas not preceded by a backslash, and unescapes "\,".
func splitEscaped(s string) []string {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == ',':
			cur.WriteByte(',')
			i++
		case s[i] == ',':
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(s[i])
		}
	}
	return append(parts, cur.String())
}

// Package certinfo describes X.509 certificates for people: the fields an operator checks
// first (subject, SANs, validity, issuer, key, usages), one per line.
package certinfo

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"io"
	"strings"
	"time"
)

var keyUsageNames = []struct {
	bit  x509.KeyUsage
	name string
}{
	{x509.KeyUsageDigitalSignature, "digital signature"},
	{x509.KeyUsageContentCommitment, "content commitment"},
	{x509.KeyUsageKeyEncipherment, "key encipherment"},
	{x509.KeyUsageDataEncipherment, "data encipherment"},
	{x509.KeyUsageKeyAgreement, "key agreement"},
	{x509.KeyUsageCertSign, "cert sign"},
	{x509.KeyUsageCRLSign, "crl sign"},
	{x509.KeyUsageEncipherOnly, "encipher only"},
	{x509.KeyUsageDecipherOnly, "decipher only"},
}

var extKeyUsageNames = map[x509.ExtKeyUsage]string{
	x509.ExtKeyUsageAny:             "any",
	x509.ExtKeyUsageServerAuth:      "server auth",
	x509.ExtKeyUsageClientAuth:      "client auth",
	x509.ExtKeyUsageCodeSigning:     "code signing",
	x509.ExtKeyUsageEmailProtection: "email protection",
	x509.ExtKeyUsageIPSECEndSystem:  "ipsec end system",
	x509.ExtKeyUsageIPSECTunnel:     "ipsec tunnel",
	x509.ExtKeyUsageIPSECUser:       "ipsec user",
	x509.ExtKeyUsageTimeStamping:    "timestamping",
	x509.ExtKeyUsageOCSPSigning:     "ocsp signing",
}

// Write prints a description of cert to w, each line indented by indent.
func Write(w io.Writer, cert *x509.Certificate, indent string) {
	line := func(label, value string) {
		if value != "" {
			fmt.Fprintf(w, "%s%-11s %s\n", indent, label+":", value)
		}
	}
	line("Subject", cert.Subject.String())
	line("Issuer", cert.Issuer.String())
	line("Serial", fmt.Sprintf("%x (%d bits)", cert.SerialNumber, cert.SerialNumber.BitLen()))
	line("SANs", strings.Join(SANs(cert), ", "))
	line("Valid", fmt.Sprintf("%s → %s (%s)", cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339), cert.NotAfter.Sub(cert.NotBefore)))
	line("Key", KeyDescription(cert.PublicKey))
	line("Key usage", strings.Join(KeyUsages(cert.KeyUsage), ", "))
	line("Ext usage", strings.Join(ExtKeyUsages(cert.ExtKeyUsage), ", "))
	line("CA", fmt.Sprintf("%t", cert.IsCA))
}

// SANs lists the subject alternative names of cert, each prefixed with its type.
func SANs(cert *x509.Certificate) []string {
	var out []string
	for _, d := range cert.DNSNames {
		out = append(out, "DNS:"+d)
	}
	for _, ip := range cert.IPAddresses {
		out = append(out, "IP:"+ip.String())
	}
	for _, u := range cert.URIs {
		out = append(out, "URI:"+u.String())
	}
	for _, e := range cert.EmailAddresses {
		out = append(out, "email:"+e)
	}
	return out
}

// KeyDescription names a public key's type and size, e.g. "ECDSA P-256" or "RSA 2048".
func KeyDescription(pub any) string {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		return "ECDSA " + k.Curve.Params().Name
	case *rsa.PublicKey:
		return fmt.Sprintf("RSA %d", k.N.BitLen())
	case ed25519.PublicKey:
		return "Ed25519"
	default:
		return fmt.Sprintf("%T", pub)
	}
}

// KeyUsages names the key usage bits set in ku, in the certificates.k8s.io/v1 spelling.
func KeyUsages(ku x509.KeyUsage) []string {
	var out []string
	for _, n := range keyUsageNames {
		if ku&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// ExtKeyUsages names the extended key usages in the certificates.k8s.io/v1 spelling, in their
// order; an unknown one as "ext key usage <n>".
func ExtKeyUsages(ekus []x509.ExtKeyUsage) []string {
	var out []string
	for _, e := range ekus {
		if n, ok := extKeyUsageNames[e]; ok {
			out = append(out, n)
		} else {
			out = append(out, fmt.Sprintf("ext key usage %d", e))
		}
	}
	return out
}

package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // a SHA-1 fingerprint is what many tools still print, to compare with them
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/signet-pki/signet/internal/certinfo"
)

// The kinds of object inspect describes.
const (
	kindCertificate = "certificate"
	kindRequest     = "certificateRequest"
)

// described is one certificate or certificate request as inspect describes it (-o json|yaml).
type described struct {
	Kind               string         `json:"kind"`
	Source             string         `json:"source"`
	Index              int            `json:"index"`
	Subject            string         `json:"subject"`
	Issuer             string         `json:"issuer,omitempty"`
	SerialNumber       string         `json:"serialNumber,omitempty"`
	SANs               []string       `json:"sans,omitempty"`
	Key                keyDetails     `json:"key"`
	KeyUsages          []string       `json:"keyUsages,omitempty"`
	ExtKeyUsages       []string       `json:"extKeyUsages,omitempty"`
	IsCA               bool           `json:"isCA"`
	MaxPathLen         *int           `json:"maxPathLen,omitempty"`
	NotBefore          *time.Time     `json:"notBefore,omitempty"`
	NotAfter           *time.Time     `json:"notAfter,omitempty"`
	Lifetime           string         `json:"lifetime,omitempty"`
	Validity           string         `json:"validity,omitempty"`
	SignatureAlgorithm string         `json:"signatureAlgorithm"`
	SignatureValid     *bool          `json:"signatureValid,omitempty"`
	SubjectKeyID       string         `json:"subjectKeyID,omitempty"`
	AuthorityKeyID     string         `json:"authorityKeyID,omitempty"`
	SelfSigned         bool           `json:"selfSigned,omitempty"`
	SignedByNext       *bool          `json:"signedByNext,omitempty"`
	Fingerprints       fingerprintSet `json:"fingerprints"`
}

// keyDetails is a public key's type and size.
type keyDetails struct {
	Type        string `json:"type"`
	Bits        int    `json:"bits,omitempty"`
	Description string `json:"description"`
}

// fingerprintSet is the SHA-256 and SHA-1 of the DER, lower-case hex.
type fingerprintSet struct {
	SHA256 string `json:"sha256"`
	SHA1   string `json:"sha1"`
}

// inspectCommand is "signetctl inspect".
func inspectCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inspect FILE|- ...",
		Short: "Describe a certificate, a chain or a certificate request (PEM or DER)",
		Long: `Describes the certificates and certificate requests in each FILE ("-" reads stdin), PEM or DER:
subject, issuer, serial number, SANs, key type and size, key usages, CA bit, validity, signature,
key identifiers and SHA-256 and SHA-1 fingerprints. In a chain, each certificate's signature is
checked against the next one's key; a request's signature (its proof of possession) is checked.
Other PEM blocks (a private key) are named and never printed.

` + exitCodesHelp,
		Example: `  signetctl inspect /etc/signet/kube-ca.crt
  kubectl get csr my-csr -o jsonpath='{.status.certificate}' | base64 -d | signetctl inspect -
  signetctl inspect request.csr -o json`,
		Args: cobra.MinimumNArgs(1),
	}
	out := addOutputFlag(cmd, "one object per certificate or request")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		now := time.Now()
		var all []described
		var notes []string
		for _, name := range args {
			data, source, err := readInput(name, cmd.InOrStdin())
			if err != nil {
				return inputError("%v", err)
			}
			ds, skipped, err := describeData(data, source, now)
			if err != nil {
				return inputError("%v", err)
			}
			all = append(all, ds...)
			notes = append(notes, skipped...)
		}
		w := cmd.OutOrStdout()
		if !out.text() {
			return out.print(w, all)
		}
		for i, d := range all {
			if i > 0 {
				fmt.Fprintln(w)
			}
			writeDescribed(w, d)
		}
		for _, n := range notes {
			fmt.Fprintf(cmd.ErrOrStderr(), "note: %s\n", n)
		}
		return nil
	}
	return cmd
}

// readInput reads the file name, or in for "-"; it returns the data and the name to show.
func readInput(name string, in io.Reader) ([]byte, string, error) {
	if name == "-" {
		data, err := io.ReadAll(in)
		if err != nil {
			return nil, "", fmt.Errorf("reading stdin: %w", err)
		}
		return data, "stdin", nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, "", err
	}
	return data, name, nil
}

// describeData describes every certificate and request in data (PEM blocks, else DER), and
// names the PEM blocks it skipped.
func describeData(data []byte, source string, now time.Time) ([]described, []string, error) {
	var (
		certs   []*x509.Certificate
		reqs    []*x509.CertificateRequest
		skipped []string
	)
	if bytes.Contains(data, []byte("-----BEGIN ")) {
		rest := data
		for n := 1; ; n++ {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			switch block.Type {
			case "CERTIFICATE", "TRUSTED CERTIFICATE":
				c, err := x509.ParseCertificate(block.Bytes)
				if err != nil {
					return nil, nil, fmt.Errorf("%s: PEM block %d: %w", source, n, err)
				}
				certs = append(certs, c)
			case "CERTIFICATE REQUEST", "NEW CERTIFICATE REQUEST":
				r, err := x509.ParseCertificateRequest(block.Bytes)
				if err != nil {
					return nil, nil, fmt.Errorf("%s: PEM block %d: %w", source, n, err)
				}
				reqs = append(reqs, r)
			default:
				skipped = append(skipped, fmt.Sprintf("%s: PEM block %d is a %s, not shown", source, n, block.Type))
			}
		}
	} else if cs, err := x509.ParseCertificates(data); err == nil && len(cs) > 0 {
		certs = cs
	} else if r, rerr := x509.ParseCertificateRequest(data); rerr == nil {
		reqs = append(reqs, r)
	} else {
		return nil, nil, fmt.Errorf("%s holds no PEM block and is neither a DER certificate (%v) nor a DER certificate request (%v)", source, err, rerr)
	}
	if len(certs)+len(reqs) == 0 {
		return nil, skipped, fmt.Errorf("%s holds no certificate or certificate request", source)
	}
	var out []described
	for i, c := range certs {
		d := describeCert(c, now)
		d.Source, d.Index = source, len(out)+1
		if i+1 < len(certs) {
			ok := c.CheckSignatureFrom(certs[i+1]) == nil
			d.SignedByNext = &ok
		}
		out = append(out, d)
	}
	for _, r := range reqs {
		d := describeRequest(r)
		d.Source, d.Index = source, len(out)+1
		out = append(out, d)
	}
	return out, skipped, nil
}

// describeCert describes a certificate; now decides its validity.
func describeCert(c *x509.Certificate, now time.Time) described {
	d := described{
		Kind:               kindCertificate,
		Subject:            c.Subject.String(),
		Issuer:             c.Issuer.String(),
		SerialNumber:       hex.EncodeToString(c.SerialNumber.Bytes()), // as the server records it
		SANs:               certinfo.SANs(c),
		Key:                describeKey(c.PublicKey),
		KeyUsages:          certinfo.KeyUsages(c.KeyUsage),
		ExtKeyUsages:       certinfo.ExtKeyUsages(c.ExtKeyUsage),
		IsCA:               c.IsCA,
		NotBefore:          new(c.NotBefore.UTC()),
		NotAfter:           new(c.NotAfter.UTC()),
		Lifetime:           c.NotAfter.Sub(c.NotBefore).String(),
		SignatureAlgorithm: c.SignatureAlgorithm.String(),
		SubjectKeyID:       fmt.Sprintf("%x", c.SubjectKeyId),
		AuthorityKeyID:     fmt.Sprintf("%x", c.AuthorityKeyId),
		Fingerprints:       fingerprints(c.Raw),
	}
	if c.IsCA && c.BasicConstraintsValid && (c.MaxPathLen > 0 || c.MaxPathLenZero) {
		d.MaxPathLen = new(c.MaxPathLen)
	}
	switch {
	case now.Before(c.NotBefore):
		d.Validity = "not yet valid: starts in " + c.NotBefore.Sub(now).Round(time.Second).String()
	case now.After(c.NotAfter):
		d.Validity = "expired " + now.Sub(c.NotAfter).Round(time.Second).String() + " ago"
	default:
		d.Validity = "valid, " + c.NotAfter.Sub(now).Round(time.Second).String() + " left"
	}
	if bytes.Equal(c.RawSubject, c.RawIssuer) && c.CheckSignatureFrom(c) == nil {
		d.SelfSigned = true
	}
	return d
}

// describeRequest describes a certificate request and checks its signature.
func describeRequest(r *x509.CertificateRequest) described {
	valid := r.CheckSignature() == nil
	d := described{
		Kind:               kindRequest,
		Subject:            r.Subject.String(),
		Key:                describeKey(r.PublicKey),
		SignatureAlgorithm: r.SignatureAlgorithm.String(),
		SignatureValid:     &valid,
		Fingerprints:       fingerprints(r.Raw),
	}
	// The SANs of a request, in the same spelling as a certificate's.
	d.SANs = certinfo.SANs(&x509.Certificate{DNSNames: r.DNSNames, IPAddresses: r.IPAddresses, URIs: r.URIs, EmailAddresses: r.EmailAddresses})
	return d
}

// describeKey names a public key's type and size.
func describeKey(pub any) keyDetails {
	k := keyDetails{Description: certinfo.KeyDescription(pub)}
	switch p := pub.(type) {
	case *ecdsa.PublicKey:
		k.Type, k.Bits = "ECDSA", p.Curve.Params().BitSize
	case *rsa.PublicKey:
		k.Type, k.Bits = "RSA", p.N.BitLen()
	case ed25519.PublicKey:
		k.Type, k.Bits = "Ed25519", 256
	default:
		k.Type = "unknown"
	}
	return k
}

// fingerprints hashes der.
func fingerprints(der []byte) fingerprintSet {
	s256 := sha256.Sum256(der)
	s1 := sha1.Sum(der) //nolint:gosec // see the import
	return fingerprintSet{SHA256: fmt.Sprintf("%x", s256), SHA1: fmt.Sprintf("%x", s1)}
}

// colonHex writes lower-case hex as upper-case pairs joined by colons, as openssl prints
// fingerprints.
func colonHex(h string) string {
	var parts []string
	for i := 0; i+1 < len(h); i += 2 {
		parts = append(parts, strings.ToUpper(h[i:i+2]))
	}
	return strings.Join(parts, ":")
}

// writeDescribed prints d for people, one labelled line per field that is set.
func writeDescribed(w io.Writer, d described) {
	what := "certificate"
	if d.Kind == kindRequest {
		what = "certificate request"
	}
	fmt.Fprintf(w, "%s %d (%s)\n", what, d.Index, d.Source)
	line := func(label, value string) {
		if value != "" {
			fmt.Fprintf(w, "  %-14s %s\n", label+":", value)
		}
	}
	line("Subject", d.Subject)
	line("Issuer", d.Issuer)
	line("Serial", d.SerialNumber)
	line("SANs", strings.Join(d.SANs, ", "))
	line("Key", d.Key.Description)
	line("Key usage", strings.Join(d.KeyUsages, ", "))
	line("Ext usage", strings.Join(d.ExtKeyUsages, ", "))
	if d.Kind == kindCertificate {
		ca := fmt.Sprint(d.IsCA)
		if d.MaxPathLen != nil {
			ca += fmt.Sprintf(", path length %d", *d.MaxPathLen)
		}
		line("CA", ca)
		line("Valid", fmt.Sprintf("%s → %s (%s); %s", d.NotBefore.Format(time.RFC3339), d.NotAfter.Format(time.RFC3339), d.Lifetime, d.Validity))
	}
	sig := d.SignatureAlgorithm
	switch {
	case d.SignatureValid != nil && *d.SignatureValid:
		sig += ", valid (proof of possession)"
	case d.SignatureValid != nil:
		sig += ", INVALID: the request was not signed by its key"
	case d.SelfSigned:
		sig += ", self-signed"
	}
	line("Signature", sig)
	if d.SignedByNext != nil {
		if *d.SignedByNext {
			line("Signed by", fmt.Sprintf("certificate %d, the next in this file (signature verified)", d.Index+1))
		} else {
			line("Signed by", fmt.Sprintf("NOT certificate %d, the next in this file: the chain is out of order or broken", d.Index+1))
		}
	}
	line("Subject key", colonHex(d.SubjectKeyID))
	line("Authority key", colonHex(d.AuthorityKeyID))
	line("SHA-256", colonHex(d.Fingerprints.SHA256))
	line("SHA-1", colonHex(d.Fingerprints.SHA1))
}

package issuance_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/issuance"
)

func TestIssueUsages(t *testing.T) {
	t.Parallel()
	is := newIssuer(t, caOf(testpki.CA(t)), time.Hour)
	tests := []struct {
		usages  []string
		wantKU  x509.KeyUsage
		wantEKU []x509.ExtKeyUsage
	}{
		{[]string{"digital signature", "key encipherment", "server auth"}, x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		{[]string{"signing", "client auth"}, x509.KeyUsageDigitalSignature, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		{[]string{"client auth", "server auth"}, 0, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		{[]string{"digital signature"}, x509.KeyUsageDigitalSignature, nil},
		{[]string{"content commitment", "key agreement", "data encipherment", "encipher only", "decipher only"},
			x509.KeyUsageContentCommitment | x509.KeyUsageKeyAgreement | x509.KeyUsageDataEncipherment | x509.KeyUsageEncipherOnly | x509.KeyUsageDecipherOnly, nil},
		{[]string{"any"}, 0, []x509.ExtKeyUsage{x509.ExtKeyUsageAny}},
		{[]string{"s/mime", "email protection", "email protection"}, 0, []x509.ExtKeyUsage{x509.ExtKeyUsageEmailProtection}},
		{[]string{"code signing", "timestamping", "ocsp signing"}, 0, []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning, x509.ExtKeyUsageTimeStamping, x509.ExtKeyUsageOCSPSigning}},
		{[]string{"ipsec end system", "ipsec tunnel", "ipsec user"}, 0, []x509.ExtKeyUsage{x509.ExtKeyUsageIPSECEndSystem, x509.ExtKeyUsageIPSECTunnel, x509.ExtKeyUsageIPSECUser}},
		{[]string{"microsoft sgc", "netscape sgc"}, 0, []x509.ExtKeyUsage{x509.ExtKeyUsageMicrosoftServerGatedCrypto, x509.ExtKeyUsageNetscapeServerGatedCrypto}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.usages, ","), func(t *testing.T) {
			t.Parallel()
			cert, err := is.Issue(request(testpki.CSR(t, testpki.Key(t, testpki.P256), nil), tt.usages...))
			if err != nil {
				t.Fatalf("Issue: %v", err)
			}
			if cert.Leaf.KeyUsage != tt.wantKU {
				t.Errorf("key usage = %b, want %b", cert.Leaf.KeyUsage, tt.wantKU)
			}
			got := slices.Sorted(slices.Values(cert.Leaf.ExtKeyUsage))
			want := slices.Sorted(slices.Values(tt.wantEKU))
			if !slices.Equal(got, want) {
				t.Errorf("extended key usage = %v, want %v", got, want)
			}
			if len(cert.Leaf.UnknownExtKeyUsage) != 0 {
				t.Errorf("unexpected extended key usages %v", cert.Leaf.UnknownExtKeyUsage)
			}
		})
	}
}

func TestIssueRefusals(t *testing.T) {
	t.Parallel()
	is := newIssuer(t, caOf(testpki.CA(t)), time.Hour)
	key := testpki.Key(t, testpki.P256)
	plain := testpki.CSR(t, key, nil)
	badBC := testpki.CSR(t, key, &x509.CertificateRequest{
		ExtraExtensions: []pkix.Extension{{Id: testpki.OIDBasicConstraints, Value: []byte{0x04, 0x00}}},
	})
	tests := []struct {
		name    string
		req     issuance.Request
		want    error
		wantMsg string
	}{
		{"no usages", request(plain), issuance.ErrPolicyViolation, "no usages"},
		{"unknown usage", request(plain, "digital signature", "teleportation"), issuance.ErrPolicyViolation, `unknown usage "teleportation"`},
		{"usage in the wrong case", request(plain, "Server Auth"), issuance.ErrPolicyViolation, `unknown usage "Server Auth"`},
		{"cert sign", request(plain, "digital signature", "cert sign"), issuance.ErrPolicyViolation, `"cert sign" is reserved for CA certificates`},
		{"crl sign", request(plain, "crl sign"), issuance.ErrPolicyViolation, `"crl sign" is reserved for CA certificates`},
		{"asks for CA:TRUE", request(testpki.CARequestCSR(t, key), "digital signature"), issuance.ErrPolicyViolation, "CA:TRUE"},
		{"unparsable basic constraints", request(badBC, "digital signature"), issuance.ErrMalformedRequest, "basic constraints"},
		{"another signer", issuance.Request{SignerName: "example.com/other", PEM: plain, Usages: []string{"digital signature"}}, issuance.ErrPolicyViolation, `"example.com/other"`},
		{"weak key", request(testpki.CSR(t, testpki.Key(t, testpki.RSA1024), nil), "digital signature"), issuance.ErrUnsupportedKey, "1024 bits"},
		{"broken signature", request(testpki.BreakSignature(t, plain), "digital signature"), issuance.ErrInvalidSignature, "signature"},
		{"not PEM", request([]byte("hello"), "digital signature"), issuance.ErrMalformedRequest, "no PEM block"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cert, err := is.Issue(tt.req)
			if cert != nil {
				t.Errorf("Issue returned a certificate with error %v", err)
			}
			wantSentinel(t, err, tt.want)
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tt.wantMsg)
			}
		})
	}
}

// TestIssueAcceptsExplicitCAFalse: a request that carries basic constraints with CA:FALSE
// asks for nothing the signer refuses.
func TestIssueAcceptsExplicitCAFalse(t *testing.T) {
	t.Parallel()
	is := newIssuer(t, caOf(testpki.CA(t)), time.Hour)
	value, err := asn1.Marshal(struct{}{}) // CA:FALSE is the DER default, so the sequence is empty
	if err != nil {
		t.Fatal(err)
	}
	csrPEM := testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{
		ExtraExtensions: []pkix.Extension{{Id: testpki.OIDBasicConstraints, Critical: true, Value: value}},
	})
	cert, err := is.Issue(request(csrPEM, "digital signature"))
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	if cert.Leaf.IsCA {
		t.Error("leaf is a CA")
	}
}

package testpki_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"strconv"
	"testing"

	"github.com/signet-pki/signet/internal/testpki"
)

func TestKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kt   testpki.KeyType
		want string // curve name or RSA bit size
	}{
		{testpki.P224, "P-224"}, {testpki.P256, "P-256"}, {testpki.P384, "P-384"}, {testpki.P521, "P-521"},
		{testpki.Ed25519, "Ed25519"}, {testpki.RSA1024, "1024"}, {testpki.RSA2048, "2048"}, {testpki.RSA3072, "3072"},
	}
	for _, tt := range tests {
		t.Run(string(tt.kt), func(t *testing.T) {
			t.Parallel()
			var got string
			switch k := testpki.Key(t, tt.kt).(type) {
			case *ecdsa.PrivateKey:
				got = k.Curve.Params().Name
			case ed25519.PrivateKey:
				got = "Ed25519"
			case *rsa.PrivateKey:
				got = strconv.Itoa(k.N.BitLen())
			}
			if got != tt.want {
				t.Errorf("Key(%s) is %s", tt.kt, got)
			}
		})
	}
	if testpki.Key(t, testpki.RSA2048) != testpki.Key(t, testpki.RSA2048) {
		t.Error("RSA keys are not memoized")
	}
	if testpki.Key(t, testpki.P256).(*ecdsa.PrivateKey).Equal(testpki.Key(t, testpki.P256)) {
		t.Error("ECDSA keys are shared; they should be fresh")
	}
}

func parseCSR(t *testing.T, data []byte) *x509.CertificateRequest {
	t.Helper()
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" || len(rest) != 0 {
		t.Fatalf("not a single CERTIFICATE REQUEST block: %q", data)
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return csr
}

func TestCSRs(t *testing.T) {
	t.Parallel()
	key := testpki.Key(t, testpki.P256)
	plain := parseCSR(t, testpki.CSR(t, key, nil))
	if err := plain.CheckSignature(); err != nil || plain.Subject.CommonName != "testpki-leaf" {
		t.Errorf("CSR: signature %v, CN %q", err, plain.Subject.CommonName)
	}
	wantsCA := parseCSR(t, testpki.CARequestCSR(t, key))
	var found bool
	for _, ext := range wantsCA.Extensions {
		var bc struct{ IsCA bool }
		if ext.Id.Equal(testpki.OIDBasicConstraints) {
			_, err := asn1.Unmarshal(ext.Value, &bc)
			found = err == nil && bc.IsCA && ext.Critical
		}
	}
	if !found {
		t.Error("CARequestCSR has no critical basic constraints extension with CA:TRUE")
	}
	broken := parseCSR(t, testpki.BreakSignature(t, testpki.CSR(t, testpki.Key(t, testpki.Ed25519), nil)))
	if broken.CheckSignature() == nil {
		t.Error("BreakSignature left a valid signature")
	}
}

func TestCA(t *testing.T) {
	t.Parallel()
	root := testpki.CA(t)
	sub := root.SubCA(t, func(c *x509.Certificate) { c.MaxPathLenZero = true })
	if !root.Cert.IsCA || root.Cert.KeyUsage&x509.KeyUsageCertSign == 0 || len(root.Cert.SubjectKeyId) == 0 {
		t.Errorf("CA: IsCA=%t KeyUsage=%b SKI=%x", root.Cert.IsCA, root.Cert.KeyUsage, root.Cert.SubjectKeyId)
	}
	if !root.Cert.NotBefore.Equal(testpki.NotBefore) || !root.Cert.NotAfter.Equal(testpki.NotAfter) {
		t.Errorf("CA valid %s..%s, want the package defaults", root.Cert.NotBefore, root.Cert.NotAfter)
	}
	if err := sub.Cert.CheckSignatureFrom(root.Cert); err != nil || !sub.Cert.MaxPathLenZero {
		t.Errorf("SubCA: signature %v, modify applied %t", err, sub.Cert.MaxPathLenZero)
	}
	if block, _ := pem.Decode(sub.CertPEM()); block == nil || !bytes.Equal(block.Bytes, sub.Cert.Raw) {
		t.Error("CertPEM does not encode the certificate")
	}
}

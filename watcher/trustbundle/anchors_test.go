package trustbundle

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/signet-pki/signet/internal/testpki"
)

// parsePEM returns the certificates of a bundle, failing the test on anything else.
func parsePEM(t *testing.T, bundle string) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	rest := []byte(bundle)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("trailing data after the last block: %q", rest)
	}
	return out
}

func TestNormalize(t *testing.T) {
	a, b, c := testpki.CA(t), testpki.CA(t), testpki.CA(t)
	in := "comment line\n" + string(b.CertPEM()) + string(a.CertPEM()) + "between\n" + string(c.CertPEM()) + string(a.CertPEM())
	got, n, err := Normalize([]byte(in))
	if err != nil {
		t.Fatalf("Normalize: %v", err)
	}
	if n != 3 {
		t.Errorf("anchors = %d, want 3 (a duplicate dropped)", n)
	}
	certs := parsePEM(t, got)
	if len(certs) != 3 {
		t.Fatalf("bundle holds %d certificates, want 3", len(certs))
	}
	for i := 1; i < len(certs); i++ {
		if bytes.Compare(certs[i-1].Raw, certs[i].Raw) >= 0 {
			t.Errorf("certificates %d and %d are not in DER order", i-1, i)
		}
	}
	// Any order, any duplicates of the same set: the same bundle.
	again, _, err := Normalize([]byte(string(c.CertPEM()) + string(b.CertPEM()) + string(a.CertPEM()) + string(c.CertPEM())))
	if err != nil || again != got {
		t.Errorf("Normalize of a permutation = %q, %v; want the same bundle", again, err)
	}
	if strings.Contains(got, "comment") || strings.Contains(got, "between") {
		t.Error("text between blocks was kept")
	}
}

func TestNormalizeRefuses(t *testing.T) {
	ca := testpki.CA(t)
	leaf := ca.Sign(t, &x509.Certificate{}, testpki.Key(t, testpki.P256).Public())
	notCA := testpki.CA(t, func(c *x509.Certificate) { c.IsCA = false })
	withHeaders := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED"}, Bytes: ca.Cert.Raw})
	for name, tt := range map[string]struct {
		in      []byte
		wantErr string
	}{
		"empty":            {nil, "no trust anchor"},
		"text only":        {[]byte("no PEM here"), "no trust anchor"},
		"leaf certificate": {append(ca.CertPEM(), testpki.CertPEM(leaf)...), "anchor 1"},
		"CA:FALSE":         {notCA.CertPEM(), "not a CA certificate"},
		"other block type": {pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), `"PRIVATE KEY" PEM block`},
		"headers":          {withHeaders, "PEM headers"},
		"unparsable":       {pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")}), "parsing certificate"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := Normalize(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Normalize() error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

package signerclient

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/testpki"
)

// TestSummary: the server's serial and NotAfter are used as reported; without them the leaf
// is parsed and its serial written as the server writes it (the hex of its bytes, with a
// leading zero); a chain that does not parse leaves only the signer's name.
func TestSummary(t *testing.T) {
	const signer = "example.com/serving"
	notAfter := time.Date(2026, 5, 5, 12, 0, 0, 0, time.UTC)
	leaf := testpki.CA(t).Sign(t, &x509.Certificate{
		SerialNumber: big.NewInt(0x1abc1), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: notAfter.Add(-time.Hour), NotAfter: notAfter,
	}, testpki.Key(t, testpki.P256).Public())
	chain := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw})

	for _, tt := range []struct {
		name   string
		issued Issued
		want   string
	}{
		{"reported", Issued{Chain: []byte("not parsed"), Serial: "0f00", NotAfter: notAfter.Add(time.Hour)},
			"certificate issued by example.com/serving, serial 0f00, valid until 2026-05-05T13:00:00Z"},
		{"from the chain", Issued{Chain: chain},
			"certificate issued by example.com/serving, serial 01abc1, valid until 2026-05-05T12:00:00Z"},
		{"unparsable chain", Issued{Chain: []byte("garbage"), Serial: "0f00"}, "certificate issued by example.com/serving"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.issued.Summary(context.Background(), signer); got != tt.want {
				t.Errorf("Summary() = %q, want %q", got, tt.want)
			}
		})
	}
}

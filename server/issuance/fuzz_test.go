package issuance_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/issuance"
)

// seedCSRs are valid and invalid PEM requests for the fuzz corpora.
func seedCSRs(f *testing.F) [][]byte {
	f.Helper()
	var seeds [][]byte
	for _, kt := range []testpki.KeyType{testpki.P256, testpki.P384, testpki.P521, testpki.Ed25519, testpki.RSA2048, testpki.RSA1024, testpki.P224} {
		seeds = append(seeds, testpki.CSR(f, testpki.Key(f, kt), &x509.CertificateRequest{
			Subject:     pkix.Name{CommonName: "fuzz", Organization: []string{"signet"}},
			DNSNames:    []string{"fuzz.example.com"},
			IPAddresses: []net.IP{net.IPv4(10, 1, 2, 3)},
		}))
	}
	key := testpki.Key(f, testpki.P256)
	seeds = append(seeds,
		testpki.CARequestCSR(f, key),
		testpki.BreakSignature(f, seeds[0]),
		[]byte("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"),
		[]byte("not a request"),
		nil,
	)
	return seeds
}

// checkRefusal fails t unless err wraps exactly one sentinel.
func checkRefusal(t *testing.T, err error) {
	t.Helper()
	n := 0
	for _, s := range sentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("refusal %v wraps %d sentinels, want exactly 1", err, n)
	}
}

func FuzzParseCSR(f *testing.F) {
	for _, s := range seedCSRs(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		csr, err := issuance.ParseCSR(data)
		if err != nil {
			if csr != nil {
				t.Fatal("ParseCSR returned a request and an error")
			}
			checkRefusal(t, err)
			return
		}
		if err := csr.CheckSignature(); err != nil {
			t.Fatalf("accepted a request whose signature does not verify: %v", err)
		}
		if err := issuance.CheckPublicKey(csr.PublicKey); err != nil {
			t.Fatalf("accepted a request with an unsupported key: %v", err)
		}
	})
}

// fuzzUsages are the usages FuzzIssue picks from with a bit mask.
var fuzzUsages = []string{"digital signature", "key encipherment", "server auth", "client auth", "cert sign", "any", "bogus"}

// FuzzIssue feeds DER requests (wrapped in PEM) with fuzzed usages and lifetimes to an issuer
// and checks every certificate it issues: not a CA, signed by the CA, for the request's key,
// within the CA's validity.
func FuzzIssue(f *testing.F) {
	ca := testpki.CA(f)
	is := newIssuer(f, caOf(ca), 48*time.Hour)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for i, s := range seedCSRs(f) {
		der := s
		if block, _ := pem.Decode(s); block != nil {
			der = block.Bytes
		}
		f.Add(der, uint8(1|4|8), int32(3600*(i+1)), i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, der []byte, usageMask uint8, expirationSeconds int32, hasExpiration bool) {
		csrPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
		req := request(csrPEM)
		for i, u := range fuzzUsages {
			if usageMask&(1<<i) != 0 {
				req.Usages = append(req.Usages, u)
			}
		}
		if hasExpiration {
			req.ExpirationSeconds = &expirationSeconds
		}
		cert, err := is.Issue(req)
		if err != nil {
			if cert != nil {
				t.Fatal("Issue returned a certificate and an error")
			}
			checkRefusal(t, err)
			return
		}
		leaf := cert.Leaf
		if leaf.IsCA || !leaf.BasicConstraintsValid || leaf.KeyUsage&x509.KeyUsageCertSign != 0 {
			t.Fatalf("issued a certificate that can act as a CA: IsCA=%t KeyUsage=%b", leaf.IsCA, leaf.KeyUsage)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Fatalf("issued certificate does not chain to the CA: %v", err)
		}
		csr, err := issuance.ParseCSR(csrPEM)
		if err != nil {
			t.Fatalf("issued for a request ParseCSR refuses: %v", err)
		}
		if !samePublicKey(csr.PublicKey, leaf.PublicKey) {
			t.Fatal("issued certificate is for another key than the request's")
		}
		if leaf.NotAfter.After(ca.Cert.NotAfter) || !leaf.NotBefore.Before(leaf.NotAfter) {
			t.Fatalf("validity %s..%s is empty or outlives the CA", leaf.NotBefore, leaf.NotAfter)
		}
	})
}

package certsign_test

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/keystore/pemfile"
	"github.com/signet-pki/signet/server/certsign"
)

// caKeys are the CA key types Signet loads.
var caKeys = []testpki.KeyType{testpki.P256, testpki.P384, testpki.P521, testpki.RSA2048, testpki.Ed25519}

type ca struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func newCA(t testing.TB, kt testpki.KeyType) ca {
	t.Helper()
	a := testpki.CAOf(t, kt, func(c *x509.Certificate) {
		c.Subject = pkix.Name{CommonName: "certsign test CA " + string(kt)}
		c.KeyUsage = x509.KeyUsageCertSign
		c.SubjectKeyId = []byte{1, 2, 3, 4}
	})
	return ca{cert: a.Cert, key: a.Key}
}

// leafNotBefore is read once, so that every leafTemplate encodes the same TBS (two reads of
// the clock may straddle a second) and the leaf is valid now (chains are verified).
var leafNotBefore = time.Now().Add(-5 * time.Minute)

// leafTemplate is a client leaf valid from leafNotBefore for a day.
func leafTemplate() *x509.Certificate {
	return &x509.Certificate{
		SerialNumber:          big.NewInt(42),
		Subject:               pkix.Name{CommonName: "system:node:worker-1", Organization: []string{"system:nodes"}},
		NotBefore:             leafNotBefore,
		NotAfter:              leafNotBefore.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
}

// TestSignMatchesCreateCertificate: for every CA key type, the certificate Sign makes from
// EncodeTBS's bytes carries exactly the TBS x509.CreateCertificate makes for the same template,
// the same signature algorithm, and a signature that verifies under the CA.
func TestSignMatchesCreateCertificate(t *testing.T) {
	sub := testpki.Key(t, testpki.P256).Public()
	for _, kt := range caKeys {
		t.Run(string(kt), func(t *testing.T) {
			ca := newCA(t, kt)
			tbs, err := certsign.EncodeTBS(leafTemplate(), ca.cert, sub)
			if err != nil {
				t.Fatal(err)
			}
			der, err := certsign.Sign(rand.Reader, tbs, ca.key, ca.cert)
			if err != nil {
				t.Fatal(err)
			}
			got, err := x509.ParseCertificate(der)
			if err != nil {
				t.Fatalf("the signed certificate does not parse: %v", err)
			}
			refDER, err := x509.CreateCertificate(rand.Reader, leafTemplate(), ca.cert, sub, ca.key)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := x509.ParseCertificate(refDER)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.RawTBSCertificate, tbs) {
				t.Error("the certificate's TBS is not the bytes that were signed")
			}
			if !bytes.Equal(got.RawTBSCertificate, ref.RawTBSCertificate) {
				t.Errorf("TBS differs from x509.CreateCertificate's\nsign   %x\ncreate %x", got.RawTBSCertificate, ref.RawTBSCertificate)
			}
			if got.SignatureAlgorithm != ref.SignatureAlgorithm {
				t.Errorf("signature algorithm %s, x509.CreateCertificate picks %s", got.SignatureAlgorithm, ref.SignatureAlgorithm)
			}
			if err := got.CheckSignatureFrom(ca.cert); err != nil {
				t.Errorf("signature does not verify under the CA: %v", err)
			}
			pool := x509.NewCertPool()
			pool.AddCert(ca.cert)
			if _, err := got.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("chain does not verify: %v", err)
			}
		})
	}
}

// faultySigner signs with the wrapped key and then flips a bit of the signature, like a device
// that answers with a damaged signature.
type faultySigner struct{ crypto.Signer }

func (f faultySigner) Sign(r io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	sig, err := f.Signer.Sign(r, digest, opts)
	if err == nil {
		sig[len(sig)/2] ^= 0x01
	}
	return sig, err
}

// TestSignChecksOtherSigners: a signer that is not Go's own ECDSA or RSA key gets its
// signature verified, and a bad one is refused, not assembled into a certificate.
func TestSignChecksOtherSigners(t *testing.T) {
	for _, kt := range []testpki.KeyType{testpki.P256, testpki.RSA2048} {
		t.Run(string(kt), func(t *testing.T) {
			ca := newCA(t, kt)
			tbs, err := certsign.EncodeTBS(leafTemplate(), ca.cert, testpki.Key(t, testpki.P256).Public())
			if err != nil {
				t.Fatal(err)
			}
			der, err := certsign.Sign(rand.Reader, tbs, faultySigner{ca.key}, ca.cert)
			if err == nil || !strings.Contains(err.Error(), "signature returned by the CA key is invalid") || der != nil {
				t.Fatalf("Sign with a faulty signer = %d bytes, %v; want the invalid signature refused", len(der), err)
			}
		})
	}
}

func TestNeedsCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		key  crypto.Signer
		want bool
	}{
		{"Go ECDSA", testpki.Key(t, testpki.P256), false},
		{"Go RSA", testpki.Key(t, testpki.RSA2048), false},
		{"Go ECDSA behind a keystore wrapper", pemfile.Key{Signer: testpki.Key(t, testpki.P384)}, false},
		{"Ed25519 (deterministic)", testpki.Key(t, testpki.Ed25519), true},
		{"any other signer", faultySigner{testpki.Key(t, testpki.P256)}, true},
		{"a wrapper around another signer", pemfile.Key{Signer: faultySigner{testpki.Key(t, testpki.P256)}}, true},
		{"a wrapper around nothing", pemfile.Key{}, true},
	} {
		if got := certsign.NeedsCheck(c.key); got != c.want {
			t.Errorf("%s: NeedsCheck = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSignRefuses: bytes that are not a TBS, an algorithm that does not suit the key, and one
// Sign does not support are refused with a reason.
func TestSignRefuses(t *testing.T) {
	p256, rsa := newCA(t, testpki.P256), newCA(t, testpki.RSA2048)
	sub := testpki.Key(t, testpki.P256).Public()
	ecTBS, err := certsign.EncodeTBS(leafTemplate(), p256.cert, sub)
	if err != nil {
		t.Fatal(err)
	}
	pss := leafTemplate()
	pss.SignatureAlgorithm = x509.SHA256WithRSAPSS
	pssTBS, err := certsign.EncodeTBS(pss, rsa.cert, sub)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want string
		tbs        []byte
		key        crypto.Signer
		ca         *x509.Certificate
	}{
		{"garbage", "malformed to-be-signed certificate", []byte("not DER"), p256.key, p256.cert},
		{"trailing bytes", "malformed to-be-signed certificate", append(append([]byte(nil), ecTBS...), 0), p256.key, p256.cert},
		{"ECDSA algorithm, RSA key", "does not suit", ecTBS, rsa.key, rsa.cert},
		{"RSA-PSS", "unsupported signature algorithm", pssTBS, rsa.key, rsa.cert},
		{"no key", "required", ecTBS, nil, p256.cert},
	} {
		der, err := certsign.Sign(rand.Reader, c.tbs, c.key, c.ca)
		if err == nil || !strings.Contains(err.Error(), c.want) || der != nil {
			t.Errorf("%s: Sign = %d bytes, %v; want an error containing %q", c.name, len(der), err, c.want)
		}
	}
}

func TestEncodeTBSRefuses(t *testing.T) {
	ca := newCA(t, testpki.P256)
	sub := testpki.Key(t, testpki.P256).Public()
	noSerial := leafTemplate()
	noSerial.SerialNumber = nil
	for _, c := range []struct {
		name string
		fn   func() ([]byte, error)
	}{
		{"nil template", func() ([]byte, error) { return certsign.EncodeTBS(nil, ca.cert, sub) }},
		{"nil CA", func() ([]byte, error) { return certsign.EncodeTBS(leafTemplate(), nil, sub) }},
		{"nil key", func() ([]byte, error) { return certsign.EncodeTBS(leafTemplate(), ca.cert, nil) }},
		{"no serial", func() ([]byte, error) { return certsign.EncodeTBS(noSerial, ca.cert, sub) }},
	} {
		if tbs, err := c.fn(); err == nil || tbs != nil {
			t.Errorf("%s: EncodeTBS = %d bytes, %v; want an error", c.name, len(tbs), err)
		}
	}
}

// BenchmarkSign compares EncodeTBS + Sign (what the issuer does) with x509.CreateCertificate
// for the same template, per CA key type: the difference is Go's verification of the new
// signature, which Sign skips for Go's own keys.
func BenchmarkSign(b *testing.B) {
	sub := testpki.Key(b, testpki.P256).Public()
	for _, kt := range []testpki.KeyType{testpki.P256, testpki.RSA2048} {
		ca := newCA(b, kt)
		b.Run(string(kt)+"/certsign", func(b *testing.B) {
			for b.Loop() {
				tbs, err := certsign.EncodeTBS(leafTemplate(), ca.cert, sub)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := certsign.Sign(rand.Reader, tbs, ca.key, ca.cert); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(string(kt)+"/x509.CreateCertificate", func(b *testing.B) {
			for b.Loop() {
				if _, err := x509.CreateCertificate(rand.Reader, leafTemplate(), ca.cert, sub, ca.key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

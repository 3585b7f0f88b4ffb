// Package testpki builds keys, certificate authorities and PKCS#10 requests for tests.
//
// Every helper takes a testing.TB and fails the test on error, so call sites stay one line.
// Certificates are valid from NotBefore to NotAfter (2000 to 2100) unless a modify function
// changes them, so they work with both the real clock and a fake clock fixed at any date in
// between.
package testpki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"sync"
	"testing"
	"time"
)

// KeyType names a key algorithm and size.
type KeyType string

// The key types Key generates. P224 and RSA1024 exist to test refusals.
const (
	P224    KeyType = "P-224"
	P256    KeyType = "P-256"
	P384    KeyType = "P-384"
	P521    KeyType = "P-521"
	Ed25519 KeyType = "Ed25519"
	RSA1024 KeyType = "RSA-1024"
	RSA2048 KeyType = "RSA-2048"
	RSA3072 KeyType = "RSA-3072"
	RSA4096 KeyType = "RSA-4096"
)

// Default validity of the certificates this package creates.
var (
	NotBefore = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	NotAfter  = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

// rsaKeys memoizes one RSA key per size: RSA generation is slow, and tests only need a key of
// the right size, not a fresh one.
var rsaKeys = map[KeyType]func() (*rsa.PrivateKey, error){
	RSA1024: sync.OnceValues(func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 1024) }),
	RSA2048: sync.OnceValues(func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 2048) }),
	RSA3072: sync.OnceValues(func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 3072) }),
	RSA4096: sync.OnceValues(func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 4096) }),
}

// Key returns a private key of type kt. ECDSA and Ed25519 keys are fresh on every call; RSA
// keys are generated once per size and shared by every caller in the process.
func Key(t testing.TB, kt KeyType) crypto.Signer {
	t.Helper()
	var (
		key crypto.Signer
		err error
	)
	switch kt {
	case P224:
		key, err = ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	case P256:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case P384:
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case P521:
		key, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case Ed25519:
		_, key, err = ed25519.GenerateKey(rand.Reader)
	case RSA1024, RSA2048, RSA3072, RSA4096:
		key, err = rsaKeys[kt]()
	default:
		t.Fatalf("testpki: unknown key type %q", kt)
	}
	if err != nil {
		t.Fatalf("testpki: generating %s key: %v", kt, err)
	}
	return key
}

// CSR returns a PEM-encoded PKCS#10 request signed by key. A nil tmpl asks for
// CN=testpki-leaf and nothing else.
func CSR(t testing.TB, key crypto.Signer, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	if tmpl == nil {
		tmpl = &x509.CertificateRequest{Subject: pkix.Name{CommonName: "testpki-leaf"}}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatalf("testpki: creating CSR: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// OIDBasicConstraints is the basic constraints extension (RFC 5280 4.2.1.9).
var OIDBasicConstraints = asn1.ObjectIdentifier{2, 5, 29, 19}

// CARequestCSR returns a PEM CSR signed by key whose extensions ask for a CA certificate: a
// critical basic constraints extension with CA:TRUE, added through ExtraExtensions.
func CARequestCSR(t testing.TB, key crypto.Signer) []byte {
	t.Helper()
	value, err := asn1.Marshal(struct{ IsCA bool }{IsCA: true})
	if err != nil {
		t.Fatalf("testpki: encoding basic constraints: %v", err)
	}
	return CSR(t, key, &x509.CertificateRequest{
		Subject:         pkix.Name{CommonName: "testpki-wants-ca"},
		ExtraExtensions: []pkix.Extension{{Id: OIDBasicConstraints, Critical: true, Value: value}},
	})
}

// BreakSignature returns csrPEM with the last byte of its signature flipped. The result still
// parses as PKCS#10 but its signature does not verify; BreakSignature fails the test if either
// is not so.
func BreakSignature(t testing.TB, csrPEM []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(csrPEM)
	if block == nil {
		t.Fatal("testpki: BreakSignature: no PEM block")
	}
	der := append([]byte(nil), block.Bytes...)
	// The signature BIT STRING is the last element of the request, so the last byte of the
	// DER is a signature byte whatever the algorithm.
	der[len(der)-1] ^= 0xff
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		t.Fatalf("testpki: BreakSignature: broken request no longer parses: %v", err)
	}
	if csr.CheckSignature() == nil {
		t.Fatal("testpki: BreakSignature: signature still verifies")
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// Authority is a CA for tests: a certificate and its key.
type Authority struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// CA returns a self-signed P-256 CA: CA:TRUE, key usage cert sign and CRL sign, subject
// CN=testpki CA, valid from NotBefore to NotAfter. Each modify function may change the
// template (validity, key usage, IsCA, ...) before signing.
func CA(t testing.TB, modify ...func(*x509.Certificate)) *Authority {
	t.Helper()
	return CAOf(t, P256, modify...)
}

// CAOf is CA with a key of type kt.
func CAOf(t testing.TB, kt KeyType, modify ...func(*x509.Certificate)) *Authority {
	t.Helper()
	key := Key(t, kt)
	tmpl := caTemplate("testpki CA")
	for _, m := range modify {
		m(tmpl)
	}
	return &Authority{Cert: create(t, tmpl, tmpl, key.Public(), key), Key: key}
}

// SubCA returns a P-256 CA signed by a, with the same defaults and modify hooks as CA.
func (a *Authority) SubCA(t testing.TB, modify ...func(*x509.Certificate)) *Authority {
	t.Helper()
	key := Key(t, P256)
	tmpl := caTemplate("testpki intermediate CA")
	for _, m := range modify {
		m(tmpl)
	}
	return &Authority{Cert: a.Sign(t, tmpl, key.Public()), Key: key}
}

// Sign issues a certificate for pub from tmpl. A missing serial number gets a random one and a
// zero NotBefore/NotAfter gets the package defaults.
func (a *Authority) Sign(t testing.TB, tmpl *x509.Certificate, pub crypto.PublicKey) *x509.Certificate {
	t.Helper()
	return create(t, tmpl, a.Cert, pub, a.Key)
}

// CertPEM returns the PEM encoding of the authority's certificate.
func (a *Authority) CertPEM() []byte { return CertPEM(a.Cert) }

// CertPEM returns the PEM encoding of cert.
func CertPEM(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

// KeyPEM returns key as a PEM PKCS#8 "PRIVATE KEY" block, the form Signet's file keystore,
// kube-apiserver and kube-controller-manager all read.
func KeyPEM(t testing.TB, key crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("testpki: encoding key: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func caTemplate(cn string) *x509.Certificate {
	return &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
}

func create(t testing.TB, tmpl, parent *x509.Certificate, pub crypto.PublicKey, key crypto.Signer) *x509.Certificate {
	t.Helper()
	if tmpl.SerialNumber == nil {
		serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
		if err != nil {
			t.Fatalf("testpki: serial: %v", err)
		}
		tmpl.SerialNumber = serial.Add(serial, big.NewInt(1))
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = NotBefore
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
	if err != nil {
		t.Fatalf("testpki: creating certificate %q: %v", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testpki: parsing certificate %q: %v", tmpl.Subject.CommonName, err)
	}
	return cert
}

// ProofOfPossession signs uid with key as a v1beta1 kubelet proves possession of a
// PodCertificateRequest's key: Ed25519 over the bytes, ECDSA (ASN.1) and RSA-PSS over their
// SHA-256.
func ProofOfPossession(t testing.TB, key crypto.Signer, uid string) []byte {
	t.Helper()
	digest := sha256.Sum256([]byte(uid))
	var sig []byte
	var err error
	switch k := key.(type) {
	case ed25519.PrivateKey:
		sig = ed25519.Sign(k, []byte(uid))
	case *ecdsa.PrivateKey:
		sig, err = ecdsa.SignASN1(rand.Reader, k, digest[:])
	case *rsa.PrivateKey:
		sig, err = rsa.SignPSS(rand.Reader, k, crypto.SHA256, digest[:], nil)
	default:
		t.Fatalf("testpki: proof of possession with key type %T", key)
	}
	if err != nil {
		t.Fatalf("testpki: proof of possession: %v", err)
	}
	return sig
}

package cacert_test

import (
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/cacert"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/issuance"
)

func TestSelfSigned(t *testing.T) {
	t.Parallel()
	for _, kt := range []testpki.KeyType{testpki.P256, testpki.P384, testpki.RSA2048} {
		key := testpki.Key(t, kt)
		subject, err := cacert.ParseSubject("CN=Kubernetes CA, O=Example, OU=Platform\\, PKI")
		if err != nil {
			t.Fatal(err)
		}
		cert, err := cacert.SelfSigned(key, cacert.Options{Subject: subject, Lifetime: 24 * time.Hour})
		if err != nil {
			t.Fatalf("%s: %v", kt, err)
		}
		if !cert.IsCA || cert.MaxPathLen != 0 || !cert.MaxPathLenZero || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
			t.Errorf("%s: not a CA that signs leaves only: IsCA %v MaxPathLen %d usage %v", kt, cert.IsCA, cert.MaxPathLen, cert.KeyUsage)
		}
		if cert.Subject.CommonName != "Kubernetes CA" || cert.Subject.OrganizationalUnit[0] != "Platform, PKI" {
			t.Errorf("%s: subject %s", kt, cert.Subject)
		}
		if len(cert.SubjectKeyId) == 0 {
			t.Errorf("%s: no subject key identifier", kt)
		}
		if d := cert.NotAfter.Sub(cert.NotBefore); d != 24*time.Hour {
			t.Errorf("%s: lifetime %s", kt, d)
		}
		if err := (&issuance.CA{Certificate: cert, Key: key}).Validate(); err != nil {
			t.Errorf("%s: the server would not take the root: %v", kt, err)
		}
	}
}

// badKey signs with the wrong key: a faulty device.
type badKey struct {
	crypto.Signer
	other crypto.Signer
}

func (k badKey) Sign(r io.Reader, d []byte, o crypto.SignerOpts) ([]byte, error) {
	return k.other.Sign(r, d, o)
}

func TestFaultyKeyMakesNothing(t *testing.T) {
	t.Parallel()
	key := badKey{testpki.Key(t, testpki.P256), testpki.Key(t, testpki.P256)}
	if _, err := cacert.SelfSigned(key, cacert.Options{Subject: mustSubject(t, "CN=x"), Lifetime: time.Hour}); err == nil {
		t.Error("a root was made with a signature that does not verify")
	}
	if _, err := cacert.Request(key, cacert.Options{Subject: mustSubject(t, "CN=x")}); err == nil {
		t.Error("a request was made with a signature that does not verify")
	}
}

func TestRequest(t *testing.T) {
	t.Parallel()
	key := testpki.Key(t, testpki.P384)
	out, err := cacert.Request(key, cacert.Options{Subject: mustSubject(t, "CN=Intermediate,O=Example")})
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(out)
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if csr.Subject.CommonName != "Intermediate" || csr.CheckSignature() != nil {
		t.Errorf("request subject %s, signature %v", csr.Subject, csr.CheckSignature())
	}
}

func TestParseSubjectErrors(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                 "not attribute=value",
		"O=Example":        "CN is required",
		"CN=a,CN=b":        "twice",
		"CN=a,EMAIL=x@y.z": "unknown attribute",
		"CN=a,O":           "not attribute=value",
		"CN=a,O=":          "not attribute=value",
	} {
		if _, err := cacert.ParseSubject(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSubject(%q) = %v, want an error saying %q", in, err, want)
		}
	}
}

func mustSubject(t *testing.T, s string) pkix.Name {
	t.Helper()
	n, err := cacert.ParseSubject(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

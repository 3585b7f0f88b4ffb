package issuance_test

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"sync"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/lint"
	"github.com/signet-pki/signet/server/profile"
)

// podSigner is the signer name of the pod-identity issuers in these tests.
const podSigner = "example.com/pods"

// rsa4096 is the one RSA-4096 key of the package's tests (testpki has none; generating one
// takes a second or more).
var rsa4096 = sync.OnceValues(func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 4096) })

// podKeyTypes are the key types the kube-apiserver accepts in a PodCertificateRequest.
var podKeyTypes = []string{"P-256", "P-384", "P-521", "Ed25519", "RSA-3072", "RSA-4096"}

// podKey returns a key of type kt: a testpki key type, or "RSA-4096".
func podKey(t testing.TB, kt string) crypto.Signer {
	t.Helper()
	if kt == "RSA-4096" {
		k, err := rsa4096()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	return testpki.Key(t, testpki.KeyType(kt))
}

// stub returns the DER stub request the kubelet sends: an empty template signed by key, or
// tmpl when given.
func stub(t testing.TB, key crypto.Signer, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	if tmpl == nil {
		tmpl = &x509.CertificateRequest{}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatalf("creating stub request: %v", err)
	}
	return der
}

// spki returns the DER SubjectPublicKeyInfo of key.
func spki(t testing.TB, key crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// testPod is the pod identity of the tests.
var testPod = issuance.PodIdentity{
	Namespace: "shop", PodName: "web-7d9f", PodUID: "0b8f4a8e-5d0c-4f57-9f3e-1f2d3c4b5a69",
	ServiceAccountName: "web", ServiceAccountUID: "6f1c2d3e-aaaa-bbbb-cccc-111122223333",
	NodeName: "node-1", NodeUID: "9a8b7c6d-1111-2222-3333-444455556666",
}

// podRequest is a v1 request for testPod with key's stub and maxExpirationSeconds 86400.
func podRequest(t testing.TB, key crypto.Signer) issuance.PodRequest {
	t.Helper()
	return issuance.PodRequest{SignerName: podSigner, Pod: testPod, StubPKCS10Request: stub(t, key, nil), MaxExpirationSeconds: 86400}
}

// podPolicy is a pod-identity profile with maxLifetime and spec (nil: every default).
func podPolicy(t testing.TB, maxLifetime time.Duration, spec *profile.PodIdentitySpec) profile.Profile {
	t.Helper()
	p, err := profile.New(profile.Spec{Name: profile.NamePodIdentity, PodIdentity: spec}, maxLifetime)
	if err != nil {
		t.Fatalf("profile.New: %v", err)
	}
	return p
}

// podIssuer returns a pod-identity issuer over ca with the default lint gate (as signet-server
// configures it for the profile), the clock fixed at at.
func podIssuer(t testing.TB, ca *issuance.CA, maxLifetime time.Duration, at time.Time) *issuance.Issuer {
	t.Helper()
	pol := podPolicy(t, maxLifetime, nil)
	gate, err := lint.New(pol.LintOptions(lint.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	is, err := issuance.NewIssuer(issuance.IssuerOptions{
		SignerName: podSigner, CA: ca, Policy: pol, Lint: gate, Clock: testclock.NewFakePassiveClock(at),
	})
	if err != nil {
		t.Fatalf("NewIssuer: %v", err)
	}
	return is
}

// pemToDER returns the bytes of the one PEM block of data.
func pemToDER(t testing.TB, data []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatal("no PEM block")
	}
	return block.Bytes
}

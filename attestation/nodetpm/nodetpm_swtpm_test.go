package nodetpm_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/signet-pki/signet/attestation"
	"github.com/signet-pki/signet/attestation/nodetpm"
	"github.com/signet-pki/signet/internal/swtpmtest"
	"github.com/signet-pki/signet/internal/tpmconn"
)

// What swtpm_setup (0.7) makes, by key type as it names its EK certificates: the NV index of
// the certificate and the persistent handle of the EK.
var swtpmEKs = map[string]struct{ nv, persistent tpm2.TPMHandle }{
	// The TCG default (low range) RSA 2048 EK, template L-1: go-tpm's RSAEKTemplate.
	"rsa2048": {0x01c00002, 0x81010001},
	// The TCG high-range ECC NIST P-384 EK, template H-3 (nodetpm.ECCP384EKTemplate).
	"secp384r1": {0x01c00016, 0x81010016},
}

// TestSwtpmManufacturerRoot runs the manufacturer-root mode against a swtpm that swtpm_setup
// manufactured with a local CA: nodetpm finds one of the EK certificates in NV, for the very
// EK swtpm_setup certified; CheckKeys trusts it through the CA's root and intermediate and
// names that root, refuses it under another vendor's root or without the intermediate; and
// the credential challenge made for the checked keys is answered by the TPM.
func TestSwtpmManufacturerRoot(t *testing.T) {
	t.Parallel()
	s := swtpmtest.StartManufactured(t)
	conn := openSocket(t, s.Socket)
	node := nodetpm.New(conn)
	keys, err := node.Keys()
	if err != nil {
		t.Fatalf("Keys: %v", err)
	}
	if keys.EKCertificate == nil {
		t.Fatalf("Keys returned no EK certificate; swtpm_setup wrote %s", describe(s.EKCertificates))
	}
	keyType := ""
	for kt, der := range s.EKCertificates {
		if bytes.Equal(der, keys.EKCertificate) {
			keyType = kt
		}
	}
	if keyType == "" {
		t.Fatalf("Keys returned an EK certificate that is none of swtpm_setup's: %s", describe(s.EKCertificates))
	}
	t.Logf("nodetpm took the %s EK certificate (NV index 0x%08x) of %s", keyType, uint32(swtpmEKs[keyType].nv), describe(s.EKCertificates))
	ek, err := tpm2.ReadPublic{ObjectHandle: swtpmEKs[keyType].persistent}.Execute(conn)
	if err != nil {
		t.Fatalf("reading the EK swtpm_setup made for the %s certificate: %v", keyType, err)
	}
	if !bytes.Equal(ek.OutPublic.Bytes(), keys.EKPublic) {
		t.Errorf("Keys' EK is not the %s EK that swtpm_setup certified (persistent 0x%08x)", keyType, uint32(swtpmEKs[keyType].persistent))
	}

	// The certificate is for the EK: a refusal by CheckKeys below is CheckKeys' own.
	certifies(t, keys.EKCertificate, keys.EKPublic)

	trust := attestation.Trust{Roots: pool(s.Root), Intermediates: pool(s.Intermediate)}
	checked, err := attestation.CheckKeys(keys.EKCertificate, keys.EKPublic, keys.AKPublic, trust, time.Now())
	if err != nil {
		t.Fatalf("CheckKeys with the local CA as manufacturer root: %v", err)
	}
	if want := fmt.Sprintf("manufacturer root %q", s.Root.Subject.String()); checked.EKTrust != want {
		t.Errorf("EKTrust = %q, want %q", checked.EKTrust, want)
	}
	if fp, _ := attestation.EKFingerprint(keys.EKPublic); checked.EK != fp {
		t.Errorf("EK = %s, want the EK's fingerprint %s", checked.EK, fp)
	}

	for name, refused := range map[string]attestation.Trust{
		"another vendor's root":    {Roots: pool(otherRoot(t)), Intermediates: pool(s.Intermediate)},
		"without the intermediate": {Roots: pool(s.Root)},
	} {
		_, err := attestation.CheckKeys(keys.EKCertificate, keys.EKPublic, keys.AKPublic, refused, time.Now())
		if got := attestation.FailedCheck(err); got != attestation.CheckEKTrust {
			t.Errorf("CheckKeys with %s and no allow-list: %v (check %q), want a refusal of %q", name, err, got, attestation.CheckEKTrust)
		}
	}

	secret, ch, err := attestation.MakeChallenge(nil, checked)
	if err != nil {
		t.Fatalf("MakeChallenge: %v", err)
	}
	got, err := node.Activate(keys, ch)
	if err != nil {
		t.Fatalf("Activate: %v", err)
	}
	if !bytes.Equal(got, secret) {
		t.Errorf("Activate returned %x, want the challenge's secret %x", got, secret)
	}
}

// TestSwtpmP384EK checks swtpm's ECC P-384 EK certificate (NV index 0x01c00016) below nodetpm:
// the EK swtpm_setup persisted is the key of template H-3 (so a node derives it again), its
// certificate passes CheckKeys under the local CA's root, and a challenge MakeChallenge makes
// for it is answered by TPM2_ActivateCredential with that EK, authorized by its empty
// password (H templates set userWithAuth).
func TestSwtpmP384EK(t *testing.T) {
	t.Parallel()
	s := swtpmtest.StartManufactured(t)
	conn := openSocket(t, s.Socket)
	handles := swtpmEKs["secp384r1"]
	cert := s.EKCertificates["secp384r1"]
	if cert == nil {
		t.Fatalf("swtpm_setup wrote no secp384r1 EK certificate: %s", describe(s.EKCertificates))
	}
	ek, err := tpm2.ReadPublic{ObjectHandle: handles.persistent}.Execute(conn)
	if err != nil {
		t.Fatalf("reading the ECC EK at 0x%08x: %v", uint32(handles.persistent), err)
	}
	derived, err := tpm2.CreatePrimary{PrimaryHandle: tpm2.TPMRHEndorsement, InPublic: tpm2.New2B(nodetpm.ECCP384EKTemplate)}.Execute(conn)
	if err != nil {
		t.Fatalf("creating the EK of template H-3: %v", err)
	}
	flush(conn, derived.ObjectHandle)
	if !bytes.Equal(derived.OutPublic.Bytes(), ek.OutPublic.Bytes()) {
		t.Errorf("the persistent ECC EK is not the key of template H-3")
	}
	ak, err := tpm2.CreatePrimary{PrimaryHandle: tpm2.TPMRHOwner, InPublic: tpm2.New2B(nodetpm.AKTemplate)}.Execute(conn)
	if err != nil {
		t.Fatalf("creating the AK: %v", err)
	}
	t.Cleanup(func() { flush(conn, ak.ObjectHandle) })

	certifies(t, cert, ek.OutPublic.Bytes())

	trust := attestation.Trust{Roots: pool(s.Root), Intermediates: pool(s.Intermediate)}
	checked, err := attestation.CheckKeys(cert, ek.OutPublic.Bytes(), ak.OutPublic.Bytes(), trust, time.Now())
	if err != nil {
		t.Fatalf("CheckKeys of the P-384 EK certificate: %v", err)
	}
	if want := fmt.Sprintf("manufacturer root %q", s.Root.Subject.String()); checked.EKTrust != want {
		t.Errorf("EKTrust = %q, want %q", checked.EKTrust, want)
	}
	secret, ch, err := attestation.MakeChallenge(nil, checked)
	if err != nil {
		t.Fatalf("MakeChallenge for the P-384 EK: %v", err)
	}
	rsp, err := tpm2.ActivateCredential{
		ActivateHandle: tpm2.AuthHandle{Handle: ak.ObjectHandle, Name: ak.Name, Auth: tpm2.PasswordAuth(nil)},
		KeyHandle:      tpm2.AuthHandle{Handle: handles.persistent, Name: ek.Name, Auth: tpm2.PasswordAuth(nil)},
		CredentialBlob: tpm2.TPM2BIDObject{Buffer: ch.CredentialBlob},
		Secret:         tpm2.TPM2BEncryptedSecret{Buffer: ch.EncryptedSecret},
	}.Execute(conn)
	if err != nil {
		t.Fatalf("ActivateCredential with the P-384 EK: %v", err)
	}
	if !bytes.Equal(rsp.CertInfo.Buffer, secret) {
		t.Errorf("ActivateCredential returned %x, want the challenge's secret %x", rsp.CertInfo.Buffer, secret)
	}
}

// certifies fails the test unless the certificate certDER is for the key of the TPMT_PUBLIC
// tpmPublic.
func certifies(t *testing.T, certDER, tpmPublic []byte) {
	t.Helper()
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		t.Fatalf("the EK certificate: %v", err)
	}
	public, err := tpm2.Unmarshal[tpm2.TPMTPublic](tpmPublic)
	if err != nil {
		t.Fatalf("the EK's public area: %v", err)
	}
	key, err := tpm2.Pub(*public)
	if err != nil {
		t.Fatalf("the EK's key: %v", err)
	}
	if eq, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !eq.Equal(key) {
		t.Fatalf("the EK certificate's key (%T) is not the EK's", cert.PublicKey)
	}
}

func openSocket(t *testing.T, path string) transport.TPMCloser {
	t.Helper()
	conn, err := tpmconn.OpenSocket(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func flush(conn transport.TPM, h tpm2.TPMHandle) {
	_, _ = tpm2.FlushContext{FlushHandle: h}.Execute(conn)
}

func pool(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

// otherRoot is another TPM vendor's root CA.
func otherRoot(t *testing.T) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another TPM vendor's root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// describe lists EK certificates by key type and subject key, for failure messages.
func describe(certs map[string][]byte) string {
	var out []string
	for kt, der := range certs {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			out = append(out, fmt.Sprintf("%s (does not parse: %v)", kt, err))
			continue
		}
		out = append(out, fmt.Sprintf("%s (%T, NV index 0x%08x)", kt, c.PublicKey, uint32(swtpmEKs[kt].nv)))
	}
	slices.Sort(out)
	return fmt.Sprint(out)
}

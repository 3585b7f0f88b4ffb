package issuance_test

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/issuance"
)

func TestIssueCopiesSubjectAndSANs(t *testing.T) {
	t.Parallel()
	ca := testpki.CA(t)
	is := newIssuer(t, caOf(ca), 24*time.Hour)
	spiffe, _ := url.Parse("spiffe://cluster.local/ns/default/sa/web")
	tmpl := &x509.CertificateRequest{
		Subject: pkix.Name{
			CommonName:         "system:node:worker-1",
			Organization:       []string{"system:nodes"},
			OrganizationalUnit: []string{"ops"},
			Country:            []string{"NL"},
			Locality:           []string{"Utrecht"},
		},
		DNSNames:       []string{"worker-1", "worker-1.example.com"},
		IPAddresses:    []net.IP{net.ParseIP("10.0.0.7").To4(), net.ParseIP("fd00::7")},
		URIs:           []*url.URL{spiffe},
		EmailAddresses: []string{"ops@example.com"},
	}
	cert, err := is.Issue(request(testpki.CSR(t, testpki.Key(t, testpki.P256), tmpl), "digital signature", "server auth", "client auth"))
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	leaf := cert.Leaf
	if got, want := leaf.Subject.String(), tmpl.Subject.String(); got != want {
		t.Errorf("subject = %q, want %q", got, want)
	}
	if !slices.Equal(leaf.DNSNames, tmpl.DNSNames) {
		t.Errorf("DNS names = %q, want %q", leaf.DNSNames, tmpl.DNSNames)
	}
	if !slices.EqualFunc(leaf.IPAddresses, tmpl.IPAddresses, net.IP.Equal) {
		t.Errorf("IP addresses = %v, want %v", leaf.IPAddresses, tmpl.IPAddresses)
	}
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != spiffe.String() {
		t.Errorf("URIs = %v, want [%s]", leaf.URIs, spiffe)
	}
	if !slices.Equal(leaf.EmailAddresses, tmpl.EmailAddresses) {
		t.Errorf("emails = %q, want %q", leaf.EmailAddresses, tmpl.EmailAddresses)
	}
	if got, want := leaf.Issuer.String(), ca.Cert.Subject.String(); got != want {
		t.Errorf("issuer = %q, want the CA subject %q", got, want)
	}
}

func TestIssueLeafShape(t *testing.T) {
	t.Parallel()
	ca := testpki.CA(t)
	is := newIssuer(t, caOf(ca), 24*time.Hour)
	for _, kt := range []testpki.KeyType{testpki.P256, testpki.P384, testpki.P521, testpki.Ed25519, testpki.RSA2048, testpki.RSA3072} {
		t.Run(string(kt), func(t *testing.T) {
			t.Parallel()
			key := testpki.Key(t, kt)
			csrPEM := testpki.CSR(t, key, &x509.CertificateRequest{DNSNames: []string{"svc.example.com"}})
			cert, err := is.Issue(request(csrPEM, "digital signature", "server auth"))
			if err != nil {
				t.Fatalf("Issue: %v", err)
			}
			leaf := cert.Leaf
			if !leaf.BasicConstraintsValid || leaf.IsCA {
				t.Errorf("basic constraints present=%t CA=%t, want present and CA:FALSE", leaf.BasicConstraintsValid, leaf.IsCA)
			}
			if len(ca.Cert.SubjectKeyId) == 0 || !bytes.Equal(leaf.AuthorityKeyId, ca.Cert.SubjectKeyId) {
				t.Errorf("authority key ID = %x, want the CA's subject key ID %x", leaf.AuthorityKeyId, ca.Cert.SubjectKeyId)
			}
			if len(leaf.SubjectKeyId) != 0 {
				t.Errorf("leaf has a subject key ID %x, want none", leaf.SubjectKeyId)
			}
			if !samePublicKey(key.Public(), leaf.PublicKey) {
				t.Error("leaf public key is not the requester's")
			}
			chain := parseChain(t, cert.ChainPEM)
			if len(chain) != 1 || !chain[0].Equal(leaf) {
				t.Fatalf("chain has %d certificates, want only the leaf", len(chain))
			}
			verify(t, chain, x509.ExtKeyUsageServerAuth, ca.Cert)
			if err := leaf.VerifyHostname("svc.example.com"); err != nil {
				t.Errorf("leaf not valid for the requested name: %v", err)
			}
		})
	}
}

// TestIssueSerials checks the serial is 129 bits long (a 0x01 byte and 128 random bits) and
// that two certificates never share one.
func TestIssueSerials(t *testing.T) {
	t.Parallel()
	is := newIssuer(t, caOf(testpki.CA(t)), 24*time.Hour)
	csrPEM := testpki.CSR(t, testpki.Key(t, testpki.P256), nil)
	seen := map[string]bool{}
	for range 32 {
		cert, err := is.Issue(request(csrPEM, "digital signature"))
		if err != nil {
			t.Fatalf("Issue: %v", err)
		}
		serial := cert.Leaf.SerialNumber
		if serial.BitLen() != 129 {
			t.Errorf("serial %x has %d bits, want 129", serial, serial.BitLen())
		}
		if seen[serial.String()] {
			t.Fatalf("serial %x issued twice", serial)
		}
		seen[serial.String()] = true
	}
}

// constReader is an endless stream of one byte value.
type constReader byte

func (c constReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(c)
	}
	return len(p), nil
}

func TestIssueSerialUsesInjectedRandomness(t *testing.T) {
	t.Parallel()
	is, err := issuance.NewIssuer(issuance.IssuerOptions{
		SignerName: signerName,
		CA:         caOf(testpki.CA(t)),
		Policy:     leafPolicy(t, time.Hour),
		Clock:      testclock.NewFakePassiveClock(now),
		Rand:       constReader(0xab),
	})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := is.Issue(request(testpki.CSR(t, testpki.Key(t, testpki.P256), nil), "client auth"))
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	if got, want := cert.Leaf.SerialNumber.Text(16), "1"+strings.Repeat("ab", 16); got != want {
		t.Errorf("serial = %s, want %s", got, want)
	}
}

// TestIssueLifetime pins kube-controller-manager's rules: NotBefore = now − 5m; the lifetime
// is expirationSeconds clamped to [10m, max] (max when absent); a lifetime under 8h ends at
// now + lifetime, a longer one at now + lifetime − 5m; never past the CA's NotAfter.
func TestIssueLifetime(t *testing.T) {
	t.Parallel()
	seconds := func(d time.Duration) *int32 { s := int32(d / time.Second); return &s }
	tests := []struct {
		name        string
		maxLifetime time.Duration
		caNotAfter  time.Time
		expiration  *int32
		wantEnd     time.Time
	}{
		{"absent gets the maximum", 24 * time.Hour, testpki.NotAfter, nil, now.Add(24*time.Hour - 5*time.Minute)},
		{"absent, short maximum", time.Hour, testpki.NotAfter, nil, now.Add(time.Hour)},
		{"600s is a 900s certificate", 24 * time.Hour, testpki.NotAfter, seconds(10 * time.Minute), now.Add(10 * time.Minute)},
		{"below the floor", 24 * time.Hour, testpki.NotAfter, seconds(time.Minute), now.Add(10 * time.Minute)},
		{"zero", 24 * time.Hour, testpki.NotAfter, seconds(0), now.Add(10 * time.Minute)},
		{"negative", 24 * time.Hour, testpki.NotAfter, seconds(-time.Hour), now.Add(10 * time.Minute)},
		{"one hour", 24 * time.Hour, testpki.NotAfter, seconds(time.Hour), now.Add(time.Hour)},
		{"just under 8h", 24 * time.Hour, testpki.NotAfter, seconds(8*time.Hour - time.Second), now.Add(8*time.Hour - time.Second)},
		{"exactly 8h", 24 * time.Hour, testpki.NotAfter, seconds(8 * time.Hour), now.Add(8*time.Hour - 5*time.Minute)},
		{"twelve hours", 24 * time.Hour, testpki.NotAfter, seconds(12 * time.Hour), now.Add(12*time.Hour - 5*time.Minute)},
		{"above the maximum", 24 * time.Hour, testpki.NotAfter, seconds(48 * time.Hour), now.Add(24*time.Hour - 5*time.Minute)},
		{"365 days", 365 * 24 * time.Hour, testpki.NotAfter, nil, now.Add(365*24*time.Hour - 5*time.Minute)},
		{"capped by the CA", 24 * time.Hour, now.Add(time.Hour), nil, now.Add(time.Hour)},
		{"capped by the CA, short request", 24 * time.Hour, now.Add(15 * time.Minute), seconds(time.Hour), now.Add(15 * time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ca := testpki.CA(t, func(c *x509.Certificate) { c.NotAfter = tt.caNotAfter })
			is := newIssuer(t, caOf(ca), tt.maxLifetime)
			req := request(testpki.CSR(t, testpki.Key(t, testpki.P256), nil), "digital signature")
			req.ExpirationSeconds = tt.expiration
			cert, err := is.Issue(req)
			if err != nil {
				t.Fatalf("Issue: %v", err)
			}
			if want := now.Add(-5 * time.Minute); !cert.Leaf.NotBefore.Equal(want) {
				t.Errorf("NotBefore = %s, want %s", cert.Leaf.NotBefore, want)
			}
			if !cert.Leaf.NotAfter.Equal(tt.wantEnd) {
				t.Errorf("NotAfter = %s, want %s", cert.Leaf.NotAfter, tt.wantEnd)
			}
		})
	}
}

func TestIssueRefusesExpiredCA(t *testing.T) {
	t.Parallel()
	for name, notAfter := range map[string]time.Time{
		"expired a second ago": now.Add(-time.Second),
		"expires right now":    now,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ca := testpki.CA(t, func(c *x509.Certificate) { c.NotAfter = notAfter })
			is := newIssuer(t, caOf(ca), 24*time.Hour)
			cert, err := is.Issue(request(testpki.CSR(t, testpki.Key(t, testpki.P256), nil), "digital signature"))
			if err == nil || cert != nil {
				t.Fatalf("Issue with an expired CA = %v, %v; want a refusal", cert, err)
			}
			if !strings.Contains(err.Error(), "expired") {
				t.Errorf("error %q does not say the CA expired", err)
			}
		})
	}
}

func TestIssueChainWithIntermediates(t *testing.T) {
	t.Parallel()
	root := testpki.CA(t)
	middle := root.SubCA(t)
	issuing := middle.SubCA(t)
	tests := []struct {
		name          string
		ca            *testpki.Authority
		intermediates []*x509.Certificate
	}{
		{"root issues", root, nil},
		{"one level below the root", middle, []*x509.Certificate{middle.Cert}},
		{"two levels below the root", issuing, []*x509.Certificate{issuing.Cert, middle.Cert}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := newIssuer(t, &issuance.CA{Certificate: tt.ca.Cert, Key: tt.ca.Key, Intermediates: tt.intermediates}, time.Hour)
			cert, err := is.Issue(request(testpki.CSR(t, testpki.Key(t, testpki.P384), nil), "client auth"))
			if err != nil {
				t.Fatalf("Issue: %v", err)
			}
			chain := parseChain(t, cert.ChainPEM)
			if len(chain) != 1+len(tt.intermediates) || !chain[0].Equal(cert.Leaf) {
				t.Fatalf("chain has %d certificates, want the leaf then %d intermediates", len(chain), len(tt.intermediates))
			}
			for i, want := range tt.intermediates {
				if !chain[i+1].Equal(want) {
					t.Errorf("chain[%d] = %q, want %q", i+1, chain[i+1].Subject, want.Subject)
				}
			}
			verify(t, chain, x509.ExtKeyUsageClientAuth, root.Cert)
			verify(t, chain, x509.ExtKeyUsageClientAuth, tt.ca.Cert)
			anchor, _ := pem.Decode(is.TrustAnchors())
			if anchor == nil || !bytes.Equal(anchor.Bytes, tt.ca.Cert.Raw) {
				t.Error("TrustAnchors is not the issuing CA certificate")
			}
		})
	}
}

func TestCAValidate(t *testing.T) {
	t.Parallel()
	good := testpki.CA(t)
	other := testpki.CA(t)
	noCertSign := testpki.CA(t, func(c *x509.Certificate) { c.KeyUsage = x509.KeyUsageDigitalSignature })
	noKeyUsage := testpki.CA(t, func(c *x509.Certificate) { c.KeyUsage = 0 })
	leafKey := testpki.Key(t, testpki.P256)
	leaf := good.Sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: "leaf"}, BasicConstraintsValid: true}, leafKey.Public())
	noBC := good.Sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: "v1-style"}, KeyUsage: x509.KeyUsageCertSign}, leafKey.Public())
	tests := []struct {
		name    string
		ca      *issuance.CA
		wantMsg string // empty: valid
	}{
		{"valid", caOf(good), ""},
		{"CA without key usage extension", caOf(noKeyUsage), ""},
		{"key of another CA", &issuance.CA{Certificate: good.Cert, Key: other.Key}, "does not match the CA certificate"},
		{"RSA key for an ECDSA CA", &issuance.CA{Certificate: good.Cert, Key: testpki.Key(t, testpki.RSA2048)}, "does not match the CA certificate"},
		{"leaf certificate", &issuance.CA{Certificate: leaf, Key: leafKey}, "not a CA"},
		{"no basic constraints", &issuance.CA{Certificate: noBC, Key: leafKey}, "not a CA"},
		{"CA without cert sign", caOf(noCertSign), "does not allow certificate signing"},
		{"no key", &issuance.CA{Certificate: good.Cert}, "both required"},
		{"no certificate", &issuance.CA{Key: good.Key}, "both required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.ca.Validate()
			if tt.wantMsg == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("Validate = %v, want an error saying %q", err, tt.wantMsg)
			}
			if _, err := issuance.NewIssuer(issuance.IssuerOptions{SignerName: signerName, CA: tt.ca, Policy: leafPolicy(t, time.Hour)}); err == nil || !strings.Contains(err.Error(), tt.wantMsg) || !strings.Contains(err.Error(), signerName) {
				t.Errorf("NewIssuer = %v, want an error naming the signer and saying %q", err, tt.wantMsg)
			}
		})
	}
}

func TestNewIssuerRefusesBadOptions(t *testing.T) {
	t.Parallel()
	ca := caOf(testpki.CA(t))
	tests := []struct {
		name    string
		opts    issuance.IssuerOptions
		wantMsg string
	}{
		{"no signer name", issuance.IssuerOptions{CA: ca, Policy: leafPolicy(t, time.Hour)}, "signer name is required"},
		{"no CA", issuance.IssuerOptions{SignerName: signerName, Policy: leafPolicy(t, time.Hour)}, "both required"},
		{"no policy", issuance.IssuerOptions{SignerName: signerName, CA: ca}, "a policy is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is, err := issuance.NewIssuer(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("NewIssuer = %v, %v; want an error saying %q", is, err, tt.wantMsg)
			}
		})
	}
}

// TestIssueExtensionsComeOnlyFromPolicy checks that nothing the request asks for through
// extensions reaches the certificate: not a custom OID, not a subject key ID, not key usages.
func TestIssueExtensionsComeOnlyFromPolicy(t *testing.T) {
	t.Parallel()
	ca := testpki.CA(t)
	is := newIssuer(t, caOf(ca), time.Hour)
	custom := asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}
	ski, _ := asn1.Marshal([]byte{1, 2, 3, 4, 5, 6, 7, 8})
	ku, _ := asn1.Marshal(asn1.BitString{Bytes: []byte{0x06}, BitLength: 7})     // cert sign + CRL sign
	eku, _ := asn1.Marshal([]asn1.ObjectIdentifier{{1, 3, 6, 1, 5, 5, 7, 3, 3}}) // code signing
	csrPEM := testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: "greedy"},
		DNSNames: []string{"greedy.example.com"},
		ExtraExtensions: []pkix.Extension{
			{Id: custom, Value: []byte{0x05, 0x00}},
			{Id: asn1.ObjectIdentifier{2, 5, 29, 14}, Value: ski},
			{Id: asn1.ObjectIdentifier{2, 5, 29, 15}, Critical: true, Value: ku},
			{Id: asn1.ObjectIdentifier{2, 5, 29, 37}, Value: eku},
		},
	})
	cert, err := is.Issue(request(csrPEM, "digital signature", "server auth"))
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	var got []string
	for _, ext := range cert.Leaf.Extensions {
		got = append(got, ext.Id.String())
	}
	slices.Sort(got)
	// key usage, subject alternative name, basic constraints, extended key usage, authority key ID
	want := []string{"2.5.29.15", "2.5.29.17", "2.5.29.19", "2.5.29.35", "2.5.29.37"}
	if !slices.Equal(got, want) {
		t.Errorf("leaf extensions = %v, want exactly %v", got, want)
	}
	if len(cert.Leaf.SubjectKeyId) != 0 {
		t.Errorf("leaf carries the requested subject key ID %x", cert.Leaf.SubjectKeyId)
	}
	if cert.Leaf.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("key usage = %b, want digital signature only", cert.Leaf.KeyUsage)
	}
	if !slices.Equal(cert.Leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Errorf("extended key usage = %v, want server auth only", cert.Leaf.ExtKeyUsage)
	}
}

// damagingSigner stands for a CA key held by a device (HSM, TPM) that answers with a damaged
// signature: it signs with the real key and flips one bit.
type damagingSigner struct{ crypto.Signer }

func (d damagingSigner) Sign(r io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	sig, err := d.Signer.Sign(r, digest, opts)
	if err == nil {
		sig[len(sig)-1] ^= 0x01
	}
	return sig, err
}

// TestIssueRefusesABadSignatureFromTheCAKey: a CA key that is not Go's own implementation has
// every signature checked before a certificate is returned; a damaged one is an internal
// error, not a certificate (and not a refusal the requester could be blamed for).
func TestIssueRefusesABadSignatureFromTheCAKey(t *testing.T) {
	t.Parallel()
	ca := testpki.CA(t)
	is := newIssuer(t, &issuance.CA{Certificate: ca.Cert, Key: damagingSigner{ca.Key}}, 24*time.Hour)
	csr := testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice"}})
	cert, err := is.Issue(request(csr, "digital signature", "client auth"))
	if err == nil || cert != nil {
		t.Fatalf("Issue with a damaging CA key = %v, %v; want an error and no certificate", cert, err)
	}
	if !strings.Contains(err.Error(), "signature returned by the CA key is invalid") {
		t.Errorf("error %q does not say the CA key's signature was invalid", err)
	}
	for _, sentinel := range []error{issuance.ErrMalformedRequest, issuance.ErrInvalidSignature, issuance.ErrUnsupportedKey, issuance.ErrPolicyViolation} {
		if errors.Is(err, sentinel) {
			t.Errorf("error %v wraps refusal %v; a bad CA signature is the server's fault", err, sentinel)
		}
	}
}

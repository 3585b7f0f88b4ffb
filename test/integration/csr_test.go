package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/server/issuance"
)

func p256(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestApprovedCSRIsSigned: an approved CSR gets a chain that verifies against the signer's CA,
// with the requested subject and SANs, CA:FALSE, a ≥128-bit serial and the lifetime
// min(expirationSeconds, the signer's maximum) with kube-controller-manager's backdating.
func TestApprovedCSRIsSigned(t *testing.T) {
	const maxLifetime = time.Hour
	s := newSignet(t, "it.signet.dev/approved", maxLifetime)
	s.startServer()
	s.startWatcher()
	alice, err := cluster.AddRequester("alice", []string{"team-payments"})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: "payments", Organization: []string{"team-payments"}},
		DNSNames:    []string{"payments.prod.svc", "payments.prod.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("10.0.0.7")},
		URIs:        []*url.URL{{Scheme: "spiffe", Host: "cluster.local", Path: "/ns/prod/sa/payments"}},
	}
	for _, tc := range []struct {
		name       string
		expiration *int32
		wantTTL    time.Duration
	}{
		{"requested 30m", ptr(int32(1800)), 30 * time.Minute},
		{"requested above the maximum", ptr(int32(7200)), maxLifetime},
		{"nothing requested", nil, maxLifetime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := p256(t)
			csr := submit(t, alice, s.signerName, key, tmpl, tc.expiration, certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth)
			if csr.Spec.Username != "alice" {
				t.Fatalf("spec.username = %q, want alice (the requester must be a distinct real user)", csr.Spec.Username)
			}
			approvedAt := time.Now()
			if err := cluster.Approve(context.Background(), csr.Name); err != nil {
				t.Fatal(err)
			}
			got := waitFor(t, alice.Client(), csr.Name, 30*time.Second, "signed", signed)
			chain := parseChain(t, got.Status.Certificate)
			leaf := chain[0]

			roots := x509.NewCertPool()
			roots.AddCert(s.caCert)
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Fatalf("chain does not verify against the signer CA: %v", err)
			}
			if !key.PublicKey.Equal(leaf.PublicKey) {
				t.Error("certificate is not for the requested key")
			}
			if leaf.Subject.CommonName != "payments" || !slices.Equal(leaf.Subject.Organization, []string{"team-payments"}) {
				t.Errorf("subject = %s, want CN=payments,O=team-payments", leaf.Subject)
			}
			if !slices.Equal(leaf.DNSNames, tmpl.DNSNames) || len(leaf.IPAddresses) != 1 || !leaf.IPAddresses[0].Equal(tmpl.IPAddresses[0]) ||
				len(leaf.URIs) != 1 || leaf.URIs[0].String() != tmpl.URIs[0].String() {
				t.Errorf("SANs = %v %v %v, want %v %v %v", leaf.DNSNames, leaf.IPAddresses, leaf.URIs, tmpl.DNSNames, tmpl.IPAddresses, tmpl.URIs)
			}
			if !leaf.BasicConstraintsValid || leaf.IsCA {
				t.Errorf("basic constraints valid=%t CA=%t, want CA:FALSE", leaf.BasicConstraintsValid, leaf.IsCA)
			}
			if leaf.SerialNumber.BitLen() < 128 {
				t.Errorf("serial has %d bits, want at least 128", leaf.SerialNumber.BitLen())
			}
			if leaf.KeyUsage != x509.KeyUsageDigitalSignature || !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
				t.Errorf("usages = %v %v, want digital signature + server auth only", leaf.KeyUsage, leaf.ExtKeyUsage)
			}
			// kube-controller-manager parity: NotBefore = signing time − 5 min; a lifetime under
			// 8 h ends at signing time + lifetime.
			if d := leaf.NotAfter.Sub(leaf.NotBefore); d != tc.wantTTL+issuance.Backdate {
				t.Errorf("NotAfter − NotBefore = %s, want %s + %s backdate", d, tc.wantTTL, issuance.Backdate)
			}
			if skew := leaf.NotAfter.Sub(approvedAt.Add(tc.wantTTL)); skew < -2*time.Second || skew > 30*time.Second {
				t.Errorf("NotAfter = %s, want about approval time + %s (%s)", leaf.NotAfter, tc.wantTTL, approvedAt.Add(tc.wantTTL))
			}
		})
	}
}

// TestOnlyApprovedCSRsOfServedSignersAreTouched: an unapproved CSR, a denied CSR and an
// approved CSR for a signer the watcher does not serve are never written to, while an approved
// CSR submitted after them is signed.
func TestOnlyApprovedCSRsOfServedSignersAreTouched(t *testing.T) {
	s := newSignet(t, "it.signet.dev/gating", time.Hour)
	s.startServer()
	s.startWatcher()
	bob, err := cluster.AddRequester("bob", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "bob"}}
	pending := submit(t, bob, s.signerName, p256(t), tmpl, nil)
	denied := submit(t, bob, s.signerName, p256(t), tmpl, nil)
	if err := cluster.Deny(ctx, denied.Name); err != nil {
		t.Fatal(err)
	}
	foreign := submit(t, bob, "it.signet.dev/not-served", p256(t), tmpl, nil)
	if err := cluster.Approve(ctx, foreign.Name); err != nil {
		t.Fatal(err)
	}
	control := submit(t, bob, s.signerName, p256(t), tmpl, nil)
	if err := cluster.Approve(ctx, control.Name); err != nil {
		t.Fatal(err)
	}
	waitFor(t, bob.Client(), control.Name, 30*time.Second, "signed", signed)
	// The watcher has handled everything queued before the control CSR; give a late write a
	// moment to show up before checking nothing happened.
	time.Sleep(time.Second)

	for _, c := range []struct {
		name, what string
		conditions int
	}{
		{pending.Name, "unapproved", 0},
		{denied.Name, "denied", 1},
		{foreign.Name, "approved for an unserved signer", 1},
	} {
		got, err := bob.Client().CertificatesV1().CertificateSigningRequests().Get(ctx, c.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if signed(got) {
			t.Errorf("%s CSR %s was signed", c.what, c.name)
		}
		if len(got.Status.Conditions) != c.conditions {
			t.Errorf("%s CSR %s has conditions %+v, want only the %d set by the test", c.what, c.name, got.Status.Conditions, c.conditions)
		}
	}
}

// TestRefusedCSRsFailWithReason: CSRs the apiserver accepts but the signer must refuse end
// Failed with a TitleCase reason and a message naming the rule, and a good CSR submitted
// after them is still signed.
func TestRefusedCSRsFailWithReason(t *testing.T) {
	s := newSignet(t, "it.signet.dev/refusals", time.Hour)
	s.startServer()
	s.startWatcher()
	carol, err := cluster.AddRequester("carol", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rsa1024, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	caTrue, err := asn1.Marshal(struct{ IsCA bool }{true})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, csr, wantReason, wantMessage string
	}{
		{name: "RSA-1024 key", wantReason: "UnsupportedKey", wantMessage: "RSA key has 1024 bits"},
		{name: "CA bit requested", wantReason: "PolicyViolation", wantMessage: "CA certificate"},
		{name: "cert sign usage", wantReason: "PolicyViolation", wantMessage: `"cert sign"`},
		// A request the apiserver stores (etcd allows 1.5 MiB) but Signet's limit refuses:
		// final, not retried until the watcher gives up.
		{name: "400 KiB request", wantReason: "MalformedRequest", wantMessage: "more than the 65536 Signet accepts"},
	}
	cases[0].csr = submit(t, carol, s.signerName, rsa1024, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "weak"}}, nil).Name
	cases[1].csr = submit(t, carol, s.signerName, p256(t), &x509.CertificateRequest{
		Subject:         pkix.Name{CommonName: "wants-ca"},
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 19}, Critical: true, Value: caTrue}},
	}, nil).Name
	cases[2].csr = submit(t, carol, s.signerName, p256(t), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "signs-certs"}}, nil,
		certificatesv1.UsageDigitalSignature, certificatesv1.UsageCertSign).Name
	cases[3].csr = submit(t, carol, s.signerName, p256(t), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "huge"},
		DNSNames: manyNames(1200, 250)}, nil).Name
	good := submit(t, carol, s.signerName, p256(t), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "fine"}}, nil)
	for _, name := range []string{cases[0].csr, cases[1].csr, cases[2].csr, cases[3].csr, good.Name} {
		if err := cluster.Approve(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range cases {
		got := waitFor(t, carol.Client(), tc.csr, 30*time.Second, "Failed", func(c *certificatesv1.CertificateSigningRequest) bool {
			return condition(c, certificatesv1.CertificateFailed) != nil
		})
		cond := condition(got, certificatesv1.CertificateFailed)
		if cond.Reason != tc.wantReason || !strings.Contains(cond.Message, tc.wantMessage) {
			t.Errorf("%s: Failed reason=%q message=%q, want reason %q and a message containing %q", tc.name, cond.Reason, cond.Message, tc.wantReason, tc.wantMessage)
		}
		if signed(got) {
			t.Errorf("%s: refused CSR carries a certificate", tc.name)
		}
	}
	waitFor(t, carol.Client(), good.Name, 30*time.Second, "signed", signed)
}

// TestWatcherWaitsForServer: with the server down at first, an approved CSR is neither
// signed nor failed; once the server comes up, it is signed.
func TestWatcherWaitsForServer(t *testing.T) {
	s := newSignet(t, "it.signet.dev/late-server", time.Hour)
	s.startWatcher()
	dave, err := cluster.AddRequester("dave", nil)
	if err != nil {
		t.Fatal(err)
	}
	csr := submit(t, dave, s.signerName, p256(t), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "dave"}}, nil)
	if err := cluster.Approve(context.Background(), csr.Name); err != nil {
		t.Fatal(err)
	}
	// Let the watcher try and fail a few times against the closed port.
	time.Sleep(3 * time.Second)
	got, err := dave.Client().CertificatesV1().CertificateSigningRequests().Get(context.Background(), csr.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if signed(got) || condition(got, certificatesv1.CertificateFailed) != nil {
		t.Fatalf("with the server down, CSR status = %+v; want it left alone", got.Status)
	}
	s.startServer()
	waitFor(t, dave.Client(), csr.Name, 30*time.Second, "signed after the server came up", signed)
}

func ptr[T any](v T) *T { return &v }

package profile_test

import (
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/profile"
)

// maxLifetime is the signer maximum of every test profile.
const maxLifetime = 24 * time.Hour

// Usage strings used throughout the tests.
const (
	ds  = "digital signature"
	ke  = "key encipherment"
	ca  = "client auth"
	sa  = "server auth"
	sig = "signing"
)

// node is the kubelet identity of the kubelet tests.
const node = "system:node:n1"

// nodeRequester is the requester a kubelet CSR for node carries.
var nodeRequester = issuance.Requester{Username: node, Groups: []string{"system:nodes", "system:authenticated"}}

// caseCSR is the request side of a table case: a template signed by a P-256 key unless key
// or pemCSR is set.
type caseCSR struct {
	tmpl   *x509.CertificateRequest
	key    testpki.KeyType
	pemCSR []byte
}

// ruleCase is one request and the rules it must fail, in the profile's order. An empty
// failed list means the request is accepted.
type ruleCase struct {
	name      string
	csr       caseCSR
	usages    []string
	requester *issuance.Requester
	failed    []string
	sentinel  error
}

// newProfile builds a profile or fails the test.
func newProfile(t testing.TB, spec profile.Spec) profile.Profile {
	t.Helper()
	p, err := profile.New(spec, maxLifetime)
	if err != nil {
		t.Fatalf("profile.New(%+v): %v", spec, err)
	}
	return p
}

// parse builds and parses the case's request with issuance.ParseCSR.
func (c caseCSR) parse(t testing.TB) *x509.CertificateRequest {
	t.Helper()
	data := c.pemCSR
	if data == nil {
		kt := c.key
		if kt == "" {
			kt = testpki.P256
		}
		data = testpki.CSR(t, testpki.Key(t, kt), c.tmpl)
	}
	csr, err := issuance.ParseCSR(data)
	if err != nil {
		t.Fatalf("ParseCSR: %v", err)
	}
	return csr
}

// runCases evaluates every case against p and checks the failed rules, the other rules'
// passing, the error and its sentinel. defaultRequester is used when a case sets none.
func runCases(t *testing.T, p profile.Profile, defaultRequester issuance.Requester, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requester := defaultRequester
			if tc.requester != nil {
				requester = *tc.requester
			}
			req := issuance.Request{Usages: tc.usages, Requester: requester}
			_, results, err := p.Evaluate(tc.csr.parse(t), req)
			checkResults(t, results, err, tc.failed, tc.sentinel)
		})
	}
}

// checkResults checks that exactly the rules containing the failed substrings failed, in
// order, and that err agrees: nil when none failed, else wrapping sentinel (default
// ErrPolicyViolation) and naming the first failed rule.
func checkResults(t testing.TB, results []issuance.RuleResult, err error, failed []string, sentinel error) {
	t.Helper()
	var got []issuance.RuleResult
	for _, r := range results {
		if !r.Passed {
			got = append(got, r)
		}
		if r.Detail == "" {
			t.Errorf("rule %q has no detail", r.Rule)
		}
	}
	if len(got) != len(failed) {
		t.Fatalf("failed rules = %s, want rules containing %q", dump(got), failed)
	}
	for i, r := range got {
		if !strings.Contains(r.Rule, failed[i]) {
			t.Fatalf("failed rule %d = %q, want one containing %q (failed: %s)", i, r.Rule, failed[i], dump(got))
		}
	}
	if len(failed) == 0 {
		if err != nil {
			t.Fatalf("Evaluate error = %v, want nil", err)
		}
		return
	}
	if sentinel == nil {
		sentinel = issuance.ErrPolicyViolation
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("Evaluate error = %v, want one wrapping %q", err, sentinel)
	}
	for _, s := range []error{issuance.ErrPolicyViolation, issuance.ErrUnsupportedKey, issuance.ErrMalformedRequest, issuance.ErrInvalidSignature} {
		if s != sentinel && errors.Is(err, s) {
			t.Fatalf("Evaluate error %v also wraps %q", err, s)
		}
	}
	if !strings.Contains(err.Error(), got[0].Rule) || !strings.Contains(err.Error(), got[0].Detail) {
		t.Fatalf("Evaluate error %q does not name the first failed rule %q with its detail %q", err, got[0].Rule, got[0].Detail)
	}
}

// dump formats rule results for failure messages.
func dump(results []issuance.RuleResult) string {
	var b strings.Builder
	for _, r := range results {
		b.WriteString("\n  " + r.Rule + " → " + r.Detail)
	}
	return b.String()
}

// ruleNames returns the Rule of every result.
func ruleNames(results []issuance.RuleResult) []string {
	out := make([]string, len(results))
	for i, r := range results {
		out[i] = r.Rule
	}
	return out
}

// subject returns a template with the given common name and organizations.
func subject(cn string, orgs ...string) *x509.CertificateRequest {
	return &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}}
}

// with applies modify functions to tmpl and returns it.
func with(tmpl *x509.CertificateRequest, modify ...func(*x509.CertificateRequest)) *x509.CertificateRequest {
	for _, m := range modify {
		m(tmpl)
	}
	return tmpl
}

// dns, ips, emails, uris and wantCA are template modifiers.
func dns(names ...string) func(*x509.CertificateRequest) {
	return func(r *x509.CertificateRequest) { r.DNSNames = append(r.DNSNames, names...) }
}

func ips(addrs ...string) func(*x509.CertificateRequest) {
	return func(r *x509.CertificateRequest) {
		for _, a := range addrs {
			r.IPAddresses = append(r.IPAddresses, net.ParseIP(a))
		}
	}
}

func emails(addrs ...string) func(*x509.CertificateRequest) {
	return func(r *x509.CertificateRequest) { r.EmailAddresses = append(r.EmailAddresses, addrs...) }
}

func uris(raw ...string) func(*x509.CertificateRequest) {
	return func(r *x509.CertificateRequest) {
		for _, s := range raw {
			u, err := url.Parse(s)
			if err != nil {
				panic(err)
			}
			r.URIs = append(r.URIs, u)
		}
	}
}

func wantCA(r *x509.CertificateRequest) {
	value, err := asn1.Marshal(struct{ IsCA bool }{IsCA: true})
	if err != nil {
		panic(err)
	}
	r.ExtraExtensions = append(r.ExtraExtensions, pkix.Extension{Id: testpki.OIDBasicConstraints, Critical: true, Value: value})
}

// rawCSR creates a request with key and parses it with x509 only, bypassing ParseCSR's key
// checks, to test that the profile's own key rule holds.
func rawCSR(t testing.TB, key crypto.Signer, tmpl *x509.CertificateRequest) *x509.CertificateRequest {
	t.Helper()
	block, _ := pem.Decode(testpki.CSR(t, key, tmpl))
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatalf("parsing CSR: %v", err)
	}
	return csr
}

// requester returns a pointer to a requester with the given user name and groups.
func requester(user string, groups ...string) *issuance.Requester {
	return &issuance.Requester{Username: user, Groups: groups}
}

// newTestCA returns a fresh test CA as an issuance CA.
func newTestCA(t testing.TB) *issuance.CA {
	t.Helper()
	a := testpki.CA(t)
	return &issuance.CA{Certificate: a.Cert, Key: a.Key}
}

// csrPEM returns a PEM request for tmpl signed by a fresh P-256 key.
func csrPEM(t testing.TB, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	return testpki.CSR(t, testpki.Key(t, testpki.P256), tmpl)
}

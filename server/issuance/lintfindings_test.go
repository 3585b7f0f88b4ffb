package issuance_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"strings"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/lint"
)

// The lint gate's warnings and notices do not stop issuance but come back with the
// certificate, so the service can show them: none with the default gate on an ordinary
// serving leaf; with the default exclusions lifted, the lints they silence are reported.
func TestIssueReturnsLintFindings(t *testing.T) {
	t.Parallel()
	ca := caOf(testpki.CA(t))
	csr := testpki.CSR(t, testpki.Key(t, testpki.P256), &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: "web"},
		DNSNames: []string{"web.example.com"},
	})
	issue := func(opts lint.Options) *issuance.Certificate {
		t.Helper()
		gate, err := lint.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		is, err := issuance.NewIssuer(issuance.IssuerOptions{
			SignerName: signerName, CA: ca, Policy: leafPolicy(t, 24*time.Hour), Lint: gate,
			Clock: testclock.NewFakePassiveClock(now),
		})
		if err != nil {
			t.Fatalf("NewIssuer: %v", err)
		}
		cert, err := is.Issue(request(csr, "digital signature", "server auth"))
		if err != nil {
			t.Fatalf("Issue: %v", err)
		}
		return cert
	}
	if got := issue(lint.Options{}).LintFindings; len(got) != 0 {
		t.Errorf("default gate: findings %q, want none", got)
	}
	got := strings.Join(issue(lint.Options{ReplaceDefaultExclusions: true}).LintFindings, "\n")
	found := 0
	for _, e := range lint.DefaultExclusions() {
		if strings.Contains(got, e.Lint) {
			found++
		}
	}
	if found == 0 {
		t.Errorf("no exclusions: findings %q name none of the default exclusions", got)
	}
}

package profile_test

import (
	"crypto/x509"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/profile"
)

// TestEvaluateDecision checks the lifetime and usages of the decision.
func TestEvaluateDecision(t *testing.T) {
	t.Parallel()
	p := newProfile(t, profile.Spec{Name: profile.NameLegacyUnknown})
	csr := caseCSR{tmpl: subject("x")}.parse(t)
	seconds := func(s int32) *int32 { return &s }
	tests := []struct {
		name    string
		exp     *int32
		usages  []string
		life    time.Duration
		ku      x509.KeyUsage
		ekus    []x509.ExtKeyUsage
		wantErr bool
	}{
		{"absent expiration", nil, []string{ds, ke, sa}, maxLifetime, x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, false},
		{"600 seconds", seconds(600), []string{sig, ca, sa}, 10 * time.Minute, x509.KeyUsageDigitalSignature, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, false},
		{"below the floor", seconds(60), []string{ca}, 10 * time.Minute, 0, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false},
		{"above the maximum", seconds(10 * 24 * 3600), []string{ca}, maxLifetime, 0, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false},
		{"an hour", seconds(3600), []string{ds}, time.Hour, x509.KeyUsageDigitalSignature, nil, false},
		{"unknown usage", seconds(3600), []string{ds, "x"}, time.Hour, 0, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, _, err := p.Evaluate(csr, issuance.Request{Usages: tt.usages, ExpirationSeconds: tt.exp})
			if (err != nil) != tt.wantErr {
				t.Fatalf("Evaluate error = %v, want error %v", err, tt.wantErr)
			}
			if d.Lifetime != tt.life || d.KeyUsage != tt.ku || !slices.Equal(d.ExtKeyUsage, tt.ekus) {
				t.Errorf("decision = %+v, want lifetime %s, key usage %b, extended %v", d, tt.life, tt.ku, tt.ekus)
			}
		})
	}
}

// TestEvaluateSeveralFailures checks that every rule is evaluated after a failure, that the
// results list every rule with its outcome, and that the error names the first failure and
// counts the others.
func TestEvaluateSeveralFailures(t *testing.T) {
	t.Parallel()
	p := newProfile(t, profile.Spec{Name: profile.NameKubeletServing})
	csr := caseCSR{tmpl: with(subject("alice", "system:nodes"), emails("a@example.com"))}.parse(t)
	_, results, err := p.Evaluate(csr, issuance.Request{Usages: []string{ds, ke, sa}, Requester: nodeRequester})
	want := []struct {
		rule   string
		passed bool
		detail string
	}{
		{rKey, true, "key is ECDSA-P256"},
		{rCA, true, "no basic constraints requested"},
		{rKnown, true, `usages are ["digital signature" "key encipherment" "server auth"]`},
		{rLeaf, true, "usages are"},
		{rNames, true, "well formed"},
		{rOrg, true, `organizations are ["system:nodes"]`},
		{rDNSOrIP, false, `email addresses ["a@example.com"]`},
		{rNoEmailURI, false, `email addresses ["a@example.com"]`},
		{rExactly, true, "usages are"},
		{rCN, false, `common name is "alice"`},
		{rUser, false, `username is "system:node:n1", common name is "alice"`},
		{rGroup, true, `groups are ["system:nodes" "system:authenticated"]`},
	}
	if len(results) != len(want) {
		t.Fatalf("results:%s\nwant %d rules", dump(results), len(want))
	}
	for i, w := range want {
		r := results[i]
		if !strings.Contains(r.Rule, w.rule) || r.Passed != w.passed || !strings.Contains(r.Detail, w.detail) {
			t.Errorf("result %d = %+v, want rule containing %q, passed %v, detail containing %q", i, r, w.rule, w.passed, w.detail)
		}
	}
	if !errors.Is(err, issuance.ErrPolicyViolation) {
		t.Fatalf("error = %v", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, `rule "sans: at least one DNS name or IP address" failed: policy violation: email addresses ["a@example.com"]`) ||
		!strings.HasSuffix(msg, "(3 more rules failed)") {
		t.Errorf("error = %q", msg)
	}
}

// TestEvaluateZeroProfile checks that the zero Profile refuses with one failed rule.
func TestEvaluateZeroProfile(t *testing.T) {
	t.Parallel()
	var p profile.Profile
	csr := caseCSR{tmpl: subject("x")}.parse(t)
	_, results, err := p.Evaluate(csr, issuance.Request{Usages: []string{ca}})
	if !errors.Is(err, issuance.ErrPolicyViolation) || len(results) != 1 || results[0].Passed {
		t.Fatalf("zero profile: results %v, error %v", results, err)
	}
	p = newProfile(t, profile.Spec{Name: profile.NameLegacyUnknown})
	_, results, err = p.Evaluate(nil, issuance.Request{Usages: []string{ca}})
	if !errors.Is(err, issuance.ErrMalformedRequest) || len(results) != 1 || results[0].Passed {
		t.Fatalf("nil request: results %v, error %v", results, err)
	}
}

// TestProfileKeepsItsSpec checks that changing the caller's spec after New changes nothing.
func TestProfileKeepsItsSpec(t *testing.T) {
	t.Parallel()
	spec := meshSpec()
	spec.PrivilegedGroups = []string{"system:masters"}
	p := newProfile(t, spec)
	spec.PrivilegedGroups[0] = "other"
	spec.Custom.Usages.Allowed[0] = "cert sign"
	spec.Custom.KeyTypes[0] = "RSA-2048"
	if got := p.Spec(); got.PrivilegedGroups[0] != "system:masters" || got.Custom.Usages.Allowed[0] != ds || got.Custom.KeyTypes[0] != "ECDSA-P256" {
		t.Errorf("Spec() = %+v changed with the caller's copy", got)
	}
	if p.Name() != profile.NameCustom || p.MaxLifetime() != maxLifetime {
		t.Errorf("Name, MaxLifetime = %q, %s", p.Name(), p.MaxLifetime())
	}
	var _ issuance.Policy = p
}

// TestIssuerWithProfile runs a profile through the issuance pipeline end to end.
func TestIssuerWithProfile(t *testing.T) {
	t.Parallel()
	p := newProfile(t, profile.Spec{Name: profile.NameKubeletServing})
	authority := newTestCA(t)
	is, err := issuance.NewIssuer(issuance.IssuerOptions{SignerName: "kubernetes.io/kubelet-serving", CA: authority, Policy: p})
	if err != nil {
		t.Fatalf("NewIssuer: %v", err)
	}
	req := issuance.Request{
		SignerName: "kubernetes.io/kubelet-serving",
		PEM:        csrPEM(t, with(subject(node, "system:nodes"), dns("n1"), ips("10.0.0.1"))),
		Usages:     []string{ds, sa},
		Requester:  nodeRequester,
	}
	cert, err := is.Issue(req)
	if err != nil {
		t.Fatalf("Issue: %v", err)
	}
	if cert.Leaf.Subject.CommonName != node || !slices.Equal(cert.Leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Errorf("leaf = %v, %v", cert.Leaf.Subject, cert.Leaf.ExtKeyUsage)
	}
	req.Requester = issuance.Requester{Username: "system:node:n2", Groups: []string{"system:nodes"}}
	if _, err := is.Issue(req); !errors.Is(err, issuance.ErrPolicyViolation) || !strings.Contains(err.Error(), "requester: username equals the common name") {
		t.Errorf("Issue for another node: %v", err)
	}
}

package profile_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"testing"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/profile"
)

// Substrings that identify the custom rules.
const (
	rCustomCN    = "subject: common name"
	rCustomOrg   = "organization"
	rOtherAttrs  = "only common name and organization attributes"
	rCustomDNS   = "DNS names"
	rCustomIP    = "IP addresses"
	rCustomURI   = "URIs"
	rCustomEmail = "email addresses"
	rAnySAN      = "sans: at least one"
	rCustomMost  = "usages: at most"
	rRequired    = "usages: include server auth"
)

// meshSpec is a custom profile for service-mesh workloads, using every kind of pattern.
func meshSpec() profile.Spec {
	return profile.Spec{Name: profile.NameCustom, Custom: &profile.CustomSpec{
		Subject: profile.SubjectSpec{CommonNames: []string{"svc-*", "*.mesh.internal"}, Organizations: []string{"team-*"}},
		SANs: profile.SANSpec{
			DNS:      []string{"*.*.svc.cluster.local", "API.example.com", "**.apps.example.com"},
			IP:       []string{"10.0.0.0/8", "fd00::/8", "192.0.2.7"},
			URI:      []string{"spiffe://cluster.local/ns/*/sa/*", "https://id.example.com/**"},
			Email:    []string{"*@Example.com"},
			Required: true,
		},
		Usages:   profile.UsageSpec{Allowed: []string{ds, ke, sa, ca}, Required: []string{sa}},
		KeyTypes: []string{"ECDSA-P256", "Ed25519"},
	}}
}

// TestCustomPatterns covers the custom profile's subject, SAN, usage and key rules.
func TestCustomPatterns(t *testing.T) {
	t.Parallel()
	p := newProfile(t, meshSpec())
	svc := func(modify ...func(*x509.CertificateRequest)) caseCSR {
		return caseCSR{tmpl: with(subject("svc-web", "team-a"), modify...)}
	}
	u := []string{ds, sa}
	runCases(t, p, issuance.Requester{}, []ruleCase{
		{name: "service DNS", csr: svc(dns("web.prod.svc.cluster.local")), usages: u},
		{name: "DNS case-insensitive", csr: svc(dns("api.EXAMPLE.com")), usages: u},
		{name: "DNS double star", csr: svc(dns("a.b.c.apps.example.com")), usages: u},
		{name: "DNS one label short", csr: svc(dns("web.svc.cluster.local")), usages: u, failed: []string{rCustomDNS}},
		{name: "DNS one label long", csr: svc(dns("a.web.prod.svc.cluster.local")), usages: u, failed: []string{rCustomDNS}},
		{name: "DNS suffix trick", csr: svc(dns("web.prod.svc.cluster.local.evil.com")), usages: u, failed: []string{rCustomDNS}},
		{name: "DNS wildcard requested", csr: svc(dns("*.prod.svc.cluster.local")), usages: u, failed: []string{rCustomDNS}},
		{name: "DNS bad label", csr: svc(dns("-x.prod.svc.cluster.local")), usages: u, failed: []string{rNames, rCustomDNS}},
		// The names rule holds on custom profiles too (issue 18): the lint gate is not the
		// only guard against control characters.
		{name: "DNS punycode of a C1 control", csr: svc(dns("xn--a.apps.example.com")), usages: u, failed: []string{rNames}},
		{name: "control character in the common name", csr: caseCSR{tmpl: with(subject("svc-\x1b[31mweb", "team-a"), dns("web.prod.svc.cluster.local"))},
			usages: u, failed: []string{rNames}},
		{name: "subject attribute that is not a string", csr: caseCSR{tmpl: with(subject("svc-web", "team-a"), dns("web.prod.svc.cluster.local"), func(r *x509.CertificateRequest) {
			r.Subject.ExtraNames = []pkix.AttributeTypeAndValue{{Type: asn1.ObjectIdentifier{2, 5, 4, 10}, Value: 42}}
		})}, usages: u, failed: []string{rNames}, sentinel: issuance.ErrMalformedRequest},
		{name: "IPv4 in range", csr: svc(ips("10.1.2.3")), usages: u},
		{name: "IPv6 in range", csr: svc(ips("fd00::1")), usages: u},
		{name: "single address", csr: svc(ips("192.0.2.7")), usages: u},
		{name: "IPv4 outside", csr: svc(ips("11.0.0.1")), usages: u, failed: []string{rCustomIP}},
		{name: "next to the single address", csr: svc(ips("192.0.2.8")), usages: u, failed: []string{rCustomIP}},
		{name: "one of two IPs outside", csr: svc(ips("10.0.0.1", "2001:db8::1")), usages: u, failed: []string{rCustomIP}},
		{name: "SPIFFE ID", csr: svc(uris("spiffe://cluster.local/ns/prod/sa/web")), usages: u},
		{name: "URI double star", csr: svc(uris("https://id.example.com/a/b/c")), usages: u},
		{name: "SPIFFE extra segment", csr: svc(uris("spiffe://cluster.local/ns/prod/x/sa/web")), usages: u, failed: []string{rCustomURI}},
		{name: "SPIFFE other trust domain", csr: svc(uris("spiffe://other.local/ns/prod/sa/web")), usages: u, failed: []string{rCustomURI}},
		{name: "URI with query", csr: svc(uris("spiffe://cluster.local/ns/prod/sa/web?x=1")), usages: u, failed: []string{rCustomURI}},
		{name: "URI with fragment", csr: svc(uris("https://id.example.com/a#b")), usages: u, failed: []string{rCustomURI}},
		{name: "URI with user", csr: svc(uris("https://root@id.example.com/a")), usages: u, failed: []string{rCustomURI}},
		{name: "URI with dot segment", csr: svc(uris("https://id.example.com/a/../../b")), usages: u, failed: []string{rCustomURI}},
		{name: "email", csr: svc(emails("web@example.COM")), usages: u},
		{name: "email other domain", csr: svc(emails("web@evil.com")), usages: u, failed: []string{rCustomEmail}},
		{name: "email subdomain", csr: svc(emails("web@x.example.com")), usages: u, failed: []string{rCustomEmail}},
		{name: "no SAN", csr: svc(), usages: u, failed: []string{rAnySAN}},
		{name: "common name pattern two", csr: caseCSR{tmpl: with(subject("db.mesh.internal", "team-b"), dns("a.b.svc.cluster.local"))}, usages: u},
		{name: "common name mismatch", csr: caseCSR{tmpl: with(subject("web", "team-a"), dns("a.b.svc.cluster.local"))}, usages: u, failed: []string{rCustomCN}},
		{name: "empty common name", csr: caseCSR{tmpl: with(subject("", "team-a"), dns("a.b.svc.cluster.local"))}, usages: u, failed: []string{rCustomCN}},
		{name: "organization mismatch", csr: svc(dns("a.b.svc.cluster.local"), func(r *x509.CertificateRequest) {
			r.Subject.Organization = append(r.Subject.Organization, "ops")
		}), usages: u, failed: []string{rCustomOrg}},
		{name: "other subject attribute", csr: svc(dns("a.b.svc.cluster.local"), func(r *x509.CertificateRequest) {
			r.Subject.OrganizationalUnit = []string{"x"}
			r.Subject.Country = []string{"NL"}
		}), usages: u, failed: []string{rOtherAttrs}},
		{name: "usage not allowed", csr: svc(dns("a.b.svc.cluster.local")), usages: []string{sa, "code signing"}, failed: []string{rCustomMost}},
		{name: "required usage missing", csr: svc(dns("a.b.svc.cluster.local")), usages: []string{ds, ca}, failed: []string{rRequired}},
		{name: "Ed25519 key", csr: caseCSR{tmpl: with(subject("svc-web"), dns("a.b.svc.cluster.local")), key: testpki.Ed25519}, usages: u},
		{name: "RSA key refused", csr: caseCSR{tmpl: with(subject("svc-web"), dns("a.b.svc.cluster.local")), key: testpki.RSA2048}, usages: u,
			failed: []string{rKey}, sentinel: issuance.ErrUnsupportedKey},
		{name: "P-384 key refused", csr: caseCSR{tmpl: with(subject("svc-web"), dns("a.b.svc.cluster.local")), key: testpki.P384}, usages: u,
			failed: []string{rKey}, sentinel: issuance.ErrUnsupportedKey},
		{name: "key and policy both fail", csr: caseCSR{tmpl: with(subject("web"), dns("a.b.svc.cluster.local")), key: testpki.P384}, usages: u,
			failed: []string{rKey, rCustomCN}, sentinel: issuance.ErrUnsupportedKey},
		{name: "CA requested", csr: svc(dns("a.b.svc.cluster.local"), wantCA), usages: u, failed: []string{rCA}},
		{name: "cert sign", csr: svc(dns("a.b.svc.cluster.local")), usages: []string{sa, "cert sign"}, failed: []string{rLeaf, rCustomMost}},
	})
}

// TestCustomPrivileged covers the privileged rule on a custom profile: it applies only when
// the certificate can authenticate clients.
func TestCustomPrivileged(t *testing.T) {
	t.Parallel()
	spec := profile.Spec{Name: profile.NameCustom, Custom: &profile.CustomSpec{
		Subject: profile.SubjectSpec{CommonNames: []string{"*"}, Organizations: []string{"*"}},
		Usages:  profile.UsageSpec{Allowed: []string{ds, sa, ca, "any"}},
	}}
	p := newProfile(t, spec)
	masters := caseCSR{tmpl: subject("root", "system:masters")}
	runCases(t, p, issuance.Requester{}, []ruleCase{
		{name: "server auth only", csr: masters, usages: []string{sa}},
		{name: "client auth", csr: masters, usages: []string{sa, ca}, failed: []string{rPriv}},
		{name: "any", csr: masters, usages: []string{"any"}, failed: []string{rPriv}},
		{name: "no extended key usage", csr: masters, usages: []string{ds}, failed: []string{rPriv}},
		{name: "ordinary group", csr: caseCSR{tmpl: subject("u", "dev")}, usages: []string{ca}},
	})
	spec.AllowPrivileged = true
	runCases(t, newProfile(t, spec), issuance.Requester{}, []ruleCase{
		{name: "client auth allowed", csr: masters, usages: []string{ca}},
	})
}

// TestCustomMinimal covers a custom profile with nothing but usages: an empty subject and no
// SANs.
func TestCustomMinimal(t *testing.T) {
	t.Parallel()
	p := newProfile(t, profile.Spec{Name: profile.NameCustom, Custom: &profile.CustomSpec{
		Usages:  profile.UsageSpec{Allowed: []string{ca}},
		Subject: profile.SubjectSpec{AllowOtherAttributes: true},
	}})
	runCases(t, p, issuance.Requester{}, []ruleCase{
		{name: "empty subject", csr: caseCSR{tmpl: &x509.CertificateRequest{}}, usages: []string{ca}},
		{name: "other attributes allowed", csr: caseCSR{tmpl: &x509.CertificateRequest{Subject: pkix.Name{Country: []string{"NL"}}}}, usages: []string{ca}},
		{name: "common name", csr: caseCSR{tmpl: subject("x")}, usages: []string{ca}, failed: []string{"subject: common name empty"}},
		{name: "organization", csr: caseCSR{tmpl: subject("", "o")}, usages: []string{ca}, failed: []string{"subject: no organization"}},
		{name: "every SAN type", csr: caseCSR{tmpl: with(subject(""), dns("a"), ips("10.0.0.1"), uris("urn:a"), emails("a@b"))}, usages: []string{ca},
			failed: []string{"sans: no DNS names", "sans: no IP addresses", "sans: no URIs", "sans: no email addresses"}},
	})
	_, results, _ := p.Evaluate(caseCSR{tmpl: &x509.CertificateRequest{}}.parse(t), issuance.Request{Usages: []string{ca}})
	for _, r := range results {
		if r.Rule == "subject: only common name and organization attributes" || r.Rule == "sans: at least one" || r.Rule == "usages: include client auth" {
			t.Errorf("rule %q is listed but not configured", r.Rule)
		}
	}
}

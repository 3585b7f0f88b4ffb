package profile_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/lint"
	"github.com/signet-pki/signet/server/profile"
)

// kubernetesProfiles are the profiles that reproduce kube-controller-manager's signers.
var kubernetesProfiles = []string{profile.NameKubeAPIServerClient, profile.NameKubeAPIServerClientKubelet, profile.NameKubeletServing, profile.NameLegacyUnknown}

// TestLintOptions: the kubernetes.io profiles accept, by design and with a reason, the
// findings of lints that flag what their rules accept; configured options pass through
// unchanged (exclusions add to the defaults inside the gate); custom and pod-identity profiles
// add nothing.
func TestLintOptions(t *testing.T) {
	t.Parallel()
	configured := lint.Options{Exclude: []string{"e_rfc_dnsname_empty_label"}, Sources: []string{"RFC5280"}}
	for _, name := range kubernetesProfiles {
		got := newProfile(t, profile.Spec{Name: name}).LintOptions(configured)
		if !slices.Equal(got.Exclude, configured.Exclude) || !slices.Equal(got.Sources, configured.Sources) || got.ReplaceDefaultExclusions {
			t.Errorf("%s: configured options became %+v", name, got)
		}
		var accepted []string
		for _, a := range got.Accept {
			if a.Reason == "" {
				t.Errorf("%s: %s accepted without a reason", name, a.Lint)
			}
			accepted = append(accepted, a.Lint)
		}
		for _, want := range []string{"e_key_usage_and_extended_key_usage_inconsistent", "e_ecdsa_allowed_ku", "n_ecdsa_ee_invalid_ku", "e_subject_common_name_max_length"} {
			if !slices.Contains(accepted, want) {
				t.Errorf("%s: accepted findings %v lack %s", name, accepted, want)
			}
		}
		if _, err := lint.New(got); err != nil {
			t.Errorf("%s: the options do not build a gate: %v", name, err)
		}
	}
	custom := newProfile(t, profile.Spec{Name: profile.NameCustom, Custom: &profile.CustomSpec{Usages: profile.UsageSpec{Allowed: []string{ca}}}})
	if got := custom.LintOptions(configured); got.Accept != nil || !slices.Equal(got.Exclude, configured.Exclude) {
		t.Errorf("custom: options %+v, want the configured ones alone", got)
	}
}

// walkKeys are the key types every kubernetes.io profile accepts.
var walkKeys = []testpki.KeyType{testpki.RSA2048, testpki.RSA3072, testpki.RSA4096, testpki.P256, testpki.P384, testpki.P521, testpki.Ed25519}

// walkCase is one request of the walk.
type walkCase struct {
	name   string
	key    testpki.KeyType
	tmpl   *x509.CertificateRequest
	usages []string
	user   issuance.Requester
}

// TestDefaultGatePassesWhatProfilesAccept walks, for each kubernetes.io profile with the
// default lint gate, every usage set the profile accepts (as sets: every order and repeats
// give the same certificate) × every key type it accepts, then the subject and SAN shapes it
// accepts × every key type, and checks that each request is issued: the lint gate never
// refuses what the profile's rules accept. For legacy-unknown, which accepts any known usage,
// every combination of key usage bits is walked with no, each single and the client+server
// extended key usage, on an RSA, an ECDSA and an Ed25519 key.
func TestDefaultGatePassesWhatProfilesAccept(t *testing.T) {
	t.Parallel()
	for _, name := range kubernetesProfiles {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			is := defaultGateIssuer(t, name)
			cases := walk(name)
			csrs := walkCSRs(t, cases)
			var failures []string
			for i, c := range cases {
				_, err := is.Issue(issuance.Request{SignerName: "kubernetes.io/" + name, PEM: csrs[i], Usages: c.usages, Requester: c.user})
				var lintErr *lint.FailedError
				switch {
				case errors.As(err, &lintErr):
					failures = append(failures, fmt.Sprintf("%s: lint gate refused: %v", c.name, err))
				case err != nil:
					failures = append(failures, fmt.Sprintf("%s: refused: %v", c.name, err))
				}
			}
			if len(failures) > 0 {
				t.Errorf("%d of %d accepted requests not issued, e.g.:\n%s", len(failures), len(cases), strings.Join(failures[:min(len(failures), 10)], "\n"))
			}
			t.Logf("%d requests issued", len(cases)-len(failures))
		})
	}
}

// TestMalformedNamesRefusedByProfile: names no certificate should carry are refused by the
// kubernetes.io profiles' names rule (a policy violation that names the rule and the name),
// never by the lint gate, which would contradict what the profile says it accepts.
func TestMalformedNamesRefusedByProfile(t *testing.T) {
	t.Parallel()
	malformed := map[string]*x509.CertificateRequest{
		"empty label":           with(subject("x"), dns("a..example.com")),
		"trailing dot":          with(subject("x"), dns("example.com.")),
		"leading dot":           with(subject("x"), dns(".example.com")),
		"NUL in DNS name":       with(subject("x"), dns("a\x00b.example.com")),
		"bare wildcard":         with(subject("x"), dns("*")),
		"inner wildcard":        with(subject("x"), dns("a.*.example.com")),
		"partial wildcard":      with(subject("x"), dns("a*.example.com")),
		"hyphen at label edge":  with(subject("x"), dns("a.-b.example.com")),
		"label over 63":         with(subject("x"), dns(strings.Repeat("l", 64)+".example.com")),
		"name over 253":         with(subject("x"), dns(strings.Repeat("a.", 127)+"com")),
		"broken punycode":       with(subject("x"), dns("xn--a-b-c-d.example.com")),
		"space in DNS name":     with(subject("x"), dns(" ")),
		"inner space":           with(subject("x"), dns("a b.example.com")),
		"underscore":            with(subject("x"), dns("_srv.example.com")),
		"ESC in DNS name":       with(subject("x"), dns("a\x1b[31m.example.com")),
		"DEL in DNS name":       with(subject("x"), dns("a\x7f.example.com")),
		"TAB in DNS name":       with(subject("x"), dns("a\tb.example.com")),
		"email with space":      with(subject("x"), emails("a b@example.com")),
		"email display name":    with(subject("x"), emails("<a@example.com>")),
		"relative URI":          with(subject("x"), uris("relative/path")),
		"URI with nothing":      with(subject("x"), uris("http://")),
		"control character CN":  subject("alice\x07"),
		"control character O":   subject("alice", "dev\x1b[31m"),
		"replacement character": subject("alice\ufffd"),
	}
	for _, name := range []string{profile.NameKubeAPIServerClient, profile.NameLegacyUnknown} {
		is := defaultGateIssuer(t, name)
		for label, tmpl := range malformed {
			_, err := is.Issue(issuance.Request{SignerName: "kubernetes.io/" + name, PEM: testpki.CSR(t, testpki.Key(t, testpki.P256), tmpl), Usages: []string{ds, ca}})
			if !errors.Is(err, issuance.ErrPolicyViolation) || !strings.Contains(err.Error(), rNames) {
				t.Errorf("%s, %s: %v; want a policy violation of the names rule", name, label, err)
			}
		}
	}
}

// defaultGateIssuer returns an issuer for kubernetes.io/<name> with the profile's defaults and
// the default lint gate.
func defaultGateIssuer(t *testing.T, name string) *issuance.Issuer {
	t.Helper()
	p := newProfile(t, profile.Spec{Name: name})
	gate, err := lint.New(p.LintOptions(lint.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	is, err := issuance.NewIssuer(issuance.IssuerOptions{SignerName: "kubernetes.io/" + name, CA: newTestCA(t), Policy: p, Lint: gate})
	if err != nil {
		t.Fatal(err)
	}
	return is
}

// walkCSRs signs the request of every case, one CSR per key type and template.
func walkCSRs(t *testing.T, cases []walkCase) [][]byte {
	t.Helper()
	type shape struct {
		key  testpki.KeyType
		tmpl *x509.CertificateRequest
	}
	memo := map[shape][]byte{}
	out := make([][]byte, len(cases))
	for i, c := range cases {
		s := shape{c.key, c.tmpl}
		if memo[s] == nil {
			memo[s] = testpki.CSR(t, testpki.Key(t, c.key), c.tmpl)
		}
		out[i] = memo[s]
	}
	return out
}

// walk returns the cases of profile name: its usage sets × keys, then its name shapes × keys.
func walk(name string) []walkCase {
	node := "system:node:worker-1"
	nodeUser := issuance.Requester{Username: node, Groups: []string{"system:nodes", "system:authenticated"}}
	nodeSubject := subject(node, "system:nodes")
	var cases []walkCase
	add := func(label string, tmpl *x509.CertificateRequest, user issuance.Requester, usageSets [][]string, keys []testpki.KeyType) {
		for _, kt := range keys {
			for _, u := range usageSets {
				cases = append(cases, walkCase{name: fmt.Sprintf("%s %s %q", label, kt, u), key: kt, tmpl: tmpl, usages: u, user: user})
			}
		}
	}
	switch name {
	case profile.NameKubeAPIServerClient:
		add("usages", subject("alice", "dev"), issuance.Requester{}, withClientAuth([]string{ds, ke}, ca), walkKeys)
		for label, tmpl := range clientNameShapes() {
			add(label, tmpl, issuance.Requester{}, [][]string{{ds, ke, ca}}, walkKeys)
		}
	case profile.NameKubeAPIServerClientKubelet:
		add("usages", nodeSubject, nodeUser, [][]string{{ds, ca}, {ca, ds}, {ds, ke, ca}, {ke, ca, ds}, {ds, ca, ca}}, walkKeys)
		long := "system:node:" + strings.Repeat("n", 63) + "." + strings.Repeat("d", 63) + ".example.internal"
		add("long node name", subject(long, "system:nodes"), issuance.Requester{Username: long, Groups: []string{"system:nodes"}}, [][]string{{ds, ke, ca}}, walkKeys)
	case profile.NameKubeletServing:
		sets := [][]string{{ds, sa}, {sa, ds}, {ds, ke, sa}, {ke, sa, ds}}
		add("usages", with(subject(node, "system:nodes"), dns("worker-1"), ips("192.0.2.10")), nodeUser, sets, walkKeys)
		for label, tmpl := range servingNameShapes(node) {
			add(label, tmpl, nodeUser, [][]string{{ds, ke, sa}}, walkKeys)
		}
	case profile.NameLegacyUnknown:
		add("usages", subject("anything", "whatever"), issuance.Requester{}, legacyUsageSets(), []testpki.KeyType{testpki.RSA2048, testpki.P256, testpki.Ed25519})
		add("node-like subject", subject("system:node:x", "system:nodes"), issuance.Requester{}, [][]string{{ds, ke, sa, ca}}, walkKeys)
		for label, tmpl := range clientNameShapes() {
			add(label, tmpl, issuance.Requester{}, [][]string{{ds, ke, sa, ca}}, walkKeys)
		}
	}
	return cases
}

// withClientAuth returns every subset of optional, each with required added last.
func withClientAuth(optional []string, required string) [][]string {
	var sets [][]string
	for mask := 0; mask < 1<<len(optional); mask++ {
		var set []string
		for i, u := range optional {
			if mask&(1<<i) != 0 {
				set = append(set, u)
			}
		}
		sets = append(sets, append(set, required))
	}
	return sets
}

// legacyUsageSets returns every combination of the seven key usage bits (signing and digital
// signature are the same bit) with no extended key usage, each single one, and server+client
// auth; and every extended key usage alone.
func legacyUsageSets() [][]string {
	bits := []string{ds, "content commitment", ke, "key agreement", "data encipherment", "encipher only", "decipher only"}
	ekus := []string{"", "any", sa, ca, "code signing", "email protection", "ipsec end system", "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc", sa + "+" + ca}
	var sets [][]string
	for mask := 0; mask < 1<<len(bits); mask++ {
		for _, e := range ekus {
			var set []string
			for i, b := range bits {
				if mask&(1<<i) != 0 {
					set = append(set, b)
				}
			}
			if e != "" {
				set = append(set, strings.Split(e, "+")...)
			}
			if len(set) > 0 {
				sets = append(sets, set)
			}
		}
	}
	return sets
}

// clientNameShapes are the subjects and SANs kube-apiserver-client and legacy-unknown accept:
// long Kubernetes names, empty subjects, several organizations and other attributes, and
// every SAN type.
func clientNameShapes() map[string]*x509.CertificateRequest {
	sa := "system:serviceaccount:" + strings.Repeat("namespace-", 6) + ":" + strings.Repeat("account-", 6)
	return map[string]*x509.CertificateRequest{
		"service account CN over 64":             subject(sa, "system:serviceaccounts", "system:serviceaccounts:"+strings.Repeat("namespace-", 6)),
		"organization over 64":                   subject("alice", strings.Repeat("team-", 20)),
		"empty subject, no SAN":                  {},
		"empty subject with DNS SAN":             with(&x509.CertificateRequest{}, dns("api.example.com")),
		"only organizations":                     subject("", "dev", "ops"),
		"lower-case country and a serial number": {Subject: pkix.Name{CommonName: "alice", Country: []string{"de"}, SerialNumber: "emp_0042"}},
		"several organizations":                  subject("alice", "dev", "ops", "audit"),
		"other attributes":                       {Subject: pkix.Name{CommonName: "alice", Organization: []string{"dev"}, OrganizationalUnit: []string{"platform"}, Country: []string{"DE"}, Province: []string{"Berlin"}, Locality: []string{"Berlin"}}},
		"every SAN type":                         with(subject("alice"), dns("a.example.com", "node-1"), ips("10.0.0.1", "2001:db8::1"), emails("alice@example.com"), uris("spiffe://cluster.local/ns/a/sa/b", "https://a.example.com/x")),
		"wildcard DNS":                           with(subject("web"), dns("*.apps.example.com")),
		"single-label DNS and IPv6":              with(subject("web"), dns("web"), ips("fd00::10")),
		"email only":                             with(subject(""), emails("bob@example.com")),
		"URI only":                               with(subject(""), uris("spiffe://cluster.local/ns/default/sa/builder")),
		"CN over 64 with every SAN":              with(subject(strings.Repeat("c", 80)), dns("a.example.com"), ips("10.0.0.2"), emails("c@example.com"), uris("urn:example:c")),
		"punycode, URI ports and opaque URIs": with(subject("svc"), dns("xn--nxasmq6b.example.com", "a-b.example.com"),
			uris("spiffe://prod/ns/a/sa/b", "https://api.internal:8443/x", "urn:example:a", "mailto:a@example.com")),
	}
}

// servingNameShapes are the SANs kubelet-serving accepts for node: DNS only, IP only, both
// families, many names, a long node name.
func servingNameShapes(node string) map[string]*x509.CertificateRequest {
	return map[string]*x509.CertificateRequest{
		"DNS only":           with(subject(node, "system:nodes"), dns("worker-1.cluster.internal")),
		"IPv4 only":          with(subject(node, "system:nodes"), ips("10.1.2.3")),
		"IPv6 only":          with(subject(node, "system:nodes"), ips("fd00::1")),
		"dual stack":         with(subject(node, "system:nodes"), dns("worker-1"), ips("10.1.2.3", "fd00::1")),
		"many names":         with(subject(node, "system:nodes"), dns("worker-1", "worker-1.example.com", "ip-10-1-2-3.ec2.internal"), ips("10.1.2.3", "192.0.2.1", "fd00::2")),
		"63-character label": with(subject(node, "system:nodes"), dns(strings.Repeat("w", 63)+".example.com")),
	}
}

package profile_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"slices"
	"strings"
	"testing"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/profile"
)

// Substrings that identify each rule in the tables.
const (
	rKey          = "key: "
	rCA           = "ca: no CA certificate requested"
	rKnown        = "each a known certificates.k8s.io/v1 usage"
	rLeaf         = "no cert sign or crl sign"
	rNames        = "names: well formed"
	rIncludeCA    = "usages: include client auth"
	rAtMost       = "usages: at most digital signature, key encipherment, client auth"
	rOrg          = "organization exactly [system:nodes]"
	rNoSAN        = "sans: none"
	rCN           = "common name starts with system:node:"
	rExactly      = "usages: exactly"
	rUser         = "username equals the common name"
	rGroup        = "groups include system:nodes"
	rNodeOrBoot   = "requester: the node itself (username equals the common name, groups include system:nodes) or in a bootstrap group"
	rDNSOrIP      = "at least one DNS name or IP address"
	rNoEmailURI   = "no email address or URI"
	rPriv         = "privileged: no organization"
	rNodeIdentity = "privileged: no node identity"
)

// TestRuleNames pins the rule names and their order for every kubernetes.io profile: they are
// part of the API (ExplainCertificateSigningRequest, Failed condition messages).
func TestRuleNames(t *testing.T) {
	t.Parallel()
	common := []string{
		"key: RSA of 2048 to 8192 bits (whole bytes) with exponent 65537, ECDSA P-256, P-384 or P-521, or Ed25519",
		"ca: no CA certificate requested (leaf-only signer)",
		"usages: at least one, each a known certificates.k8s.io/v1 usage",
		"usages: no cert sign or crl sign (leaf-only signer)",
		"names: well formed (no control characters in the subject; DNS, email and URI SANs that are valid names)",
	}
	requester := []string{"requester: username equals the common name", "requester: groups include system:nodes"}
	tests := map[string][]string{
		profile.NameKubeAPIServerClient: {
			"usages: include client auth",
			"usages: at most digital signature, key encipherment, client auth",
			"privileged: no organization in [system:masters]",
			"privileged: no node identity (common name system:node:<name> or organization system:nodes)",
		},
		profile.NameKubeAPIServerClientKubelet: {
			"subject: organization exactly [system:nodes]",
			"sans: none (no DNS name, IP address, email address or URI)",
			"subject: common name starts with system:node:",
			"usages: exactly digital signature and client auth, optionally with key encipherment",
			"requester: the node itself (username equals the common name, groups include system:nodes) or in a bootstrap group [system:bootstrappers]",
		},
		profile.NameKubeletServing: append([]string{
			"subject: organization exactly [system:nodes]",
			"sans: at least one DNS name or IP address",
			"sans: no email address or URI",
			"usages: exactly digital signature and server auth, optionally with key encipherment",
			"subject: common name starts with system:node:",
		}, requester...),
		profile.NameLegacyUnknown: {
			"privileged: no organization in [system:masters] when the certificate can authenticate clients",
		},
	}
	for name, specific := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := newProfile(t, profile.Spec{Name: name})
			csr := caseCSR{tmpl: subject(node, "system:nodes")}.parse(t)
			_, results, _ := p.Evaluate(csr, issuance.Request{Usages: []string{ds, ca}, Requester: nodeRequester})
			got, want := ruleNames(results), append(append([]string{}, common...), specific...)
			if len(got) != len(want) {
				t.Fatalf("rules = %q,\nwant %q", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("rule %d = %q, want %q", i, got[i], want[i])
				}
			}
		})
	}
}

// TestKubeAPIServerClient covers kubernetes.io/kube-apiserver-client: usages include client
// auth and are at most digital signature, key encipherment, client auth; any subject but the
// privileged groups; every SAN type honored; no CA.
func TestKubeAPIServerClient(t *testing.T) {
	t.Parallel()
	p := newProfile(t, profile.Spec{Name: profile.NameKubeAPIServerClient})
	alice := subject("alice", "dev")
	runCases(t, p, issuance.Requester{Username: "admin"}, []ruleCase{
		{name: "client auth only", csr: caseCSR{tmpl: alice}, usages: []string{ca}},
		{name: "all three usages", csr: caseCSR{tmpl: alice}, usages: []string{ds, ke, ca}},
		{name: "no subject", csr: caseCSR{tmpl: subject("")}, usages: []string{ca}},
		{name: "every SAN type honored", csr: caseCSR{tmpl: with(subject("alice"), dns("a.example.com"), ips("10.0.0.1", "2001:db8::1"),
			emails("alice@example.com"), uris("spiffe://cluster.local/ns/a/sa/b"))}, usages: []string{ds, ca}},
		{name: "Ed25519 key", csr: caseCSR{tmpl: alice, key: testpki.Ed25519}, usages: []string{ca}},
		{name: "RSA-3072 key", csr: caseCSR{tmpl: alice, key: testpki.RSA3072}, usages: []string{ke, ca}},
		{name: "P-384 key", csr: caseCSR{tmpl: alice, key: testpki.P384}, usages: []string{ca}},
		{name: "without client auth", csr: caseCSR{tmpl: alice}, usages: []string{ds, ke}, failed: []string{rIncludeCA}},
		{name: "server auth added", csr: caseCSR{tmpl: alice}, usages: []string{ds, ca, sa}, failed: []string{rAtMost}},
		{name: "server auth instead", csr: caseCSR{tmpl: alice}, usages: []string{sa}, failed: []string{rIncludeCA, rAtMost}},
		{name: "signing is not digital signature", csr: caseCSR{tmpl: alice}, usages: []string{sig, ca}, failed: []string{rAtMost}},
		{name: "no usages", csr: caseCSR{tmpl: alice}, failed: []string{rKnown, rIncludeCA}},
		{name: "unknown usage", csr: caseCSR{tmpl: alice}, usages: []string{ca, "teleport"}, failed: []string{rKnown, rAtMost}},
		{name: "cert sign", csr: caseCSR{tmpl: alice}, usages: []string{ca, "cert sign"}, failed: []string{rLeaf, rAtMost}},
		{name: "crl sign", csr: caseCSR{tmpl: alice}, usages: []string{ca, "crl sign"}, failed: []string{rLeaf, rAtMost}},
		{name: "CA requested", csr: caseCSR{tmpl: with(subject("alice"), wantCA)}, usages: []string{ca}, failed: []string{rCA}},
		{name: "system:masters refused by default", csr: caseCSR{tmpl: subject("root", "dev", "system:masters")}, usages: []string{ca}, failed: []string{rPriv}},
		{name: "system:masters with bad usages too", csr: caseCSR{tmpl: with(subject("root", "system:masters"), wantCA)}, usages: []string{sa},
			failed: []string{rCA, rIncludeCA, rAtMost, rPriv}},
		{name: "node common name", csr: caseCSR{tmpl: subject("system:node:n1")}, usages: []string{ca}, failed: []string{rNodeIdentity}},
		{name: "node organization", csr: caseCSR{tmpl: subject("mallory", "system:nodes")}, usages: []string{ca}, failed: []string{rNodeIdentity}},
		{name: "a node's full identity", csr: caseCSR{tmpl: subject("system:node:n1", "system:nodes")}, usages: []string{ds, ca}, failed: []string{rNodeIdentity}},
		{name: "a name that merely mentions nodes", csr: caseCSR{tmpl: subject("node-operator", "system:nodes-admins")}, usages: []string{ca}},
	})
	allowed := newProfile(t, profile.Spec{Name: profile.NameKubeAPIServerClient, AllowPrivileged: true})
	runCases(t, allowed, issuance.Requester{}, []ruleCase{
		{name: "node identity with allowPrivileged", csr: caseCSR{tmpl: subject("system:node:n1", "system:nodes")}, usages: []string{ca}},
	})
}

// TestPrivilegedGroups covers allowPrivileged and a configured privileged group list.
func TestPrivilegedGroups(t *testing.T) {
	t.Parallel()
	allowed := newProfile(t, profile.Spec{Name: profile.NameKubeAPIServerClient, AllowPrivileged: true})
	runCases(t, allowed, issuance.Requester{}, []ruleCase{
		{name: "system:masters with allowPrivileged", csr: caseCSR{tmpl: subject("root", "system:masters")}, usages: []string{ca}},
	})
	custom := newProfile(t, profile.Spec{Name: profile.NameKubeAPIServerClient, PrivilegedGroups: []string{"system:masters", "acme:cluster-admins"}})
	runCases(t, custom, issuance.Requester{}, []ruleCase{
		{name: "configured group refused", csr: caseCSR{tmpl: subject("bob", "acme:cluster-admins")}, usages: []string{ca}, failed: []string{rPriv}},
		{name: "system:masters still refused", csr: caseCSR{tmpl: subject("bob", "system:masters")}, usages: []string{ca}, failed: []string{rPriv}},
		{name: "other group", csr: caseCSR{tmpl: subject("bob", "acme:developers")}, usages: []string{ca}},
	})
	legacy := newProfile(t, profile.Spec{Name: profile.NameLegacyUnknown, PrivilegedGroups: []string{"acme:cluster-admins"}})
	runCases(t, legacy, issuance.Requester{}, []ruleCase{
		{name: "legacy configured group refused", csr: caseCSR{tmpl: subject("bob", "acme:cluster-admins")}, usages: []string{ds}, failed: []string{rPriv}},
		{name: "legacy list replaces the default", csr: caseCSR{tmpl: subject("bob", "system:masters")}, usages: []string{ds}},
	})
}

// TestKubeletClient covers kubernetes.io/kube-apiserver-client-kubelet: kube-controller-manager's
// ValidateKubeletClientCSR plus the requester check (the node itself, or a bootstrap
// requester: see TestKubeletClientBootstrap).
func TestKubeletClient(t *testing.T) {
	t.Parallel()
	p := newProfile(t, profile.Spec{Name: profile.NameKubeAPIServerClientKubelet})
	good := func() caseCSR { return caseCSR{tmpl: subject(node, "system:nodes")} }
	rsaUsages, ecUsages := []string{ke, ds, ca}, []string{ds, ca}
	runCases(t, p, nodeRequester, []ruleCase{
		{name: "with key encipherment", csr: good(), usages: rsaUsages},
		{name: "without key encipherment", csr: caseCSR{tmpl: subject(node, "system:nodes"), key: testpki.Ed25519}, usages: ecUsages},
		{name: "RSA key", csr: caseCSR{tmpl: subject(node, "system:nodes"), key: testpki.RSA2048}, usages: rsaUsages},
		{name: "repeated usage is the same set", csr: good(), usages: []string{ds, ca, ca}},
		{name: "bare prefix", csr: caseCSR{tmpl: subject("system:node:", "system:nodes")}, usages: ecUsages, requester: requester("system:node:", "system:nodes")},
		{name: "DNS SAN", csr: caseCSR{tmpl: with(subject(node, "system:nodes"), dns("n1.example.com"))}, usages: rsaUsages, failed: []string{rNoSAN}},
		{name: "IP SAN", csr: caseCSR{tmpl: with(subject(node, "system:nodes"), ips("10.0.0.1"))}, usages: rsaUsages, failed: []string{rNoSAN}},
		{name: "email SAN", csr: caseCSR{tmpl: with(subject(node, "system:nodes"), emails("n1@example.com"))}, usages: rsaUsages, failed: []string{rNoSAN}},
		{name: "URI SAN", csr: caseCSR{tmpl: with(subject(node, "system:nodes"), uris("spiffe://td/n1"))}, usages: rsaUsages, failed: []string{rNoSAN}},
		{name: "wrong organization", csr: caseCSR{tmpl: subject(node, "system:node")}, usages: rsaUsages, failed: []string{rOrg}},
		{name: "extra organization", csr: caseCSR{tmpl: subject(node, "system:nodes", "system:masters")}, usages: rsaUsages, failed: []string{rOrg}},
		{name: "organization twice", csr: caseCSR{tmpl: subject(node, "system:nodes", "system:nodes")}, usages: rsaUsages, failed: []string{rOrg}},
		{name: "no organization", csr: caseCSR{tmpl: subject(node)}, usages: rsaUsages, failed: []string{rOrg}},
		{name: "common name without prefix", csr: caseCSR{tmpl: subject("node:n1", "system:nodes")}, usages: rsaUsages,
			requester: requester("node:n1", "system:nodes"), failed: []string{rCN}},
		{name: "common name is not the requester", csr: caseCSR{tmpl: subject("system:node:n2", "system:nodes")}, usages: rsaUsages, failed: []string{rNodeOrBoot}},
		{name: "bootstrap requester", csr: good(), usages: rsaUsages,
			requester: requester("system:bootstrap:abcdef", "system:bootstrappers", "system:authenticated")},
		{name: "no requester", csr: good(), usages: rsaUsages, requester: &issuance.Requester{}, failed: []string{rNodeOrBoot}},
		{name: "groups without system:nodes", csr: good(), usages: rsaUsages, requester: requester(node, "system:authenticated"), failed: []string{rNodeOrBoot}},
		{name: "another node", csr: good(), usages: rsaUsages, requester: requester("system:node:n2", "system:nodes"), failed: []string{rNodeOrBoot}},
		{name: "plain user", csr: good(), usages: rsaUsages, requester: requester("alice", "dev", "system:authenticated"), failed: []string{rNodeOrBoot}},
		{name: "client auth only", csr: good(), usages: []string{ca}, failed: []string{rExactly}},
		{name: "server auth added", csr: good(), usages: []string{ds, ke, ca, sa}, failed: []string{rExactly}},
		{name: "server auth instead", csr: good(), usages: []string{ds, ke, sa}, failed: []string{rExactly}},
		{name: "signing instead of digital signature", csr: good(), usages: []string{sig, ca}, failed: []string{rExactly}},
		{name: "no usages", csr: good(), failed: []string{rKnown, rExactly}},
		{name: "cert sign", csr: good(), usages: []string{ds, ca, "cert sign"}, failed: []string{rLeaf, rExactly}},
		{name: "CA requested", csr: caseCSR{tmpl: with(subject(node, "system:nodes"), wantCA)}, usages: rsaUsages, failed: []string{rCA}},
		{name: "everything wrong", csr: caseCSR{tmpl: with(subject("alice", "dev"), dns("a.example.com"), wantCA)}, usages: []string{sa},
			requester: requester("bob"), failed: []string{rCA, rOrg, rNoSAN, rCN, rExactly, rNodeOrBoot}},
	})
}

// TestKubeletClientBootstrap covers the bootstrap rule of kube-apiserver-client-kubelet as a
// kubelet joining with a bootstrap token meets it: by default a requester in
// system:bootstrappers obtains any node's certificate, with the decision's grounds saying so;
// configured groups replace the default; bootstrap.disabled refuses the join with a detail
// naming the option, while the node itself still renews.
func TestKubeletClientBootstrap(t *testing.T) {
	t.Parallel()
	joining := requester("system:bootstrap:abcdef", "system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token", "system:authenticated")
	csr := caseCSR{tmpl: subject(node, "system:nodes")}
	usages := []string{ds, ca}
	tests := []struct {
		name        string
		bootstrap   *profile.BootstrapSpec
		requester   *issuance.Requester
		wantGrounds string   // when issued
		wantDetail  []string // substrings of the requester rule's detail
	}{
		{name: "default groups, bootstrap token", requester: joining,
			wantGrounds: `bootstrap: requester in group "system:bootstrappers"`, wantDetail: []string{"bootstrap:", `"system:bootstrap:abcdef"`}},
		{name: "default groups, renewal", requester: &nodeRequester, wantDetail: []string{"the node itself"}},
		{name: "configured group", bootstrap: &profile.BootstrapSpec{Groups: []string{"acme:node-joiners"}},
			requester: requester("joiner", "acme:node-joiners"), wantGrounds: `bootstrap: requester in group "acme:node-joiners"`},
		{name: "configured groups replace the default", bootstrap: &profile.BootstrapSpec{Groups: []string{"acme:node-joiners"}},
			requester: joining, wantDetail: []string{"neither the node nor in a bootstrap group"}},
		{name: "disabled refuses the join", bootstrap: &profile.BootstrapSpec{Disabled: true}, requester: joining,
			wantDetail: []string{`"system:bootstrappers" is a bootstrap group`, "bootstrap.disabled: true"}},
		{name: "disabled keeps renewal", bootstrap: &profile.BootstrapSpec{Disabled: true}, requester: &nodeRequester,
			wantDetail: []string{"the node itself"}},
		{name: "disabled refuses a plain user", bootstrap: &profile.BootstrapSpec{Disabled: true}, requester: requester("alice", "dev"),
			wantDetail: []string{"not the node", "bootstrap.disabled"}},
		{name: "plain user", requester: requester("alice", "dev", "system:authenticated"),
			wantDetail: []string{`username is "alice"`, "neither the node nor in a bootstrap group"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newProfile(t, profile.Spec{Name: profile.NameKubeAPIServerClientKubelet, Bootstrap: tc.bootstrap})
			d, results, err := p.Evaluate(csr.parse(t), issuance.Request{Usages: usages, Requester: *tc.requester})
			issued := tc.wantGrounds != "" || slices.Contains(tc.wantDetail, "the node itself")
			var failed []string
			if !issued {
				failed = []string{"requester: "}
			}
			checkResults(t, results, err, failed, nil)
			if d.Grounds != tc.wantGrounds {
				t.Errorf("Grounds = %q, want %q", d.Grounds, tc.wantGrounds)
			}
			last := results[len(results)-1]
			for _, want := range tc.wantDetail {
				if !strings.Contains(last.Detail, want) {
					t.Errorf("requester rule detail = %q, want it to contain %q", last.Detail, want)
				}
			}
			if tc.bootstrap != nil && tc.bootstrap.Disabled && !strings.Contains(last.Rule, "bootstrap is off (bootstrap.disabled)") {
				t.Errorf("rule name = %q, want it to say bootstrap is off", last.Rule)
			}
		})
	}
}

// TestKubeletServing covers kubernetes.io/kubelet-serving: kube-controller-manager's
// ValidateKubeletServingCSR plus the requester checks.
func TestKubeletServing(t *testing.T) {
	t.Parallel()
	p := newProfile(t, profile.Spec{Name: profile.NameKubeletServing})
	nodeSubject := func() *caseCSR { return &caseCSR{tmpl: subject(node, "system:nodes")} }
	serving := func(modify ...func(*caseCSR)) caseCSR {
		c := nodeSubject()
		c.tmpl = with(c.tmpl, dns("n1.example.com"), ips("10.0.0.1"))
		for _, m := range modify {
			m(c)
		}
		return *c
	}
	rsaUsages := []string{ke, ds, sa}
	runCases(t, p, nodeRequester, []ruleCase{
		{name: "DNS and IP", csr: serving(), usages: rsaUsages},
		{name: "DNS only", csr: caseCSR{tmpl: with(subject(node, "system:nodes"), dns("n1"))}, usages: rsaUsages},
		{name: "IP only", csr: caseCSR{tmpl: with(subject(node, "system:nodes"), ips("fd00::1"))}, usages: rsaUsages},
		{name: "without key encipherment", csr: serving(func(c *caseCSR) { c.key = testpki.P384 }), usages: []string{ds, sa}},
		{name: "no SAN", csr: *nodeSubject(), usages: rsaUsages, failed: []string{rDNSOrIP}},
		{name: "email SAN", csr: serving(func(c *caseCSR) { emails("n1@example.com")(c.tmpl) }), usages: rsaUsages, failed: []string{rNoEmailURI}},
		{name: "URI SAN", csr: serving(func(c *caseCSR) { uris("spiffe://td/n1")(c.tmpl) }), usages: rsaUsages, failed: []string{rNoEmailURI}},
		{name: "email SAN only", csr: caseCSR{tmpl: with(subject(node, "system:nodes"), emails("n1@example.com"))}, usages: rsaUsages,
			failed: []string{rDNSOrIP, rNoEmailURI}},
		{name: "wrong organization", csr: caseCSR{tmpl: with(subject(node, "system:node"), dns("n1"))}, usages: rsaUsages, failed: []string{rOrg}},
		{name: "extra organization", csr: caseCSR{tmpl: with(subject(node, "system:nodes", "x"), dns("n1"))}, usages: rsaUsages, failed: []string{rOrg}},
		{name: "common name without prefix", csr: caseCSR{tmpl: with(subject("n1", "system:nodes"), dns("n1"))}, usages: rsaUsages,
			requester: requester("n1", "system:nodes"), failed: []string{rCN}},
		{name: "common name is not the requester", csr: caseCSR{tmpl: with(subject("system:node:n2", "system:nodes"), dns("n2"))}, usages: rsaUsages,
			failed: []string{rUser}},
		{name: "groups without system:nodes", csr: serving(), usages: rsaUsages, requester: requester(node), failed: []string{rGroup}},
		{name: "client auth instead", csr: serving(), usages: []string{ds, ke, ca}, failed: []string{rExactly}},
		{name: "client auth added", csr: serving(), usages: []string{ds, ke, sa, ca}, failed: []string{rExactly}},
		{name: "server auth only", csr: serving(), usages: []string{sa}, failed: []string{rExactly}},
		{name: "unknown usage", csr: serving(), usages: []string{ds, sa, "Server Auth"}, failed: []string{rKnown, rExactly}},
		{name: "CA requested", csr: serving(func(c *caseCSR) { wantCA(c.tmpl) }), usages: rsaUsages, failed: []string{rCA}},
	})
}

// TestLegacyUnknown covers kubernetes.io/legacy-unknown: any subject and known usage, SANs
// honored, but no CA and the privileged rule for certificates that can authenticate clients.
func TestLegacyUnknown(t *testing.T) {
	t.Parallel()
	p := newProfile(t, profile.Spec{Name: profile.NameLegacyUnknown})
	anyone := subject("anything", "whatever")
	masters := subject("root", "system:masters")
	runCases(t, p, issuance.Requester{}, []ruleCase{
		{name: "server auth", csr: caseCSR{tmpl: with(subject("web"), dns("web.example.com"), uris("https://web.example.com/"))}, usages: []string{ds, ke, sa}},
		{name: "many usages", csr: caseCSR{tmpl: anyone}, usages: []string{"code signing", "any", "ocsp signing", "s/mime", "content commitment"}},
		{name: "every SAN type", csr: caseCSR{tmpl: with(subject(""), dns("x"), ips("192.0.2.1"), emails("a@b"), uris("urn:x:y"))}, usages: []string{ca}},
		{name: "CA requested", csr: caseCSR{pemCSR: testpki.CARequestCSR(t, testpki.Key(t, testpki.P256))}, usages: []string{ds}, failed: []string{rCA}},
		{name: "cert sign", csr: caseCSR{tmpl: anyone}, usages: []string{ds, "cert sign"}, failed: []string{rLeaf}},
		{name: "crl sign", csr: caseCSR{tmpl: anyone}, usages: []string{"crl sign"}, failed: []string{rLeaf}},
		{name: "no usages", csr: caseCSR{tmpl: anyone}, failed: []string{rKnown}},
		{name: "unknown usage", csr: caseCSR{tmpl: anyone}, usages: []string{"teleport"}, failed: []string{rKnown}},
		{name: "system:masters client auth", csr: caseCSR{tmpl: masters}, usages: []string{ca}, failed: []string{rPriv}},
		{name: "system:masters any", csr: caseCSR{tmpl: masters}, usages: []string{"any"}, failed: []string{rPriv}},
		{name: "system:masters without extended key usage", csr: caseCSR{tmpl: masters}, usages: []string{ds}, failed: []string{rPriv}},
		{name: "system:masters server auth only", csr: caseCSR{tmpl: masters}, usages: []string{ds, sa}},
		{name: "unparsable basic constraints", csr: caseCSR{tmpl: with(subject("x"), func(r *x509.CertificateRequest) {
			r.ExtraExtensions = []pkix.Extension{{Id: testpki.OIDBasicConstraints, Value: []byte{0x04, 0x00}}}
		})}, usages: []string{ds}, failed: []string{rCA}, sentinel: issuance.ErrMalformedRequest},
	})
	allowed := newProfile(t, profile.Spec{Name: profile.NameLegacyUnknown, AllowPrivileged: true})
	runCases(t, allowed, issuance.Requester{}, []ruleCase{
		{name: "system:masters with allowPrivileged", csr: caseCSR{tmpl: masters}, usages: []string{ca}},
	})
}

// TestKeyRule checks the baseline key rule holds even for a request that did not go through
// ParseCSR.
func TestKeyRule(t *testing.T) {
	t.Parallel()
	for _, name := range []string{profile.NameKubeAPIServerClient, profile.NameLegacyUnknown} {
		p := newProfile(t, profile.Spec{Name: name})
		csr := rawCSR(t, testpki.Key(t, testpki.P224), subject("alice"))
		_, results, err := p.Evaluate(csr, issuance.Request{Usages: []string{ca}})
		checkResults(t, results, err, []string{rKey}, issuance.ErrUnsupportedKey)
		csr = rawCSR(t, testpki.Key(t, testpki.RSA1024), subject("alice"))
		_, results, err = p.Evaluate(csr, issuance.Request{Usages: []string{ca}})
		checkResults(t, results, err, []string{rKey}, issuance.ErrUnsupportedKey)
	}
}

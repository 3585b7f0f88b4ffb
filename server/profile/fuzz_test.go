package profile_test

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"slices"
	"testing"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/profile"
)

// fuzzUsages are the usages FuzzEvaluate picks from with a bit mask.
var fuzzUsages = []string{ds, ke, sa, ca, sig, "cert sign", "crl sign", "any", "code signing", "bogus", "Server Auth"}

// fuzzProfiles are the profiles FuzzEvaluate picks from.
func fuzzProfiles(f *testing.F) []profile.Profile {
	specs := []profile.Spec{
		{Name: profile.NameKubeAPIServerClient},
		{Name: profile.NameKubeAPIServerClientKubelet},
		{Name: profile.NameKubeletServing},
		{Name: profile.NameLegacyUnknown},
		meshSpec(),
		validCustom(nil),
		{Name: profile.NameLegacyUnknown, AllowPrivileged: true},
	}
	out := make([]profile.Profile, len(specs))
	for i, s := range specs {
		out[i] = newProfile(f, s)
	}
	return append(out, profile.Profile{})
}

// fuzzSeeds are valid and invalid DER requests for the corpus.
func fuzzSeeds(f *testing.F) [][]byte {
	tmpls := []*x509.CertificateRequest{
		subject(node, "system:nodes"),
		with(subject(node, "system:nodes"), dns("n1"), ips("10.0.0.1")),
		subject("root", "system:masters"),
		with(subject("svc-web", "team-a"), dns("a.b.svc.cluster.local"), uris("spiffe://cluster.local/ns/a/sa/b"), emails("a@example.com")),
		with(subject("x"), wantCA),
	}
	var seeds [][]byte
	for i, tmpl := range tmpls {
		kt := []testpki.KeyType{testpki.P256, testpki.Ed25519, testpki.RSA2048, testpki.P384, testpki.P224}[i]
		block, _ := pem.Decode(testpki.CSR(f, testpki.Key(f, kt), tmpl))
		seeds = append(seeds, block.Bytes)
	}
	block, _ := pem.Decode(testpki.CSR(f, testpki.Key(f, testpki.RSA1024), nil))
	return append(seeds, block.Bytes, []byte{0x30, 0x00}, nil)
}

// FuzzEvaluate feeds parsed requests with fuzzed usages and requesters to every profile and
// checks: no panic; every rule reported with a detail; a nil error exactly when every rule
// passed; a refusal wraps exactly one sentinel; an accepted request meets the invariants
// every profile shares (no CA, no CA usage, known usages, a baseline key) and, on the kubelet
// profiles, the node identity rules.
func FuzzEvaluate(f *testing.F) {
	profiles := fuzzProfiles(f)
	for i, der := range fuzzSeeds(f) {
		f.Add(der, uint16(1|2|8), uint8(i), true)
		f.Add(der, uint16(1|4), uint8(i+2), i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, der []byte, usageMask uint16, profileIdx uint8, requesterIsCN bool) {
		csr, err := x509.ParseCertificateRequest(der)
		if err != nil {
			return
		}
		p := profiles[int(profileIdx)%len(profiles)]
		req := issuance.Request{Requester: issuance.Requester{Username: "someone", Groups: []string{"system:nodes"}}}
		if requesterIsCN {
			req.Requester.Username = csr.Subject.CommonName
		}
		for i, u := range fuzzUsages {
			if usageMask&(1<<i) != 0 {
				req.Usages = append(req.Usages, u)
			}
		}
		_, results, err := p.Evaluate(csr, req)
		if len(results) == 0 {
			t.Fatal("no rule results")
		}
		allPassed := true
		for _, r := range results {
			if r.Rule == "" || r.Detail == "" {
				t.Fatalf("rule result without a name or detail: %+v", r)
			}
			allPassed = allPassed && r.Passed
		}
		if (err == nil) != allPassed {
			t.Fatalf("error %v with results %s", err, dump(results))
		}
		if err != nil {
			n := 0
			for _, s := range []error{issuance.ErrPolicyViolation, issuance.ErrUnsupportedKey, issuance.ErrMalformedRequest, issuance.ErrInvalidSignature} {
				if errors.Is(err, s) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("refusal %v wraps %d sentinels, want 1", err, n)
			}
			return
		}
		checkAccepted(t, p, csr, req)
	})
}

// checkAccepted checks the invariants of an accepted request.
func checkAccepted(t *testing.T, p profile.Profile, csr *x509.CertificateRequest, req issuance.Request) {
	t.Helper()
	if err := issuance.CheckNotCA(csr); err != nil {
		t.Fatalf("accepted a CA request: %v", err)
	}
	if err := issuance.CheckPublicKey(csr.PublicKey); err != nil {
		t.Fatalf("accepted an unsupported key: %v", err)
	}
	if _, _, err := issuance.ParseUsages(req.Usages); err != nil || len(req.Usages) == 0 {
		t.Fatalf("accepted usages %q: %v", req.Usages, err)
	}
	if slices.Contains(req.Usages, "cert sign") || slices.Contains(req.Usages, "crl sign") {
		t.Fatalf("accepted CA usages %q", req.Usages)
	}
	switch p.Name() {
	case profile.NameKubeAPIServerClientKubelet, profile.NameKubeletServing:
		if !slices.Equal(csr.Subject.Organization, []string{"system:nodes"}) || req.Requester.Username != csr.Subject.CommonName {
			t.Fatalf("accepted a kubelet request for %v from %q", csr.Subject, req.Requester.Username)
		}
	case profile.NameKubeAPIServerClient:
		if slices.Contains(csr.Subject.Organization, "system:masters") {
			t.Fatalf("accepted system:masters on %s", p.Name())
		}
	}
}

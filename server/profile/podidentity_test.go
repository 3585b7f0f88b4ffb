package profile_test

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/lint"
	"github.com/signet-pki/signet/server/profile"
)

// pod is the pod identity of the pod-identity tests.
var pod = issuance.PodIdentity{
	Namespace: "shop", PodName: "web-7d9f", PodUID: "pod-uid-1",
	ServiceAccountName: "web", ServiceAccountUID: "sa-uid-1", NodeName: "node-1", NodeUID: "node-uid-1",
}

// podSpec is a pod-identity spec with the given settings (nil: every default).
func podSpec(pi *profile.PodIdentitySpec) profile.Spec {
	return profile.Spec{Name: profile.NamePodIdentity, PodIdentity: pi}
}

// stubFor returns the DER stub request of key for tmpl (nil: the kubelet's empty one).
func stubFor(t testing.TB, key crypto.Signer, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	if tmpl == nil {
		tmpl = &x509.CertificateRequest{}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// evaluatePod parses req's key as the issuer does and evaluates it.
func evaluatePod(t testing.TB, p profile.Profile, req issuance.PodRequest) (issuance.Decision, []issuance.RuleResult, error) {
	t.Helper()
	key, err := issuance.ParsePodKey(req)
	if err != nil {
		t.Fatalf("ParsePodKey: %v", err)
	}
	return p.EvaluatePod(key, req)
}

// TestPodIdentitySpecValidate: the trust domain must be a bare SPIFFE trust domain, the allowed
// annotations domain-prefixed keys (compared case-insensitively), and the pod-identity
// settings only appear on a pod-identity profile, which has no privileged-group settings (its
// certificates have no subject) and needs a maximum lifetime of at least an hour.
func TestPodIdentitySpecValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		spec        profile.Spec
		maxLifetime time.Duration
		want        string // "" valid
	}{
		{"defaults", podSpec(nil), time.Hour, ""},
		{"empty settings", podSpec(&profile.PodIdentitySpec{}), time.Hour, ""},
		{"trust domain and annotations", podSpec(&profile.PodIdentitySpec{TrustDomain: "prod.example-1.com", AllowedAnnotations: []string{"example.com/purpose", "spiffe/path-hint"}}), 24 * time.Hour, ""},
		{"underscore in trust domain", podSpec(&profile.PodIdentitySpec{TrustDomain: "my_cluster.local"}), time.Hour, ""},
		{"trust domain with scheme", podSpec(&profile.PodIdentitySpec{TrustDomain: "spiffe://cluster.local"}), time.Hour, "without scheme, port or path"},
		{"trust domain with path", podSpec(&profile.PodIdentitySpec{TrustDomain: "cluster.local/ns"}), time.Hour, "without scheme, port or path"},
		{"trust domain with port", podSpec(&profile.PodIdentitySpec{TrustDomain: "cluster.local:443"}), time.Hour, "without scheme, port or path"},
		{"upper-case trust domain", podSpec(&profile.PodIdentitySpec{TrustDomain: "Cluster.Local"}), time.Hour, "lower-case letters"},
		{"empty label", podSpec(&profile.PodIdentitySpec{TrustDomain: "cluster..local"}), time.Hour, "empty label"},
		{"long trust domain", podSpec(&profile.PodIdentitySpec{TrustDomain: strings.Repeat("a", 256)}), time.Hour, "more than 255"},
		{"annotation without prefix", podSpec(&profile.PodIdentitySpec{AllowedAnnotations: []string{"purpose"}}), time.Hour, `podIdentity.allowedAnnotations[0]: "purpose": is not a domain-prefixed key`},
		{"annotation with two slashes", podSpec(&profile.PodIdentitySpec{AllowedAnnotations: []string{"example.com/a/b"}}), time.Hour, "allowedAnnotations[0]"},
		{"empty annotation", podSpec(&profile.PodIdentitySpec{AllowedAnnotations: []string{""}}), time.Hour, "must not be empty"},
		{"duplicate annotation in another case", podSpec(&profile.PodIdentitySpec{AllowedAnnotations: []string{"example.com/a", "Example.com/A"}}), time.Hour, "allowedAnnotations[1]"},
		{"settings on another profile", profile.Spec{Name: profile.NameLegacyUnknown, PodIdentity: &profile.PodIdentitySpec{}}, time.Hour, `podIdentity: only allowed when name is pod-identity, not "legacy-unknown"`},
		{"allowPrivileged", profile.Spec{Name: profile.NamePodIdentity, AllowPrivileged: true}, time.Hour, "allowPrivileged: not allowed on pod-identity (its certificates have no subject)"},
		{"privileged groups", profile.Spec{Name: profile.NamePodIdentity, PrivilegedGroups: []string{"x"}}, time.Hour, "privilegedGroups: not allowed on pod-identity"},
		{"maximum under an hour", podSpec(nil), 30 * time.Minute, "maxLifetime: 30m0s is below the 1h floor of pod certificates"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := profile.New(tt.spec, tt.maxLifetime)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("New = %v, want an error saying %q", err, tt.want)
			}
			if verr := tt.spec.Validate(); tt.want != "" && !strings.Contains(tt.want, "maxLifetime") && verr == nil {
				t.Error("Validate accepted what New refuses")
			}
		})
	}
}

// TestEvaluatePod: pod-identity's rules, one table case per way a request can fail, each with
// its sentinel and the rules it fails; everything else passes.
func TestEvaluatePod(t *testing.T) {
	t.Parallel()
	p := newProfile(t, podSpec(&profile.PodIdentitySpec{AllowedAnnotations: []string{"example.com/purpose"}}))
	p256 := testpki.Key(t, testpki.P256)
	base := func() issuance.PodRequest {
		return issuance.PodRequest{SignerName: "example.com/pods", Pod: pod, StubPKCS10Request: stubFor(t, p256, nil), MaxExpirationSeconds: 86400}
	}
	with := func(change func(r *issuance.PodRequest)) issuance.PodRequest {
		r := base()
		change(&r)
		return r
	}
	const (
		keyRule   = "key: one of"
		stubRule  = "request: the stub PKCS#10 request is empty"
		fields    = "pod: every identity field set"
		names     = "pod: namespace a DNS-1123 label"
		annotRule = "annotations:"
		lifetime  = "lifetime:"
	)
	prefixes := []string{keyRule, stubRule, fields, names, annotRule, lifetime}
	tests := []struct {
		name     string
		req      issuance.PodRequest
		failed   []string
		sentinel error
		detail   string
	}{
		{"kubelet request", base(), nil, nil, ""},
		{"RSA-3072", with(func(r *issuance.PodRequest) { r.StubPKCS10Request = stubFor(t, testpki.Key(t, testpki.RSA3072), nil) }), nil, nil, ""},
		{"Ed25519", with(func(r *issuance.PodRequest) { r.StubPKCS10Request = stubFor(t, testpki.Key(t, testpki.Ed25519), nil) }), nil, nil, ""},
		{"allowed annotation, any case", with(func(r *issuance.PodRequest) {
			r.UnverifiedUserAnnotations = map[string]string{"Example.COM/Purpose": "x"}
		}), nil, nil, ""},
		{"RSA-2048", with(func(r *issuance.PodRequest) { r.StubPKCS10Request = stubFor(t, testpki.Key(t, testpki.RSA2048), nil) }),
			[]string{keyRule}, issuance.ErrUnsupportedKey, "key is RSA-2048; use one of ECDSA-P256"},
		{"stub with a subject and SAN", with(func(r *issuance.PodRequest) {
			r.StubPKCS10Request = stubFor(t, p256, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "admin"}, DNSNames: []string{"a.example"}})
		}), []string{stubRule}, issuance.ErrPolicyViolation, `subject "CN=admin", extension 2.5.29.17`},
		{"missing fields", with(func(r *issuance.PodRequest) { r.Pod.NodeUID, r.Pod.PodName = "", "" }),
			[]string{fields}, issuance.ErrMalformedRequest, "missing pod_name, node_uid"},
		{"namespace not a label", with(func(r *issuance.PodRequest) { r.Pod.Namespace = "shop.prod" }), []string{names}, issuance.ErrMalformedRequest, `namespace "shop.prod"`},
		{"upper-case namespace", with(func(r *issuance.PodRequest) { r.Pod.Namespace = "Shop" }), []string{names}, issuance.ErrMalformedRequest, `namespace "Shop"`},
		{"service account with a path", with(func(r *issuance.PodRequest) { r.Pod.ServiceAccountName = "web/../../admin" }), []string{names}, issuance.ErrMalformedRequest, `service_account_name "web/../../admin"`},
		{"service account with a query", with(func(r *issuance.PodRequest) { r.Pod.ServiceAccountName = "web?x=1" }), []string{names}, issuance.ErrMalformedRequest, "service_account_name"},
		{"node name with a space", with(func(r *issuance.PodRequest) { r.Pod.NodeName = "node 1" }), []string{names}, issuance.ErrMalformedRequest, "node_name"},
		{"long UID", with(func(r *issuance.PodRequest) { r.Pod.PodUID = strings.Repeat("u", 129) }), []string{names}, issuance.ErrMalformedRequest, "pod_uid"},
		{"UID with a newline", with(func(r *issuance.PodRequest) { r.Pod.NodeUID = "uid\nforged log line" }), []string{names}, issuance.ErrMalformedRequest, "control characters"},
		{"unknown annotations", with(func(r *issuance.PodRequest) {
			r.UnverifiedUserAnnotations = map[string]string{"z.example/b": "", "example.com/purpose": "", "a.example/c": ""}
		}), []string{annotRule}, issuance.ErrUnknownAnnotation, `keys ["a.example/c" "z.example/b"] are not recognised`},
		{"no maxExpirationSeconds", with(func(r *issuance.PodRequest) { r.MaxExpirationSeconds = 0 }), []string{lifetime}, issuance.ErrMalformedRequest, "max_expiration_seconds is 0"},
		{"lifetime under an hour", with(func(r *issuance.PodRequest) { r.MaxExpirationSeconds = 3599 }), []string{lifetime}, issuance.ErrPolicyViolation, "under the 1h0m0s"},
		{"several problems", with(func(r *issuance.PodRequest) {
			r.Pod.Namespace, r.UnverifiedUserAnnotations = "", map[string]string{"x.io/y": ""}
		}),
			[]string{fields, annotRule}, issuance.ErrMalformedRequest, "missing namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, results, err := evaluatePod(t, p, tt.req)
			var failed []string
			for _, r := range results {
				if r.Rule == "" || r.Detail == "" {
					t.Errorf("rule %+v lacks its name or detail", r)
				}
				if !r.Passed {
					i := slices.IndexFunc(prefixes, func(prefix string) bool { return strings.HasPrefix(r.Rule, prefix) })
					if i < 0 {
						t.Fatalf("unexpected rule %q failed", r.Rule)
					}
					failed = append(failed, prefixes[i])
				}
			}
			if !slices.Equal(failed, tt.failed) {
				t.Errorf("failed rules %q, want %q", failed, tt.failed)
			}
			if tt.sentinel == nil {
				if err != nil || len(d.URIs) != 1 {
					t.Fatalf("EvaluatePod = %v, decision %+v; want allowed", err, d)
				}
				return
			}
			if !errors.Is(err, tt.sentinel) || !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("error %v, want one wrapping %q saying %q", err, tt.sentinel, tt.detail)
			}
			if len(d.URIs) != 0 || d.Lifetime != 0 {
				t.Errorf("a refused request got decision %+v", d)
			}
		})
	}
}

// TestEvaluatePodDecision: the decision names the service account in the configured trust
// domain, adds key encipherment for RSA keys only, asks for server and client auth, and takes
// min(maxExpirationSeconds, maxLifetime).
func TestEvaluatePodDecision(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec    *profile.PodIdentitySpec
		key     testpki.KeyType
		maxExp  int32
		wantURI string
		wantKU  x509.KeyUsage
		wantTTL time.Duration
	}{
		{nil, testpki.P256, 86400, "spiffe://cluster.local/ns/shop/sa/web", x509.KeyUsageDigitalSignature, 24 * time.Hour},
		{&profile.PodIdentitySpec{TrustDomain: "prod.example.com"}, testpki.Ed25519, 7200, "spiffe://prod.example.com/ns/shop/sa/web", x509.KeyUsageDigitalSignature, 2 * time.Hour},
		{nil, testpki.RSA3072, 91 * 86400, "spiffe://cluster.local/ns/shop/sa/web", x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, 24 * time.Hour},
	}
	for _, tt := range tests {
		p := newProfile(t, podSpec(tt.spec))
		req := issuance.PodRequest{Pod: pod, StubPKCS10Request: stubFor(t, testpki.Key(t, tt.key), nil), MaxExpirationSeconds: tt.maxExp}
		d, _, err := evaluatePod(t, p, req)
		if err != nil {
			t.Fatalf("%s: %v", tt.key, err)
		}
		if len(d.URIs) != 1 || d.URIs[0].String() != tt.wantURI || d.KeyUsage != tt.wantKU || d.Lifetime != tt.wantTTL ||
			!slices.Equal(d.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}) {
			t.Errorf("%s: decision URIs %v KU %b EKU %v lifetime %s; want %s, %b, [server client], %s", tt.key, d.URIs, d.KeyUsage, d.ExtKeyUsage, d.Lifetime, tt.wantURI, tt.wantKU, tt.wantTTL)
		}
	}
}

// TestProfileKinds: pod-identity serves PodCertificateRequests only and every other profile
// CertificateSigningRequests only; evaluated directly, a profile refuses the other kind with
// one rule that names the kind it serves.
func TestProfileKinds(t *testing.T) {
	t.Parallel()
	key := testpki.Key(t, testpki.P256)
	pods := newProfile(t, podSpec(nil))
	if pods.Kind() != issuance.KindPodCertificateRequest {
		t.Errorf("pod-identity Kind() = %s", pods.Kind())
	}
	_, results, err := pods.Evaluate(caseCSR{}.parse(t), issuance.Request{Usages: []string{ds}})
	if !errors.Is(err, issuance.ErrPolicyViolation) || len(results) != 1 || !strings.Contains(results[0].Detail, "serves PodCertificateRequests only") {
		t.Errorf("pod-identity Evaluate(CSR) = %v, %+v; want the kind rule refusing", err, results)
	}
	for _, name := range []string{profile.NameKubeAPIServerClient, profile.NameKubeletServing, profile.NameLegacyUnknown} {
		p := newProfile(t, profile.Spec{Name: name})
		if p.Kind() != issuance.KindCertificateSigningRequest {
			t.Errorf("%s Kind() = %s", name, p.Kind())
		}
		d, results, err := evaluatePod(t, p, issuance.PodRequest{Pod: pod, StubPKCS10Request: stubFor(t, key, nil), MaxExpirationSeconds: 86400})
		if !errors.Is(err, issuance.ErrPolicyViolation) || len(results) != 1 || !strings.Contains(results[0].Detail, "profile "+name+" serves CertificateSigningRequests only") || len(d.URIs) != 0 {
			t.Errorf("%s EvaluatePod = %v, %+v; want the kind rule refusing", name, err, results)
		}
	}
	if _, _, err := (profile.Profile{}).EvaluatePod(nil, issuance.PodRequest{}); !errors.Is(err, issuance.ErrPolicyViolation) {
		t.Errorf("zero Profile EvaluatePod = %v, want a refusal", err)
	}
}

// TestDescribePodIdentity: the seven points say what a pod-identity signer issues.
func TestDescribePodIdentity(t *testing.T) {
	t.Parallel()
	d := newProfile(t, podSpec(&profile.PodIdentitySpec{TrustDomain: "prod.example.com", AllowedAnnotations: []string{"example.com/purpose"}})).Describe()
	for field, wants := range map[string][]string{
		d.TrustDistribution:   {"ClusterTrustBundle", `"prod.example.com"`},
		d.PermittedSubjects:   {"PodCertificateRequests only", "CertificateSigningRequest is refused", "spiffe://prod.example.com/ns/<namespace>/sa/<serviceAccountName>", "DNS-1123"},
		d.PermittedExtensions: {"Exactly one SAN", "stub PKCS#10 request must be empty", `["example.com/purpose"]`, "InvalidUnverifiedUserAnnotations"},
		d.PermittedKeyUsages:  {"digital signature", "key encipherment for RSA keys", "server auth and client auth"},
		d.Expiration:          {"spec.maxExpirationSeconds", "24h0m0s", "1m0s before signing", "under 1h0m0s is refused", "beginRefreshAt", "4m0s"},
		d.CABit:               {"CA:FALSE"},
		d.ExtraPEMBlocks:      {"status.certificateChain", "root is never included"},
	} {
		for _, w := range wants {
			if !strings.Contains(field, w) {
				t.Errorf("%q does not say %q", field, w)
			}
		}
	}
	if d.Profile != profile.NamePodIdentity || !slices.Equal(d.KeyTypes, []string{"ECDSA-P256", "ECDSA-P384", "ECDSA-P521", "Ed25519", "RSA-3072", "RSA-4096"}) {
		t.Errorf("profile %q, key types %q", d.Profile, d.KeyTypes)
	}
	if none := newProfile(t, podSpec(nil)).Describe().PermittedExtensions; !strings.Contains(none, "recognises none") {
		t.Errorf("default annotations description %q", none)
	}
}

// TestPodIdentityLintOptions: pod-identity runs the default lint gate, which its certificates
// pass (server/issuance's tests issue them through it).
func TestPodIdentityLintOptions(t *testing.T) {
	t.Parallel()
	if got := newProfile(t, podSpec(nil)).LintOptions(lint.Options{}); got.Exclude != nil || got.Sources != nil {
		t.Errorf("options %+v, want the default gate", got)
	}
}

package lint_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/lint"
)

func newGate(t testing.TB, opts lint.Options) *lint.Gate {
	t.Helper()
	g, err := lint.New(opts)
	if err != nil {
		t.Fatalf("New(%+v): %v", opts, err)
	}
	return g
}

// TestCheckPassesPrivateLeaves: the leaves a Kubernetes private CA issues every day pass the
// default gate with no error, warning or notice, for every CA and subject key type.
func TestCheckPassesPrivateLeaves(t *testing.T) {
	g := newGate(t, lint.Options{})
	leaves := map[string]func(testing.TB, time.Duration) *x509.Certificate{
		"client CN only":  clientCNOnly,
		"kubelet client":  kubeletClient,
		"kubelet serving": kubeletServing,
	}
	for _, caType := range []testpki.KeyType{testpki.P256, testpki.P384, testpki.P521, testpki.RSA2048, testpki.Ed25519} {
		ca := newCA(t, caType)
		for _, subjectType := range []testpki.KeyType{testpki.P256, testpki.P384, testpki.P521, testpki.RSA2048, testpki.Ed25519} {
			pub := testpki.Key(t, subjectType).Public()
			for name, mk := range leaves {
				for _, life := range []time.Duration{24 * time.Hour, 365 * 24 * time.Hour} {
					tmpl := mk(t, life)
					res, err := g.Check(tmpl, ca.cert, pub)
					if err != nil {
						t.Errorf("CA %s, key %s, %s, %v: %v", caType, subjectType, name, life, err)
						continue
					}
					if len(res.Warnings)+len(res.Notices) > 0 {
						t.Errorf("CA %s, key %s, %s, %v: warnings %q, notices %q", caType, subjectType, name, life, res.Warnings, res.Notices)
					}
					if len(res.TBS) == 0 || len(res.Certificate) == 0 {
						t.Errorf("CA %s, key %s, %s: empty result", caType, subjectType, name)
					}
				}
			}
		}
	}
}

// TestCheckFailsLint: templates a permissive profile could produce, which zlint reports at
// Error, fail closed with ErrLintFailed naming the lint.
func TestCheckFailsLint(t *testing.T) {
	g := newGate(t, lint.Options{})
	ca := newCA(t, testpki.P256)
	pub := testpki.Key(t, testpki.P256).Public()
	tests := []struct {
		name   string
		modify func(*x509.Certificate)
		pub    any
		want   string
	}{
		{"DNS SAN with an empty label", func(c *x509.Certificate) { c.DNSNames = []string{"bad_name..example"} }, nil,
			"e_rfc_dnsname_empty_label"},
		{"empty subject and no SAN", func(c *x509.Certificate) { c.Subject = pkix.Name{} }, nil,
			"e_subject_empty_without_san"},
		{"malformed email SAN", func(c *x509.Certificate) { c.EmailAddresses = []string{"not an address"} }, nil,
			"e_ext_san_rfc822_format_invalid"},
		{"wildcard not first", func(c *x509.Certificate) { c.DNSNames = []string{"a.*.example.com"} }, nil,
			"e_san_wildcard_not_first"},
		{"NotAfter before NotBefore", func(c *x509.Certificate) { c.NotAfter = c.NotBefore.Add(-time.Hour) }, nil,
			"e_validity_time_not_positive"},
		{"21-octet serial", func(c *x509.Certificate) { c.SerialNumber = new(big.Int).Lsh(big.NewInt(1), 20*8) }, nil,
			"e_serial_number_longer_than_20_octets"},
		{"common name over 64 characters", func(c *x509.Certificate) { c.Subject.CommonName = strings.Repeat("a", 65) }, nil,
			"e_subject_common_name_max_length"},
		{"RSA-1024 subject key", func(*x509.Certificate) {}, testpki.Key(t, testpki.RSA1024).Public(),
			"e_mp_modulus_must_be_2048_bits_or_more"},
		{"P-224 subject key", func(*x509.Certificate) {}, testpki.Key(t, testpki.P224).Public(),
			"e_mp_ecdsa_pub_key_encoding_correct"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := clientCNOnly(t, 24*time.Hour)
			tt.modify(tmpl)
			subject := tt.pub
			if subject == nil {
				subject = pub
			}
			res, err := g.Check(tmpl, ca.cert, subject)
			if !errors.Is(err, lint.ErrLintFailed) {
				t.Fatalf("Check = %+v, %v; want an error wrapping ErrLintFailed", res, err)
			}
			var fe *lint.FailedError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FailedError", err)
			}
			if !slices.ContainsFunc(fe.Failures, func(f lint.Finding) bool { return f.Lint == tt.want && f.Status == "error" }) {
				t.Errorf("failures %+v do not include %s at error", fe.Failures, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name %s", err, tt.want)
			}
			if res.TBS != nil {
				t.Errorf("a failed check returned TBS bytes")
			}
		})
	}
}

// TestCheckTBSIdentity: the lint certificate's TBS is byte-identical to the one the real CA key
// signs, for every CA key type, with the same signature algorithm.
func TestCheckTBSIdentity(t *testing.T) {
	g := newGate(t, lint.Options{})
	tests := []struct {
		ca     testpki.KeyType
		sigAlg x509.SignatureAlgorithm // what the template asks for; 0 lets Go choose
		want   x509.SignatureAlgorithm
	}{
		{testpki.P256, 0, x509.ECDSAWithSHA256},
		{testpki.P384, 0, x509.ECDSAWithSHA384},
		{testpki.P521, 0, x509.ECDSAWithSHA512},
		{testpki.RSA2048, 0, x509.SHA256WithRSA},
		{testpki.RSA3072, 0, x509.SHA256WithRSA}, // Go picks SHA-256 for every RSA size
		{testpki.RSA2048, x509.SHA256WithRSAPSS, x509.SHA256WithRSAPSS},
		{testpki.Ed25519, 0, x509.PureEd25519},
	}
	for _, tt := range tests {
		t.Run(string(tt.ca)+"/"+tt.want.String(), func(t *testing.T) {
			ca := newCA(t, tt.ca)
			for _, mk := range []func(testing.TB, time.Duration) *x509.Certificate{clientCNOnly, kubeletClient, kubeletServing} {
				tmpl := mk(t, 24*time.Hour)
				tmpl.SignatureAlgorithm = tt.sigAlg
				pub := testpki.Key(t, testpki.P256).Public()
				res, err := g.Check(tmpl, ca.cert, pub)
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				real := ca.sign(t, tmpl, pub)
				if !bytes.Equal(res.TBS, real.RawTBSCertificate) {
					t.Fatalf("lint TBS differs from the real TBS\nlint %x\nreal %x", res.TBS, real.RawTBSCertificate)
				}
				if real.SignatureAlgorithm != tt.want {
					t.Errorf("real signature algorithm %v, want %v", real.SignatureAlgorithm, tt.want)
				}
				lintCert, err := x509.ParseCertificate(res.Certificate)
				if err != nil {
					t.Fatalf("parsing the lint certificate: %v", err)
				}
				if lintCert.SignatureAlgorithm != tt.want {
					t.Errorf("lint signature algorithm %v, want %v", lintCert.SignatureAlgorithm, tt.want)
				}
				if !bytes.Equal(lintCert.AuthorityKeyId, ca.cert.SubjectKeyId) || !bytes.Equal(lintCert.RawIssuer, ca.cert.RawSubject) {
					t.Errorf("lint certificate issuer or AKI differ from the CA's subject and SKI")
				}
				// The lint certificate must not verify under the real CA: its signature is a
				// placeholder, never made by the CA key.
				if err := lintCert.CheckSignatureFrom(ca.cert); err == nil {
					t.Errorf("the lint certificate verifies under the real CA key")
				}
			}
		})
	}
}

func TestCheckRefusesBadInput(t *testing.T) {
	g := newGate(t, lint.Options{})
	ca := newCA(t, testpki.P256)
	pub := testpki.Key(t, testpki.P256).Public()
	noSerial := clientCNOnly(t, 24*time.Hour)
	noSerial.SerialNumber = nil
	p224CA := ca
	p224CA.cert = &x509.Certificate{PublicKey: testpki.Key(t, testpki.P224).Public()}
	tests := []struct {
		name string
		call func() error
	}{
		{"nil template", func() error { _, err := g.Check(nil, ca.cert, pub); return err }},
		{"nil CA", func() error { _, err := g.Check(clientCNOnly(t, time.Hour), nil, pub); return err }},
		{"nil key", func() error { _, err := g.Check(clientCNOnly(t, time.Hour), ca.cert, nil); return err }},
		{"no serial", func() error { _, err := g.Check(noSerial, ca.cert, pub); return err }},
		{"unsupported CA curve", func() error { _, err := g.Check(clientCNOnly(t, time.Hour), p224CA.cert, pub); return err }},
		{"prepare nil CA", func() error { return g.Prepare(nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, lint.ErrLintFailed) {
				t.Errorf("error %v wraps ErrLintFailed, but no lint ran", err)
			}
		})
	}
}

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    lint.Options
		wantErr string
	}{
		{"defaults", lint.Options{}, ""},
		{"CA/B Forum allowed when configured", lint.Options{Sources: []string{"RFC5280", "CABF_BR"}}, ""},
		{"unknown source", lint.Options{Sources: []string{"RFC5280", "RFC9999"}}, `unknown lint source "RFC9999"`},
		{"source spelt in lower case", lint.Options{Sources: []string{"community"}}, `unknown lint source "community"`},
		{"unknown lint", lint.Options{Exclude: []string{"e_no_such_lint"}}, `unknown certificate lint "e_no_such_lint"`},
		{"OCSP-only source", lint.Options{Sources: []string{"RFC6960"}}, "no certificate lint left"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := lint.New(tt.opts)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestLints(t *testing.T) {
	def := newGate(t, lint.Options{}).Lints()
	if !slices.IsSorted(def) {
		t.Errorf("Lints() is not sorted")
	}
	for _, want := range []string{"e_rfc_dnsname_empty_label", "e_mp_modulus_must_be_2048_bits_or_more", "e_rsa_allowed_ku_ee", "e_ecdsa_allowed_ku"} {
		if !slices.Contains(def, want) {
			t.Errorf("default lints lack %s", want)
		}
	}
	for _, e := range append(lint.DefaultExclusions(), lint.AlwaysExcluded()...) {
		if e.Reason == "" {
			t.Errorf("exclusion %s has no reason", e.Lint)
		}
		if slices.Contains(def, e.Lint) {
			t.Errorf("default lints include excluded %s", e.Lint)
		}
	}
	for _, name := range def {
		if strings.HasPrefix(name, "e_sub_cert_") || strings.Contains(name, "cabf") {
			t.Errorf("default lints include CA/B Forum lint %s", name)
		}
	}

	// replaceDefaultExclusions with no Exclude runs the default exclusions too; the
	// always-excluded lints stay out.
	none := newGate(t, lint.Options{ReplaceDefaultExclusions: true}).Lints()
	for _, e := range lint.DefaultExclusions() {
		if !slices.Contains(none, e.Lint) {
			t.Errorf("replaceDefaultExclusions still leaves out %s", e.Lint)
		}
	}
	for _, e := range lint.AlwaysExcluded() {
		if slices.Contains(none, e.Lint) {
			t.Errorf("replaceDefaultExclusions runs always-excluded %s", e.Lint)
		}
	}
	// A configured exclusion adds to the defaults.
	exclude := make([]string, 1, 4)
	exclude[0] = "e_rfc_dnsname_empty_label"
	one := newGate(t, lint.Options{Exclude: exclude}).Lints()
	if spare := exclude[:cap(exclude)]; spare[1] != "" {
		t.Errorf("New wrote %q into the caller's Exclude slice", spare[1])
	}
	if slices.Contains(one, "e_rfc_dnsname_empty_label") || len(one) != len(def)-1 {
		t.Errorf("excluding one lint: %d lints, want %d", len(one), len(def)-1)
	}
	for _, e := range lint.DefaultExclusions() {
		if slices.Contains(one, e.Lint) {
			t.Errorf("a configured exclusion dropped the default exclusion %s", e.Lint)
		}
	}
}

// TestExclusionsReported: the gate reports every exclusion with its reason and origin (default,
// configured, or full control), and the findings it accepts by design.
func TestExclusionsReported(t *testing.T) {
	accepted := lint.Exclusion{Lint: "e_key_usage_and_extended_key_usage_inconsistent", Reason: "accepted on purpose"}
	g := newGate(t, lint.Options{Exclude: []string{"e_rfc_dnsname_empty_label", "n_san_iana_pub_suffix_empty"}, Accept: []lint.Exclusion{accepted}})
	reasons := map[string]string{}
	for _, e := range g.Excluded() {
		if _, dup := reasons[e.Lint]; dup {
			t.Errorf("%s excluded twice", e.Lint)
		}
		reasons[e.Lint] = e.Reason
	}
	for _, e := range append(lint.DefaultExclusions(), lint.AlwaysExcluded()...) {
		if reasons[e.Lint] != e.Reason {
			t.Errorf("%s: reason %q, want the default's %q", e.Lint, reasons[e.Lint], e.Reason)
		}
	}
	if reasons["e_rfc_dnsname_empty_label"] != "configured (lint.exclude)" {
		t.Errorf("reasons %v: want the configured one", reasons)
	}
	if got := g.Accepted(); len(got) != 1 || got[0] != accepted || !slices.Contains(g.Lints(), accepted.Lint) {
		t.Errorf("Accepted() = %v, want %v, in force", got, accepted)
	}
	if !slices.Equal(g.Sources(), lint.DefaultSources()) {
		t.Errorf("Sources() = %v, want the defaults", g.Sources())
	}
	full := newGate(t, lint.Options{Exclude: []string{"e_rfc_dnsname_empty_label"}, ReplaceDefaultExclusions: true})
	var names []string
	for _, e := range full.Excluded() {
		names = append(names, e.Lint+": "+e.Reason)
	}
	want := []string{"e_rfc_dnsname_empty_label: configured (lint.exclude with replaceDefaultExclusions)"}
	for _, e := range lint.AlwaysExcluded() {
		want = append(want, e.Lint+": "+e.Reason)
	}
	if !slices.Equal(names, want) {
		t.Errorf("full control: excluded %q, want %q", names, want)
	}
}

// TestAcceptedFindingsDoNotFail: a lint whose findings the profile accepts runs, and its Error
// result is returned in Result.Accepted instead of failing the check.
func TestAcceptedFindingsDoNotFail(t *testing.T) {
	ca := newCA(t, testpki.P256)
	tmpl := kubeletClient(t, 24*time.Hour)
	tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment // RSA kubelets ask for it with client auth
	pub := testpki.Key(t, testpki.RSA2048).Public()
	_, err := newGate(t, lint.Options{}).Check(tmpl, ca.cert, pub)
	var failed *lint.FailedError
	if !errors.As(err, &failed) || failed.Failures[0].Lint != "e_key_usage_and_extended_key_usage_inconsistent" {
		t.Fatalf("default gate: %v, want e_key_usage_and_extended_key_usage_inconsistent to fail", err)
	}
	g := newGate(t, lint.Options{Accept: []lint.Exclusion{{Lint: "e_key_usage_and_extended_key_usage_inconsistent", Reason: "test"}}})
	res, err := g.Check(tmpl, ca.cert, pub)
	if err != nil {
		t.Fatalf("accepting gate: %v", err)
	}
	if len(res.Accepted) != 1 || res.Accepted[0].Lint != "e_key_usage_and_extended_key_usage_inconsistent" || res.Accepted[0].Status != "error" {
		t.Errorf("Accepted = %v, want the error finding", res.Accepted)
	}
	if _, err := lint.New(lint.Options{Accept: []lint.Exclusion{{Lint: "e_no_such_lint"}}}); err == nil {
		t.Error("an unknown accepted lint built a gate")
	}
}

// TestDefaultExclusionsMisfire shows each misfiring default exclusion firing on a normal leaf
// when it is not excluded, so none of them is there without cause.
func TestDefaultExclusionsMisfire(t *testing.T) {
	g := newGate(t, lint.Options{ReplaceDefaultExclusions: true})
	ca := newCA(t, testpki.P256)
	pub := testpki.Key(t, testpki.P256).Public()
	res, err := g.Check(kubeletServing(t, 24*time.Hour), ca.cert, pub)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	got := strings.Join(append(res.Warnings, res.Notices...), "\n")
	for _, e := range lint.DefaultExclusions() {
		if e.Lint == smallKeyLint {
			continue // excluded for its cost, not for misfiring: see TestSmallPrivateKeyOptIn
		}
		if !strings.Contains(got, e.Lint) {
			t.Errorf("%s does not fire on a kubelet serving certificate without the exclusion; results:\n%s", e.Lint, got)
		}
	}
}

const smallKeyLint = "e_ecdsa_small_private_key"

// TestSmallPrivateKeyOptIn: the small-private-key lint, excluded by default for its cost, can be
// turned back on through Options.Exclude with ReplaceDefaultExclusions and then refuses a P-256 key whose private scalar is
// 12345.
func TestSmallPrivateKeyOptIn(t *testing.T) {
	g := newGate(t, lint.Options{Exclude: defaultExcludeExcept(smallKeyLint), ReplaceDefaultExclusions: true})
	if !slices.Contains(g.Lints(), smallKeyLint) {
		t.Fatalf("%s is not in force", smallKeyLint)
	}
	ca := newCA(t, testpki.P256)
	x, y := elliptic.P256().ScalarBaseMult(big.NewInt(12345).Bytes())
	weak := &ecdsa.PublicKey{Curve: elliptic.P256(), X: x, Y: y}
	_, err := g.Check(kubeletClient(t, 24*time.Hour), ca.cert, weak)
	if !errors.Is(err, lint.ErrLintFailed) || !strings.Contains(err.Error(), smallKeyLint) {
		t.Fatalf("Check with a weak key = %v, want a %s failure", err, smallKeyLint)
	}
	if _, err := g.Check(kubeletClient(t, 24*time.Hour), ca.cert, testpki.Key(t, testpki.P256).Public()); err != nil {
		t.Fatalf("Check with a random key: %v", err)
	}
	if _, err := newGate(t, lint.Options{}).Check(kubeletClient(t, 24*time.Hour), ca.cert, weak); err != nil {
		t.Fatalf("the default gate refuses the weak key (%v), so the exclusion is not in force", err)
	}
}

// TestCABForumMisfiresOnPrivateLeaves shows why the CA/B Forum sources are off by default: a
// normal kubelet serving certificate fails the public-web baseline requirements.
func TestCABForumMisfiresOnPrivateLeaves(t *testing.T) {
	g := newGate(t, lint.Options{Sources: []string{"RFC5280", "CABF_BR"}})
	ca := newCA(t, testpki.P256)
	_, err := g.Check(kubeletServing(t, 24*time.Hour), ca.cert, testpki.Key(t, testpki.P256).Public())
	if !errors.Is(err, lint.ErrLintFailed) || !strings.Contains(err.Error(), "e_sub_cert_aia_missing") {
		t.Fatalf("Check = %v, want CA/B Forum failures such as e_sub_cert_aia_missing", err)
	}
}

// TestCheckConcurrent runs checks from many goroutines against CAs of several key types, so the
// race detector sees the shared registry.
func TestCheckConcurrent(t *testing.T) {
	g := newGate(t, lint.Options{})
	cas := []testCA{newCA(t, testpki.P256), newCA(t, testpki.Ed25519), newCA(t, testpki.RSA2048)}
	pub := testpki.Key(t, testpki.P256).Public()
	var wg sync.WaitGroup
	errs := make(chan error, 24)
	for i := range 24 {
		tmpl := kubeletClient(t, 24*time.Hour)
		wg.Go(func() {
			if _, err := g.Check(tmpl, cas[i%len(cas)].cert, pub); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestKeyEnciphermentOnECDSAKey records a default lint that refuses what kubelets ask for: a
// serving certificate with "key encipherment" for an ECDSA key fails RFC 8813's
// e_ecdsa_allowed_ku, while the same usage on an RSA key passes. Signers that must match
// kube-controller-manager exclude that lint themselves (profile.Profile.LintOptions).
func TestKeyEnciphermentOnECDSAKey(t *testing.T) {
	g := newGate(t, lint.Options{})
	ca := newCA(t, testpki.P256)
	tmpl := kubeletServing(t, 24*time.Hour)
	tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	_, err := g.Check(tmpl, ca.cert, testpki.Key(t, testpki.P256).Public())
	if !errors.Is(err, lint.ErrLintFailed) || !strings.Contains(err.Error(), "e_ecdsa_allowed_ku") {
		t.Fatalf("ECDSA key with key encipherment: %v, want an e_ecdsa_allowed_ku failure", err)
	}
	if _, err := g.Check(tmpl, ca.cert, testpki.Key(t, testpki.RSA2048).Public()); err != nil {
		t.Fatalf("RSA key with key encipherment: %v", err)
	}
	exclude := append(defaultExcludeExcept(""), "e_ecdsa_allowed_ku")
	if _, err := newGate(t, lint.Options{Exclude: exclude}).Check(tmpl, ca.cert, testpki.Key(t, testpki.P256).Public()); err != nil {
		t.Fatalf("ECDSA key with key encipherment, e_ecdsa_allowed_ku excluded: %v", err)
	}
}

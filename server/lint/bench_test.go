package lint_test

import (
	"crypto/rand"
	"crypto/x509"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/lint"
)

// allSources is every zlint source, the CA/B Forum ones included.
var allSources = []string{
	"RFC3279", "RFC5280", "RFC5480", "RFC5891", "RFC6960", "RFC6962", "RFC8813",
	"CABF_BR", "CABF_CS_BR", "CABF_SMIME_BR", "CABF_EV",
	"Mozilla", "Apple", "Chrome", "Community", "ETSI_ESI",
}

// benchCAs are the CA key types benchmarked; the subject key is P-256 throughout, and the
// template a kubelet client certificate (CN, O, clientAuth, 24 h).
var benchCAs = []testpki.KeyType{testpki.P256, testpki.RSA2048}

// BenchmarkCheck measures the lint gate: TBS encoding, zcrypto parse, lints. Compare
// with BenchmarkBareSign for the same CA key type. "default" is Options{}; "default+small-key"
// puts e_ecdsa_small_private_key back; "all-sources" is every zlint source, CA/B Forum
// included, with the default exclusions.
func BenchmarkCheck(b *testing.B) {
	for _, kt := range benchCAs {
		ca := newCA(b, kt)
		pub := testpki.Key(b, testpki.P256).Public()
		tmpl := kubeletClient(b, 24*time.Hour)
		for _, set := range []struct {
			name string
			opts lint.Options
		}{
			{"default", lint.Options{}},
			{"default+small-key", lint.Options{Exclude: defaultExcludeExcept(smallKeyLint), ReplaceDefaultExclusions: true}},
			{"all-sources", lint.Options{Sources: allSources}},
		} {
			g := newGate(b, set.opts)
			if err := g.Prepare(ca.cert); err != nil {
				b.Fatal(err)
			}
			b.Run(string(kt)+"/"+set.name, func(b *testing.B) {
				for b.Loop() {
					if _, err := g.Check(tmpl, ca.cert, pub); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(g.Lints())), "lints")
			})
		}
	}
}

// BenchmarkBareSign is the real signature alone: x509.CreateCertificate with the CA key on the
// same template, which Go follows with a verification of its own signature.
func BenchmarkBareSign(b *testing.B) {
	for _, kt := range benchCAs {
		ca := newCA(b, kt)
		pub := testpki.Key(b, testpki.P256).Public()
		tmpl := kubeletClient(b, 24*time.Hour)
		b.Run(string(kt), func(b *testing.B) {
			for b.Loop() {
				if _, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCheckVsBareSign alternates a default Check and a bare signature on the same CA and
// template, and reports the mean of each and their ratio. Interleaving makes the ratio robust to
// load from other processes, which moves separate benchmarks by tens of percent.
func BenchmarkCheckVsBareSign(b *testing.B) {
	for _, kt := range benchCAs {
		ca := newCA(b, kt)
		pub := testpki.Key(b, testpki.P256).Public()
		tmpl := kubeletClient(b, 24*time.Hour)
		g := newGate(b, lint.Options{})
		if err := g.Prepare(ca.cert); err != nil {
			b.Fatal(err)
		}
		b.Run(string(kt), func(b *testing.B) {
			var check, bare time.Duration
			n := 0
			for b.Loop() {
				start := time.Now()
				if _, err := g.Check(tmpl, ca.cert, pub); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if _, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key); err != nil {
					b.Fatal(err)
				}
				check += mid.Sub(start)
				bare += time.Since(mid)
				n++
			}
			b.ReportMetric(float64(check.Nanoseconds())/float64(n), "check-ns/op")
			b.ReportMetric(float64(bare.Nanoseconds())/float64(n), "bare-ns/op")
			b.ReportMetric(float64(check)/float64(bare), "check/bare")
		})
	}
}

// defaultExcludeExcept returns the default exclusions without name, to measure that lint's cost.
func defaultExcludeExcept(name string) []string {
	var out []string
	for _, e := range lint.DefaultExclusions() {
		if e.Lint != name {
			out = append(out, e.Lint)
		}
	}
	return out
}

// Package lint is the lint gate between the certificate template and the real signature, after
// Let's Encrypt Boulder's pre-issuance linter: CheckTBS runs zlint on the exact to-be-signed
// certificate the CA key is about to sign (certsign.EncodeTBS encodes it from the template
// without signing), wrapped with a placeholder signature value. The issuer then signs those
// very bytes (certsign.Sign), so what was linted is what was signed. The CA key never signs
// what has not passed the gate, and no other key signs anything.
//
// Any lint result at Error or Fatal fails the check (fail closed); Warn and Notice results are
// returned for logging. The lints in force are chosen once, in New.
package lint

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"sort"
	"strings"

	zx509 "github.com/zmap/zcrypto/x509"
	// zlint/v3 imports every lint package, whose init functions fill the global registry.
	_ "github.com/zmap/zlint/v3"
	zl "github.com/zmap/zlint/v3/lint"

	"github.com/signet-pki/signet/server/certsign"
)

// ErrLintFailed is wrapped by every Check error caused by a lint result at Error or Fatal. Its
// message names the failing lints and their details, which describe the certificate's
// contents only and are safe to show to the requester.
var ErrLintFailed = errors.New("certificate failed lint")

// Options chooses the lints a Gate runs. The zero value is the default set.
type Options struct {
	// Sources are the zlint lint sources that apply, spelled as zlint's lint.LintSource values
	// ("RFC5280", "Community", "CABF_BR", ...). Empty means DefaultSources. The CA/Browser
	// Forum, Apple, Chrome and ETSI sources are for the public web PKI and misfire on private
	// leaves (missing AIA, policies and C/L/ST, 200-day validity, non-public TLDs); they are
	// off by default but may be configured.
	Sources []string `json:"sources,omitempty"`
	// Exclude names lints not to run, on top of the default exclusions (DefaultExclusions).
	// Every name must be a lint zlint knows.
	Exclude []string `json:"exclude,omitempty"`
	// ReplaceDefaultExclusions takes full control: Exclude becomes the complete list, and the
	// default exclusions no longer apply. The always-excluded lints stay out, and the findings
	// a profile accepts by design (Accept) stay accepted.
	ReplaceDefaultExclusions bool `json:"replaceDefaultExclusions,omitempty"`
	// Accept are lints whose findings the signer's profile accepts by design, with reasons:
	// they run, but even an Error result does not stop issuance; CheckTBS returns their
	// findings in Result.Accepted, for a metric and a debug log. Set by the profile, never by
	// the configuration file.
	Accept []Exclusion `json:"-"`
}

// Exclusion is a lint left out of the default set, and why.
type Exclusion struct {
	Lint   string
	Reason string
}

// defaultSources: every RFC source, the community lints and Mozilla's root store policy, which
// is the only source that flags weak subject keys (RSA below 2048 bits, unknown curves).
// RFC6960 holds OCSP response lints only and adds no certificate lint.
var defaultSources = []string{
	string(zl.RFC3279), string(zl.RFC5280), string(zl.RFC5480), string(zl.RFC5891),
	string(zl.RFC6960), string(zl.RFC6962), string(zl.RFC8813),
	string(zl.Community), string(zl.MozillaRootStorePolicy),
}

// defaultExclusions are lints of the default sources that misfire on legitimate private-CA
// leaves, or that cost far more than they can tell about a lint certificate.
var defaultExclusions = []Exclusion{
	{"w_ext_subject_key_identifier_missing_sub_cert",
		"RFC 5280 makes SKI on end-entity certificates a SHOULD; Go sets it only on CAs, nothing builds paths from a leaf's SKI, and the warning would fire on every issuance"},
	{"n_san_iana_pub_suffix_empty",
		"flags single-label private host names (a kubelet serving certificate's \"node-1\") as bare public suffixes; the public suffix list says nothing about cluster-internal names"},
	{"e_ecdsa_small_private_key",
		"a baby-step giant-step search for ECDSA private keys below 2^16 on crypto/elliptic's deprecated generic point arithmetic: ~110-135 µs per ECDSA subject key, about half a bare P-256 signature and a quarter of the whole check; it tests the requester's key, not the certificate, so it belongs with the CSR key checks"},
}

// alwaysExcluded are lints that check the lint certificate's signature value, which is a
// placeholder, so their result says nothing about the real certificate. They never run,
// whatever the options say.
var alwaysExcluded = []Exclusion{
	{"e_cert_issued_by_compromised_emudhra_ca",
		"verifies the signature against eight compromised public eMudhra P-384 keys: the placeholder signature can never match, and the eight verifications cost ~6.6 ms, 40x everything else"},
}

// DefaultSources returns the lint sources used when Options.Sources is empty.
func DefaultSources() []string { return append([]string(nil), defaultSources...) }

// DefaultExclusions returns the lints left out unless Options.ReplaceDefaultExclusions is
// set, with reasons.
func DefaultExclusions() []Exclusion { return append([]Exclusion(nil), defaultExclusions...) }

// AlwaysExcluded returns the lints that never run, whatever the options, with reasons.
func AlwaysExcluded() []Exclusion { return append([]Exclusion(nil), alwaysExcluded...) }

// Gate lints certificate templates before they are signed. It is safe for concurrent use.
type Gate struct {
	lints    *runner
	names    []string
	sources  []string
	excluded []Exclusion
	accepted map[string]string // lint name → reason
}

// Reasons given to exclusions that come from the configuration.
const (
	reasonConfigured = "configured (lint.exclude)"
	reasonReplaced   = "configured (lint.exclude with replaceDefaultExclusions)"
)

// New validates opts and builds the filtered lint registry once. It fails on an unknown source
// or lint name, and when the options leave no certificate lint to run.
func New(opts Options) (*Gate, error) {
	sources, err := parseSources(opts.Sources)
	if err != nil {
		return nil, err
	}
	excluded := effectiveExclusions(opts)
	global := zl.GlobalRegistry()
	for _, e := range append(excluded, opts.Accept...) {
		if global.CertificateLints().ByName(e.Lint) == nil {
			return nil, fmt.Errorf("lint options: unknown certificate lint %q in exclusions or accepted findings", e.Lint)
		}
	}
	excluded = append(excluded, alwaysExcluded...)
	names := make([]string, len(excluded))
	for i, e := range excluded {
		names[i] = e.Lint
	}
	reg, err := global.Filter(zl.FilterOptions{IncludeSources: sources, ExcludeNames: names})
	if err != nil {
		return nil, fmt.Errorf("lint options: %w", err)
	}
	inForce := reg.CertificateLints().Names()
	if len(inForce) == 0 {
		return nil, errors.New("lint options: no certificate lint left to run")
	}
	run, err := newRunner(reg.CertificateLints().Lints(), reg.GetConfiguration())
	if err != nil {
		return nil, err
	}
	g := &Gate{lints: run, names: inForce, excluded: excluded, accepted: map[string]string{}}
	for _, s := range sources {
		g.sources = append(g.sources, string(s))
	}
	for _, a := range opts.Accept {
		g.accepted[a.Lint] = a.Reason
	}
	return g, nil
}

// effectiveExclusions returns the exclusions opts asks for, without the always-excluded
// lints and without repeats (the first reason wins): the defaults, then the configured ones;
// or, with ReplaceDefaultExclusions, the configured ones alone.
func effectiveExclusions(opts Options) []Exclusion {
	var all []Exclusion
	reason := reasonConfigured
	if opts.ReplaceDefaultExclusions {
		reason = reasonReplaced
	} else {
		all = append(all, defaultExclusions...)
	}
	for _, name := range opts.Exclude {
		all = append(all, Exclusion{Lint: name, Reason: reason})
	}
	var out []Exclusion
	seen := map[string]bool{}
	for _, e := range all {
		if !seen[e.Lint] {
			seen[e.Lint] = true
			out = append(out, e)
		}
	}
	return out
}

// parseSources checks each name against zlint's own list of sources and returns them, or the
// defaults when names is empty.
func parseSources(names []string) (zl.SourceList, error) {
	if len(names) == 0 {
		names = defaultSources
	}
	var list zl.SourceList
	seen := make(map[zl.LintSource]bool, len(names))
	for _, n := range names {
		var s zl.LintSource
		// LintSource.UnmarshalJSON is zlint's authority on which sources exist.
		if err := s.UnmarshalJSON([]byte(fmt.Sprintf("%q", n))); err != nil {
			return nil, fmt.Errorf("lint options: unknown lint source %q (known: %s)", n, knownSources())
		}
		if !seen[s] {
			seen[s] = true
			list = append(list, s)
		}
	}
	return list, nil
}

// knownSources lists the sources zlint has lints for, sorted, for error messages.
func knownSources() string {
	var names []string
	for _, s := range zl.GlobalRegistry().Sources() {
		names = append(names, string(s))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Lints returns the names of the certificate lints in force, sorted.
func (g *Gate) Lints() []string { return append([]string(nil), g.names...) }

// Sources returns the lint sources the gate draws its lints from.
func (g *Gate) Sources() []string { return append([]string(nil), g.sources...) }

// Excluded returns the lints left out, with reasons: the default and configured exclusions, then the always-excluded ones. A lint of a source the gate does not use is not
// listed.
func (g *Gate) Excluded() []Exclusion { return append([]Exclusion(nil), g.excluded...) }

// Accepted returns the lints in force whose findings the profile accepts by design, with
// reasons, sorted by name.
func (g *Gate) Accepted() []Exclusion {
	var out []Exclusion
	for _, name := range g.names {
		if reason, ok := g.accepted[name]; ok {
			out = append(out, Exclusion{Lint: name, Reason: reason})
		}
	}
	return out
}

// Prepare checks that the gate can lint certificates issued under caCert: its key is ECDSA
// P-256, P-384 or P-521, RSA or Ed25519. Check makes the same check on every call.
func (g *Gate) Prepare(caCert *x509.Certificate) error {
	if caCert == nil {
		return errors.New("lint: CA certificate is required")
	}
	if _, err := placeholderSignature(caCert.PublicKey); err != nil {
		return fmt.Errorf("lint: %w", err)
	}
	return nil
}

// Result is what a passing Check returns.
type Result struct {
	// TBS is the lint certificate's RawTBSCertificate: the bytes that passed. CheckTBS returns
	// the bytes it was given (the issuer signs its own copy); Check returns the TBS it encoded
	// from the template, the one a CA would sign for it.
	TBS []byte
	// Certificate is the DER of the lint certificate: Result.TBS with a placeholder signature
	// value that no key made, so it verifies under no key. A record of what was linted.
	Certificate []byte
	// Warnings are the Warn results, as "lint_name: details", sorted.
	Warnings []string
	// Notices are the Notice results, in the same form.
	Notices []string
	// Accepted are the results at Notice or above of the lints whose findings the profile
	// accepts by design (Options.Accept), whatever their level.
	Accepted []Finding
}

// Finding is one lint result at or above Notice.
type Finding struct {
	Lint    string
	Status  string // "notice", "warn", "error" or "fatal"
	Details string
}

func (f Finding) String() string {
	if f.Details == "" {
		return f.Lint
	}
	return f.Lint + ": " + f.Details
}

// FailedError is the error Check returns when lints fail. It wraps ErrLintFailed.
type FailedError struct {
	// Failures are the Error and Fatal results, sorted by lint name.
	Failures []Finding
}

func (e *FailedError) Error() string {
	parts := make([]string, len(e.Failures))
	for i, f := range e.Failures {
		parts[i] = f.String()
	}
	return fmt.Sprintf("%v: %s", ErrLintFailed, strings.Join(parts, "; "))
}

// Unwrap makes errors.Is(err, ErrLintFailed) true.
func (e *FailedError) Unwrap() error { return ErrLintFailed }

// Check lints the certificate that tmpl would give when signed by caCert's key for the subject
// key pub: certsign.EncodeTBS encodes the TBSCertificate for tmpl under caCert (with caCert's
// public key, so the signature algorithm, issuer name and authority key identifier are the
// real signature's, and nothing signed), then CheckTBS lints it. tmpl must carry its serial
// number. Issuers that sign the linted bytes call certsign.EncodeTBS and CheckTBS themselves.
func (g *Gate) Check(tmpl *x509.Certificate, caCert *x509.Certificate, pub crypto.PublicKey) (Result, error) {
	tbs, err := certsign.EncodeTBS(tmpl, caCert, pub)
	if err != nil {
		return Result{}, fmt.Errorf("lint: %w", err)
	}
	return g.CheckTBS(tbs, caCert)
}

// CheckTBS lints the certificate that caCert's key makes by signing tbs, a DER TBSCertificate:
//   - the lint certificate is tbs with a placeholder signature of the CA key's shape;
//   - its issuer must be caCert's subject, byte for byte;
//   - the gate's lints run on it.
//
// An Error or Fatal result returns a *FailedError wrapping ErrLintFailed; any other failure is
// an internal error.
func (g *Gate) CheckTBS(tbs []byte, caCert *x509.Certificate) (Result, error) {
	if caCert == nil {
		return Result{}, errors.New("lint: CA certificate is required")
	}
	placeholder, err := placeholderSignature(caCert.PublicKey)
	if err != nil {
		return Result{}, fmt.Errorf("lint: %w", err)
	}
	der, err := certsign.Assemble(tbs, placeholder)
	if err != nil {
		return Result{}, fmt.Errorf("lint: building the lint certificate: %w", err)
	}
	cert, err := zx509.ParseCertificate(der)
	if err != nil {
		return Result{}, fmt.Errorf("lint: parsing lint certificate: %w", err)
	}
	if len(caCert.RawSubject) > 0 && !bytes.Equal(cert.RawIssuer, caCert.RawSubject) {
		return Result{}, errors.New("lint: the lint certificate's issuer does not match the CA certificate's subject")
	}
	return g.lint(cert, der)
}

// lint runs the gate's lints on cert and sorts the results into a Result or a *FailedError.
//
// It does what zlint.LintCertificateEx does (run each certificate lint of the registry with the
// registry's configuration) without building a ResultSet: LintCertificateEx sorts every lint
// name of the registry and fills a map of all results on each call, ~10% of a whole check.
func (g *Gate) lint(cert *zx509.Certificate, der []byte) (Result, error) {
	res := Result{TBS: cert.RawTBSCertificate, Certificate: der}
	var failures []Finding
	err := g.lints.run(cert, func(l *zl.CertificateLint, r *zl.LintResult) {
		if r.Status < zl.Notice {
			return
		}
		f := Finding{Lint: l.Name, Status: statusName(r.Status), Details: r.Details}
		if _, ok := g.accepted[l.Name]; ok {
			res.Accepted = append(res.Accepted, f)
			return
		}
		switch r.Status {
		case zl.Notice:
			res.Notices = append(res.Notices, f.String())
		case zl.Warn:
			res.Warnings = append(res.Warnings, f.String())
		default: // Error, Fatal and any level zlint adds above them
			failures = append(failures, f)
		}
	})
	if err != nil {
		return Result{}, fmt.Errorf("lint: %w", err)
	}
	if len(failures) > 0 {
		sort.Slice(failures, func(i, j int) bool { return failures[i].Lint < failures[j].Lint })
		return Result{}, &FailedError{Failures: failures}
	}
	sort.Strings(res.Notices)
	sort.Strings(res.Warnings)
	sort.Slice(res.Accepted, func(i, j int) bool { return res.Accepted[i].Lint < res.Accepted[j].Lint })
	return res, nil
}

// statusName spells a lint status for logs and errors.
func statusName(s zl.LintStatus) string {
	if s == zl.Notice {
		return "notice" // zlint spells it "info"
	}
	return s.String()
}

package spec

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// KnownKeyTypes are the names CustomSpec.KeyTypes accepts, in the order descriptions list
// them.
var KnownKeyTypes = []string{"RSA-2048", "RSA-3072", "RSA-4096", "RSA-8192", "ECDSA-P256", "ECDSA-P384", "ECDSA-P521", "Ed25519"}

// KnownUsages are the certificates.k8s.io/v1 usages, the strings spec.usages may carry: those
// the issuer maps to key usage bits and extended key usages (issuance.ParseUsages; a test
// there pins the two lists equal).
var KnownUsages = []string{
	string(certificatesv1.UsageSigning), string(certificatesv1.UsageDigitalSignature), string(certificatesv1.UsageContentCommitment),
	string(certificatesv1.UsageKeyEncipherment), string(certificatesv1.UsageKeyAgreement), string(certificatesv1.UsageDataEncipherment),
	string(certificatesv1.UsageCertSign), string(certificatesv1.UsageCRLSign), string(certificatesv1.UsageEncipherOnly),
	string(certificatesv1.UsageDecipherOnly), string(certificatesv1.UsageAny), string(certificatesv1.UsageServerAuth),
	string(certificatesv1.UsageClientAuth), string(certificatesv1.UsageCodeSigning), string(certificatesv1.UsageEmailProtection),
	string(certificatesv1.UsageSMIME), string(certificatesv1.UsageIPsecEndSystem), string(certificatesv1.UsageIPsecTunnel),
	string(certificatesv1.UsageIPsecUser), string(certificatesv1.UsageTimestamping), string(certificatesv1.UsageOCSPSigning),
	string(certificatesv1.UsageMicrosoftSGC), string(certificatesv1.UsageNetscapeSGC),
}

// Custom is a validated CustomSpec with its patterns compiled.
type Custom struct {
	// Spec is the configuration compiled.
	Spec CustomSpec
	// CommonNames, Organizations, DNS, URI and Email are the compiled patterns of the subject
	// and the SANs, in configuration order (DNS patterns and email domains lower-cased).
	CommonNames   []Glob
	Organizations []Glob
	DNS, URI      []Glob
	Email         []Glob
	// IP are the allowed IP ranges.
	IP []netip.Prefix
	// KeyTypes are the allowed key types (KnownKeyTypes' names); empty: the baseline.
	KeyTypes []string
}

// compileCustom validates and compiles c. Errors name the field by its path in Spec.
func compileCustom(c CustomSpec) (*Custom, []error) {
	out := &Custom{Spec: c, KeyTypes: c.KeyTypes}
	var errs, e []error
	out.CommonNames, e = compileGlobs("custom.subject.commonNames", c.Subject.CommonNames, compileNamePattern)
	errs = append(errs, e...)
	out.Organizations, e = compileGlobs("custom.subject.organizations", c.Subject.Organizations, compileNamePattern)
	errs = append(errs, e...)
	out.DNS, e = compileGlobs("custom.sans.dns", c.SANs.DNS, compileDNSPattern)
	errs = append(errs, e...)
	out.URI, e = compileGlobs("custom.sans.uri", c.SANs.URI, compileURIPattern)
	errs = append(errs, e...)
	out.Email, e = compileGlobs("custom.sans.email", c.SANs.Email, compileEmailPattern)
	errs = append(errs, e...)
	errs = append(errs, validateList("custom.sans.ip", c.SANs.IP, func(s string) error {
		p, err := parseIPRange(s)
		if err == nil {
			out.IP = append(out.IP, p)
		}
		return err
	})...)
	if c.SANs.Required && len(c.SANs.DNS)+len(c.SANs.IP)+len(c.SANs.URI)+len(c.SANs.Email) == 0 {
		errs = append(errs, errors.New("custom.sans.required: no SAN type is allowed (list dns, ip, uri or email patterns)"))
	}
	errs = append(errs, validateUsages(c.Usages)...)
	errs = append(errs, validateList("custom.keyTypes", c.KeyTypes, func(k string) error {
		if !slices.Contains(KnownKeyTypes, k) {
			return fmt.Errorf("is not one of %s", strings.Join(KnownKeyTypes, ", "))
		}
		return nil
	})...)
	return out, errs
}

// compileGlobs compiles every pattern of list with compile; errors name field[i].
func compileGlobs(field string, list []string, compile func(string) (Glob, error)) ([]Glob, []error) {
	var globs []Glob
	errs := validateList(field, list, func(p string) error {
		g, err := compile(p)
		if err == nil {
			globs = append(globs, g)
		}
		return err
	})
	return globs, errs
}

// validateUsages checks custom.usages: allowed is non-empty, every usage is known and not a
// CA usage, and every required usage is allowed.
func validateUsages(u UsageSpec) []error {
	known := func(s string) error {
		if !slices.Contains(KnownUsages, s) {
			return errors.New("is not a certificates.k8s.io/v1 usage")
		}
		if s == string(certificatesv1.UsageCertSign) || s == string(certificatesv1.UsageCRLSign) {
			return errors.New("is reserved for CA certificates; Signet issues leaf certificates only")
		}
		return nil
	}
	var errs []error
	if len(u.Allowed) == 0 {
		errs = append(errs, errors.New("custom.usages.allowed: required, at least one usage"))
	}
	errs = append(errs, validateList("custom.usages.allowed", u.Allowed, known)...)
	errs = append(errs, validateList("custom.usages.required", u.Required, func(s string) error {
		if !slices.Contains(u.Allowed, s) {
			return errors.New("is not in custom.usages.allowed")
		}
		return nil
	})...)
	return errs
}

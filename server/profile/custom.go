package profile

import (
	"encoding/asn1"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/signet-pki/signet/server/issuance"
)

// compiledCustom is a validated CustomSpec with its patterns compiled.
type compiledCustom struct {
	spec          CustomSpec
	commonNames   []glob
	organizations []glob
	dns, uri      []glob
	email         []glob
	ip            []netip.Prefix
	keyTypes      []string
}

// compileCustom validates and compiles c. Errors name the field by its path in Spec.
func compileCustom(c CustomSpec) (*compiledCustom, []error) {
	out := &compiledCustom{spec: c, keyTypes: c.KeyTypes}
	var errs, e []error
	out.commonNames, e = compileGlobs("custom.subject.commonNames", c.Subject.CommonNames, compileNamePattern)
	errs = append(errs, e...)
	out.organizations, e = compileGlobs("custom.subject.organizations", c.Subject.Organizations, compileNamePattern)
	errs = append(errs, e...)
	out.dns, e = compileGlobs("custom.sans.dns", c.SANs.DNS, compileDNSPattern)
	errs = append(errs, e...)
	out.uri, e = compileGlobs("custom.sans.uri", c.SANs.URI, compileURIPattern)
	errs = append(errs, e...)
	out.email, e = compileGlobs("custom.sans.email", c.SANs.Email, compileEmailPattern)
	errs = append(errs, e...)
	errs = append(errs, validateList("custom.sans.ip", c.SANs.IP, func(s string) error {
		p, err := parseIPRange(s)
		if err == nil {
			out.ip = append(out.ip, p)
		}
		return err
	})...)
	if c.SANs.Required && len(c.SANs.DNS)+len(c.SANs.IP)+len(c.SANs.URI)+len(c.SANs.Email) == 0 {
		errs = append(errs, errors.New("custom.sans.required: no SAN type is allowed (list dns, ip, uri or email patterns)"))
	}
	errs = append(errs, validateUsages(c.Usages)...)
	errs = append(errs, validateList("custom.keyTypes", c.KeyTypes, func(k string) error {
		if !slices.Contains(knownKeyTypes, k) {
			return fmt.Errorf("is not one of %s", strings.Join(knownKeyTypes, ", "))
		}
		return nil
	})...)
	return out, errs
}

// compileGlobs compiles every pattern of list with compile; errors name field[i].
func compileGlobs(field string, list []string, compile func(string) (glob, error)) ([]glob, []error) {
	var globs []glob
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
		if _, _, err := issuance.ParseUsages([]string{s}); err != nil {
			return errors.New("is not a certificates.k8s.io/v1 usage")
		}
		if s == usageCertSign || s == usageCRLSign {
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

// rules returns the custom profile's rules: subject, SANs, usages.
func (c *compiledCustom) rules() []rule {
	rules := []rule{c.commonNameRule(), c.organizationRule()}
	if !c.spec.Subject.AllowOtherAttributes {
		rules = append(rules, otherAttributesRule())
	}
	rules = append(rules, c.dnsRule(), c.ipRule(), c.uriRule(), c.emailRule())
	if c.spec.SANs.Required {
		rules = append(rules, rule{name: "sans: at least one", check: func(in *input) (string, error) {
			return outcome(sanCount(in.csr) > 0, describeSANs(in.csr))
		}})
	}
	rules = append(rules, usagesAtMostRule(c.spec.Usages.Allowed))
	if req := c.spec.Usages.Required; len(req) != 0 {
		rules = append(rules, rule{name: "usages: include " + strings.Join(req, ", "), check: func(in *input) (string, error) {
			for _, u := range req {
				if !slices.Contains(in.usages, u) {
					return fmt.Sprintf("usages are %s; %q is missing", quoted(in.usages), u), issuance.ErrPolicyViolation
				}
			}
			return "usages are " + quoted(in.usages), nil
		}})
	}
	return rules
}

// commonNameRule requires the common name to match a pattern, or to be empty when there are
// none.
func (c *compiledCustom) commonNameRule() rule {
	name := "subject: common name empty"
	if len(c.commonNames) != 0 {
		name = "subject: common name matches one of " + list(texts(c.commonNames))
	}
	return rule{name: name, check: func(in *input) (string, error) {
		cn := in.csr.Subject.CommonName
		ok := cn == "" && len(c.commonNames) == 0 || matchAny(c.commonNames, cn)
		return outcome(ok, fmt.Sprintf("common name is %q", cn))
	}}
}

// organizationRule requires every organization to match a pattern; none are allowed when
// there are no patterns.
func (c *compiledCustom) organizationRule() rule {
	name := "subject: no organization"
	if len(c.organizations) != 0 {
		name = "subject: every organization matches one of " + list(texts(c.organizations))
	}
	return rule{name: name, check: func(in *input) (string, error) {
		orgs := in.csr.Subject.Organization
		for _, o := range orgs {
			if !matchAny(c.organizations, o) {
				return fmt.Sprintf("organizations are %s; %q matches no pattern", quoted(orgs), o), issuance.ErrPolicyViolation
			}
		}
		return "organizations are " + quoted(orgs), nil
	}}
}

// Subject attribute types the custom profile always understands.
var (
	oidCommonName   = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidOrganization = asn1.ObjectIdentifier{2, 5, 4, 10}
)

// attributeNames names the usual subject attributes in details.
var attributeNames = map[string]string{
	"2.5.4.5": "serialNumber", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.9": "street",
	"2.5.4.11": "OU", "2.5.4.17": "postalCode", "1.2.840.113549.1.9.1": "emailAddress",
	"0.9.2342.19200300.100.1.1": "UID", "0.9.2342.19200300.100.1.25": "DC",
}

// otherAttributesRule refuses subject attributes other than common name and organization.
func otherAttributesRule() rule {
	return rule{name: "subject: only common name and organization attributes", check: func(in *input) (string, error) {
		var other []string
		for _, atv := range in.csr.Subject.Names {
			if atv.Type.Equal(oidCommonName) || atv.Type.Equal(oidOrganization) {
				continue
			}
			n := atv.Type.String()
			if short, ok := attributeNames[n]; ok {
				n = short
			}
			if !slices.Contains(other, n) {
				other = append(other, n)
			}
		}
		if len(other) != 0 {
			return "subject also has " + strings.Join(other, ", "), issuance.ErrPolicyViolation
		}
		return "subject has only common name and organization attributes", nil
	}}
}

// dnsRule requires every DNS SAN to be a host name matching a pattern; none are allowed when
// there are no patterns.
func (c *compiledCustom) dnsRule() rule {
	name := "sans: no DNS names"
	if len(c.dns) != 0 {
		name = "sans: DNS names are host names matching one of " + list(texts(c.dns))
	}
	return rule{name: name, check: func(in *input) (string, error) {
		names := in.csr.DNSNames
		found := "DNS names are " + quoted(names)
		for _, n := range names {
			if err := checkDNSName(n); err != nil {
				return fmt.Sprintf("%s; %q %v", found, n, err), issuance.ErrPolicyViolation
			}
			if !matchAny(c.dns, asciiLower(n)) {
				return fmt.Sprintf("%s; %q matches no pattern", found, n), issuance.ErrPolicyViolation
			}
		}
		return found, nil
	}}
}

// ipRule requires every IP SAN to be within a range; none are allowed when there are none.
func (c *compiledCustom) ipRule() rule {
	name := "sans: no IP addresses"
	if len(c.ip) != 0 {
		ranges := make([]string, len(c.ip))
		for i, p := range c.ip {
			ranges[i] = p.String()
		}
		name = "sans: IP addresses within " + list(ranges)
	}
	return rule{name: name, check: func(in *input) (string, error) {
		found := fmt.Sprintf("IP addresses are %v", in.csr.IPAddresses)
		for _, ip := range in.csr.IPAddresses {
			addr, ok := netip.AddrFromSlice(ip)
			addr = addr.Unmap()
			if !ok || !slices.ContainsFunc(c.ip, func(p netip.Prefix) bool { return p.Contains(addr) }) {
				return fmt.Sprintf("%s; %s is in no allowed range", found, ip), issuance.ErrPolicyViolation
			}
		}
		return found, nil
	}}
}

// uriRule requires every URI SAN to be in plain form and match a pattern; none are allowed
// when there are no patterns. URIs are matched as the certificate will carry them.
func (c *compiledCustom) uriRule() rule {
	name := "sans: no URIs"
	if len(c.uri) != 0 {
		name = "sans: URIs without user information, query, fragment or dot segments, matching one of " + list(texts(c.uri))
	}
	return rule{name: name, check: func(in *input) (string, error) {
		uris := make([]string, len(in.csr.URIs))
		for i, u := range in.csr.URIs {
			uris[i] = u.String()
		}
		found := "URIs are " + quoted(uris)
		for i, u := range in.csr.URIs {
			if err := checkURI(u); err != nil {
				return fmt.Sprintf("%s; %q %v", found, uris[i], err), issuance.ErrPolicyViolation
			}
			if !matchAny(c.uri, uris[i]) {
				return fmt.Sprintf("%s; %q matches no pattern", found, uris[i]), issuance.ErrPolicyViolation
			}
		}
		return found, nil
	}}
}

// emailRule requires every email SAN to match a pattern; none are allowed when there are no
// patterns.
func (c *compiledCustom) emailRule() rule {
	name := "sans: no email addresses"
	if len(c.email) != 0 {
		name = "sans: email addresses matching one of " + list(texts(c.email))
	}
	return rule{name: name, check: func(in *input) (string, error) {
		found := "email addresses are " + quoted(in.csr.EmailAddresses)
		for _, e := range in.csr.EmailAddresses {
			norm, err := normalizeEmail(e)
			if err != nil {
				return fmt.Sprintf("%s; %q %v", found, e, err), issuance.ErrPolicyViolation
			}
			if !matchAny(c.email, norm) {
				return fmt.Sprintf("%s; %q matches no pattern", found, e), issuance.ErrPolicyViolation
			}
		}
		return found, nil
	}}
}

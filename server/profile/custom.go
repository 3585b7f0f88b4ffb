package profile

import (
	"encoding/asn1"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/profile/spec"
)

// compiledCustom is a custom profile's compiled configuration (spec.Custom), with its rules.
type compiledCustom struct{ *spec.Custom }

// rules returns the custom profile's rules: subject, SANs, usages.
func (c *compiledCustom) rules() []rule {
	rules := []rule{c.commonNameRule(), c.organizationRule()}
	if !c.Spec.Subject.AllowOtherAttributes {
		rules = append(rules, otherAttributesRule())
	}
	rules = append(rules, c.dnsRule(), c.ipRule(), c.uriRule(), c.emailRule())
	if c.Spec.SANs.Required {
		rules = append(rules, rule{name: "sans: at least one", check: func(in *input) (string, error) {
			return outcome(sanCount(in.csr) > 0, describeSANs(in.csr))
		}})
	}
	rules = append(rules, usagesAtMostRule(c.Spec.Usages.Allowed))
	if req := c.Spec.Usages.Required; len(req) != 0 {
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
	if len(c.CommonNames) != 0 {
		name = "subject: common name matches one of " + list(texts(c.CommonNames))
	}
	return rule{name: name, check: func(in *input) (string, error) {
		cn := in.csr.Subject.CommonName
		ok := cn == "" && len(c.CommonNames) == 0 || spec.MatchAny(c.CommonNames, cn)
		return outcome(ok, fmt.Sprintf("common name is %q", cn))
	}}
}

// organizationRule requires every organization to match a pattern; none are allowed when
// there are no patterns.
func (c *compiledCustom) organizationRule() rule {
	name := "subject: no organization"
	if len(c.Organizations) != 0 {
		name = "subject: every organization matches one of " + list(texts(c.Organizations))
	}
	return rule{name: name, check: func(in *input) (string, error) {
		orgs := in.csr.Subject.Organization
		for _, o := range orgs {
			if !spec.MatchAny(c.Organizations, o) {
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
	if len(c.DNS) != 0 {
		name = "sans: DNS names are host names matching one of " + list(texts(c.DNS))
	}
	return rule{name: name, check: func(in *input) (string, error) {
		names := in.csr.DNSNames
		found := "DNS names are " + quoted(names)
		for _, n := range names {
			if err := checkDNSName(n); err != nil {
				return fmt.Sprintf("%s; %q %v", found, n, err), issuance.ErrPolicyViolation
			}
			if !spec.MatchAny(c.DNS, spec.LowerASCII(n)) {
				return fmt.Sprintf("%s; %q matches no pattern", found, n), issuance.ErrPolicyViolation
			}
		}
		return found, nil
	}}
}

// ipRule requires every IP SAN to be within a range; none are allowed when there are none.
func (c *compiledCustom) ipRule() rule {
	name := "sans: no IP addresses"
	if len(c.IP) != 0 {
		ranges := make([]string, len(c.IP))
		for i, p := range c.IP {
			ranges[i] = p.String()
		}
		name = "sans: IP addresses within " + list(ranges)
	}
	return rule{name: name, check: func(in *input) (string, error) {
		found := fmt.Sprintf("IP addresses are %v", in.csr.IPAddresses)
		for _, ip := range in.csr.IPAddresses {
			addr, ok := netip.AddrFromSlice(ip)
			addr = addr.Unmap()
			if !ok || !slices.ContainsFunc(c.IP, func(p netip.Prefix) bool { return p.Contains(addr) }) {
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
	if len(c.URI) != 0 {
		name = "sans: URIs without user information, query, fragment or dot segments, matching one of " + list(texts(c.URI))
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
			if !spec.MatchAny(c.URI, uris[i]) {
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
	if len(c.Email) != 0 {
		name = "sans: email addresses matching one of " + list(texts(c.Email))
	}
	return rule{name: name, check: func(in *input) (string, error) {
		found := "email addresses are " + quoted(in.csr.EmailAddresses)
		for _, e := range in.csr.EmailAddresses {
			norm, err := normalizeEmail(e)
			if err != nil {
				return fmt.Sprintf("%s; %q %v", found, e, err), issuance.ErrPolicyViolation
			}
			if !spec.MatchAny(c.Email, norm) {
				return fmt.Sprintf("%s; %q matches no pattern", found, e), issuance.ErrPolicyViolation
			}
		}
		return found, nil
	}}
}

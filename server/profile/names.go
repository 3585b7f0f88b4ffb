package profile

import (
	"crypto/x509/pkix"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/text/unicode/norm"

	"github.com/signet-pki/signet/server/issuance"
)

// wellFormedNamesRule refuses names no certificate should carry, whatever a profile allows:
// subject attributes with control characters or U+FFFD, and SANs that are not names at all
// (DNS names that are not LDH host names: empty labels, spaces, control characters,
// underscores, misplaced wildcards, hyphens at label edges, over-long names or labels, broken
// punycode; email addresses with spaces or display-name
// syntax, URIs without a scheme or without anything after it). kube-controller-manager signs
// them as asked; Signet refuses them with this rule instead of letting the lint gate refuse
// what the profile accepted. The checks follow the RFC 5280 lints of the default gate.
func wellFormedNamesRule() rule {
	return rule{name: "names: well formed (no control characters in the subject; DNS, email and URI SANs that are valid names)", check: func(in *input) (string, error) {
		if problem, err := subjectProblem(in.csr.Subject); problem != "" {
			return problem, err
		}
		for _, d := range in.csr.DNSNames {
			if problem := dnsProblem(d); problem != "" {
				return fmt.Sprintf("DNS name %q: %s", d, problem), issuance.ErrPolicyViolation
			}
		}
		for _, e := range in.csr.EmailAddresses {
			if problem := emailProblem(e); problem != "" {
				return fmt.Sprintf("email address %q: %s", e, problem), issuance.ErrPolicyViolation
			}
		}
		for _, u := range in.csr.URIs {
			s := u.String()
			switch {
			case u.Scheme == "":
				return fmt.Sprintf("URI %q: no scheme (a relative reference)", s), issuance.ErrPolicyViolation
			case u.Host == "" && u.User == nil && u.Opaque == "" && u.Path == "":
				return fmt.Sprintf("URI %q: nothing after the scheme", s), issuance.ErrPolicyViolation
			case strings.ContainsFunc(s, func(r rune) bool { return r == ' ' || isControl(r) }):
				return fmt.Sprintf("URI %q: contains a space or control character", s), issuance.ErrPolicyViolation
			}
		}
		return "subject and SANs are well formed", nil
	}}
}

// subjectProblem returns what is wrong with a subject attribute value, "" if nothing, and
// the refusal's kind: a value that is not a string Go can decode (a UniversalString, an OCTET
// STRING, an INTEGER, a nested structure) is malformed, since it would be dropped from the
// certificate's subject; a string with control characters or U+FFFD violates the policy.
func subjectProblem(subject pkix.Name) (string, error) {
	for _, atv := range subject.Names {
		v, ok := atv.Value.(string)
		if !ok {
			return fmt.Sprintf("subject attribute %v is not a string this signer can read (ASN.1 %T)", atv.Type, atv.Value), issuance.ErrMalformedRequest
		}
		switch {
		case strings.ContainsFunc(v, isControl):
			return fmt.Sprintf("subject attribute %v %q contains a control character", atv.Type, v), issuance.ErrPolicyViolation
		case strings.ContainsRune(v, utf8.RuneError):
			return fmt.Sprintf("subject attribute %v %q contains U+FFFD (invalid UTF-8 replaced)", atv.Type, v), issuance.ErrPolicyViolation
		}
	}
	return "", nil
}

// dnsProblem returns what is wrong with a DNS SAN, "" if nothing: a host name (checkDNSName:
// LDH labels of 1 to 63 characters, no hyphen at a label's edge, 253 characters in all), after
// an optional wildcard as the whole leftmost label ("*.apps.example.com"), with punycode
// labels that decode to valid host-name Unicode (IDNA lookup rules) in normal form C.
func dnsProblem(name string) string {
	host := strings.TrimPrefix(name, "*.")
	if err := checkDNSName(host); err != nil {
		if strings.Contains(host, "*") {
			return "a wildcard other than the whole leftmost label"
		}
		return strings.TrimSuffix(err.Error(), " (wildcards are refused)")
	}
	for label := range strings.SplitSeq(host, ".") {
		if len(label) < 4 || !strings.EqualFold(label[:4], "xn--") {
			continue
		}
		// The lookup profile also refuses what decodes to code points no host name may
		// hold, such as C1 controls ("xn--a" is U+0080).
		u, err := idna.Lookup.ToUnicode(label)
		if err != nil {
			return fmt.Sprintf("label %q is not valid punycode for a host name", label)
		}
		if !norm.NFC.IsNormalString(u) {
			return fmt.Sprintf("label %q is not in Unicode normal form C", label)
		}
	}
	return ""
}

// emailProblem returns what is wrong with an email SAN, "" if nothing: RFC 5280 wants a bare
// addr-spec, without spaces or display-name syntax.
func emailProblem(addr string) string {
	switch {
	case addr == "":
		return "empty"
	case strings.ContainsFunc(addr, isControl):
		return "contains a control character"
	case strings.Contains(addr, " "):
		return "contains a space"
	case addr[0] == '<' || addr[len(addr)-1] == ')':
		return "display-name syntax (<...> or a comment), not a bare address"
	}
	return ""
}

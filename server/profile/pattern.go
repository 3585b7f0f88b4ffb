package profile

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
)

// knownKeyTypes are the names CustomSpec.KeyTypes accepts, in the order descriptions list them.
var knownKeyTypes = []string{"RSA-2048", "RSA-3072", "RSA-4096", "RSA-8192", "ECDSA-P256", "ECDSA-P384", "ECDSA-P521", "Ed25519"}

// baselineKeyTypes describes the keys every profile accepts (issuance.CheckPublicKey).
var baselineKeyTypes = []string{"RSA (2048 to 8192 bits in whole bytes, exponent 65537)", "ECDSA-P256", "ECDSA-P384", "ECDSA-P521", "Ed25519"}

// keyTypeOf names a public key the way CustomSpec.KeyTypes does: "RSA-<bits>",
// "ECDSA-P256", "Ed25519"; other keys are named by their Go type.
func keyTypeOf(pub any) string {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if k.N == nil {
			return "RSA"
		}
		return fmt.Sprintf("RSA-%d", k.N.BitLen())
	case *ecdsa.PublicKey:
		if k.Curve == nil {
			return "ECDSA"
		}
		return "ECDSA-" + strings.ReplaceAll(k.Curve.Params().Name, "-", "")
	case ed25519.PublicKey:
		return "Ed25519"
	default:
		return fmt.Sprintf("%T", pub)
	}
}

// glob is a compiled pattern (see the package documentation).
type glob struct {
	text string
	re   *regexp.Regexp
}

// match reports whether s matches the pattern.
func (g glob) match(s string) bool { return g.re.MatchString(s) }

// compileGlob compiles pattern p, where "*" does not match sep (when sep is not empty) and
// "**" matches anything.
func compileGlob(p, sep string) (glob, error) {
	var b strings.Builder
	b.WriteString(`(?s)^(?:`)
	for i := 0; i < len(p); {
		switch {
		case strings.HasPrefix(p[i:], "**"):
			b.WriteString(`.*`)
			i += 2
		case p[i] == '*' && sep != "":
			b.WriteString(`[^` + regexp.QuoteMeta(sep) + `]*`)
			i++
		case p[i] == '*':
			b.WriteString(`.*`)
			i++
		default:
			j := strings.IndexByte(p[i:], '*')
			if j < 0 {
				j = len(p) - i
			}
			b.WriteString(regexp.QuoteMeta(p[i : i+j]))
			i += j
		}
	}
	b.WriteString(`)$`)
	re, err := regexp.Compile(b.String())
	if err != nil {
		return glob{}, fmt.Errorf("does not compile: %w", err)
	}
	return glob{text: p, re: re}, nil
}

// matchAny reports whether s matches one of globs.
func matchAny(globs []glob, s string) bool {
	for _, g := range globs {
		if g.match(s) {
			return true
		}
	}
	return false
}

// texts returns the source text of globs.
func texts(globs []glob) []string {
	out := make([]string, len(globs))
	for i, g := range globs {
		out[i] = g.text
	}
	return out
}

// asciiLower lower-cases ASCII letters only, so no Unicode case folding can turn a foreign
// character into an ASCII one.
func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}

// compileNamePattern compiles a common name or organization pattern.
func compileNamePattern(p string) (glob, error) {
	if err := checkPlain(p); err != nil {
		return glob{}, err
	}
	return compileGlob(p, "")
}

// compileDNSPattern compiles a DNS name pattern, lower-cased: letters, digits, hyphens and
// "*", in non-empty dot-separated labels.
func compileDNSPattern(p string) (glob, error) {
	p = asciiLower(p)
	for label := range strings.SplitSeq(p, ".") {
		if label == "" {
			return glob{}, errors.New("has an empty label")
		}
		if strings.ContainsFunc(label, func(r rune) bool { return !isLDH(r) && r != '*' }) {
			return glob{}, errors.New("may hold only letters, digits, hyphens, dots and *")
		}
	}
	return compileGlob(p, ".")
}

// uriScheme matches the scheme a URI pattern must start with.
var uriScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// compileURIPattern compiles a URI pattern, which must start with a scheme.
func compileURIPattern(p string) (glob, error) {
	if err := checkPlain(p); err != nil {
		return glob{}, err
	}
	if strings.ContainsAny(p, " \t") {
		return glob{}, errors.New("contains a space")
	}
	if !uriScheme.MatchString(p) {
		return glob{}, errors.New("must start with a scheme, e.g. spiffe://")
	}
	return compileGlob(p, "/")
}

// compileEmailPattern compiles an email pattern: local@domain, the domain lower-cased.
func compileEmailPattern(p string) (glob, error) {
	if err := checkPlain(p); err != nil {
		return glob{}, err
	}
	local, domain, ok := strings.Cut(p, "@")
	if !ok || local == "" || domain == "" || strings.Contains(domain, "@") {
		return glob{}, errors.New("must be local@domain with exactly one @")
	}
	return compileGlob(local+"@"+asciiLower(domain), "@")
}

// parseIPRange parses a CIDR range or a single address. The range must be written masked
// ("10.0.0.0/8", not "10.1.2.3/8"), without a zone, and IPv4 ranges as IPv4.
func parseIPRange(s string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, errors.New("is not a CIDR range or an IP address")
		}
		if p != p.Masked() {
			return netip.Prefix{}, fmt.Errorf("has bits set beyond the prefix length; write %s", p.Masked())
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, errors.New("is not a CIDR range or an IP address")
		}
		if a.Zone() != "" {
			return netip.Prefix{}, errors.New("must not have a zone")
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, errors.New("is an IPv4-mapped IPv6 range; write it as IPv4")
	}
	return p, nil
}

// isLDH reports whether r is an ASCII letter, digit or hyphen.
func isLDH(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-'
}

// checkDNSName checks that name is a host name: 1 to 253 characters in dot-separated labels
// of 1 to 63 ASCII letters, digits and hyphens, no label starting or ending with a hyphen.
func checkDNSName(name string) error {
	if name == "" || len(name) > 253 {
		return errors.New("is not 1 to 253 characters long")
	}
	for label := range strings.SplitSeq(name, ".") {
		switch {
		case label == "" || len(label) > 63:
			return errors.New("has a label that is empty or longer than 63 characters")
		case strings.ContainsFunc(label, func(r rune) bool { return !isLDH(r) }):
			return errors.New("has a character other than a letter, digit or hyphen (wildcards are refused)")
		case label[0] == '-' || label[len(label)-1] == '-':
			return errors.New("has a label starting or ending with a hyphen")
		}
	}
	return nil
}

// checkURI refuses URIs with user information, a query, a fragment or a "." or ".." path
// segment: relying parties compare URIs as strings, so they must be in a plain form.
func checkURI(u *url.URL) error {
	switch {
	case u.User != nil:
		return errors.New("has user information")
	case u.RawQuery != "" || u.ForceQuery:
		return errors.New("has a query")
	case u.Fragment != "":
		return errors.New("has a fragment")
	}
	for _, path := range []string{u.Path, u.Opaque} {
		for seg := range strings.SplitSeq(path, "/") {
			if seg == "." || seg == ".." {
				return errors.New(`has a "." or ".." path segment`)
			}
		}
	}
	return nil
}

// normalizeEmail checks that addr is local@domain with exactly one @ and returns it with the
// domain lower-cased.
func normalizeEmail(addr string) (string, error) {
	local, domain, ok := strings.Cut(addr, "@")
	if !ok || local == "" || domain == "" || strings.Contains(domain, "@") {
		return "", errors.New("is not local@domain with exactly one @")
	}
	return local + "@" + asciiLower(domain), nil
}

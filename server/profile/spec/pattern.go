package spec

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// Glob is a compiled pattern (see the package documentation).
type Glob struct {
	text string
	re   *regexp.Regexp
}

// Match reports whether s matches the pattern. DNS patterns and email domains are compiled
// lower-cased (LowerASCII): match such names lower-cased the same way.
func (g Glob) Match(s string) bool { return g.re != nil && g.re.MatchString(s) }

// String is the pattern as written (DNS patterns and email domains lower-cased).
func (g Glob) String() string { return g.text }

// MatchAny reports whether s matches one of globs.
func MatchAny(globs []Glob, s string) bool {
	for _, g := range globs {
		if g.Match(s) {
			return true
		}
	}
	return false
}

// compileGlob compiles pattern p, where "*" does not match sep (when sep is not empty) and
// "**" matches anything.
func compileGlob(p, sep string) (Glob, error) {
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
		return Glob{}, fmt.Errorf("does not compile: %w", err)
	}
	return Glob{text: p, re: re}, nil
}

// LowerASCII lower-cases ASCII letters only, so no Unicode case folding can turn a foreign
// character into an ASCII one. DNS patterns and email domains are compiled with it.
func LowerASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}

// compileNamePattern compiles a common name or organization pattern.
func compileNamePattern(p string) (Glob, error) {
	if err := checkPlain(p); err != nil {
		return Glob{}, err
	}
	return compileGlob(p, "")
}

// compileDNSPattern compiles a DNS name pattern, lower-cased: letters, digits, hyphens and
// "*", in non-empty dot-separated labels.
func compileDNSPattern(p string) (Glob, error) {
	p = LowerASCII(p)
	for label := range strings.SplitSeq(p, ".") {
		if label == "" {
			return Glob{}, errors.New("has an empty label")
		}
		if strings.ContainsFunc(label, func(r rune) bool { return !IsLDH(r) && r != '*' }) {
			return Glob{}, errors.New("may hold only letters, digits, hyphens, dots and *")
		}
	}
	return compileGlob(p, ".")
}

// uriScheme matches the scheme a URI pattern must start with.
var uriScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// compileURIPattern compiles a URI pattern, which must start with a scheme.
func compileURIPattern(p string) (Glob, error) {
	if err := checkPlain(p); err != nil {
		return Glob{}, err
	}
	if strings.ContainsAny(p, " \t") {
		return Glob{}, errors.New("contains a space")
	}
	if !uriScheme.MatchString(p) {
		return Glob{}, errors.New("must start with a scheme, e.g. spiffe://")
	}
	return compileGlob(p, "/")
}

// compileEmailPattern compiles an email pattern: local@domain, the domain lower-cased.
func compileEmailPattern(p string) (Glob, error) {
	if err := checkPlain(p); err != nil {
		return Glob{}, err
	}
	local, domain, ok := strings.Cut(p, "@")
	if !ok || local == "" || domain == "" || strings.Contains(domain, "@") {
		return Glob{}, errors.New("must be local@domain with exactly one @")
	}
	return compileGlob(local+"@"+LowerASCII(domain), "@")
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

// IsLDH reports whether r is an ASCII letter, digit or hyphen: what DNS patterns and host
// names are made of.
func IsLDH(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-'
}

package profile

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/signet-pki/signet/server/profile/spec"
)

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

// texts returns the source text of globs.
func texts(globs []spec.Glob) []string {
	out := make([]string, len(globs))
	for i, g := range globs {
		out[i] = g.String()
	}
	return out
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
		case strings.ContainsFunc(label, func(r rune) bool { return !spec.IsLDH(r) }):
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
// domain lower-cased, as email patterns are compiled.
func normalizeEmail(addr string) (string, error) {
	local, domain, ok := strings.Cut(addr, "@")
	if !ok || local == "" || domain == "" || strings.Contains(domain, "@") {
		return "", errors.New("is not local@domain with exactly one @")
	}
	return local + "@" + spec.LowerASCII(domain), nil
}

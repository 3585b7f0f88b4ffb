package spec

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DefaultTrustDomain is the SPIFFE trust domain of a pod-identity profile that sets none.
const DefaultTrustDomain = "cluster.local"

// maxTrustDomainLength is the SPIFFE limit on a trust domain name.
const maxTrustDomainLength = 255

// Pod is a validated PodIdentitySpec with its defaults applied.
type Pod struct {
	// TrustDomain is the SPIFFE trust domain (DefaultTrustDomain when the spec sets none).
	TrustDomain string
	// AllowedAnnotations are the allowed annotation keys, lower-cased (the kube-apiserver
	// treats keys case-insensitively), in configuration order.
	AllowedAnnotations []string
}

// compilePodIdentity validates s (nil: every default). Errors name the field by its path in
// Spec.
func compilePodIdentity(s *PodIdentitySpec) (*Pod, []error) {
	if s == nil {
		s = &PodIdentitySpec{}
	}
	out := &Pod{TrustDomain: s.TrustDomain}
	var errs []error
	if out.TrustDomain == "" {
		out.TrustDomain = DefaultTrustDomain
	} else if err := checkTrustDomain(s.TrustDomain); err != nil {
		errs = append(errs, fmt.Errorf("podIdentity.trustDomain: %q: %w", s.TrustDomain, err))
	}
	lower := make([]string, len(s.AllowedAnnotations))
	for i, k := range s.AllowedAnnotations {
		lower[i] = strings.ToLower(k)
	}
	errs = append(errs, validateList("podIdentity.allowedAnnotations", lower, checkAnnotationKey)...)
	out.AllowedAnnotations = lower
	return out, errs
}

// checkAnnotationKey accepts what the kube-apiserver accepts as an unverified user annotation
// key (lower-cased): a label key with a domain prefix, e.g. "example.com/purpose".
func checkAnnotationKey(k string) error {
	if k == "" {
		return errors.New("must not be empty")
	}
	var details []string
	for _, e := range validation.IsDomainPrefixedKey(field.NewPath("key"), k) {
		details = append(details, e.Detail)
	}
	if len(details) > 0 {
		return fmt.Errorf("is not a domain-prefixed key such as \"example.com/purpose\": %s", strings.Join(details, "; "))
	}
	return nil
}

// checkTrustDomain accepts a bare SPIFFE trust domain name: lower-case letters, digits, ".",
// "-" and "_", at most 255 characters, with no empty label; no scheme, port or path.
func checkTrustDomain(td string) error {
	switch {
	case strings.ContainsAny(td, "/:"):
		return errors.New(`must be a bare trust domain such as "cluster.local", without scheme, port or path`)
	case len(td) > maxTrustDomainLength:
		return fmt.Errorf("is %d characters, more than %d", len(td), maxTrustDomainLength)
	case strings.ContainsFunc(td, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '.' && r != '-' && r != '_'
	}):
		return errors.New(`may contain only lower-case letters, digits, ".", "-" and "_"`)
	case slices.Contains(strings.Split(td, "."), ""):
		return errors.New("has an empty label")
	}
	return nil
}

package profile

import (
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/signet-pki/signet/server/issuance"
)

// Profile is a loaded, validated signer profile. It implements issuance.Policy and is safe
// for concurrent use. The zero Profile refuses every request; build one with New.
type Profile struct {
	spec        Spec
	maxLifetime time.Duration
	privileged  []string
	custom      *compiledCustom
	rules       []rule
}

var _ issuance.Policy = Profile{}

// rule is one check of a profile. check returns what it found and, when the request fails
// the rule, the bare sentinel error to wrap (issuance.ErrPolicyViolation unless said
// otherwise).
type rule struct {
	name  string
	check func(in *input) (detail string, err error)
}

// input is one request as the rules see it.
type input struct {
	csr    *x509.CertificateRequest
	req    issuance.Request
	usages []string
	// ekus and usageErr are issuance.ParseUsages' result for usages.
	ekus     []x509.ExtKeyUsage
	usageErr error
}

// sentinels are the errors a failed rule may wrap.
var sentinels = []error{issuance.ErrMalformedRequest, issuance.ErrUnsupportedKey, issuance.ErrPolicyViolation}

// New validates spec and maxLifetime and returns the profile. maxLifetime is the signer's
// maximum certificate lifetime, at least issuance.MinLifetime. Errors name the field (see
// Spec.Validate; "maxLifetime" for maxLifetime).
func New(spec Spec, maxLifetime time.Duration) (Profile, error) {
	var errs []error
	if maxLifetime < issuance.MinLifetime {
		errs = append(errs, fmt.Errorf("maxLifetime: %s is below the %s floor", maxLifetime, issuance.MinLifetime))
	}
	custom, err := spec.compile()
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Profile{}, err
	}
	p := Profile{spec: cloneSpec(spec), maxLifetime: maxLifetime, privileged: slices.Clone(spec.PrivilegedGroups)}
	if len(p.privileged) == 0 {
		p.privileged = slices.Clone(defaultPrivilegedGroups)
	}
	p.custom = custom
	p.rules = p.buildRules()
	return p, nil
}

// cloneSpec deep-copies spec, so later changes by the caller do not reach the profile.
func cloneSpec(s Spec) Spec {
	s.PrivilegedGroups = slices.Clone(s.PrivilegedGroups)
	if s.Custom != nil {
		c := *s.Custom
		c.Subject.CommonNames = slices.Clone(c.Subject.CommonNames)
		c.Subject.Organizations = slices.Clone(c.Subject.Organizations)
		c.SANs.DNS, c.SANs.IP = slices.Clone(c.SANs.DNS), slices.Clone(c.SANs.IP)
		c.SANs.URI, c.SANs.Email = slices.Clone(c.SANs.URI), slices.Clone(c.SANs.Email)
		c.Usages.Allowed, c.Usages.Required = slices.Clone(c.Usages.Allowed), slices.Clone(c.Usages.Required)
		c.KeyTypes = slices.Clone(c.KeyTypes)
		s.Custom = &c
	}
	return s
}

// Name returns the profile name, e.g. "kubelet-serving"; empty for the zero Profile.
func (p Profile) Name() string { return p.spec.Name }

// Spec returns a copy of the configuration the profile was built from.
func (p Profile) Spec() Spec { return cloneSpec(p.spec) }

// MaxLifetime returns the longest lifetime the profile grants.
func (p Profile) MaxLifetime() time.Duration { return p.maxLifetime }

// buildRules returns the ordered rules of the profile: the common rules, then the profile's.
func (p Profile) buildRules() []rule {
	rules := []rule{p.keyRule(), caRule(), usagesKnownRule(), leafUsagesRule()}
	switch p.spec.Name {
	case NameKubeAPIServerClient:
		rules = append(rules, kubeAPIServerClientRules()...)
		rules = append(rules, p.privilegedRule(true))
	case NameKubeAPIServerClientKubelet:
		rules = append(rules, kubeletClientRules()...)
	case NameKubeletServing:
		rules = append(rules, kubeletServingRules()...)
	case NameLegacyUnknown:
		rules = append(rules, p.privilegedRule(false))
	case NameCustom:
		rules = append(rules, p.custom.rules()...)
		rules = append(rules, p.privilegedRule(false))
	}
	return rules
}

// Evaluate applies every rule of the profile to a parsed request, even after one fails, and
// returns:
//   - the decision: Lifetime = issuance.ClampLifetime(expirationSeconds, maximum), KeyUsage
//     and ExtKeyUsage from spec.usages only (zero when a usage is unknown);
//   - the rule results, in the profile's order (Rule names the rule and its requirement,
//     Detail says what was found);
//   - nil when every rule passed; otherwise an error naming the first failed rule and
//     wrapping issuance.ErrUnsupportedKey (key rules), issuance.ErrMalformedRequest (an
//     unparsable basic constraints extension) or issuance.ErrPolicyViolation.
func (p Profile) Evaluate(csr *x509.CertificateRequest, req issuance.Request) (issuance.Decision, []issuance.RuleResult, error) {
	d := issuance.Decision{Lifetime: issuance.ClampLifetime(req.ExpirationSeconds, p.maxLifetime)}
	rules := p.rules
	switch {
	case len(rules) == 0:
		rules = []rule{{name: "profile: built with profile.New", check: func(*input) (string, error) {
			return "the profile is not configured", issuance.ErrPolicyViolation
		}}}
	case csr == nil:
		rules = []rule{{name: "request: parsed", check: func(*input) (string, error) {
			return "no parsed request", issuance.ErrMalformedRequest
		}}}
	}
	in := &input{csr: csr, req: req, usages: req.Usages}
	ku, ekus, err := issuance.ParseUsages(req.Usages)
	if err == nil {
		d.KeyUsage, d.ExtKeyUsage = ku, ekus
	}
	in.ekus, in.usageErr = ekus, err
	results := make([]issuance.RuleResult, 0, len(rules))
	var first error
	failed := 0
	for _, r := range rules {
		detail, err := r.check(in)
		results = append(results, issuance.RuleResult{Rule: r.name, Passed: err == nil, Detail: detail})
		if err == nil {
			continue
		}
		if failed++; first == nil {
			first = fmt.Errorf("rule %q failed: %w: %s", r.name, err, detail)
		}
	}
	if failed > 1 {
		first = fmt.Errorf("%w (%d more %s failed)", first, failed-1, plural(failed-1, "rule", "rules"))
	}
	return d, results, first
}

// plural returns one or many by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// fromError turns an error wrapping a sentinel into a rule outcome: the message without the
// sentinel's prefix, and the sentinel.
func fromError(err error) (string, error) {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return strings.TrimPrefix(err.Error(), s.Error()+": "), s
		}
	}
	return err.Error(), issuance.ErrPolicyViolation
}

// outcome returns detail and, unless ok, issuance.ErrPolicyViolation.
func outcome(ok bool, detail string) (string, error) {
	if ok {
		return detail, nil
	}
	return detail, issuance.ErrPolicyViolation
}

// list formats a list for a rule name: [a, b].
func list(xs []string) string {
	return "[" + strings.Join(xs, ", ") + "]"
}

// quoted formats a list of strings as ["a" "b"].
func quoted(list []string) string {
	if len(list) == 0 {
		return "[]"
	}
	return fmt.Sprintf("%q", list)
}

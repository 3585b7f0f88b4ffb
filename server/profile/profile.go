package profile

import (
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/profile/spec"
)

// Profile is a loaded, validated signer profile. It implements issuance.Policy and is safe
// for concurrent use. The zero Profile refuses every request; build one with New.
type Profile struct {
	spec        Spec
	maxLifetime time.Duration
	privileged  []string
	custom      *compiledCustom
	pod         *compiledPod
	rules       []rule // for CertificateSigningRequests
	podRules    []rule // for PodCertificateRequests
}

var _ issuance.Policy = Profile{}

// rule is one check of a profile. check returns what it found and, when the request fails
// the rule, the bare sentinel error to wrap (issuance.ErrPolicyViolation unless said
// otherwise).
type rule struct {
	name  string
	check func(in *input) (detail string, err error)
}

// input is one request as the rules see it: a CertificateSigningRequest (csr, req, usages,
// ekus, usageErr) or a PodCertificateRequest (key, pod).
type input struct {
	csr    *x509.CertificateRequest
	req    issuance.Request
	usages []string
	// ekus and usageErr are issuance.ParseUsages' result for usages.
	ekus     []x509.ExtKeyUsage
	usageErr error

	key *issuance.PodKey
	pod issuance.PodRequest

	// grounds is set by a rule that admits the request on other than the ordinary grounds
	// (see issuance.Decision.Grounds).
	grounds string
}

// sentinels are the errors a failed rule may wrap.
var sentinels = []error{issuance.ErrMalformedRequest, issuance.ErrUnsupportedKey, issuance.ErrPolicyViolation, issuance.ErrUnknownAnnotation}

// New validates spec and maxLifetime and returns the profile. maxLifetime is the signer's
// maximum certificate lifetime, at least issuance.MinLifetime, and for pod-identity at least
// issuance.PodMinLifetime. Errors name the field (see Spec.Validate; "maxLifetime" for
// maxLifetime).
func New(s Spec, maxLifetime time.Duration) (Profile, error) {
	var errs []error
	if err := CheckMaxLifetime(s.Name, maxLifetime); err != nil {
		errs = append(errs, fmt.Errorf("maxLifetime: %w", err))
	}
	c, err := s.Compile()
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Profile{}, err
	}
	p := Profile{spec: cloneSpec(s), maxLifetime: maxLifetime, privileged: slices.Clone(s.PrivilegedGroups)}
	if len(p.privileged) == 0 {
		p.privileged = spec.DefaultPrivilegedGroups()
	}
	if c.Custom != nil {
		p.custom = &compiledCustom{c.Custom}
	}
	if c.Pod != nil {
		p.pod = &compiledPod{c.Pod}
	}
	p.rules, p.podRules = p.buildRules()
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
	if s.Bootstrap != nil {
		b := *s.Bootstrap
		b.Groups = slices.Clone(b.Groups)
		s.Bootstrap = &b
	}
	if s.PodIdentity != nil {
		pi := *s.PodIdentity
		pi.AllowedAnnotations = slices.Clone(pi.AllowedAnnotations)
		s.PodIdentity = &pi
	}
	return s
}

// Name returns the profile name, e.g. "kubelet-serving"; empty for the zero Profile.
func (p Profile) Name() string { return p.spec.Name }

// Spec returns a copy of the configuration the profile was built from.
func (p Profile) Spec() Spec { return cloneSpec(p.spec) }

// MaxLifetime returns the longest lifetime the profile grants.
func (p Profile) MaxLifetime() time.Duration { return p.maxLifetime }

// Kind is the kind of object whose requests the profile serves: PodCertificateRequests for
// pod-identity, CertificateSigningRequests for every other profile.
func (p Profile) Kind() issuance.Kind {
	if p.spec.Name == NamePodIdentity {
		return issuance.KindPodCertificateRequest
	}
	return issuance.KindCertificateSigningRequest
}

// buildRules returns the ordered rules of the profile for each kind of request: the common
// rules, then the profile's; for the kind the profile does not serve, one rule that refuses.
func (p Profile) buildRules() (csrRules, podRules []rule) {
	if p.spec.Name == NamePodIdentity {
		return []rule{p.kindRule(issuance.KindCertificateSigningRequest)}, p.pod.rules(p.maxLifetime)
	}
	rules := []rule{p.keyRule(), caRule(), usagesKnownRule(), leafUsagesRule(), wellFormedNamesRule()}
	switch p.spec.Name {
	case NameKubeAPIServerClient:
		rules = append(rules, kubeAPIServerClientRules()...)
		rules = append(rules, p.privilegedRule(true), p.nodeIdentityRule())
	case NameKubeAPIServerClientKubelet:
		rules = append(rules, kubeletClientRules(p.spec.Bootstrap)...)
	case NameKubeletClientTPM:
		rules = append(rules, kubeletClientRules(p.spec.Bootstrap)...)
		rules = append(rules, attestedNodeRule())
	case NameKubeletClientInsecure:
		rules = append(rules, kubeletClientRules(p.spec.Bootstrap)...)
		rules = append(rules, insecureRule())
	case NameKubeletServing:
		rules = append(rules, kubeletServingRules()...)
		if p.spec.BindSANsToNode {
			rules = append(rules, nodeSANsRule())
		}
	case NameKubeletServingTPM:
		rules = append(rules, kubeletServingRules()...)
		rules = append(rules, attestedNodeRule(), nodeSANsRule())
	case NameLegacyUnknown:
		rules = append(rules, p.privilegedRule(false))
	case NameCustom:
		rules = append(rules, p.custom.rules()...)
		rules = append(rules, p.privilegedRule(false))
	}
	return rules, []rule{p.kindRule(issuance.KindPodCertificateRequest)}
}

// reproducesKubernetes reports whether the profile is one of the four that reproduce
// kube-controller-manager's kubernetes.io signers.
func (p Profile) reproducesKubernetes() bool {
	_, ok := KubernetesProfileFor("kubernetes.io/" + p.spec.Name)
	return ok
}

// kindRule refuses every request of kind, which the profile does not serve. The issuer
// refuses such requests before they reach the profile; the rule keeps the profile closed
// when it is called directly.
func (p Profile) kindRule(kind issuance.Kind) rule {
	served := p.Kind()
	return rule{name: fmt.Sprintf("kind: the signer serves %ss", served), check: func(*input) (string, error) {
		return fmt.Sprintf("profile %s serves %ss only, not %ss", p.spec.Name, served, kind), issuance.ErrPolicyViolation
	}}
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
//
// The pod-identity profile refuses every CertificateSigningRequest.
func (p Profile) Evaluate(csr *x509.CertificateRequest, req issuance.Request) (issuance.Decision, []issuance.RuleResult, error) {
	d := issuance.Decision{Lifetime: issuance.ClampLifetime(req.ExpirationSeconds, p.maxLifetime)}
	rules := p.rules
	switch {
	case len(rules) == 0:
		rules = unconfiguredRules()
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
	results, err := run(rules, in)
	d.Grounds = in.grounds
	return d, results, err
}

// EvaluatePod applies every rule of the profile to a PodCertificateRequest whose key
// issuance.ParsePodKey has verified, as Evaluate does. Failed rules wrap
// issuance.ErrUnsupportedKey, issuance.ErrMalformedRequest (pod identity),
// issuance.ErrUnknownAnnotation or issuance.ErrPolicyViolation. Every profile but
// pod-identity refuses every PodCertificateRequest; see podRules for pod-identity's rules
// and decision.
func (p Profile) EvaluatePod(key *issuance.PodKey, req issuance.PodRequest) (issuance.Decision, []issuance.RuleResult, error) {
	rules := p.podRules
	switch {
	case len(rules) == 0:
		rules = unconfiguredRules()
	case key == nil || key.PublicKey == nil:
		rules = []rule{{name: "request: parsed", check: func(*input) (string, error) {
			return "no parsed key", issuance.ErrMalformedRequest
		}}}
	}
	results, err := run(rules, &input{key: key, pod: req})
	if err != nil || p.pod == nil {
		return issuance.Decision{}, results, err
	}
	return p.pod.decision(key, req, p.maxLifetime), results, nil
}

// unconfiguredRules are the rules of the zero Profile: one that refuses.
func unconfiguredRules() []rule {
	return []rule{{name: "profile: built with profile.New", check: func(*input) (string, error) {
		return "the profile is not configured", issuance.ErrPolicyViolation
	}}}
}

// run applies every rule to in, even after one fails, and returns the results and an error
// naming the first failed rule (and how many more failed), nil when all passed.
func run(rules []rule, in *input) ([]issuance.RuleResult, error) {
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
	return results, first
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

package profile

import "github.com/signet-pki/signet/server/lint"

// kubernetesLintExclusions are lints that the kubernetes.io profiles leave out of the default
// lint gate, because kube-controller-manager issues what they flag and Kubernetes clients
// ask for it.
var kubernetesLintExclusions = []lint.Exclusion{
	{Lint: "e_ecdsa_allowed_ku",
		Reason: "kubelets with ECDSA keys request \"key encipherment\", kube-controller-manager signs it and the kubernetes.io profiles accept it (RFC 5480 does not allow it for ECDSA)"},
}

// LintOptions returns the lint gate options for a signer with this profile, starting from
// the configured ones:
//   - configured exclusions (a non-nil Exclude) are kept as they are: the operator decided;
//   - otherwise the kubernetes.io profiles run the default set minus the lints in
//     kubernetesLintExclusions, so that what they accept (like kube-controller-manager) also
//     passes the gate; custom and pod-identity profiles run the default set.
func (p Profile) LintOptions(configured lint.Options) lint.Options {
	if configured.Exclude != nil || p.spec.Name == NameCustom || p.spec.Name == NamePodIdentity {
		return configured
	}
	opts := configured
	for _, e := range lint.DefaultExclusions() {
		opts.Exclude = append(opts.Exclude, e.Lint)
	}
	for _, e := range kubernetesLintExclusions {
		opts.Exclude = append(opts.Exclude, e.Lint)
	}
	return opts
}

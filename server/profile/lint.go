package profile

import (
	"slices"

	"github.com/signet-pki/signet/server/lint"
)

// Reasons shared by several accepted findings.
const (
	reasonUsages  = "key usage and extended key usage come from spec.usages, which the profile's rules accept and kube-controller-manager signs as asked"
	reasonSubject = "the subject is the request's, as kube-controller-manager copies it; RFC 5280's upper bounds (64 characters for most attributes) are ASN.1 suggestions that Kubernetes names exceed (system:serviceaccount:<namespace>:<name>, system:node:<long node name>), and Go, OpenSSL and the apiserver accept longer ones"
)

// reasonEncoding explains string-type findings on subject attributes.
const reasonEncoding = "Go encodes an attribute value with characters outside PrintableString as UTF8String, as kube-controller-manager (also Go) does for the same request; X.520 wants PrintableString for this attribute, which no Kubernetes component reads"

// kubernetesAcceptedFindings are the lints whose findings the kubernetes.io profiles accept by
// design: what they flag is what the profiles' rules accept and kube-controller-manager
// issues, because Kubernetes clients ask for it. They still run; their findings are counted
// in a metric and logged at debug level, and never stop issuance (see lint.Options.Accept).
var kubernetesAcceptedFindings = []lint.Exclusion{
	{Lint: "e_key_usage_and_extended_key_usage_inconsistent",
		Reason: "kubelets with RSA keys (client-go's certificate manager) ask for \"key encipherment\" with \"client auth\", which RFC 5280 4.2.1.12 does not list; " + reasonUsages},
	{Lint: "e_ecdsa_allowed_ku",
		Reason: "kubelets with ECDSA keys ask for \"key encipherment\" (RFC 5480 does not allow it for ECDSA); " + reasonUsages},
	{Lint: "n_ecdsa_ee_invalid_ku",
		Reason: "the notice twin of e_ecdsa_allowed_ku, on every ECDSA kubelet serving certificate; " + reasonUsages},
	{Lint: "e_rsa_allowed_ku_ee", Reason: "key agreement on an RSA key (legacy-unknown); " + reasonUsages},
	{Lint: "e_subject_empty_without_san",
		Reason: "an empty subject without SANs is what the request asked for and kube-controller-manager signs; such a certificate names nobody, and the apiserver does not authenticate it as any user"},
	{Lint: "e_ext_san_uri_host_not_fqdn_or_ip",
		Reason: "URI SANs name workloads, not web hosts: a SPIFFE trust domain or a cluster-internal authority is often a single label (spiffe://prod/ns/a/sa/b), which this lint takes for a missing host; the profile's names rule still refuses URIs without a scheme or anything after it"},
	{Lint: "e_subj_country_not_uppercase", Reason: "a lower-case country code is what the request asked for and kube-controller-manager signs; it names no Kubernetes identity"},
	{Lint: "e_subject_dn_serial_number_not_printable_string", Reason: reasonEncoding},
	{Lint: "e_subject_dn_country_not_printable_string", Reason: reasonEncoding},
	{Lint: "e_subject_common_name_max_length", Reason: reasonSubject},
	{Lint: "e_subject_organization_name_max_length", Reason: reasonSubject},
	{Lint: "e_subject_organizational_unit_name_max_length", Reason: reasonSubject},
	{Lint: "e_subject_locality_name_max_length", Reason: reasonSubject},
	{Lint: "e_subject_state_name_max_length", Reason: reasonSubject},
	{Lint: "e_subject_street_address_max_length", Reason: reasonSubject},
	{Lint: "e_subject_postal_code_max_length", Reason: reasonSubject},
	{Lint: "e_subject_given_name_max_length", Reason: reasonSubject},
	{Lint: "e_subject_surname_max_length", Reason: reasonSubject},
	{Lint: "e_subject_email_max_length", Reason: reasonSubject},
	{Lint: "e_subject_dn_serial_number_max_length", Reason: reasonSubject},
	{Lint: "w_subject_given_name_recommended_max_length", Reason: reasonSubject},
	{Lint: "w_subject_surname_recommended_max_length", Reason: reasonSubject},
}

// LintOptions returns the lint gate options for a signer with this profile: the configured
// ones (sources, exclusions added to the defaults, or full control with
// replaceDefaultExclusions), plus, on the kubernetes.io profiles and their attested and
// insecure kubelet variants, the findings they accept by
// design (kubernetesAcceptedFindings), so that whatever their rules accept, like
// kube-controller-manager, also passes the gate. Custom and pod-identity profiles add
// nothing: their gate is the configured one.
func (p Profile) LintOptions(configured lint.Options) lint.Options {
	opts := configured
	opts.Accept = nil
	if p.reproducesKubernetes() || isKubeletClient(p.spec.Name) || p.spec.Name == NameKubeletServingTPM {
		opts.Accept = slices.Clone(kubernetesAcceptedFindings)
	}
	return opts
}

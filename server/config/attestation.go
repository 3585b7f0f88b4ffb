package config

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/server/profile/spec"
)

// Attestation configures TPM node attestation (docs/attestation.md): the challenge endpoint
// node agents call, and what an endorsement key must chain to or be listed in. Required when
// a signer uses the kubelet-client-tpm or kubelet-serving-tpm profile; off otherwise.
type Attestation struct {
	// Address is host:port of the challenge endpoint: HTTPS with the server's certificate
	// (tls.certFile), no client certificate. Empty: attestation is off.
	Address string `json:"address,omitempty"`
	// EKRootsFile is a PEM file of TPM manufacturers' root certificates (and intermediates)
	// that an endorsement key certificate must chain to.
	EKRootsFile string `json:"ekRootsFile,omitempty"`
	// EKAllowListFile lists endorsement keys accepted without a certificate: one fingerprint
	// per line (hex SHA-256 of the key's PKIX DER, as signet-node prints it), "#" comments.
	EKAllowListFile string `json:"ekAllowListFile,omitempty"`
	// ChallengeTTL is how long a node has to answer a challenge. Default 1m.
	ChallengeTTL *metav1.Duration `json:"challengeTTL,omitempty"`
	// TicketTTL is how long a node has to use its ticket in a request. Default 5m.
	TicketTTL *metav1.Duration `json:"ticketTTL,omitempty"`
	// PerSourceRate and PerEKRate bound the endpoint's calls per second from one client
	// address (default 5) and the challenges for one endorsement key (default 1).
	PerSourceRate float64 `json:"perSourceRate,omitempty"`
	PerEKRate     float64 `json:"perEKRate,omitempty"`
	// BootState is the optional boot-state policy (off when nil): the node quotes these PCRs
	// with its AK and the ticket's nonce, and their values must equal one of the reference
	// sets in ReferenceFile. Exact PCR values change with every firmware, bootloader or
	// kernel update: update the reference file with each roll-out (docs/attestation.md).
	BootState *BootState `json:"bootState,omitempty"`
	// TicketKeyFile holds the key that seals the tickets a node gets after its challenge (at
	// least 32 bytes, e.g. head -c 32 /dev/urandom; a file or a systemd credential). Required
	// with state.backend postgres, where every server of the fleet names the same file, so a
	// ticket one server issued verifies on the others. Empty on one host: a fresh key at each
	// start.
	TicketKeyFile string `json:"ticketKeyFile,omitempty"`
}

// BootState configures the boot-state policy of attestation.
type BootState struct {
	// PCRs are the PCR indices of the SHA-256 bank to quote, ascending, each 0–23.
	PCRs []int `json:"pcrs"`
	// ReferenceFile is a YAML or JSON file of accepted sets:
	// {references: [{name: fw-2026-11, pcrs: {"0": "<64 hex digits>", "7": "…"}}, …]}; quote
	// the digests, or YAML may read one as a number.
	ReferenceFile string `json:"referenceFile"`
}

// TTLs returns the challenge and ticket lifetimes, zero when unset (the defaults of
// server/attest).
func (a Attestation) TTLs() (challenge, ticket time.Duration) {
	return get(a.ChallengeTTL), get(a.TicketTTL)
}

// Enabled reports whether attestation is served.
func (a Attestation) Enabled() bool { return a.Address != "" }

// validate checks the section against the signers that need it. Errors name the field.
func (a Attestation) validate(signers []Signer, taken ...string) []error {
	var errs []error
	var attested []string
	for _, s := range signers {
		if s.Profile.Name == spec.NameKubeletClientTPM || s.Profile.Name == spec.NameKubeletServingTPM {
			attested = append(attested, s.Name)
		}
	}
	if !a.Enabled() {
		if len(attested) > 0 {
			errs = append(errs, fmt.Errorf("attestation.address: required: signers %q use the %s or %s profile, whose requests carry TPM evidence the server verifies",
				attested, spec.NameKubeletClientTPM, spec.NameKubeletServingTPM))
		}
		if a.EKRootsFile != "" || a.EKAllowListFile != "" {
			errs = append(errs, errors.New("attestation: ekRootsFile or ekAllowListFile is set but attestation.address is not (attestation is off without an address)"))
		}
		return errs
	}
	if _, _, err := net.SplitHostPort(a.Address); err != nil {
		errs = append(errs, fmt.Errorf("attestation.address %q: %w", a.Address, err))
	} else if slices.Contains(taken, a.Address) {
		errs = append(errs, fmt.Errorf("attestation.address %q is the address of another listener", a.Address))
	}
	if a.EKRootsFile == "" && a.EKAllowListFile == "" {
		errs = append(errs, errors.New("attestation: set ekRootsFile (TPM manufacturers' roots), ekAllowListFile (endorsement keys accepted without a certificate), or both; with neither no node can attest"))
	}
	if b := a.BootState; b != nil && (len(b.PCRs) == 0 || b.ReferenceFile == "") {
		errs = append(errs, errors.New("attestation.bootState: pcrs and referenceFile are both required"))
	}
	if get(a.ChallengeTTL) < 0 || get(a.TicketTTL) < 0 || a.PerSourceRate < 0 || a.PerEKRate < 0 {
		errs = append(errs, errors.New("attestation: challengeTTL, ticketTTL, perSourceRate and perEKRate must not be negative"))
	}
	return errs
}

// get returns the duration, zero when unset.
func get(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}

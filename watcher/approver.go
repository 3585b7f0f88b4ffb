package watcher

import (
	"fmt"
	"slices"

	"github.com/signet-pki/signet/internal/configfile"
	"github.com/signet-pki/signet/watcher/tpmapprover"
)

// TPMApproverConfig configures the approver of the signer names whose server-side profile
// requires TPM attestation (kubelet-client-tpm; watcher/tpmapprover): on the leader, each of
// their CertificateSigningRequests that is neither approved nor denied is verified by the
// signing server without signing (VerifyAttestation) and approved, or denied with the
// server's reason. It needs the approve verb on signers with exactly these names, and update
// on certificatesigningrequests/approval (deploy/watcher). The approval of every other
// signer is untouched. Off when SignerNames is empty.
type TPMApproverConfig struct {
	// SignerNames are the attested signer names to approve for.
	SignerNames []string `json:"signerNames,omitempty"`
}

// Enabled reports whether the approver runs.
func (a TPMApproverConfig) Enabled() bool { return len(a.SignerNames) > 0 }

func (a TPMApproverConfig) validate() []error {
	var errs []error
	for i, name := range a.SignerNames {
		if problems := configfile.SignerNameProblems(name); len(problems) > 0 {
			errs = append(errs, fmt.Errorf("tpmApprover.signerNames[%d] %q is not a signer name: %v", i, name, problems))
		}
		if j := slices.Index(a.SignerNames, name); j < i {
			errs = append(errs, fmt.Errorf("tpmApprover.signerNames[%d] %q duplicates [%d]", i, name, j))
		}
	}
	return errs
}

// tpmApprover builds the approver controller of a leader term, nil when it is off.
func (c *Config) tpmApprover(d controllerDeps, addresser *nodeAddresser) (*controller, error) {
	if !c.TPMApprover.Enabled() {
		return nil, nil
	}
	approver, err := tpmapprover.New(d.kube, addressingVerifier{client: d.client, addresser: addresser}, tpmapprover.Options{
		SignerNames:    c.TPMApprover.SignerNames,
		BackoffInitial: c.Backoff.Initial.Duration,
		BackoffMax:     c.Backoff.Max.Duration,
		Clock:          d.clock,
		Recorder:       d.recorder,
	})
	if err != nil {
		return nil, err
	}
	return &controller{name: "tpmapprover", run: approver.Run, syncer: approver}, nil
}

package decision

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/signet-pki/signet/attestation"
	"github.com/signet-pki/signet/server/idempotency"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/ledger"
)

// Attestor verifies the TPM evidence of requests for attested signers (server/attest).
type Attestor interface {
	// Verify checks the evidence of a request for node, spending its ticket for holder, and
	// reports whether the node and its EK are bound yet.
	Verify(att *attestation.Attested, csr *x509.CertificateRequest, node, holder string) (attestation.NodeIdentity, bool, error)
	// Bind binds the EK to the node (trust on first use); Unbind undoes a binding whose record
	// could not be written.
	Bind(node, ek string) error
	Unbind(node, ek string)
}

// nodePrefix starts the common name of a node's certificate.
const nodePrefix = "system:node:"

// attest runs the attestation step of a request for a signer whose profile requires it,
// between parsing the request and the profile's rules: the request's PEM is split into the
// CERTIFICATE REQUEST and the evidence (attestation.Split), the request parsed, the evidence
// verified for the node of its common name (the Attestor: attestation.Verify, the ticket's
// single use, the EK's binding), and the first binding of an EK to a node recorded in the
// ledger (a Bound record) before anything is issued. It returns the request the pipeline
// sees: the bare CERTIFICATE REQUEST, with the verified identity in Attested.
func (c *Core) attest(ctx context.Context, d decisionContext, r issuance.Request) (issuance.Request, error) {
	a := c.opts.Attestor
	if a == nil {
		return r, fmt.Errorf("%w: signer %s requires TPM attestation, which this server does not serve (no attestation section in its configuration)",
			issuance.ErrPolicyViolation, r.SignerName)
	}
	att, err := attestation.Split(r.PEM)
	if err != nil {
		return r, err
	}
	csr, err := issuance.ParseCSR(att.Request)
	if err != nil {
		return r, err
	}
	node, ok := strings.CutPrefix(csr.Subject.CommonName, nodePrefix)
	if !ok {
		return r, fmt.Errorf("%w: common name %.80q does not start with %q: only a node's own certificate is attested",
			issuance.ErrPolicyViolation, csr.Subject.CommonName, nodePrefix)
	}
	holder := idempotency.Scope(d.identity, d.objectUID) + "/" + hex.EncodeToString(d.hash)
	id, bound, err := a.Verify(att, csr, node, holder)
	if err != nil {
		return r, err
	}
	if !bound {
		if err := a.Bind(node, id.EK); err != nil {
			return r, err
		}
		if err := c.recordBound(ctx, d, id); err != nil {
			a.Unbind(node, id.EK)
			return r, err
		}
	}
	r.PEM, r.Attested = att.Request, &id
	return r, nil
}

// recordBound records the first binding of an EK to a node.
func (c *Core) recordBound(ctx context.Context, d decisionContext, id attestation.NodeIdentity) error {
	rec := d.record(ledger.Bound)
	rec.Node, rec.EK = id.Node, id.EK
	rec.Message = clip(fmt.Sprintf("trust on first use: endorsement key %s (%s) bound to node %q, attestation key %s, provider ID %q",
		id.EK, id.EKTrust, id.Node, id.AKName, id.ProviderID), recordMessageBytes)
	if _, err := c.appendRecord(ctx, rec); err != nil {
		return fmt.Errorf("%w: recording the binding of node %q to its endorsement key: %w", errLedgerUnavailable, id.Node, err)
	}
	d.log.Info("endorsement key bound to node on first use", "node", id.Node, "ek", id.EK, "ek_trust", id.EKTrust)
	return nil
}

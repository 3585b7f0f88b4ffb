package decision

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/hex"
	"errors"
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
	// Check is Verify without spending the ticket.
	Check(att *attestation.Attested, csr *x509.CertificateRequest, node, holder string) (attestation.NodeIdentity, bool, error)
	// Bind binds the EK to the node (trust on first use); Unbind undoes a binding whose record
	// could not be written.
	Bind(node, ek string) error
	Unbind(node, ek string)
	// Binding returns the EK bound to node, if any.
	Binding(node string) (string, bool)
}

// nodePrefix starts the common name of a node's certificate.
const nodePrefix = "system:node:"

// attest runs the attestation step of a request for a signer whose profile requires it,
// between parsing the request and the profile's rules: the request's PEM is split into the
// CERTIFICATE REQUEST and the evidence (attestation.Split), the request parsed, and the
// evidence verified for the node of its common name (the Attestor: attestation.Verify, the
// ticket's single use, the EK's binding). It returns the request the pipeline sees (the bare
// CERTIFICATE REQUEST, with the verified identity in Attested) and, for the first use of an
// EK, bind: what binds it to the node and records the binding in the ledger (a Bound
// record), to run once the certificate is signed and before its own record, so that a
// request the rules refuse binds nothing.
func (c *Core) attest(d decisionContext, r issuance.Request) (_ issuance.Request, bind func(context.Context) error, _ error) {
	att, csr, node, err := c.splitAttested(r)
	if err != nil {
		return r, nil, err
	}
	a := c.opts.Attestor
	id, bound, err := a.Verify(att, csr, node, holder(d))
	if err != nil {
		return r, nil, err
	}
	if !bound {
		bind = func(ctx context.Context) error {
			if err := a.Bind(node, id.EK); err != nil {
				if f := (*attestation.Failure)(nil); errors.As(err, &f) {
					return err // bound to another meanwhile: final
				}
				// The bindings could not be read or written (a fleet's database): retry.
				return fmt.Errorf("%w: binding node %q to its endorsement key: %w", errLedgerUnavailable, node, err)
			}
			if err := c.recordBound(ctx, d, id); err != nil {
				a.Unbind(node, id.EK)
				return err
			}
			return nil
		}
	}
	r.PEM, r.Attested = att.Request, &id
	return r, bind, nil
}

// splitAttested takes an attested request apart: the evidence, the parsed request and the
// node of its common name.
func (c *Core) splitAttested(r issuance.Request) (*attestation.Attested, *x509.CertificateRequest, string, error) {
	if c.opts.Attestor == nil {
		return nil, nil, "", fmt.Errorf("%w: signer %s requires TPM attestation, which this server does not serve (no attestation section in its configuration)",
			issuance.ErrPolicyViolation, r.SignerName)
	}
	att, err := attestation.Split(r.PEM)
	if err != nil {
		return nil, nil, "", err
	}
	csr, err := issuance.ParseCSR(att.Request)
	if err != nil {
		return nil, nil, "", err
	}
	node, ok := strings.CutPrefix(csr.Subject.CommonName, nodePrefix)
	if !ok {
		return nil, nil, "", fmt.Errorf("%w: common name %.80q does not start with %q: only a node's own certificate is attested",
			issuance.ErrPolicyViolation, csr.Subject.CommonName, nodePrefix)
	}
	return att, csr, node, nil
}

// holder names the request that spends a ticket: its idempotency scope and hash, so that a
// retry of the same request may present the ticket again.
func holder(d decisionContext) string {
	return idempotency.Scope(d.identity, d.objectUID) + "/" + hex.EncodeToString(d.hash)
}

// VerifyAttestation verifies the evidence of a request for an attested signer without
// signing, for an approver: the admission of SignCSR (rate limits, limits, the signer served
// and allowed to the client, the object UID), the signer's profile must require attestation,
// then the attestation step without spending the ticket or binding the key, then the
// signer's rules on the attested request (issuance.Issuer.Explain: nothing is signed). Refusals are
// recorded as SignCSR's are. It returns the verified identity and whether signing will bind
// the EK to the node for the first time.
func (c *Core) VerifyAttestation(ctx context.Context, identity string, req CSR) (attestation.NodeIdentity, bool, error) {
	req, callerErr := asCaller(c.Caller(identity), req)
	r := req.Request
	d := c.newDecision(identity, issuance.KindCertificateSigningRequest, r.SignerName, req.Object, r.Requester.Username)
	sg, err := c.admit(ctx, d, func() error { return cmp.Or(callerErr, checkCSR(req)) })
	if err != nil {
		return attestation.NodeIdentity{}, false, err
	}
	if !sg.Profile.RequiresAttestation() {
		return attestation.NodeIdentity{}, false, c.refuse(ctx, d, fmt.Errorf("%w: signer %s (profile %s) takes no attestation to verify",
			issuance.ErrPolicyViolation, r.SignerName, sg.Profile.Name()))
	}
	d.hash = csrHash(r)
	att, csr, node, err := c.splitAttested(r)
	if err != nil {
		return attestation.NodeIdentity{}, false, c.refuse(ctx, d, err)
	}
	id, bound, err := c.opts.Attestor.Check(att, csr, node, holder(d))
	if err != nil {
		return attestation.NodeIdentity{}, false, c.refuse(ctx, d, err)
	}
	// The signer's rules too, without signing: an approver approves only what will be signed.
	r.PEM, r.Attested = att.Request, &id
	if exp := sg.Issuer.Explain(r); exp.Err != nil {
		return attestation.NodeIdentity{}, false, c.refuse(ctx, d, exp.Err)
	}
	d.log.Info("attestation verified for approval", "node", id.Node, "ek", id.EK, "ek_trust", id.EKTrust, "first_use", !bound)
	return id, !bound, nil
}

// recordBound records the first binding of an EK to a node.
func (c *Core) recordBound(ctx context.Context, d decisionContext, id attestation.NodeIdentity) error {
	rec := d.record(ledger.Bound)
	rec.Node, rec.EK = id.Node, id.EK
	msg := fmt.Sprintf("trust on first use: endorsement key %s (%s) bound to node %q, attestation key %s, provider ID %q",
		id.EK, id.EKTrust, id.Node, id.AKName, id.ProviderID)
	if id.BootState != "" {
		msg += fmt.Sprintf(", boot state %q", id.BootState)
	}
	rec.Message = clip(msg, recordMessageBytes)
	if _, err := c.appendRecord(ctx, rec); err != nil {
		return fmt.Errorf("%w: recording the binding of node %q to its endorsement key: %w", errLedgerUnavailable, id.Node, err)
	}
	d.log.Info("endorsement key bound to node on first use", "node", id.Node, "ek", id.EK, "ek_trust", id.EKTrust)
	return nil
}

// maxForgetReason bounds the reason of a ForgetAttestation.
const maxForgetReason = 512

// ForgetAttestation clears the binding of node to its EK for an admin of signer, an attested
// signer, within the client's rate limit: the removal is recorded (an Unbound record naming
// the admin and reason) before the binding goes, so that an audit sees every change. A node
// with no binding is NOT_FOUND. Refusals are logged and recorded. It returns the EK that was
// bound and the record's sequence number.
func (c *Core) ForgetAttestation(ctx context.Context, identity, signer, node, reason string) (string, uint64, error) {
	var ek string
	var seq uint64
	err := c.administerAttestation(ctx, identity, signer, func() error {
		if err := attestation.CheckNodeName(node); err != nil {
			return fmt.Errorf("%w: %v", issuance.ErrMalformedRequest, err)
		}
		if reason == "" || len(reason) > maxForgetReason {
			return fmt.Errorf("%w: reason is required: up to %d characters saying why the binding goes", issuance.ErrMalformedRequest, maxForgetReason)
		}
		if err := printable("reason", reason); err != nil {
			return err
		}
		var ok bool
		if ek, ok = c.opts.Attestor.Binding(node); !ok {
			return fmt.Errorf("%w: node %q has no endorsement key bound", ErrNotFound, node)
		}
		rec := ledger.Record{Decision: ledger.Unbound, Signer: signer, Client: clip(identity, recordClientBytes), Node: node, EK: ek,
			Message: clip(fmt.Sprintf("binding of node %q to endorsement key %s cleared by %s: %s", node, ek, identity, reason), recordMessageBytes)}
		rec, err := c.appendRecord(ctx, rec)
		if err != nil {
			return fmt.Errorf("%w: recording the removal of the binding: %w", errLedgerUnavailable, err)
		}
		c.opts.Attestor.Unbind(node, ek)
		seq = rec.Seq
		c.opts.Log.Warn("attestation binding cleared", logKeySigner, signer, logKeyClient, identity, "node", node, "ek", ek, "reason", reason, logKeyLedgerSeq, seq)
		return nil
	})
	return ek, seq, err
}

// administerAttestation runs an attestation admin step for an admin of signer (an attested
// signer) within the client's rate limit; a refusal is logged and recorded.
func (c *Core) administerAttestation(ctx context.Context, identity, signer string, run func() error) error {
	err := c.clientLimited(identity, signer)
	if errors.Is(err, errRateLimited) {
		return err
	}
	if err == nil {
		err = c.lookupAttestationAdmin(identity, signer)
	}
	if err == nil {
		err = run()
	}
	if err == nil {
		return nil
	}
	reason, _ := Classify(err)
	c.opts.Log.Warn("attestation admin step refused", logKeySigner, signer, logKeyClient, identity, logKeyReason, string(reason), logKeyError, err.Error())
	rec := ledger.Record{Decision: ledger.Refused, Signer: clip(signer, recordSignerBytes), Client: clip(identity, recordClientBytes),
		Reason: string(reason), Message: clip("attest forget: "+PublicMessage(err), recordMessageBytes)}
	if _, lerr := c.appendRecord(ctx, rec); lerr != nil {
		c.opts.Log.Error("recording a refused attestation admin step", logKeyError, lerr.Error())
	}
	return err
}

// lookupAttestationAdmin checks that signer is served, attested, and administered by
// identity.
func (c *Core) lookupAttestationAdmin(identity, signer string) error {
	sg, err := c.lookupSigner(identity, signer)
	if err != nil {
		return err
	}
	if !c.admin(identity, signer) {
		return fmt.Errorf("%w: client %q does not have the admin role for signer %q (clients[].admin in the server configuration)", errAdminRequired, identity, signer)
	}
	if !sg.Profile.RequiresAttestation() || c.opts.Attestor == nil {
		return fmt.Errorf("%w: signer %s (profile %s) does not attest nodes", issuance.ErrPolicyViolation, signer, sg.Profile.Name())
	}
	return nil
}

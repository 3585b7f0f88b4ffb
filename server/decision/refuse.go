package decision

import (
	"context"
	"fmt"

	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/metrics"
)

// RefuseCSR records a front door's own refusal of a request to sign a
// CertificateSigningRequest for identity: one the door refused before it could ask SignCSR
// (the webhook's: a body it cannot decode, another kind, a CSR that is not approved or is
// already signed). req is what the door knows of the request: for a decoded CSR its object and
// the request (the record names the object UID, the signer and the requester), the zero CSR
// for a body that could not be decoded (the record names none). refusal, not nil, is the
// refusal: its Reason and PublicMessage are the record's, as they are the answer's; detail, if
// not empty, is added to the record's message and the log line only (what the door knows of a
// body it could not decode, such as its size).
//
// It treats the refusal as SignCSR treats one of its own before the signer is looked up
// (admit): the client's own rate limit comes first, and when its bucket is empty nothing is
// recorded and the error is RATE_LIMITED (counted and logged as SignCSR counts and logs one);
// otherwise the refusal is recorded in the ledger with the client's identity, counted
// (requests_total{outcome="refused"}, refusals_total{reason}) and logged, and the client's
// token stays spent, so that no client can write refusals faster than its rate limit allows.
// The signer's shared budget is not touched. The refusal stands when its record cannot be
// written (the failure is logged). It returns the error to answer with: the rate limit's, or
// refusal.
func (c *Core) RefuseCSR(ctx context.Context, identity string, req CSR, refusal error, detail string) error {
	r := req.Request
	return c.refuseAtDoor(ctx, identity, c.newDecision(identity, issuance.KindCertificateSigningRequest, r.SignerName, req.Object, r.Requester.Username),
		refusal, detail)
}

// RefusePod records a front door's own refusal of a request to sign a PodCertificateRequest,
// as RefuseCSR does for a CertificateSigningRequest: req is what the door knows of it (the zero
// Pod for a message that could not be decoded).
func (c *Core) RefusePod(ctx context.Context, identity string, req Pod, refusal error, detail string) error {
	return c.refuseAtDoor(ctx, identity, c.podDecision(identity, req), refusal, detail)
}

// refuseAtDoor is RefuseCSR and RefusePod once the decision's context is known.
func (c *Core) refuseAtDoor(ctx context.Context, identity string, d decisionContext, refusal error, detail string) error {
	if ok, _ := c.access.Load().Limiter.AllowClient(identity, nil); !ok {
		c.opts.Metrics.ObserveRateLimited(d.signer, access.LimitClient)
		c.opts.Metrics.ObserveRequest(d.signer, metrics.OutcomeRateLimited, 0)
		d.log.Info("request rate limited", logKeyOutcome, metrics.OutcomeRateLimited, "limit", access.LimitClient)
		return fmt.Errorf("%w: the %s rate limit is exhausted; retry later", errRateLimited, access.LimitClient)
	}
	recorded := refusal
	if detail != "" {
		recorded = fmt.Errorf("%w (%s)", refusal, detail)
	}
	_ = c.refuse(ctx, d, recorded)
	return refusal
}

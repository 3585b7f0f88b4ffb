package decision

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/signet-pki/signet/server/idempotency"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/lint"
	"github.com/signet-pki/signet/server/metrics"
)

// Object is the Kubernetes object a request comes from. Its UID is the idempotency key; its
// name is only logged.
type Object struct {
	UID, Name string
}

// CSR is one CertificateSigningRequest to decide on: its object and the request as the
// apiserver holds it.
type CSR struct {
	Object  Object
	Request issuance.Request
}

// Issued is a certificate as returned to the caller, the first time or on a replay.
type Issued struct {
	// Serial is the serial number in lower-case hex.
	Serial string
	// Chain is the PEM chain: the leaf, then the signer's intermediates.
	Chain               []byte
	NotBefore, NotAfter time.Time
}

// SignCSR decides on one CertificateSigningRequest for the client identity, in this order:
//   - the client's own rate limit (errRateLimited; not recorded);
//   - a principal's request names no other requester, and gets its own (asCaller;
//     MALFORMED_REQUEST);
//   - the limits on what a caller may send (limits.go: signer name required, field sizes;
//     MALFORMED_REQUEST);
//   - the signer must be served and the client allowed to use it (UNKNOWN_SIGNER,
//     SIGNER_NOT_ALLOWED);
//   - the signer's rate limit, shared by its clients (not recorded);
//   - object.uid is required: it is the idempotency key;
//   - the same client, UID and request get the certificate issued before (byte for byte); the
//     same client and UID with a different request are refused;
//   - otherwise the issuance pipeline runs, and the certificate is returned only once its
//     ledger record is durable (LEDGER_UNAVAILABLE, nothing issued, if it cannot be written).
//
// Every refusal but a rate limit's is recorded in the ledger too, with the caller's strings
// clipped so that a record stays bounded. Request contents and key material are never logged.
// Errors are classified with Classify.
func (c *Core) SignCSR(ctx context.Context, identity string, req CSR) (Issued, error) {
	req, callerErr := asCaller(c.Caller(identity), req)
	r := req.Request
	d := c.newDecision(identity, issuance.KindCertificateSigningRequest, r.SignerName, req.Object, r.Requester.Username)
	return c.decide(ctx, d, func() error { return cmp.Or(callerErr, checkCSR(req)) },
		func() []byte { return csrHash(r) },
		func(sg *Signer, d decisionContext) (*issuance.Certificate, string, error) {
			req, bind := r, func(context.Context) error { return nil }
			if sg.Profile.RequiresAttestation() {
				var firstUse func(context.Context) error
				var err error
				if req, firstUse, err = c.attest(d, r); err != nil {
					return nil, "", err
				}
				if firstUse != nil {
					bind = firstUse
				}
			}
			cert, err := sg.Issuer.Issue(req)
			if err != nil {
				return nil, "", err
			}
			return cert, "", bind(ctx)
		})
}

// csrHash is the idempotency hash of a CertificateSigningRequest's request.
func csrHash(r issuance.Request) []byte {
	return idempotency.RequestHash(r.SignerName, r.PEM, r.Usages, r.ExpirationSeconds,
		r.Requester.Username, r.Requester.UID, r.Requester.Groups, r.Requester.Extra)
}

// decide is a signing call once its context is known: admission (admit, with checkLimits),
// the request's hash, then, unless the store answers for the client and UID, issue (given the
// call's context with its hash; it returns the certificate and the message of its record),
// timed and recorded; the outcome is reported by
// settle. What follows an issuance's durable record (afterIssued: the Issued hook, lint
// findings) runs once the store holds the answer, so that a failure there cannot cost the
// answer: a retry gets the same certificate.
//
// A panic before the issuance's record is durable (in the pipeline, the key, the ledger) is
// recorded as an INTERNAL refusal, nothing issued, and goes on up, for the front door to
// contain and answer; the idempotency store releases the object's claim (Store.Do).
func (c *Core) decide(ctx context.Context, d decisionContext, checkLimits func() error, hash func() []byte,
	issue func(*Signer, decisionContext) (*issuance.Certificate, string, error)) (Issued, error) {
	start := c.opts.Clock.Now()
	sg, err := c.admit(ctx, d, checkLimits)
	if err != nil {
		return Issued{}, err
	}
	d.hash = hash()
	var (
		settled bool          // the store answered: no panic in the claim
		done    *issuedRecord // this call's issuance, once its record is durable
	)
	defer func() {
		if !settled && done == nil {
			_ = c.refuse(ctx, d, ErrPanicked)
		}
	}()
	entry, res, err := c.opts.Store.Do(ctx, idempotency.Scope(d.identity, d.objectUID), d.hash, func(ctx context.Context) (idempotency.Entry, error) {
		c.faultAt(FaultSign, d.objectUID)
		t := c.opts.Clock.Now()
		cert, message, err := issue(sg, d)
		if err != nil {
			return idempotency.Entry{}, err
		}
		c.opts.Metrics.ObserveIssuance(d.signer, c.since(t))
		e, rec, err := c.recordIssued(ctx, d, cert, message)
		if err == nil {
			done = &issuedRecord{rec: rec, cert: cert}
		}
		return e, err
	})
	settled = true
	if done != nil {
		c.afterIssued(d, done.rec, done.cert)
	}
	if err := c.settle(ctx, d, start, entry, res, err); err != nil {
		return Issued{}, err
	}
	return Issued{Serial: entry.Serial, Chain: entry.Chain, NotBefore: entry.NotBefore, NotAfter: entry.NotAfter}, nil
}

// issuedRecord is an issuance whose record is durable.
type issuedRecord struct {
	rec  ledger.Record
	cert *issuance.Certificate
}

// admit applies the steps before a request is decided, in this order: the client's own rate
// limit (ResourceExhausted; not recorded); checkLimits, the limits on what a caller may send
// (limits.go; MALFORMED_REQUEST, recorded); the signer must be served and the client allowed to
// use it (NotFound, PermissionDenied; recorded, and the client's token stays spent); the
// signer's rate limit, shared by every client allowed to use it (ResourceExhausted; not
// recorded), so that a client may not spend, or probe, the budget of a signer it cannot use;
// the object UID (the idempotency key) must be set. It returns the signer, or the error to
// return.
func (c *Core) admit(ctx context.Context, d decisionContext, checkLimits func() error) (*Signer, error) {
	sg, which, err := c.limitedSigner(d.identity, d.signer, checkLimits)
	switch {
	case err != nil:
		return nil, c.refuse(ctx, d, err)
	case sg == nil:
		// Metrics label unserved signer names "unknown" themselves (bounded cardinality).
		c.opts.Metrics.ObserveRateLimited(d.signer, which)
		c.opts.Metrics.ObserveRequest(d.signer, metrics.OutcomeRateLimited, 0)
		d.log.Info("request rate limited", logKeyOutcome, metrics.OutcomeRateLimited, "limit", which)
		return nil, fmt.Errorf("%w: the %s rate limit is exhausted; retry later", errRateLimited, which)
	case d.objectUID == "":
		return nil, c.refuse(ctx, d, fmt.Errorf("%w: object.uid is required (it is the idempotency key)", issuance.ErrMalformedRequest))
	}
	return sg, nil
}

// limitedSigner returns the named signer once the rate limits and authorization let identity
// use it (access.Limiter.Allow, with lookupSigner between the client's and the signer's
// buckets): the signer; or nil and the limit that refused the call; or the authorization
// error.
func (c *Core) limitedSigner(identity, name string, checkLimits func() error) (sg *Signer, limit string, err error) {
	ok, limit, err := c.access.Load().Limiter.Allow(identity, name, func() error {
		if err := checkLimits(); err != nil {
			return err
		}
		var err error
		sg, err = c.lookupSigner(identity, name)
		return err
	})
	if !ok {
		return nil, limit, err
	}
	return sg, "", nil
}

// settle reports the outcome of an idempotent issuance (Store.Do's results) in metrics and
// logs, and returns the error to return (ctx's when the caller went away), nil when entry is
// the answer.
func (c *Core) settle(ctx context.Context, d decisionContext, start time.Time, entry idempotency.Entry, res idempotency.Result, err error) error {
	switch {
	case err != nil && ctx.Err() != nil:
		// The caller went away (or its deadline passed) while waiting: not a decision.
		d.log.Info("caller gone before the answer", logKeyError, err.Error())
		return ctx.Err()
	case err != nil && (errors.Is(err, errLedgerUnavailable) || errors.Is(err, idempotency.ErrUnavailable)):
		c.opts.Metrics.ObserveRequest(d.signer, metrics.OutcomeError, c.since(start))
		d.log.Error("nothing issued: the decision could not be recorded", logKeyOutcome, metrics.OutcomeError, logKeyError, err.Error())
		return err
	case err != nil:
		return c.refuse(ctx, d, err)
	case res == idempotency.Hit:
		c.opts.Metrics.ObserveRequest(d.signer, metrics.OutcomeIdempotentReplay, c.since(start))
		d.log.Info("certificate returned again for the same object and request", logKeyOutcome, metrics.OutcomeIdempotentReplay, logKeySerial, entry.Serial)
	case res == idempotency.Reissued:
		c.opts.Metrics.ObserveRequest(d.signer, metrics.OutcomeIssued, c.since(start))
		d.log.Info("certificate issued again: the one issued for this request is past its replay window", logKeyOutcome, metrics.OutcomeIssued,
			logKeySerial, entry.Serial, logKeyNotAfter, entry.NotAfter, logKeyLedgerSeq, entry.LedgerSeq)
	default:
		c.opts.Metrics.ObserveRequest(d.signer, metrics.OutcomeIssued, c.since(start))
		d.log.Info("certificate issued", logKeyOutcome, metrics.OutcomeIssued, logKeySerial, entry.Serial, logKeyNotAfter, entry.NotAfter, logKeyLedgerSeq, entry.LedgerSeq)
	}
	return nil
}

// decisionContext is what every ledger record and log line of one call shares.
type decisionContext struct {
	identity, signer string
	kind             issuance.Kind
	objectUID        string
	hash             []byte
	log              *slog.Logger
	// recorded is what records and log lines show of the caller's strings: clipped once.
	recorded recordedStrings
}

// recordedStrings are the caller's strings as records and log lines show them (clip).
type recordedStrings struct {
	signer, client, objectUID string
	requester                 string // the object's creator; a PodCertificateRequest records none
}

// newDecision is the context of one call: the client's identity, the signer, the object and
// its requester (none for a PodCertificateRequest), and a logger carrying them (the requester
// only if there is one) with the kind's own attributes (logAttrs, key-value pairs).
func (c *Core) newDecision(identity string, kind issuance.Kind, signer string, object Object, requester string, logAttrs ...any) decisionContext {
	// The caller's strings are clipped in logs as in the ledger: a log line stays bounded
	// whatever the caller sends (the limits refuse the request itself).
	rs := recordedStrings{
		signer:    clip(signer, recordSignerBytes),
		client:    clip(identity, recordClientBytes),
		objectUID: clip(object.UID, recordObjectUIDBytes),
		requester: clip(requester, recordRequesterBytes),
	}
	d := decisionContext{identity: identity, signer: signer, kind: kind, objectUID: object.UID, recorded: rs}
	attrs := []any{
		logKeySigner, rs.signer,
		logKeyClient, rs.client,
		logKeyKind, d.kind,
		logKeyObjectUID, rs.objectUID,
		logKeyObject, clip(object.Name, recordSignerBytes),
	}
	if requester != "" {
		attrs = append(attrs, logKeyRequester, rs.requester)
	}
	for i, a := range logAttrs {
		if v, ok := a.(string); ok && i%2 == 1 {
			logAttrs[i] = clip(v, recordRequesterBytes)
		}
	}
	d.log = c.opts.Log.With(append(attrs, logAttrs...)...)
	return d
}

// record is the ledger record of the decision, with the caller's strings clipped (see clip).
func (d decisionContext) record(decision ledger.Decision) ledger.Record {
	r := ledger.Record{
		Decision:   decision,
		Signer:     d.recorded.signer,
		Client:     d.recorded.client,
		Requester:  d.recorded.requester,
		ObjectUID:  d.recorded.objectUID,
		ObjectKind: string(d.kind),
	}
	if d.hash != nil {
		r.RequestHash = hex.EncodeToString(d.hash)
		r.IdempotencyKey = idempotency.Key(r.ObjectUID, d.hash)
	}
	return r
}

// recordIssued records the issuance of cert, with message, and returns its idempotent answer
// and the durable record, only once the record is durable (an error wrapping
// errLedgerUnavailable otherwise).
func (c *Core) recordIssued(ctx context.Context, d decisionContext, cert *issuance.Certificate, message string) (idempotency.Entry, ledger.Record, error) {
	rec := d.record(ledger.Issued)
	rec.Serial = hex.EncodeToString(cert.Leaf.SerialNumber.Bytes())
	rec.NotBefore, rec.NotAfter = cert.Leaf.NotBefore, cert.Leaf.NotAfter
	rec.Certificate = string(cert.ChainPEM)
	rec.Message = clip(message, recordMessageBytes)
	rec.Grounds = cert.Grounds
	rec.CA = cert.CA
	rec, err := c.appendRecord(ctx, rec)
	switch {
	case errors.Is(err, ledger.ErrInvalidRecord):
		// A record the ledger can never hold (a line over its limit): final, not "retry later".
		return idempotency.Entry{}, ledger.Record{}, fmt.Errorf("%w: the certificate's ledger record cannot be stored (%w), so nothing was issued", issuance.ErrMalformedRequest, err)
	case err != nil:
		return idempotency.Entry{}, ledger.Record{}, fmt.Errorf("%w: %w", errLedgerUnavailable, err)
	}
	return idempotency.Entry{
		Serial:      rec.Serial,
		Chain:       cert.ChainPEM,
		NotBefore:   cert.Leaf.NotBefore,
		NotAfter:    cert.Leaf.NotAfter,
		IssuedAt:    rec.Time,
		LedgerSeq:   rec.Seq,
		ReplayUntil: ReplayUntil(rec),
	}, rec, nil
}

// afterIssued is the bookkeeping of an issuance whose record is durable: the Issued hook, and
// the lint findings the certificate was issued with.
func (c *Core) afterIssued(d decisionContext, rec ledger.Record, cert *issuance.Certificate) {
	if c.opts.Issued != nil {
		c.opts.Issued(rec)
	}
	for _, f := range cert.AcceptedFindings {
		// What the profile accepts by design (an RSA kubelet's key encipherment with client
		// auth): visible in a metric and at debug level, not a warning on every issuance.
		c.opts.Metrics.ObserveLintAccepted(d.signer, f.Lint)
		d.log.Debug("certificate issued with a lint finding the profile accepts by design", logKeySerial, rec.Serial, logKeyLint, f.String())
	}
	if len(cert.LintFindings) > 0 {
		// Warnings and notices do not stop issuance; they are what the gate's configuration
		// lets through, shown so that an operator can tighten it or fix the profile.
		d.log.Warn("certificate issued with lint findings", logKeySerial, rec.Serial, logKeyLedgerSeq, rec.Seq,
			logKeyLintFindings, cert.LintFindings)
	}
}

// refuse records and logs a refusal (full detail for internal failures) and returns err.
// The refusal stands even when its record cannot be written.
func (c *Core) refuse(ctx context.Context, d decisionContext, err error) error {
	reason, safe := Classify(err)
	name := string(reason)
	outcome := metrics.OutcomeRefused
	if !safe {
		outcome = metrics.OutcomeError
	}
	c.opts.Metrics.ObserveRequest(d.signer, outcome, 0)
	c.opts.Metrics.ObserveRefusal(d.signer, name)
	var lintErr *lint.FailedError
	if errors.As(err, &lintErr) {
		for _, f := range lintErr.Failures {
			c.opts.Metrics.ObserveLintFailure(d.signer, f.Lint)
		}
	}
	rec := d.record(ledger.Refused)
	rec.Reason = name
	rec.Message = clip(PublicMessage(err), recordMessageBytes)
	if _, lerr := c.appendRecord(ctx, rec); lerr != nil {
		d.log.Error("recording a refusal", logKeyError, lerr.Error())
	}
	if safe {
		d.log.Info("request refused", logKeyOutcome, outcome, logKeyReason, name, logKeyError, err.Error())
	} else {
		d.log.Error("request failed", logKeyOutcome, outcome, logKeyReason, name, logKeyError, err.Error())
	}
	return err
}

// appendRecord writes rec to the ledger and, once it is durable, counts it and its append
// time: every record, issuance or refusal, goes through here.
func (c *Core) appendRecord(ctx context.Context, rec ledger.Record) (ledger.Record, error) {
	if c.opts.Ledger == nil {
		return ledger.Record{}, errors.New("no ledger configured")
	}
	start := c.opts.Clock.Now()
	rec, err := c.opts.Ledger.Append(ctx, rec)
	if err != nil {
		return ledger.Record{}, err
	}
	c.opts.Metrics.ObserveLedgerAppend(c.since(start))
	return rec, nil
}

func (c *Core) since(t time.Time) time.Duration { return c.opts.Clock.Since(t) }

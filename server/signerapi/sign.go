package signerapi

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/idempotency"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/lint"
	"github.com/signet-pki/signet/server/metrics"
)

// SignCertificateSigningRequest decides on one CertificateSigningRequest, in this order:
//   - the client's own rate limit (ResourceExhausted; not recorded);
//   - the limits on what a caller may send (limits.go: signer name required, field sizes;
//     MALFORMED_REQUEST);
//   - the signer must be served and the client allowed to use it (NotFound, PermissionDenied);
//   - the signer's rate limit, shared by its clients (ResourceExhausted; not recorded);
//   - object.uid is required: it is the idempotency key;
//   - the same UID and request get the certificate issued before (byte for byte); the same
//     UID with a different request is refused;
//   - otherwise the issuance pipeline runs, and the certificate is returned only once its
//     ledger record is durable (Unavailable, nothing issued, if it cannot be written).
//
// Every refusal but a rate limit's is recorded in the ledger too, with the caller's strings
// clipped so that a record stays bounded. Request contents and key material are never logged.
func (s *Service) SignCertificateSigningRequest(ctx context.Context, req *signetv1.SignCertificateSigningRequestRequest) (*signetv1.SignCertificateSigningRequestResponse, error) {
	start := s.opts.Clock.Now()
	d := s.newDecision(ctx, issuance.KindCertificateSigningRequest, req.GetSignerName(), req.GetObject(),
		req.GetRequester().GetUsername())
	sg, err := s.admit(ctx, d, func() error { return checkCSRRequest(req) })
	if err != nil {
		return nil, err
	}
	issReq := requestFromProto(req)
	d.hash = idempotency.RequestHash(issReq.SignerName, issReq.PEM, issReq.Usages, issReq.ExpirationSeconds,
		issReq.Requester.Username, issReq.Requester.UID, issReq.Requester.Groups, issReq.Requester.Extra)
	entry, res, err := s.opts.Store.Do(ctx, idempotency.Scope(d.identity, d.objectUID), d.hash, func() (idempotency.Entry, error) {
		t := s.opts.Clock.Now()
		cert, err := sg.Issuer.Issue(issReq)
		if err != nil {
			return idempotency.Entry{}, err
		}
		s.opts.Metrics.ObserveIssuance(d.signer, s.since(t))
		return s.recordIssued(ctx, d, cert, "")
	})
	if err := s.settle(ctx, d, start, entry, res, err); err != nil {
		return nil, err
	}
	return &signetv1.SignCertificateSigningRequestResponse{
		CertificateChainPem: string(entry.Chain),
		SerialNumber:        entry.Serial,
		NotBefore:           timestamppb.New(entry.NotBefore),
		NotAfter:            timestamppb.New(entry.NotAfter),
	}, nil
}

// admit applies the steps before a request is decided, in this order: the client's own rate
// limit (ResourceExhausted; not recorded); checkLimits, the limits on what a caller may send
// (limits.go; MALFORMED_REQUEST, recorded); the signer must be served and the client allowed to
// use it (NotFound, PermissionDenied; recorded, and the client's token stays spent); the
// signer's rate limit, shared by every client allowed to use it (ResourceExhausted; not
// recorded), so that a client may not spend, or probe, the budget of a signer it cannot use;
// the object UID (the idempotency key) must be set. It returns the signer, or the status to
// return.
func (s *Service) admit(ctx context.Context, d decisionContext, checkLimits func() error) (*Signer, error) {
	sg, which, err := s.limitedSigner(d.identity, d.signer, checkLimits)
	switch {
	case err != nil:
		return nil, s.refuse(ctx, d, err)
	case sg == nil:
		// Metrics label unserved signer names "unknown" themselves (bounded cardinality).
		s.opts.Metrics.ObserveRateLimited(d.signer, which)
		s.opts.Metrics.ObserveRequest(d.signer, metrics.OutcomeRateLimited, 0)
		d.log.Info("request rate limited", logKeyOutcome, metrics.OutcomeRateLimited, "limit", which)
		return nil, toStatus(fmt.Errorf("%w: the %s rate limit is exhausted; retry later", errRateLimited, which))
	case d.objectUID == "":
		return nil, s.refuse(ctx, d, fmt.Errorf("%w: object.uid is required (it is the idempotency key)", issuance.ErrMalformedRequest))
	}
	return sg, nil
}

// limitedSigner returns the named signer once the rate limits and authorization let identity
// use it (access.Limiter.Allow, with lookupSigner between the client's and the signer's
// buckets): the signer; or nil and the limit that refused the call; or the authorization
// error.
func (s *Service) limitedSigner(identity, name string, checkLimits func() error) (sg *Signer, limit string, err error) {
	ok, limit, err := s.access.Load().Limiter.Allow(identity, name, func() error {
		if err := checkLimits(); err != nil {
			return err
		}
		var err error
		sg, err = s.lookupSigner(identity, name)
		return err
	})
	if !ok {
		return nil, limit, err
	}
	return sg, "", nil
}

// settle reports the outcome of an idempotent issuance (Store.Do's results) in metrics and
// logs, and returns the status to return, nil when entry is the answer.
func (s *Service) settle(ctx context.Context, d decisionContext, start time.Time, entry idempotency.Entry, res idempotency.Result, err error) error {
	switch {
	case err != nil && ctx.Err() != nil:
		// The caller went away (or its deadline passed) while waiting: not a decision.
		d.log.Info("caller gone before the answer", logKeyError, err.Error())
		return status.FromContextError(ctx.Err()).Err()
	case err != nil && errors.Is(err, errLedgerUnavailable):
		s.opts.Metrics.ObserveRequest(d.signer, metrics.OutcomeError, s.since(start))
		d.log.Error("nothing issued: the decision could not be recorded", logKeyOutcome, metrics.OutcomeError, logKeyError, err.Error())
		return toStatus(err)
	case err != nil:
		return s.refuse(ctx, d, err)
	case res == idempotency.Hit:
		s.opts.Metrics.ObserveRequest(d.signer, metrics.OutcomeIdempotentReplay, s.since(start))
		d.log.Info("certificate returned again for the same object and request", logKeyOutcome, metrics.OutcomeIdempotentReplay, logKeySerial, entry.Serial)
	case res == idempotency.Reissued:
		s.opts.Metrics.ObserveRequest(d.signer, metrics.OutcomeIssued, s.since(start))
		d.log.Info("certificate issued again: the one issued for this request is past its replay window", logKeyOutcome, metrics.OutcomeIssued,
			logKeySerial, entry.Serial, logKeyNotAfter, entry.NotAfter, logKeyLedgerSeq, entry.LedgerSeq)
	default:
		s.opts.Metrics.ObserveRequest(d.signer, metrics.OutcomeIssued, s.since(start))
		d.log.Info("certificate issued", logKeyOutcome, metrics.OutcomeIssued, logKeySerial, entry.Serial, logKeyNotAfter, entry.NotAfter, logKeyLedgerSeq, entry.LedgerSeq)
	}
	return nil
}

// decisionContext is what every ledger record and log line of one call shares.
type decisionContext struct {
	identity, signer string
	kind             issuance.Kind
	objectUID        string
	requester        string // the object's creator; a PodCertificateRequest records none
	hash             []byte
	log              *slog.Logger
}

// newDecision is the context of one call: the client's identity, the signer, the object and
// its requester (none for a PodCertificateRequest), and a logger carrying them (the requester
// only if there is one) with the kind's own attributes (logAttrs, key-value pairs).
func (s *Service) newDecision(ctx context.Context, kind issuance.Kind, signer string, object *signetv1.KubernetesObject, requester string, logAttrs ...any) decisionContext {
	d := decisionContext{identity: ClientIdentity(ctx), signer: signer, kind: kind, objectUID: object.GetUid(), requester: requester}
	// The caller's strings are clipped in logs as in the ledger: a log line stays bounded
	// whatever the caller sends (the limits refuse the request itself).
	attrs := []any{
		logKeySigner, clip(d.signer, recordSignerBytes),
		logKeyClient, clip(d.identity, recordClientBytes),
		logKeyKind, d.kind,
		logKeyObjectUID, clip(d.objectUID, recordObjectUIDBytes),
		logKeyObject, clip(object.GetName(), recordSignerBytes),
	}
	if requester != "" {
		attrs = append(attrs, logKeyRequester, clip(requester, recordRequesterBytes))
	}
	for i, a := range logAttrs {
		if v, ok := a.(string); ok && i%2 == 1 {
			logAttrs[i] = clip(v, recordRequesterBytes)
		}
	}
	d.log = s.opts.Log.With(append(attrs, logAttrs...)...)
	return d
}

// record is the ledger record of the decision, with the caller's strings clipped (see clip).
func (d decisionContext) record(decision ledger.Decision) ledger.Record {
	r := ledger.Record{
		Decision:   decision,
		Signer:     clip(d.signer, recordSignerBytes),
		Client:     clip(d.identity, recordClientBytes),
		Requester:  clip(d.requester, recordRequesterBytes),
		ObjectUID:  clip(d.objectUID, recordObjectUIDBytes),
		ObjectKind: string(d.kind),
	}
	if d.hash != nil {
		r.RequestHash = hex.EncodeToString(d.hash)
		r.IdempotencyKey = idempotency.Key(r.ObjectUID, d.hash)
	}
	return r
}

// recordIssued records the issuance of cert, with message, and returns its idempotent answer
// only once the record is durable (an error wrapping errLedgerUnavailable otherwise).
func (s *Service) recordIssued(ctx context.Context, d decisionContext, cert *issuance.Certificate, message string) (idempotency.Entry, error) {
	rec := d.record(ledger.Issued)
	rec.Serial = hex.EncodeToString(cert.Leaf.SerialNumber.Bytes())
	rec.NotBefore, rec.NotAfter = cert.Leaf.NotBefore, cert.Leaf.NotAfter
	rec.Certificate = string(cert.ChainPEM)
	rec.Message = clip(message, recordMessageBytes)
	rec.Grounds = cert.Grounds
	rec, err := s.appendRecord(ctx, rec)
	switch {
	case errors.Is(err, ledger.ErrInvalidRecord):
		// A record the ledger can never hold (a line over its limit): final, not "retry later".
		return idempotency.Entry{}, fmt.Errorf("%w: the certificate's ledger record cannot be stored (%w), so nothing was issued", issuance.ErrMalformedRequest, err)
	case err != nil:
		return idempotency.Entry{}, fmt.Errorf("%w: %w", errLedgerUnavailable, err)
	}
	for _, f := range cert.AcceptedFindings {
		// What the profile accepts by design (an RSA kubelet's key encipherment with client
		// auth): visible in a metric and at debug level, not a warning on every issuance.
		s.opts.Metrics.ObserveLintAccepted(d.signer, f.Lint)
		d.log.Debug("certificate issued with a lint finding the profile accepts by design", logKeySerial, rec.Serial, logKeyLint, f.String())
	}
	if len(cert.LintFindings) > 0 {
		// Warnings and notices do not stop issuance; they are what the gate's configuration
		// lets through, shown so that an operator can tighten it or fix the profile.
		d.log.Warn("certificate issued with lint findings", logKeySerial, rec.Serial, logKeyLedgerSeq, rec.Seq,
			logKeyLintFindings, cert.LintFindings)
	}
	return idempotency.Entry{
		Serial:      rec.Serial,
		Chain:       cert.ChainPEM,
		NotBefore:   cert.Leaf.NotBefore,
		NotAfter:    cert.Leaf.NotAfter,
		IssuedAt:    rec.Time,
		LedgerSeq:   rec.Seq,
		ReplayUntil: ReplayUntil(rec),
	}, nil
}

// refuse records and logs a refusal (full detail for internal failures) and returns its
// status. The refusal stands even when its record cannot be written.
func (s *Service) refuse(ctx context.Context, d decisionContext, err error) error {
	code, reason, safe := classify(err)
	name := signetv1.ReasonName(reason)
	outcome := metrics.OutcomeRefused
	if !safe {
		outcome = metrics.OutcomeError
	}
	s.opts.Metrics.ObserveRequest(d.signer, outcome, 0)
	s.opts.Metrics.ObserveRefusal(d.signer, name)
	var lintErr *lint.FailedError
	if errors.As(err, &lintErr) {
		for _, f := range lintErr.Failures {
			s.opts.Metrics.ObserveLintFailure(d.signer, f.Lint)
		}
	}
	rec := d.record(ledger.Refused)
	rec.Reason = name
	rec.Message = clip(publicMessage(err, safe), recordMessageBytes)
	if _, lerr := s.appendRecord(ctx, rec); lerr != nil {
		d.log.Error("recording a refusal", logKeyError, lerr.Error())
	}
	if safe {
		d.log.Info("request refused", logKeyOutcome, outcome, logKeyReason, name, logKeyError, err.Error())
	} else {
		d.log.Error("request failed", logKeyOutcome, outcome, logKeyReason, name, "code", code.String(), logKeyError, err.Error())
	}
	return toStatus(err)
}

// appendRecord writes rec to the ledger and, once it is durable, counts it and its append
// time: every record, issuance or refusal, goes through here.
func (s *Service) appendRecord(ctx context.Context, rec ledger.Record) (ledger.Record, error) {
	if s.opts.Ledger == nil {
		return ledger.Record{}, errors.New("no ledger configured")
	}
	start := s.opts.Clock.Now()
	rec, err := s.opts.Ledger.Append(ctx, rec)
	if err != nil {
		return ledger.Record{}, err
	}
	s.opts.Metrics.ObserveLedgerAppend(s.since(start))
	return rec, nil
}

func (s *Service) since(t time.Time) time.Duration { return s.opts.Clock.Since(t) }

// requestFromProto converts the wire request to the pipeline's request.
func requestFromProto(req *signetv1.SignCertificateSigningRequestRequest) issuance.Request {
	r := issuance.Request{
		SignerName: req.GetSignerName(),
		PEM:        req.GetRequest(),
		Usages:     req.GetUsages(),
		Requester: issuance.Requester{
			Username: req.GetRequester().GetUsername(),
			UID:      req.GetRequester().GetUid(),
			Groups:   req.GetRequester().GetGroups(),
		},
	}
	if req.ExpirationSeconds != nil {
		v := req.GetExpirationSeconds()
		r.ExpirationSeconds = &v
	}
	if extra := req.GetRequester().GetExtra(); len(extra) > 0 {
		r.Requester.Extra = make(map[string][]string, len(extra))
		for k, v := range extra {
			r.Requester.Extra[k] = v.GetValues()
		}
	}
	return r
}

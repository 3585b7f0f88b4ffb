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

// SignCertificateSigningRequest decides on one request, in this order:
//   - the client's and the signer's rate limits (ResourceExhausted; not recorded);
//   - the signer must be served and the client allowed to use it (NotFound, PermissionDenied);
//   - object.uid is required: it is the idempotency key;
//   - the same UID and request get the certificate issued before (byte for byte); the same
//     UID with a different request is refused;
//   - otherwise the issuance pipeline runs, and the certificate is returned only once its
//     ledger record is durable (Unavailable, nothing issued, if it cannot be written).
//
// Every refusal after authorization is recorded in the ledger too. Request contents and key
// material are never logged.
func (s *Service) SignCertificateSigningRequest(ctx context.Context, req *signetv1.SignCertificateSigningRequestRequest) (*signetv1.SignCertificateSigningRequestResponse, error) {
	start := s.opts.Clock.Now()
	d := decisionContext{
		identity: ClientIdentity(ctx),
		signer:   req.GetSignerName(),
		req:      req,
	}
	d.log = s.opts.Log.With(
		logKeySigner, d.signer,
		logKeyClient, d.identity,
		logKeyObjectUID, req.GetObject().GetUid(),
		logKeyObject, req.GetObject().GetName(),
		logKeyRequester, req.GetRequester().GetUsername(),
	)
	// Rate limits come first, so that no client can make the server do (or record) more than
	// its share, refusals included.
	if ok, which := s.access.Load().Limiter.Allow(d.identity, d.signer); !ok {
		// Metrics label unserved signer names "unknown" themselves (bounded cardinality).
		s.opts.Metrics.ObserveRateLimited(d.signer, which)
		s.opts.Metrics.ObserveRequest(d.signer, metrics.OutcomeRateLimited, s.since(start))
		d.log.Info("request rate limited", logKeyOutcome, metrics.OutcomeRateLimited, "limit", which)
		return nil, toStatus(fmt.Errorf("%w: the %s rate limit is exhausted; retry later", errRateLimited, which))
	}
	sg, err := s.lookupSigner(d.identity, d.signer)
	if err != nil {
		return nil, s.refuse(ctx, d, err)
	}
	uid := req.GetObject().GetUid()
	if uid == "" {
		return nil, s.refuse(ctx, d, fmt.Errorf("%w: object.uid is required (it is the idempotency key)", issuance.ErrMalformedRequest))
	}
	issReq := requestFromProto(req)
	d.hash = idempotency.RequestHash(issReq.SignerName, issReq.PEM, issReq.Usages, issReq.ExpirationSeconds,
		issReq.Requester.Username, issReq.Requester.UID, issReq.Requester.Groups, issReq.Requester.Extra)
	entry, res, err := s.opts.Store.Do(ctx, uid, d.hash, func() (idempotency.Entry, error) {
		return s.issue(ctx, d, sg, issReq)
	})
	switch {
	case err != nil && ctx.Err() != nil:
		// The caller went away (or its deadline passed) while waiting: not a decision.
		d.log.Info("caller gone before the answer", logKeyError, err.Error())
		return nil, status.FromContextError(ctx.Err()).Err()
	case err != nil && errors.Is(err, errLedgerUnavailable):
		s.opts.Metrics.ObserveRequest(d.signer, metrics.OutcomeError, s.since(start))
		d.log.Error("nothing issued: the decision could not be recorded", logKeyOutcome, metrics.OutcomeError, logKeyError, err.Error())
		return nil, toStatus(err)
	case err != nil:
		return nil, s.refuse(ctx, d, err)
	case res == idempotency.Hit:
		s.opts.Metrics.ObserveRequest(d.signer, metrics.OutcomeIdempotentReplay, s.since(start))
		d.log.Info("certificate returned again for the same object and request", logKeyOutcome, metrics.OutcomeIdempotentReplay, logKeySerial, entry.Serial)
	default:
		s.opts.Metrics.ObserveRequest(d.signer, metrics.OutcomeIssued, s.since(start))
		d.log.Info("certificate issued", logKeyOutcome, metrics.OutcomeIssued, logKeySerial, entry.Serial, logKeyNotAfter, entry.NotAfter, logKeyLedgerSeq, entry.LedgerSeq)
	}
	return &signetv1.SignCertificateSigningRequestResponse{
		CertificateChainPem: string(entry.Chain),
		SerialNumber:        entry.Serial,
		NotBefore:           timestamppb.New(entry.NotBefore),
		NotAfter:            timestamppb.New(entry.NotAfter),
	}, nil
}

// decisionContext is what every ledger record of one call shares.
type decisionContext struct {
	identity, signer string
	req              *signetv1.SignCertificateSigningRequestRequest
	hash             []byte
	log              *slog.Logger
}

func (d decisionContext) record(decision ledger.Decision) ledger.Record {
	r := ledger.Record{
		Decision:  decision,
		Signer:    d.signer,
		Client:    d.identity,
		Requester: d.req.GetRequester().GetUsername(),
		ObjectUID: d.req.GetObject().GetUid(),
	}
	if d.hash != nil {
		r.RequestHash = hex.EncodeToString(d.hash)
		r.IdempotencyKey = idempotency.Key(r.ObjectUID, d.hash)
	}
	return r
}

// issue runs the pipeline and records the issuance; it returns the certificate only once the
// record is durable.
func (s *Service) issue(ctx context.Context, d decisionContext, sg *Signer, req issuance.Request) (idempotency.Entry, error) {
	cert, err := sg.Issuer.Issue(req)
	if err != nil {
		return idempotency.Entry{}, err
	}
	rec := d.record(ledger.Issued)
	rec.Serial = hex.EncodeToString(cert.Leaf.SerialNumber.Bytes())
	rec.NotBefore, rec.NotAfter = cert.Leaf.NotBefore, cert.Leaf.NotAfter
	rec.Certificate = string(cert.ChainPEM)
	rec, err = s.appendRecord(ctx, rec)
	if err != nil {
		return idempotency.Entry{}, fmt.Errorf("%w: %w", errLedgerUnavailable, err)
	}
	return idempotency.Entry{
		Serial:    rec.Serial,
		Chain:     cert.ChainPEM,
		NotBefore: cert.Leaf.NotBefore,
		NotAfter:  cert.Leaf.NotAfter,
		IssuedAt:  rec.Time,
		LedgerSeq: rec.Seq,
	}, nil
}

// refuse records and logs a refusal (full detail for internal failures) and returns its
// status. The refusal stands even when its record cannot be written.
func (s *Service) refuse(ctx context.Context, d decisionContext, err error) error {
	code, reason, safe := classify(err)
	name := ReasonName(reason)
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
	rec.Message = publicMessage(err, safe)
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

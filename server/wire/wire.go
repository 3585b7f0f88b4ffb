// Package wire maps the decision core's refusal reasons to what each front door answers: the
// gRPC code and the signet.v1 ErrorReason of the gRPC service, and the HTTP status of the
// webhook. One table, so that the front doors cannot disagree.
package wire

import (
	"net/http"

	"google.golang.org/grpc/codes"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/decision"
)

// Answer is how one reason is answered.
type Answer struct {
	// Code is the gRPC status code. InvalidArgument and FailedPrecondition are final for a
	// client (a retry gets the same answer); ResourceExhausted, Unavailable and Internal
	// are not.
	Code codes.Code
	// Reason is the google.rpc.ErrorInfo reason (domain signetv1.ErrorDomain).
	Reason signetv1.ErrorReason
	// HTTPStatus is the webhook's status code: 4xx for a refusal, 429 and 503 for what a
	// retry may get past, 500 for an internal failure.
	HTTPStatus int
	// RetryAfter is how many seconds a client should wait before sending the same request
	// to this server again (the webhook's Retry-After), or 0 when a retry of this server
	// cannot help: the request must change, or an operator must act.
	RetryAfter int
}

// Retry-After of the transient answers, in seconds: a rate limit refills within a second or
// so; a ledger or key that cannot be used needs the server a few seconds to recover (the
// health loop and the key's re-open run every second).
const (
	RetryAfterRateLimited = 1
	RetryAfterUnavailable = 5
)

var table = map[decision.Reason]Answer{
	decision.ReasonMalformedRequest:    {codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_MALFORMED_REQUEST, http.StatusBadRequest, 0},
	decision.ReasonInvalidSignature:    {codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_INVALID_SIGNATURE, http.StatusBadRequest, 0},
	decision.ReasonUnsupportedKey:      {codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_UNSUPPORTED_KEY, http.StatusBadRequest, 0},
	decision.ReasonUnknownAnnotation:   {codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_UNKNOWN_ANNOTATION, http.StatusBadRequest, 0},
	decision.ReasonPolicyViolation:     {codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_POLICY_VIOLATION, http.StatusForbidden, 0},
	decision.ReasonLintFailed:          {codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_LINT_FAILED, http.StatusUnprocessableEntity, 0},
	decision.ReasonIdempotencyConflict: {codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_IDEMPOTENCY_CONFLICT, http.StatusConflict, 0},
	decision.ReasonRateLimited:         {codes.ResourceExhausted, signetv1.ErrorReason_ERROR_REASON_RATE_LIMITED, http.StatusTooManyRequests, RetryAfterRateLimited},
	decision.ReasonLedgerUnavailable:   {codes.Unavailable, signetv1.ErrorReason_ERROR_REASON_LEDGER_UNAVAILABLE, http.StatusServiceUnavailable, RetryAfterUnavailable},
	decision.ReasonKeyUnavailable:      {codes.Unavailable, signetv1.ErrorReason_ERROR_REASON_KEY_UNAVAILABLE, http.StatusServiceUnavailable, RetryAfterUnavailable},
	decision.ReasonUnknownSigner:       {codes.NotFound, signetv1.ErrorReason_ERROR_REASON_UNKNOWN_SIGNER, http.StatusNotFound, 0},
	decision.ReasonSignerNotAllowed:    {codes.PermissionDenied, signetv1.ErrorReason_ERROR_REASON_SIGNER_NOT_ALLOWED, http.StatusForbidden, 0},
	decision.ReasonInternal:            {codes.Internal, signetv1.ErrorReason_ERROR_REASON_INTERNAL, http.StatusInternalServerError, 0},
	decision.ReasonAdminRequired:       {codes.PermissionDenied, signetv1.ErrorReason_ERROR_REASON_ADMIN_REQUIRED, http.StatusForbidden, 0},
	decision.ReasonRotationRefused:     {codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_ROTATION_REFUSED, http.StatusConflict, 0},
	decision.ReasonInvalidCA:           {codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_INVALID_CA, http.StatusBadRequest, 0},
	// Not Unavailable and no Retry-After: retrying this server cannot help until an operator
	// acts (another server may take the request).
	decision.ReasonLedgerRestartRequired: {codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_LEDGER_RESTART_REQUIRED, http.StatusServiceUnavailable, 0},
}

// For returns the answer to reason; an unknown reason is answered as internal.
func For(reason decision.Reason) Answer {
	if a, ok := table[reason]; ok {
		return a
	}
	return table[decision.ReasonInternal]
}

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
}

var table = map[decision.Reason]Answer{
	decision.ReasonMalformedRequest:    {codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_MALFORMED_REQUEST, http.StatusBadRequest},
	decision.ReasonInvalidSignature:    {codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_INVALID_SIGNATURE, http.StatusBadRequest},
	decision.ReasonUnsupportedKey:      {codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_UNSUPPORTED_KEY, http.StatusBadRequest},
	decision.ReasonUnknownAnnotation:   {codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_UNKNOWN_ANNOTATION, http.StatusBadRequest},
	decision.ReasonPolicyViolation:     {codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_POLICY_VIOLATION, http.StatusForbidden},
	decision.ReasonLintFailed:          {codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_LINT_FAILED, http.StatusUnprocessableEntity},
	decision.ReasonIdempotencyConflict: {codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_IDEMPOTENCY_CONFLICT, http.StatusConflict},
	decision.ReasonRateLimited:         {codes.ResourceExhausted, signetv1.ErrorReason_ERROR_REASON_RATE_LIMITED, http.StatusTooManyRequests},
	decision.ReasonLedgerUnavailable:   {codes.Unavailable, signetv1.ErrorReason_ERROR_REASON_LEDGER_UNAVAILABLE, http.StatusServiceUnavailable},
	decision.ReasonKeyUnavailable:      {codes.Unavailable, signetv1.ErrorReason_ERROR_REASON_KEY_UNAVAILABLE, http.StatusServiceUnavailable},
	decision.ReasonUnknownSigner:       {codes.NotFound, signetv1.ErrorReason_ERROR_REASON_UNKNOWN_SIGNER, http.StatusNotFound},
	decision.ReasonSignerNotAllowed:    {codes.PermissionDenied, signetv1.ErrorReason_ERROR_REASON_SIGNER_NOT_ALLOWED, http.StatusForbidden},
	decision.ReasonInternal:            {codes.Internal, signetv1.ErrorReason_ERROR_REASON_INTERNAL, http.StatusInternalServerError},
	decision.ReasonAdminRequired:       {codes.PermissionDenied, signetv1.ErrorReason_ERROR_REASON_ADMIN_REQUIRED, http.StatusForbidden},
	decision.ReasonRotationRefused:     {codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_ROTATION_REFUSED, http.StatusConflict},
	decision.ReasonInvalidCA:           {codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_INVALID_CA, http.StatusBadRequest},
	// Not Unavailable: retrying this server cannot help until an operator acts.
	decision.ReasonLedgerRestartRequired: {codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_LEDGER_RESTART_REQUIRED, http.StatusServiceUnavailable},
}

// For returns the answer to reason; an unknown reason is answered as internal.
func For(reason decision.Reason) Answer {
	if a, ok := table[reason]; ok {
		return a
	}
	return table[decision.ReasonInternal]
}

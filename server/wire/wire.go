// Package wire maps the decision core's refusal reasons to what each front door answers: the
// gRPC code and the signet.v1 ErrorReason of the gRPC service, and the HTTP status of the
// webhook, which is the canonical pair of the gRPC code (HTTPStatus). One table, so that the
// front doors cannot disagree.
package wire

import (
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/decision"
)

// Answer is how one reason is answered.
type Answer struct {
	// Code is the gRPC status code. It agrees with signetv1.Final(Reason), so that a client
	// reading only the code judges as one reading the reason: a final reason is answered
	// InvalidArgument, FailedPrecondition, NotFound or PermissionDenied (a retry gets the same
	// answer), a transient one ResourceExhausted, Unavailable or Internal
	// (TestCodeAgreesWithFinal).
	Code codes.Code
	// Reason is the google.rpc.ErrorInfo reason (domain signetv1.ErrorDomain).
	Reason signetv1.ErrorReason
	// HTTPStatus is the webhook's status code: HTTPStatus(Code), the canonical pair of the
	// gRPC code, so that a client mapping one to the other gets the same answer.
	HTTPStatus int
	// RetryAfter is how many seconds a client should wait before sending the same request
	// again (the webhook's Retry-After): set on every answer a retry may get past (429, 500,
	// 503: the reasons signetv1.Final says are not final), 0 when a retry cannot help because
	// the request must change.
	RetryAfter int
}

// Retry-After of the transient answers, in seconds: a rate limit refills within a second or
// so; an internal failure, a ledger or key that cannot be used needs the server a few seconds to recover (the
// health loop and the key's re-open run every second); a ledger that needs an operator
// needs longer (another signing server may take the request meanwhile); a record not yet
// covered by a checkpoint is covered within a second.
const (
	RetryAfterRateLimited     = 1
	RetryAfterUnavailable     = 5
	RetryAfterRestartRequired = 30
	RetryAfterCheckpoint      = 1
)

// entry is one reason's gRPC code, ErrorInfo reason and Retry-After; the HTTP status is
// derived from the code. Whether the reason is final is signetv1.Final's decision, not the
// table's: the code and Retry-After of each entry are checked against it
// (TestCodeAgreesWithFinal).
type entry struct {
	code       codes.Code
	reason     signetv1.ErrorReason
	retryAfter int
}

var table = map[decision.Reason]entry{
	decision.ReasonMalformedRequest:    {codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_MALFORMED_REQUEST, 0},
	decision.ReasonInvalidSignature:    {codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_INVALID_SIGNATURE, 0},
	decision.ReasonUnsupportedKey:      {codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_UNSUPPORTED_KEY, 0},
	decision.ReasonUnknownAnnotation:   {codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_UNKNOWN_ANNOTATION, 0},
	decision.ReasonPolicyViolation:     {codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_POLICY_VIOLATION, 0},
	decision.ReasonLintFailed:          {codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_LINT_FAILED, 0},
	decision.ReasonIdempotencyConflict: {codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_IDEMPOTENCY_CONFLICT, 0},
	decision.ReasonRateLimited:         {codes.ResourceExhausted, signetv1.ErrorReason_ERROR_REASON_RATE_LIMITED, RetryAfterRateLimited},
	decision.ReasonLedgerUnavailable:   {codes.Unavailable, signetv1.ErrorReason_ERROR_REASON_LEDGER_UNAVAILABLE, RetryAfterUnavailable},
	decision.ReasonKeyUnavailable:      {codes.Unavailable, signetv1.ErrorReason_ERROR_REASON_KEY_UNAVAILABLE, RetryAfterUnavailable},
	decision.ReasonUnknownSigner:       {codes.NotFound, signetv1.ErrorReason_ERROR_REASON_UNKNOWN_SIGNER, 0},
	decision.ReasonSignerNotAllowed:    {codes.PermissionDenied, signetv1.ErrorReason_ERROR_REASON_SIGNER_NOT_ALLOWED, 0},
	decision.ReasonInternal:            {codes.Internal, signetv1.ErrorReason_ERROR_REASON_INTERNAL, RetryAfterUnavailable},
	decision.ReasonAdminRequired:       {codes.PermissionDenied, signetv1.ErrorReason_ERROR_REASON_ADMIN_REQUIRED, 0},
	decision.ReasonRotationRefused:     {codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_ROTATION_REFUSED, 0},
	decision.ReasonInvalidCA:           {codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_INVALID_CA, 0},
	// The request is fine; this server cannot record it until an operator has acted and
	// restarted it. Another server may take it, or this one once restarted.
	decision.ReasonLedgerRestartRequired: {codes.Unavailable, signetv1.ErrorReason_ERROR_REASON_LEDGER_RESTART_REQUIRED, RetryAfterRestartRequired},
	decision.ReasonNotFound:              {codes.NotFound, signetv1.ErrorReason_ERROR_REASON_NOT_FOUND, 0},
	decision.ReasonCheckpointPending:     {codes.Unavailable, signetv1.ErrorReason_ERROR_REASON_CHECKPOINT_PENDING, RetryAfterCheckpoint},
	decision.ReasonLedgerBehind:          {codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_LEDGER_BEHIND, 0},
	decision.ReasonAttestationFailed:     {codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_ATTESTATION_FAILED, 0},
}

// For returns the answer to reason; an unknown reason is answered as internal.
func For(reason decision.Reason) Answer {
	e, ok := table[reason]
	if !ok {
		e = table[decision.ReasonInternal]
	}
	return Answer{Code: e.code, Reason: e.reason, HTTPStatus: HTTPStatus(e.code), RetryAfter: e.retryAfter}
}

// HTTPStatus is the HTTP status of a gRPC code in the canonical mapping every Google API
// client uses (google.rpc.Code's documentation), as grpc-gateway maintains it:
// INVALID_ARGUMENT, FAILED_PRECONDITION and OUT_OF_RANGE 400, UNAUTHENTICATED 401,
// PERMISSION_DENIED 403, NOT_FOUND 404, ALREADY_EXISTS and ABORTED 409, RESOURCE_EXHAUSTED
// 429, CANCELLED 499, INTERNAL, UNKNOWN and DATA_LOSS 500, UNIMPLEMENTED 501, UNAVAILABLE 503,
// DEADLINE_EXCEEDED 504.
func HTTPStatus(c codes.Code) int { return runtime.HTTPStatusFromCode(c) }

package signerapi

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/idempotency"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/lint"
)

// Errors of the API layer itself.
var (
	errUnknownSigner     = errors.New("unknown signer")
	errSignerNotAllowed  = errors.New("signer not allowed for this client")
	errRateLimited       = errors.New("rate limited")
	errLedgerUnavailable = errors.New("ledger unavailable: nothing was issued")
)

// classify maps an error to its gRPC code and reason. The message of a terminal refusal is
// safe to return: it is built from the request and the policy, never from key material.
func classify(err error) (codes.Code, signetv1.ErrorReason, bool) {
	switch {
	case errors.Is(err, issuance.ErrMalformedRequest):
		return codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_MALFORMED_REQUEST, true
	case errors.Is(err, issuance.ErrInvalidSignature):
		return codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_INVALID_SIGNATURE, true
	case errors.Is(err, issuance.ErrUnsupportedKey):
		return codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_UNSUPPORTED_KEY, true
	case errors.Is(err, issuance.ErrUnknownAnnotation):
		return codes.InvalidArgument, signetv1.ErrorReason_ERROR_REASON_UNKNOWN_ANNOTATION, true
	case errors.Is(err, issuance.ErrPolicyViolation):
		return codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_POLICY_VIOLATION, true
	case errors.Is(err, lint.ErrLintFailed):
		return codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_LINT_FAILED, true
	case errors.Is(err, idempotency.ErrConflict):
		return codes.FailedPrecondition, signetv1.ErrorReason_ERROR_REASON_IDEMPOTENCY_CONFLICT, true
	case errors.Is(err, errRateLimited):
		return codes.ResourceExhausted, signetv1.ErrorReason_ERROR_REASON_RATE_LIMITED, true
	case errors.Is(err, errLedgerUnavailable):
		return codes.Unavailable, signetv1.ErrorReason_ERROR_REASON_LEDGER_UNAVAILABLE, false
	case errors.Is(err, errUnknownSigner):
		return codes.NotFound, signetv1.ErrorReason_ERROR_REASON_UNKNOWN_SIGNER, true
	case errors.Is(err, errSignerNotAllowed):
		return codes.PermissionDenied, signetv1.ErrorReason_ERROR_REASON_SIGNER_NOT_ALLOWED, true
	default:
		return codes.Internal, signetv1.ErrorReason_ERROR_REASON_INTERNAL, false
	}
}

// publicMessage is what a client may see of err: the error itself when it is safe, a
// generic message otherwise.
func publicMessage(err error, safe bool) string {
	switch {
	case safe:
		return err.Error()
	case errors.Is(err, errLedgerUnavailable):
		return "the decision could not be recorded durably, so nothing was issued; retry later"
	default:
		return "internal error; the server log has the details"
	}
}

// toStatus converts a pipeline error to a gRPC status with a google.rpc.ErrorInfo detail.
// Internal errors get a generic message; the caller logs the detail.
func toStatus(err error) error {
	code, reason, safe := classify(err)
	st := status.New(code, publicMessage(err, safe))
	withInfo, detailErr := st.WithDetails(&errdetails.ErrorInfo{
		Reason: signetv1.ReasonName(reason),
		Domain: signetv1.ErrorDomain,
	})
	if detailErr != nil {
		return st.Err()
	}
	return withInfo.Err()
}

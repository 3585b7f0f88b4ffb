package decision

import (
	"errors"

	"github.com/signet-pki/signet/attestation"
	"github.com/signet-pki/signet/keystore/keyerr"
	"github.com/signet-pki/signet/server/authority"
	"github.com/signet-pki/signet/server/idempotency"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/lint"
)

// Reason names why a request was refused, or that it failed. The names are signet.v1's
// ErrorInfo reasons (ReasonName of the ErrorReason enum); server/wire maps each to its gRPC
// code and HTTP status.
type Reason string

// The reasons.
const (
	ReasonMalformedRequest    Reason = "MALFORMED_REQUEST"
	ReasonInvalidSignature    Reason = "INVALID_SIGNATURE"
	ReasonUnsupportedKey      Reason = "UNSUPPORTED_KEY"
	ReasonUnknownAnnotation   Reason = "UNKNOWN_ANNOTATION"
	ReasonPolicyViolation     Reason = "POLICY_VIOLATION"
	ReasonLintFailed          Reason = "LINT_FAILED"
	ReasonIdempotencyConflict Reason = "IDEMPOTENCY_CONFLICT"
	ReasonRateLimited         Reason = "RATE_LIMITED"
	ReasonLedgerUnavailable   Reason = "LEDGER_UNAVAILABLE"
	ReasonUnknownSigner       Reason = "UNKNOWN_SIGNER"
	ReasonSignerNotAllowed    Reason = "SIGNER_NOT_ALLOWED"
	ReasonInternal            Reason = "INTERNAL"
	ReasonKeyUnavailable      Reason = "KEY_UNAVAILABLE"
	ReasonAdminRequired       Reason = "ADMIN_REQUIRED"
	ReasonRotationRefused     Reason = "ROTATION_REFUSED"
	ReasonInvalidCA           Reason = "INVALID_CA"
	// ReasonLedgerRestartRequired: the ledger cannot recover by itself (ledger.ErrRestartRequired).
	ReasonLedgerRestartRequired Reason = "LEDGER_RESTART_REQUIRED"
	// The ledger lookups' own (ErrNotFound, ErrCheckpointPending, ErrLedgerBehind).
	ReasonNotFound          Reason = "NOT_FOUND"
	ReasonCheckpointPending Reason = "CHECKPOINT_PENDING"
	ReasonLedgerBehind      Reason = "LEDGER_BEHIND"
	// ReasonAttestationFailed: the TPM evidence of a request for an attested signer fails a
	// check, or was used before (attestation.ErrRefused).
	ReasonAttestationFailed Reason = "ATTESTATION_FAILED"
)

// Reasons lists every Reason, for the front doors' tables and their tests.
var Reasons = []Reason{
	ReasonMalformedRequest, ReasonInvalidSignature, ReasonUnsupportedKey, ReasonUnknownAnnotation,
	ReasonPolicyViolation, ReasonLintFailed, ReasonIdempotencyConflict, ReasonRateLimited,
	ReasonLedgerUnavailable, ReasonUnknownSigner, ReasonSignerNotAllowed, ReasonInternal,
	ReasonKeyUnavailable, ReasonAdminRequired, ReasonRotationRefused, ReasonInvalidCA,
	ReasonLedgerRestartRequired, ReasonNotFound, ReasonCheckpointPending, ReasonLedgerBehind,
	ReasonAttestationFailed,
}

// Refusals of the ledger's lookups and proofs, for the front doors to wrap: nothing the
// caller may see matches; the record is not covered by a signed checkpoint yet; the caller
// holds a checkpoint larger than the server's latest.
var (
	ErrNotFound          = errors.New("not found")
	ErrCheckpointPending = errors.New("not covered by a signed checkpoint yet")
	ErrLedgerBehind      = errors.New("the ledger is behind the caller's checkpoint")
)

// ErrPanicked is the failure of a call that panicked, contained by its front door (server/guard):
// what the door answers (INTERNAL, its message not shown; the log has the panic), and what the
// core records for a signing call that panicked before anything was issued.
var ErrPanicked = errors.New("the call panicked inside the server, nothing was issued; the server log has the panic")

// Errors of the core itself; the pipeline's are issuance's, lint's and idempotency's.
var (
	errUnknownSigner     = errors.New("unknown signer")
	errSignerNotAllowed  = errors.New("signer not allowed for this client")
	errRateLimited       = errors.New("rate limited")
	errLedgerUnavailable = errors.New("ledger unavailable: nothing was issued")
)

// Classify returns the Reason of an error a Core method returned, and whether its message is
// safe to show the caller. The message of a refusal is: it is built from the request and the
// policy, never from key material. An internal failure's is not (PublicMessage).
func Classify(err error) (Reason, bool) {
	switch {
	case errors.Is(err, issuance.ErrMalformedRequest), errors.Is(err, attestation.ErrMalformed):
		return ReasonMalformedRequest, true
	case errors.Is(err, attestation.ErrRefused):
		return ReasonAttestationFailed, true
	case errors.Is(err, issuance.ErrInvalidSignature):
		return ReasonInvalidSignature, true
	case errors.Is(err, issuance.ErrUnsupportedKey):
		return ReasonUnsupportedKey, true
	case errors.Is(err, issuance.ErrUnknownAnnotation):
		return ReasonUnknownAnnotation, true
	case errors.Is(err, issuance.ErrPolicyViolation):
		return ReasonPolicyViolation, true
	case errors.Is(err, lint.ErrLintFailed):
		return ReasonLintFailed, true
	case errors.Is(err, idempotency.ErrConflict):
		return ReasonIdempotencyConflict, true
	case errors.Is(err, errRateLimited):
		return ReasonRateLimited, true
	case errors.Is(err, errLedgerUnavailable) && errors.Is(err, ledger.ErrRestartRequired):
		return ReasonLedgerRestartRequired, false
	case errors.Is(err, errLedgerUnavailable), errors.Is(err, idempotency.ErrUnavailable):
		return ReasonLedgerUnavailable, false
	case errors.Is(err, keyerr.ErrUnavailable):
		return ReasonKeyUnavailable, false
	case errors.Is(err, errUnknownSigner):
		return ReasonUnknownSigner, true
	case errors.Is(err, errSignerNotAllowed):
		return ReasonSignerNotAllowed, true
	case errors.Is(err, errAdminRequired):
		return ReasonAdminRequired, true
	case errors.Is(err, authority.ErrRotationRefused):
		return ReasonRotationRefused, true
	case errors.Is(err, authority.ErrInvalidCA):
		return ReasonInvalidCA, true
	case errors.Is(err, ErrNotFound):
		return ReasonNotFound, true
	case errors.Is(err, ErrCheckpointPending):
		return ReasonCheckpointPending, true
	case errors.Is(err, ErrLedgerBehind):
		return ReasonLedgerBehind, true
	default:
		return ReasonInternal, false
	}
}

// PublicMessage is what a caller may see of err: the error itself when it is safe, a generic
// message otherwise (the core logs the detail).
func PublicMessage(err error) string {
	_, safe := Classify(err)
	switch {
	case safe:
		return err.Error()
	case errors.Is(err, errLedgerUnavailable) && errors.Is(err, ledger.ErrRestartRequired):
		return "the decision could not be recorded: the server's ledger needs an operator (see the server log and /readyz) and a restart; nothing was issued"
	case errors.Is(err, errLedgerUnavailable), errors.Is(err, idempotency.ErrUnavailable):
		return "the decision could not be recorded durably, so nothing was issued; retry later"
	case errors.Is(err, keyerr.ErrUnavailable):
		return "the signer's CA key cannot be used now (its HSM or TPM cannot be reached); nothing was issued; the server is re-opening the key, retry later"
	default:
		return "internal error; the server log has the details"
	}
}

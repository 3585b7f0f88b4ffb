package signerclient

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// Reasons used when the server's error carries no ErrorInfo.
const (
	ReasonSignerRefused     = "SignerRefused"
	ReasonSignerUnavailable = "SignerUnavailable"
)

// TransientError is a signing call that the caller did not send, or gave up before the
// server answered, for a cause that passes without the request changing, named by the caller:
// Classify returns its Reason and Message as a transient failure, so the object waits (with
// back-off, up to its give-up deadline) and is not failed. The watcher's ledger witness
// returns one while it pauses signing (LedgerWitnessAlarm). Unwrap gives the cause.
type TransientError struct {
	// Reason is a condition reason in TitleCase, e.g. LedgerWitnessAlarm.
	Reason string
	// Message says why, for people; it is the error's text.
	Message string
	// Err is the cause, if any.
	Err error
}

// Error returns the message.
func (e *TransientError) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *TransientError) Unwrap() error { return e.Err }

// GRPCStatus is Unavailable with the message, no details, for callers that read only a
// gRPC code (status.Code): the call was not answered by a server. Classify reads the
// TransientError itself.
func (e *TransientError) GRPCStatus() *status.Status { return status.New(codes.Unavailable, e.Message) }

// Classify tells what a SignCSR or SignPCR error means for the object:
//   - terminal is true iff retrying cannot help and the object should be marked Failed (a
//     CSR) or Denied (a PodCertificateRequest). A status carrying a signet.dev ErrorInfo
//     reason the contract knows is terminal iff signetv1.Final(reason), whatever its gRPC
//     code: so RATE_LIMITED and LEDGER_RESTART_REQUIRED (a server whose ledger needs an
//     operator; FailedPrecondition from older servers) are transient, the object staying
//     pending rather than failed for what its requester did not do, and so are
//     SIGNER_NOT_ALLOWED and UNKNOWN_SIGNER (the watcher's configuration against the
//     server's, which a roll-out fixes), and UNSUPPORTED_CLIENT_VERSION (the client's version
//     outside the server's skew policy, which an upgrade fixes). Any other status (no
//     ErrorInfo, another domain, a reason newer than the contract, UNSPECIFIED) is terminal
//     iff its code is InvalidArgument, FailedPrecondition or ResourceExhausted (gRPC's own
//     "message larger than max": the same request can never fit);
//   - reason is the ErrorInfo reason of domain signet.dev in TitleCase ("UNSUPPORTED_KEY" →
//     "UnsupportedKey"), fit for a Kubernetes condition reason; without one, SignerRefused
//     (terminal) or SignerUnavailable (transient);
//   - message is the status message, the server's safe explanation; for an error that is not
//     a gRPC status (or a status without message), the error text or the code.
//
// A call that failed because the TLS handshake failed over a certificate (a *HandshakeError
// in err) is transient, since a certificate renewed on disk or a server reconfigured cures
// it and the connection is retried with back-off, but it is named: reason is the failure's
// Reason (ClientNotConfigured, ClientCertificateExpired, ClientCAUntrusted, ServerCAUntrusted,
// ServerNameMismatch, ...) and message its message, which says what to do. A
// *TransientError in err is transient too, with its Reason and Message.
//
// Errors wrapping a gRPC status are unwrapped. A nil error is not classified: it returns
// empty strings and false.
func Classify(err error) (reason string, message string, terminal bool) {
	if err == nil {
		return "", "", false
	}
	var handshake *HandshakeError
	if errors.As(err, &handshake) {
		return handshake.Reason(), handshake.Error(), false
	}
	var transient *TransientError
	if errors.As(err, &transient) {
		return transient.Reason, transient.Error(), false
	}
	var carrier interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &carrier) || carrier.GRPCStatus() == nil {
		return ReasonSignerUnavailable, err.Error(), false
	}
	st := carrier.GRPCStatus()
	name := errorInfoReason(st)
	final, known := signetv1.FinalName(name)
	if known {
		terminal = final
	} else {
		terminal = finalCode(st.Code())
	}
	reason = signetv1.ConditionReason(name)
	if reason == "" {
		reason = ReasonSignerUnavailable
		if terminal {
			reason = ReasonSignerRefused
		}
	}
	message = st.Message()
	if message == "" {
		message = "signing server answered " + st.Code().String()
	}
	return reason, message, terminal
}

// finalCode is Classify's rule for a status without a reason the contract knows (an older
// server's, or gRPC's own): InvalidArgument and FailedPrecondition are final, and so is
// ResourceExhausted, which without RATE_LIMITED is grpc-go's "message larger than max".
// Every other code may succeed on retry.
func finalCode(c codes.Code) bool {
	switch c {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.ResourceExhausted:
		return true
	}
	return false
}

// errorInfoReason returns the reason of the first ErrorInfo detail of domain signet.dev in
// st whose TitleCase form is not empty, as sent, or "" if there is none.
func errorInfoReason(st *status.Status) string {
	for _, detail := range st.Details() {
		info, ok := detail.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != signetv1.ErrorDomain {
			continue
		}
		if signetv1.ConditionReason(info.GetReason()) != "" {
			return info.GetReason()
		}
	}
	return ""
}

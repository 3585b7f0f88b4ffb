package signerclient

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// notAboutTheRequest are the reasons whose gRPC code is otherwise final for the object
// (ResourceExhausted, FailedPrecondition) but which say nothing against the request: the
// server's rate limits, and a server whose ledger needs an operator (answered
// FailedPrecondition by servers before LEDGER_RESTART_REQUIRED became Unavailable; kept for
// them). Another try, later or on another server, can sign it.
var notAboutTheRequest = map[string]bool{
	signetv1.ConditionReason(signetv1.ReasonName(signetv1.ErrorReason_ERROR_REASON_RATE_LIMITED)):            true,
	signetv1.ConditionReason(signetv1.ReasonName(signetv1.ErrorReason_ERROR_REASON_LEDGER_RESTART_REQUIRED)): true,
}

// Reasons used when the server's error carries no ErrorInfo.
const (
	ReasonSignerRefused     = "SignerRefused"
	ReasonSignerUnavailable = "SignerUnavailable"
)

// Classify tells what a SignCSR or SignPCR error means for the object:
//   - terminal is true iff the gRPC code is InvalidArgument or FailedPrecondition, or
//     ResourceExhausted without the RATE_LIMITED reason (gRPC's own "message larger than
//     max": the same request can never fit): retrying cannot help and the object should be
//     marked Failed (a CSR) or Denied (a PodCertificateRequest). LEDGER_RESTART_REQUIRED, a
//     server whose ledger needs an operator, is transient whatever its code (Unavailable
//     now, FailedPrecondition from older servers): the request itself is fine, another server
//     or the same one restarted can sign it, so the object stays pending (with back-off and
//     its give-up deadline) rather than being failed for what its requester did not do;
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
// ServerNameMismatch, ...) and message its message, which says what to do.
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
	var carrier interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &carrier) || carrier.GRPCStatus() == nil {
		return ReasonSignerUnavailable, err.Error(), false
	}
	st := carrier.GRPCStatus()
	reason = errorInfoReason(st)
	switch st.Code() {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.ResourceExhausted:
		terminal = !notAboutTheRequest[reason]
	}
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

// errorInfoReason returns the TitleCase reason of the first ErrorInfo detail of domain
// signet.dev in st, or "" if there is none.
func errorInfoReason(st *status.Status) string {
	for _, detail := range st.Details() {
		info, ok := detail.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != signetv1.ErrorDomain {
			continue
		}
		if reason := signetv1.ConditionReason(info.GetReason()); reason != "" {
			return reason
		}
	}
	return ""
}

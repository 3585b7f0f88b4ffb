package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	rpccode "google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc/codes"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/wire"
)

// errorInfoType is the type URL of the ErrorInfo detail in an error body.
const errorInfoType = "type.googleapis.com/google.rpc.ErrorInfo"

// ErrorBody is the body of every non-2xx answer, the Google API error shape:
//
//	{"error":{"code":400,"message":"...","status":"FAILED_PRECONDITION",
//	  "details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"POLICY_VIOLATION","domain":"signet.dev"}]}}
type ErrorBody struct {
	Error Status `json:"error"`
}

// Status is the error: the HTTP status code, the message (the gRPC service's for the same
// refusal), the gRPC code's name, and the ErrorInfo with Signet's reason when there is one.
// Code and Status are always a canonical pair (google.rpc.Code's HTTP mapping).
type Status struct {
	Code    int         `json:"code"`
	Message string      `json:"message"`
	Status  string      `json:"status"`
	Details []ErrorInfo `json:"details,omitempty"`
}

// ErrorInfo is google.rpc.ErrorInfo as the JSON mapping of the Google APIs writes it.
type ErrorInfo struct {
	Type   string `json:"@type"`
	Reason string `json:"reason"`
	Domain string `json:"domain"`
}

// answer is one error answer. Its HTTP status is the canonical pair of its gRPC code
// (wire.HTTPStatus), never chosen apart from it.
type answer struct {
	code       codes.Code
	reason     string // Signet's ErrorInfo reason; "" for none
	message    string
	retryAfter int // seconds; 0 for no Retry-After
}

// httpStatus is a's HTTP status.
func (a answer) httpStatus() int { return wire.HTTPStatus(a.code) }

// codeName is the name of a gRPC code as the Google API error shape writes it
// (FAILED_PRECONDITION, not FailedPrecondition).
func codeName(c codes.Code) string {
	if name, ok := rpccode.Code_name[int32(c)]; ok {
		return name
	}
	return rpccode.Code_UNKNOWN.String()
}

// answerFor is the answer to an error of the decision core, or of the webhook's own checks
// (which wrap the core's sentinels): the gRPC code, reason and Retry-After of server/wire's
// table for its Reason, decision.PublicMessage as the message. A caller that went away gets
// CANCELLED (499) or DEADLINE_EXCEEDED (504), which no one reads.
func answerFor(err error) answer {
	switch {
	case errors.Is(err, context.Canceled):
		return answer{code: codes.Canceled, message: "the request was cancelled"}
	case errors.Is(err, context.DeadlineExceeded):
		return answer{code: codes.DeadlineExceeded, message: "the request's deadline passed"}
	}
	reason, _ := decision.Classify(err)
	a := wire.For(reason)
	return answer{code: a.Code, reason: signetv1.ReasonName(a.Reason), message: decision.PublicMessage(err), retryAfter: a.RetryAfter}
}

// unavailable is a 503 of the webhook itself (the server is stopping).
func unavailable(message string) answer {
	return answer{code: codes.Unavailable, message: message, retryAfter: wire.RetryAfterUnavailable}
}

// writeError writes a as the error body, with its canonical HTTP status.
func writeError(w http.ResponseWriter, a answer) {
	code := a.httpStatus()
	body := ErrorBody{Error: Status{Code: code, Message: a.message, Status: codeName(a.code)}}
	if a.reason != "" {
		body.Error.Details = []ErrorInfo{{Type: errorInfoType, Reason: a.reason, Domain: signetv1.ErrorDomain}}
	}
	if a.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(a.retryAfter))
	}
	writeJSON(w, code, body)
}

// writeJSON writes v as the JSON body with status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		// Only the types of this package are written; they always encode.
		code, data = http.StatusInternalServerError, []byte(`{"error":{"code":500,"message":"internal error","status":"INTERNAL"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(append(data, '\n'))
}

package adversarial

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// The ErrorInfo reasons the corpus expects, as signet.dev names them.
const (
	reasonMalformed      = "MALFORMED_REQUEST"
	reasonPolicy         = "POLICY_VIOLATION"
	reasonUnsupportedKey = "UNSUPPORTED_KEY"
	reasonBadSignature   = "INVALID_SIGNATURE"
	reasonLint           = "LINT_FAILED"
	reasonConflict       = "IDEMPOTENCY_CONFLICT"
	reasonRateLimited    = "RATE_LIMITED"
	reasonUnknownSigner  = "UNKNOWN_SIGNER"
	reasonNotAllowed     = "SIGNER_NOT_ALLOWED"
	reasonAnnotation     = "UNKNOWN_ANNOTATION"
	errorDomain          = "signet.dev"
)

// outcomeKind is what a call is expected to end in.
type outcomeKind int

const (
	// kindIssued: a new certificate, recorded once in the ledger.
	kindIssued outcomeKind = iota
	// kindReplayed: the certificate another case of the same client got, byte for byte; an
	// idempotent answer is not a new decision and is not recorded again.
	kindReplayed
	// kindRefused: a handler's refusal with an ErrorInfo, recorded once.
	kindRefused
	// kindRateLimited: RATE_LIMITED, flow control, not recorded.
	kindRateLimited
	// kindTransport: refused before Signet's handlers (TLS, gRPC decoding or size): a code
	// without ErrorInfo, not recorded.
	kindTransport
	// kindExplained: an Explain answer (never recorded).
	kindExplained
	// kindExplainRefused: an Explain call refused with an ErrorInfo (never recorded).
	kindExplainRefused
)

// want is the a priori expected outcome of a case.
type want struct {
	kind     outcomeKind
	code     codes.Code
	reason   string
	msg      string // a substring the status message (or Explain message) must contain
	replayOf string // kindReplayed: the case whose certificate must come back
	allowed  bool   // kindExplained: the answer's allowed
}

func issued() want { return want{kind: kindIssued} }

func replayOf(name string) want { return want{kind: kindReplayed, replayOf: name} }

func refused(code codes.Code, reason, msg string) want {
	return want{kind: kindRefused, code: code, reason: reason, msg: msg}
}

func malformed(msg string) want { return refused(codes.InvalidArgument, reasonMalformed, msg) }

func policy(msg string) want { return refused(codes.FailedPrecondition, reasonPolicy, msg) }

func unsupportedKey(msg string) want {
	return refused(codes.InvalidArgument, reasonUnsupportedKey, msg)
}

func badSignature() want { return refused(codes.InvalidArgument, reasonBadSignature, "") }

func notAllowed() want {
	return refused(codes.PermissionDenied, reasonNotAllowed, "may not use signer")
}

func unknownSigner() want { return refused(codes.NotFound, reasonUnknownSigner, "does not serve") }

func conflict() want { return refused(codes.FailedPrecondition, reasonConflict, "") }

func unknownAnnotation(msg string) want {
	return refused(codes.InvalidArgument, reasonAnnotation, msg)
}

func rateLimited() want {
	return want{kind: kindRateLimited, code: codes.ResourceExhausted, reason: reasonRateLimited}
}

func transport(code codes.Code, msg string) want {
	return want{kind: kindTransport, code: code, msg: msg}
}

func explained(allowed bool, reason string) want {
	return want{kind: kindExplained, allowed: allowed, reason: reason}
}

// explainRefused is an Explain call's refusal: w's code and reason, not recorded.
func explainRefused(w want) want {
	w.kind = kindExplainRefused
	return w
}

// recorded reports whether the outcome is one ledger record.
func (w want) recorded() bool { return w.kind == kindIssued || w.kind == kindRefused }

func (w want) String() string {
	switch w.kind {
	case kindIssued:
		return "issued"
	case kindReplayed:
		return "replay of " + w.replayOf
	case kindRateLimited:
		return "ResourceExhausted RATE_LIMITED"
	case kindTransport:
		return fmt.Sprintf("%s (no ErrorInfo) %q", w.code, w.msg)
	case kindExplained:
		if w.allowed {
			return "explained: allowed"
		}
		return "explained: refused " + w.reason
	case kindExplainRefused:
		return fmt.Sprintf("Explain refused: %s %s", w.code, w.reason)
	}
	s := fmt.Sprintf("%s %s", w.code, w.reason)
	if w.msg != "" {
		s += fmt.Sprintf(" %q", w.msg)
	}
	return s
}

// request is what a case sends: exactly one field is set.
type request struct {
	csr     *signetv1.SignCertificateSigningRequestRequest
	pod     *signetv1.SignPodCertificateRequestRequest
	explain *signetv1.SignCertificateSigningRequestRequest
	raw     *rawCall
}

// signer is the signer name the request is addressed to ("" when unknown).
func (r request) signer() string {
	switch {
	case r.csr != nil:
		return r.csr.GetSignerName()
	case r.pod != nil:
		return r.pod.GetSignerName()
	case r.explain != nil:
		return r.explain.GetSignerName()
	case r.raw != nil:
		return r.raw.signer
	}
	return ""
}

// objectUID is the request's object UID.
func (r request) objectUID() string {
	switch {
	case r.csr != nil:
		return r.csr.GetObject().GetUid()
	case r.pod != nil:
		return r.pod.GetObject().GetUid()
	case r.explain != nil:
		return r.explain.GetObject().GetUid()
	case r.raw != nil:
		return r.raw.uid
	}
	return ""
}

// corpusCase is one adversarial request and its expected outcome.
type corpusCase struct {
	name   string
	family string
	client string // a key of env.clients
	req    request
	want   want
	// group, when set, runs the case after the earlier cases of the same group, in table
	// order (idempotency and flood sequences); cases without a group run in parallel.
	group string
	// lifetime, when set, is the exact NotAfter − NotBefore the certificate must have.
	lifetime time.Duration
	// check, when set, is a further check of the answer, given the results so far.
	check func(got *result, results map[string]*result) error
}

// result is what a call returned.
type result struct {
	err       error
	chainPEM  string
	serial    string
	notBefore time.Time
	notAfter  time.Time
	explain   *signetv1.ExplainCertificateSigningRequestResponse
}

// describe summarizes a result for the mismatch table.
func (r *result) describe() string {
	switch {
	case r.err != nil:
		st := status.Convert(r.err)
		info := errorInfo(r.err)
		s := st.Code().String()
		if info != nil {
			s += " " + info.GetReason()
		} else {
			s += " (no ErrorInfo)"
		}
		return s + " " + clip(st.Message(), 160)
	case r.explain != nil:
		if r.explain.GetAllowed() {
			return "explained: allowed"
		}
		return "explained: refused " + r.explain.GetReason() + " " + clip(r.explain.GetMessage(), 120)
	}
	return "issued serial " + r.serial
}

// errorInfo returns the ErrorInfo detail of err, nil when it has none.
func errorInfo(err error) *errdetails.ErrorInfo {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// mismatch returns why got is not w, "" when it is.
func (w want) mismatch(got *result, results map[string]*result) string {
	switch w.kind {
	case kindIssued, kindReplayed:
		if got.err != nil || got.chainPEM == "" {
			return "want " + w.String()
		}
		if w.kind == kindReplayed {
			first := results[w.replayOf]
			if first == nil || first.err != nil {
				return "the replayed case " + w.replayOf + " issued nothing"
			}
			if first.chainPEM != got.chainPEM || first.serial != got.serial {
				return "not byte-identical to " + w.replayOf
			}
		}
		return ""
	case kindExplained:
		if got.err != nil || got.explain == nil {
			return "want " + w.String()
		}
		if got.explain.GetAllowed() != w.allowed || got.explain.GetReason() != w.reason {
			return "want " + w.String()
		}
		return ""
	}
	if got.err == nil {
		return "want " + w.String()
	}
	st := status.Convert(got.err)
	info := errorInfo(got.err)
	switch {
	case st.Code() != w.code:
		return "want " + w.String()
	case w.kind == kindTransport && info != nil:
		return "want no ErrorInfo, got " + info.GetReason()
	case w.kind != kindTransport && (info == nil || info.GetReason() != w.reason || info.GetDomain() != errorDomain):
		return "want " + w.String()
	case w.msg != "" && !strings.Contains(st.Message(), w.msg):
		return fmt.Sprintf("message lacks %q", w.msg)
	}
	return ""
}

// clip shortens s to at most n bytes for a table, escaping control characters.
func clip(s string, n int) string {
	s = strings.Trim(fmt.Sprintf("%q", s), `"`)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

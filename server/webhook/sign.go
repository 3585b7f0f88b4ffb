package webhook

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"

	"github.com/signet-pki/signet/objectrequest"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/signerapi"
)

// The object the webhook accepts and answers.
const (
	APIVersion = "certificates.k8s.io/v1"
	Kind       = "CertificateSigningRequest"
)

// errNotJSON is a request whose content type is not JSON (415).
var errNotJSON = errors.New("not JSON")

// sign answers one POST: the caller's identity from its verified certificate; the body, at
// most maxBytes (413 past it, before it is read whole); a certificates.k8s.io/v1
// CertificateSigningRequest in JSON; approved, neither denied nor failed, and not signed yet;
// then the core's decision on the request the watcher would forward for it. The answer is the
// object as posted with status.certificate set to the chain, or the error body.
//
// The webhook's own refusals (content type, size, JSON, kind, state) are recorded by the core
// (refuse), as its own are, with the client's identity: every refusal of a request that
// reached the handler is in the ledger.
func (s *Server) sign(w http.ResponseWriter, r *http.Request) {
	identity := clientIdentity(r)
	if identity == "" {
		// The handshake requires a verified, configured client certificate; this is only
		// reached if the server is wired without it.
		writeError(w, answer{code: codes.Unauthenticated, message: "no verified client certificate"})
		return
	}
	csr, rf := s.readCSR(w, r)
	if rf == nil {
		if err := checkState(csr); err != nil {
			rf = &refusal{err: err, req: CSRRequest(csr)}
		}
	}
	if rf != nil {
		s.refuse(w, r, identity, rf)
		return
	}
	issued, err := s.core.SignCSR(r.Context(), identity, CSRRequest(csr))
	if err != nil {
		// The core has logged and recorded the refusal.
		writeError(w, answerFor(err))
		return
	}
	csr.Status.Certificate = issued.Chain
	writeJSON(w, http.StatusOK, csr)
}

// refusal is one of the webhook's own refusals.
type refusal struct {
	// err is the refusal; it wraps one of the core's sentinels (issuance.ErrMalformedRequest,
	// issuance.ErrPolicyViolation), which give its reason.
	err error
	// req is what is known of the request: the decoded CSR's; the zero CSR when the body
	// could not be decoded.
	req decision.CSR
	// detail is what the record adds about a body that could not be decoded (its size); it is
	// not answered.
	detail string
	// unread: the body could not be read (the client went away, or broke the stream's
	// framing): a transport failure, not a request that was refused; logged, not recorded.
	unread bool
}

// refuse answers one of the webhook's own refusals, recorded by the core
// (decision.Core.RefuseCSR), so that it is recorded, counted and logged as a refusal of the
// core's is: the client's rate limit comes first and, when its bucket is empty, the answer is
// the rate limit's 429 (with Retry-After) and nothing is recorded; otherwise the ledger holds
// one refused record with the client's identity, the reason, the message and what is known of
// the object, and the answer is the refusal's, the same as before it was recorded.
//
// Every request that reached this handler is recorded, a body that cannot be decoded (not JSON,
// over the size limit, another content type, kind or apiVersion) included, with what is known
// of it (the client, the reason, its size) and without the object it may have named, as gRPC
// records a signing message that cannot be decoded (signerapi.Undecodable). Recording it is
// what the design's rule asks of a refusal (recorded, with a reason a person can act on), and it
// costs a client no more of the ledger than an empty gRPC request does, its rate-limit token.
// Only a body that could not be read at all (rf.unread) is merely logged: no request arrived, so
// there is no decision to record. Requests for another path or method (404, 501) are not
// signing requests and are not recorded either; the webhook's metrics count every answer.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, identity string, rf *refusal) {
	ans := answerFor(rf.err)
	if rf.unread {
		s.log.Info("webhook request refused", logKeyClient, identity, logKeyStatus, ans.httpStatus(), logKeyReason, ans.reason,
			logKeyError, rf.err.Error())
		writeError(w, ans)
		return
	}
	if err := s.core.RefuseCSR(r.Context(), identity, rf.req, rf.err, rf.detail); err != rf.err {
		// Past the client's rate limit: nothing was recorded, and the answer says when to retry.
		ans = answerFor(err)
	}
	writeError(w, ans)
}

// clientIdentity names the caller from its verified certificate (access.Identity), or "".
func clientIdentity(r *http.Request) string {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return ""
	}
	return access.Identity(r.TLS.VerifiedChains[0][0])
}

// readCSR reads and decodes the body, or returns the refusal. A body over maxBytes (by its
// Content-Length, or once that many bytes have been read) or whose content type is not JSON
// is refused, as every other body that cannot be decoded: the refusals wrap
// issuance.ErrMalformedRequest (400, INVALID_ARGUMENT) and their messages say which.
func (s *Server) readCSR(w http.ResponseWriter, r *http.Request) (*certificatesv1.CertificateSigningRequest, *refusal) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			err := fmt.Errorf("%w: %w: content type %s; the webhook accepts application/json", issuance.ErrMalformedRequest, errNotJSON, quote(ct))
			rf := &refusal{err: err}
			if r.ContentLength >= 0 {
				rf.detail = fmt.Sprintf("Content-Length %d", r.ContentLength)
			}
			return nil, rf
		}
	}
	if r.ContentLength > s.maxBytes {
		err := s.tooLarge(fmt.Sprintf("%d bytes, more", r.ContentLength))
		return nil, &refusal{err: err}
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, s.maxBytes))
	body := buf.Bytes()
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		err := s.tooLarge("more")
		return nil, &refusal{err: err}
	case err != nil:
		return nil, &refusal{err: fmt.Errorf("%w: reading the body: %w", issuance.ErrMalformedRequest, err), unread: true}
	}
	csr := &certificatesv1.CertificateSigningRequest{}
	if err := decodeCSR(body, csr); err != nil {
		// What did decode is not trusted: it may be another kind's, or half an object.
		return nil, &refusal{err: err, detail: fmt.Sprintf("body of %d bytes", len(body))}
	}
	return csr, nil
}

// tooLarge is the refusal of a body over the limit; size says by how much, in words that
// precede "than the limit" ("more", "2048 bytes, more").
func (s *Server) tooLarge(size string) error {
	return fmt.Errorf("%w: the body is %s than the %d bytes this webhook accepts (webhook.maxRequestBytes)", issuance.ErrMalformedRequest, size, s.maxBytes)
}

// decodeCSR decodes data into csr as Kubernetes decodes JSON (field names case-sensitive,
// integers kept), refusing duplicate fields and anything but one certificates.k8s.io/v1
// CertificateSigningRequest. Unknown fields are ignored, as an older apiserver ignores the
// fields of a newer client. Errors wrap issuance.ErrMalformedRequest.
func decodeCSR(data []byte, csr *certificatesv1.CertificateSigningRequest) error {
	strict, err := sigsjson.UnmarshalStrict(data, csr, sigsjson.DisallowDuplicateFields)
	switch {
	case err != nil:
		return fmt.Errorf("%w: the body is not a JSON CertificateSigningRequest: %w", issuance.ErrMalformedRequest, err)
	case len(strict) > 0:
		return fmt.Errorf("%w: the body is not a JSON CertificateSigningRequest: %w", issuance.ErrMalformedRequest, strict[0])
	case csr.APIVersion != APIVersion || csr.Kind != Kind:
		return fmt.Errorf("%w: the body is apiVersion %s, kind %s; the webhook accepts apiVersion %q, kind %q",
			issuance.ErrMalformedRequest, quote(csr.APIVersion), quote(csr.Kind), APIVersion, Kind)
	}
	return nil
}

// checkState refuses, with a POLICY_VIOLATION (400, FAILED_PRECONDITION), a CSR that the
// watcher would skip: not approved, denied, failed, or already signed. A condition counts
// when its status is True or unset, as for the watcher.
func checkState(csr *certificatesv1.CertificateSigningRequest) error {
	var problem string
	switch {
	case !hasCondition(csr, certificatesv1.CertificateApproved):
		problem = "is not approved"
	case hasCondition(csr, certificatesv1.CertificateDenied):
		problem = "is denied"
	case hasCondition(csr, certificatesv1.CertificateFailed):
		problem = "has failed"
	case len(csr.Status.Certificate) > 0:
		problem = "already has a certificate"
	default:
		return nil
	}
	return fmt.Errorf("%w: CertificateSigningRequest %s %s; Signet signs only a CSR with the Approved condition, without Denied or Failed, and no status.certificate",
		issuance.ErrPolicyViolation, quote(csr.Name), problem)
}

// shownBytes bounds what messages and log lines show of a caller's string: an object name
// (253 bytes in Kubernetes) fits.
const shownBytes = 256

// short is s cut to shownBytes (on a rune boundary), marked with "…" when cut.
func short(s string) string {
	if len(s) <= shownBytes {
		return s
	}
	cut := shownBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// quote is short(s), quoted with Go escapes (no control character reaches a message).
func quote(s string) string { return strconv.Quote(short(s)) }

// hasCondition reports whether csr has a condition of type t whose status is True or unset.
func hasCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == t && (c.Status == corev1.ConditionTrue || c.Status == "") {
			return true
		}
	}
	return false
}

// CSRRequest is the core's request for csr: the request the watcher forwards for it
// (objectrequest.CSR: spec and requester fields, object UID and name), converted as the
// gRPC service converts it.
func CSRRequest(csr *certificatesv1.CertificateSigningRequest) decision.CSR {
	return signerapi.CSRFromProto(objectrequest.CSR(csr))
}

package wire_test

import (
	"testing"

	rpccode "google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc/codes"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/webhook/webhooktest"
	"github.com/signet-pki/signet/server/wire"
)

// TestEveryReasonIsAnswered: each of the core's reasons has its own answer, whose ErrorInfo
// reason is the same name, and every signet.v1 reason but UNSPECIFIED is some reason's.
func TestEveryReasonIsAnswered(t *testing.T) {
	t.Parallel()
	used := map[signetv1.ErrorReason]bool{}
	for _, r := range decision.Reasons {
		a := wire.For(r)
		if got := signetv1.ReasonName(a.Reason); got != string(r) {
			t.Errorf("%s is answered with ErrorInfo reason %s", r, got)
		}
		if a.HTTPStatus < 400 || a.HTTPStatus > 599 {
			t.Errorf("%s: HTTP status %d is not an error", r, a.HTTPStatus)
		}
		// A Retry-After on every answer a retry may get past (429, 500, 503), on no other.
		retryable := a.HTTPStatus == 429 || a.HTTPStatus == 500 || a.HTTPStatus == 503
		if (a.RetryAfter > 0) != retryable {
			t.Errorf("%s: HTTP %d with Retry-After %d", r, a.HTTPStatus, a.RetryAfter)
		}
		used[a.Reason] = true
	}
	for v := range signetv1.ErrorReason_name {
		if r := signetv1.ErrorReason(v); r != signetv1.ErrorReason_ERROR_REASON_UNSPECIFIED && !used[r] {
			t.Errorf("signet.v1 reason %s is no decision reason's", r)
		}
	}
	if got := wire.For("NO_SUCH_REASON").Reason; got != signetv1.ErrorReason_ERROR_REASON_INTERNAL {
		t.Errorf("an unknown reason is answered %s, want INTERNAL", got)
	}
}

// TestHTTPStatusIsTheCanonicalPair: the webhook's HTTP status of every reason is the one the
// canonical google.rpc.Code mapping gives its gRPC code (webhooktest.CanonicalHTTPStatus, written
// out from code.proto's documentation, so that a change of the library's table is seen too).
func TestHTTPStatusIsTheCanonicalPair(t *testing.T) {
	t.Parallel()
	canonical := map[codes.Code]int{}
	for name, status := range webhooktest.CanonicalHTTPStatus {
		v, ok := rpccode.Code_value[name]
		if !ok {
			t.Fatalf("webhooktest names %s, no google.rpc.Code", name)
		}
		canonical[codes.Code(v)] = status
	}
	for code, want := range canonical {
		if got := wire.HTTPStatus(code); got != want {
			t.Errorf("HTTPStatus(%s) = %d, want %d", code, got, want)
		}
	}
	for _, r := range decision.Reasons {
		if a := wire.For(r); a.HTTPStatus != canonical[a.Code] {
			t.Errorf("%s: HTTP %d with %s, whose canonical status is %d", r, a.HTTPStatus, a.Code, canonical[a.Code])
		}
	}
}

// TestCodeAgreesWithFinal: every reason's gRPC code and Retry-After say what
// signetv1.Final(reason) says, so that a client that reads only the code (an older one, or
// one of another language) retries exactly what a client reading the reason retries: a final
// reason is never answered with a code a client retries, a transient one never with a code a
// client gives up on, and only a transient one carries Retry-After.
func TestCodeAgreesWithFinal(t *testing.T) {
	t.Parallel()
	finalCodes := map[codes.Code]bool{
		codes.InvalidArgument: true, codes.FailedPrecondition: true, codes.NotFound: true, codes.PermissionDenied: true,
	}
	transientCodes := map[codes.Code]bool{
		codes.ResourceExhausted: true, codes.Unavailable: true, codes.Internal: true,
	}
	// The reasons about the caller's configuration (not final: a configuration change cures
	// them) keep the codes that say so, without Retry-After: nothing but that change helps.
	configCodes := map[codes.Code]bool{codes.NotFound: true, codes.PermissionDenied: true}
	for _, r := range decision.Reasons {
		a := wire.For(r)
		final := signetv1.Final(a.Reason)
		if _, known := signetv1.FinalName(signetv1.ReasonName(a.Reason)); !known {
			t.Errorf("%s: ErrorInfo reason %s has no finality in the contract", r, a.Reason)
		}
		switch {
		case final && !finalCodes[a.Code]:
			t.Errorf("%s is final but answered %s, a code clients retry", r, a.Code)
		case !final && !transientCodes[a.Code] && !configCodes[a.Code]:
			t.Errorf("%s is transient but answered %s, a code clients give up on", r, a.Code)
		}
		if want := !final && transientCodes[a.Code]; (a.RetryAfter > 0) != want {
			t.Errorf("%s: final %v, code %s, with Retry-After %d", r, final, a.Code, a.RetryAfter)
		}
	}
	if a := wire.For("NO_SUCH_REASON"); signetv1.Final(a.Reason) || !transientCodes[a.Code] {
		t.Errorf("an unknown reason is answered %s %s, want a transient answer", a.Code, a.Reason)
	}
}

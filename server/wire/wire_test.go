package wire_test

import (
	"testing"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/decision"
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
		// A Retry-After only on what a retry of the same server may get past (429, 503), and
		// on every such answer but the one that needs an operator.
		retryable := a.HTTPStatus == 429 || (a.HTTPStatus == 503 && r != decision.ReasonLedgerRestartRequired)
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

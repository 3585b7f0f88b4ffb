package signerclient

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// statusError returns a real gRPC status error with an optional ErrorInfo detail.
func statusError(t *testing.T, code codes.Code, msg string, info *errdetails.ErrorInfo) error {
	t.Helper()
	st := status.New(code, msg)
	if info != nil {
		var err error
		if st, err = st.WithDetails(info); err != nil {
			t.Fatalf("adding details: %v", err)
		}
	}
	return st.Err()
}

func TestClassify(t *testing.T) {
	info := func(reason, domain string) *errdetails.ErrorInfo {
		return &errdetails.ErrorInfo{Reason: reason, Domain: domain}
	}
	tests := []struct {
		name         string
		code         codes.Code
		msg          string
		info         *errdetails.ErrorInfo
		wrap         bool
		wantReason   string
		wantMessage  string
		wantTerminal bool
	}{
		{"invalid argument with reason", codes.InvalidArgument, "RSA keys below 3072 bits are not accepted",
			info("UNSUPPORTED_KEY", signetv1.ErrorDomain), false, "UnsupportedKey", "RSA keys below 3072 bits are not accepted", true},
		{"failed precondition with reason", codes.FailedPrecondition, "signer example.com/x may not be used",
			info("POLICY_VIOLATION", signetv1.ErrorDomain), false, "PolicyViolation", "signer example.com/x may not be used", true},
		{"wrapped terminal error", codes.InvalidArgument, "requester is not in the allowed groups",
			info("POLICY_VIOLATION", signetv1.ErrorDomain), true, "PolicyViolation", "requester is not in the allowed groups", true},
		{"prefixed enum name", codes.InvalidArgument, "bad PEM",
			info("ERROR_REASON_MALFORMED_REQUEST", signetv1.ErrorDomain), false, "MalformedRequest", "bad PEM", true},
		{"terminal without error info", codes.InvalidArgument, "no",
			nil, false, ReasonSignerRefused, "no", true},
		{"terminal with foreign domain", codes.FailedPrecondition, "no",
			info("SOMETHING_ELSE", "example.com"), false, ReasonSignerRefused, "no", true},
		{"unavailable", codes.Unavailable, "connection refused",
			nil, false, ReasonSignerUnavailable, "connection refused", false},
		{"internal with reason", codes.Internal, "ledger write failed",
			info("INTERNAL", signetv1.ErrorDomain), false, "Internal", "ledger write failed", false},
		{"deadline exceeded", codes.DeadlineExceeded, "context deadline exceeded",
			nil, false, ReasonSignerUnavailable, "context deadline exceeded", false},
		{"permission denied is transient", codes.PermissionDenied, "unknown client",
			nil, false, ReasonSignerUnavailable, "unknown client", false},
		{"message over the server's receive limit is final", codes.ResourceExhausted, "grpc: received message larger than max (5242880 vs. 4194304)",
			nil, false, ReasonSignerRefused, "grpc: received message larger than max (5242880 vs. 4194304)", true},
		{"rate limited is transient", codes.ResourceExhausted, "the client rate limit is exhausted; retry later",
			info("RATE_LIMITED", signetv1.ErrorDomain), false, "RateLimited", "the client rate limit is exhausted; retry later", false},
		{"resource exhausted with another reason is final", codes.ResourceExhausted, "too big",
			info("MALFORMED_REQUEST", signetv1.ErrorDomain), false, "MalformedRequest", "too big", true},
		{"ledger restart required is transient", codes.Unavailable, "the server's ledger needs an operator",
			info("LEDGER_RESTART_REQUIRED", signetv1.ErrorDomain), false, "LedgerRestartRequired", "the server's ledger needs an operator", false},
		{"ledger restart required from an older server (FailedPrecondition) is transient", codes.FailedPrecondition, "the server's ledger needs an operator",
			info("LEDGER_RESTART_REQUIRED", signetv1.ErrorDomain), false, "LedgerRestartRequired", "the server's ledger needs an operator", false},
		{"policy violation is final", codes.FailedPrecondition, "group system:masters is forbidden",
			info("POLICY_VIOLATION", signetv1.ErrorDomain), false, "PolicyViolation", "group system:masters is forbidden", true},
		{"empty message", codes.InvalidArgument, "",
			nil, false, ReasonSignerRefused, "signing server answered InvalidArgument", true},
		{"signer not allowed (a configuration, not the request) is transient", codes.PermissionDenied, "client watcher-1 may not use example.com/x",
			info("SIGNER_NOT_ALLOWED", signetv1.ErrorDomain), false, "SignerNotAllowed", "client watcher-1 may not use example.com/x", false},
		{"unknown signer (a configuration, not the request) is transient", codes.NotFound, "the server does not serve example.com/x",
			info("UNKNOWN_SIGNER", signetv1.ErrorDomain), false, "UnknownSigner", "the server does not serve example.com/x", false},
		{"a transient reason under a final code is transient", codes.FailedPrecondition, "the CA key cannot be used now",
			info("KEY_UNAVAILABLE", signetv1.ErrorDomain), false, "KeyUnavailable", "the CA key cannot be used now", false},
		{"a reason newer than the contract is judged by the code (final)", codes.FailedPrecondition, "no",
			info("SOME_FUTURE_REASON", signetv1.ErrorDomain), false, "SomeFutureReason", "no", true},
		{"a reason newer than the contract is judged by the code (transient)", codes.Unavailable, "later",
			info("SOME_FUTURE_REASON", signetv1.ErrorDomain), false, "SomeFutureReason", "later", false},
		{"UNSPECIFIED is judged by the code", codes.InvalidArgument, "no",
			info("UNSPECIFIED", signetv1.ErrorDomain), false, "Unspecified", "no", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := statusError(t, tt.code, tt.msg, tt.info)
			if tt.wrap {
				err = fmt.Errorf("signing CSR csr-1: %w", err)
			}
			reason, message, terminal := Classify(err)
			if reason != tt.wantReason || message != tt.wantMessage || terminal != tt.wantTerminal {
				t.Errorf("Classify() = (%q, %q, %v), want (%q, %q, %v)",
					reason, message, terminal, tt.wantReason, tt.wantMessage, tt.wantTerminal)
			}
		})
	}
}

func TestClassifyNonStatusErrors(t *testing.T) {
	reason, message, terminal := Classify(fmt.Errorf("signing CSR x: %w", context.Canceled))
	if reason != ReasonSignerUnavailable || terminal || message != "signing CSR x: context canceled" {
		t.Errorf("Classify(plain error) = (%q, %q, %v)", reason, message, terminal)
	}
	reason, message, terminal = Classify(errors.Join(errEmptyChain))
	if reason != ReasonSignerUnavailable || terminal || message == "" {
		t.Errorf("Classify(empty chain) = (%q, %q, %v)", reason, message, terminal)
	}
	if reason, message, terminal := Classify(nil); reason != "" || message != "" || terminal {
		t.Errorf("Classify(nil) = (%q, %q, %v)", reason, message, terminal)
	}
}

// TestClassifyFollowsFinal: for every reason of the contract, a status carrying it is
// terminal iff signetv1.Final says so, whichever code it comes with.
func TestClassifyFollowsFinal(t *testing.T) {
	for v := range signetv1.ErrorReason_name {
		r := signetv1.ErrorReason(v)
		if r == signetv1.ErrorReason_ERROR_REASON_UNSPECIFIED {
			continue
		}
		for _, code := range []codes.Code{codes.InvalidArgument, codes.FailedPrecondition, codes.Unavailable, codes.PermissionDenied} {
			err := statusError(t, code, "m", &errdetails.ErrorInfo{Reason: signetv1.ReasonName(r), Domain: signetv1.ErrorDomain})
			reason, _, terminal := Classify(err)
			if terminal != signetv1.Final(r) || reason != signetv1.ConditionReason(signetv1.ReasonName(r)) {
				t.Errorf("Classify(%s, %s) = %q, terminal %v; want %q, terminal %v",
					code, r, reason, terminal, signetv1.ConditionReason(signetv1.ReasonName(r)), signetv1.Final(r))
			}
		}
	}
}

// TestClassifyTransientError: a *TransientError, wrapped or not, is transient with its own
// reason and message, reads as Unavailable to status.Code, and unwraps to its cause.
func TestClassifyTransientError(t *testing.T) {
	cause := errors.New("the ledger shrank")
	err := fmt.Errorf("signing CSR csr-1: %w", &TransientError{
		Reason: "LedgerWitnessAlarm", Message: "signing paused by the ledger witness: the ledger shrank", Err: cause})
	reason, message, terminal := Classify(err)
	if reason != "LedgerWitnessAlarm" || message != "signing paused by the ledger witness: the ledger shrank" || terminal {
		t.Errorf("Classify(TransientError) = (%q, %q, %v)", reason, message, terminal)
	}
	if !errors.Is(err, cause) {
		t.Error("a TransientError does not unwrap to its cause")
	}
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || len(st.Details()) != 0 {
		t.Errorf("status of a TransientError = %s with %v, want Unavailable without details", st.Code(), st.Details())
	}
}

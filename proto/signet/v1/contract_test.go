package signetv1_test

import (
	"fmt"
	"testing"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

func TestReasonName(t *testing.T) {
	t.Parallel()
	for r, want := range map[signetv1.ErrorReason]string{
		signetv1.ErrorReason_ERROR_REASON_POLICY_VIOLATION:   "POLICY_VIOLATION",
		signetv1.ErrorReason_ERROR_REASON_SIGNER_NOT_ALLOWED: "SIGNER_NOT_ALLOWED",
		signetv1.ErrorReason_ERROR_REASON_UNSPECIFIED:        "UNSPECIFIED",
		signetv1.ErrorReason(99):                             fmt.Sprint(signetv1.ErrorReason(99)),
	} {
		if got := signetv1.ReasonName(r); got != want {
			t.Errorf("ReasonName(%d) = %q, want %q", r, got, want)
		}
	}
}

// TestParseReason: every reason's name parses back to it, with or without the prefix.
func TestParseReason(t *testing.T) {
	t.Parallel()
	for v := range signetv1.ErrorReason_name {
		r := signetv1.ErrorReason(v)
		for _, name := range []string{signetv1.ReasonName(r), r.String()} {
			if got, ok := signetv1.ParseReason(name); !ok || got != r {
				t.Errorf("ParseReason(%q) = %v, %v; want %v", name, got, ok, r)
			}
		}
	}
	if _, ok := signetv1.ParseReason("NO_SUCH_REASON"); ok {
		t.Error("ParseReason accepted an unknown reason")
	}
}

func TestConditionReason(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"UNSUPPORTED_KEY":                "UnsupportedKey",
		"ERROR_REASON_MALFORMED_REQUEST": "MalformedRequest",
		"INTERNAL":                       "Internal",
		"SIGNER_NOT_ALLOWED":             "SignerNotAllowed",
		"already_lower":                  "AlreadyLower",
		"__DOUBLE__UNDER__":              "DoubleUnder",
		"WITH-DASH.DOT":                  "WithDashDot",
		"X509_NAME":                      "X509Name",
		"":                               "",
	} {
		if got := signetv1.ConditionReason(in); got != want {
			t.Errorf("ConditionReason(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestHealthServiceIsTheServiceName: the health service name clients watch is the service's
// own full name.
func TestHealthServiceIsTheServiceName(t *testing.T) {
	t.Parallel()
	if signetv1.HealthService != signetv1.SignerService_ServiceDesc.ServiceName {
		t.Errorf("HealthService = %q, want %q", signetv1.HealthService, signetv1.SignerService_ServiceDesc.ServiceName)
	}
}

// TestCanonicalBundle: each certificate once, sorted by DER, PEM; the hash is of that text,
// whatever order or repetition the certificates came in.
func TestCanonicalBundle(t *testing.T) {
	t.Parallel()
	a, b := []byte{0x30, 0x01, 0x02}, []byte{0x30, 0x01, 0x01}
	got := signetv1.CanonicalBundle([][]byte{a, b, a})
	want := "-----BEGIN CERTIFICATE-----\nMAEB\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\nMAEC\n-----END CERTIFICATE-----\n"
	if got != want {
		t.Fatalf("CanonicalBundle = %q, want %q", got, want)
	}
	if h := signetv1.BundleHash(signetv1.CanonicalBundle([][]byte{b, a})); h != signetv1.BundleHash(got) || len(h) != 64 {
		t.Fatalf("BundleHash depends on order, or is not hex SHA-256: %q", h)
	}
	if signetv1.BundleHash("") != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatal("BundleHash is not the SHA-256 of the text")
	}
}

// TestFinalDecidesEveryReason: every ErrorReason has a deliberate finality, the one written
// here; a new enum value without one (in the contract's table and here) fails.
func TestFinalDecidesEveryReason(t *testing.T) {
	t.Parallel()
	want := map[string]bool{
		"UNSPECIFIED":             false,
		"MALFORMED_REQUEST":       true,
		"INVALID_SIGNATURE":       true,
		"UNSUPPORTED_KEY":         true,
		"POLICY_VIOLATION":        true,
		"UNKNOWN_SIGNER":          false, // the caller's configuration, not the request
		"SIGNER_NOT_ALLOWED":      false,
		"INTERNAL":                false,
		"RATE_LIMITED":            false,
		"IDEMPOTENCY_CONFLICT":    true,
		"LINT_FAILED":             true,
		"LEDGER_UNAVAILABLE":      false,
		"UNKNOWN_ANNOTATION":      true,
		"KEY_UNAVAILABLE":         false,
		"ADMIN_REQUIRED":          false,
		"ROTATION_REFUSED":        true,
		"INVALID_CA":              true,
		"LEDGER_RESTART_REQUIRED": false,
		"NOT_FOUND":               true,
		"CHECKPOINT_PENDING":      false,
		"LEDGER_BEHIND":           true,
		"ATTESTATION_FAILED":      true,
	}
	for v := range signetv1.ErrorReason_name {
		r := signetv1.ErrorReason(v)
		name := signetv1.ReasonName(r)
		wantFinal, decided := want[name]
		if !decided {
			t.Errorf("%s: no finality decided in this test; decide it in contract.go's table and here", r)
			continue
		}
		if got := signetv1.Final(r); got != wantFinal {
			t.Errorf("Final(%s) = %v, want %v", r, got, wantFinal)
		}
		wantKnown := r != signetv1.ErrorReason_ERROR_REASON_UNSPECIFIED
		for _, n := range []string{name, r.String()} {
			if final, known := signetv1.FinalName(n); final != wantFinal || known != wantKnown {
				t.Errorf("FinalName(%q) = %v, %v; want %v, %v (a reason without a decision in contract.go's table is unknown)",
					n, final, known, wantFinal, wantKnown)
			}
		}
	}
	if len(want) != len(signetv1.ErrorReason_name) {
		t.Errorf("this test decides %d reasons, signet.v1 has %d", len(want), len(signetv1.ErrorReason_name))
	}
}

// TestFinalOfUnknownReasons: a value or name that is no ErrorReason is not final, and a
// name is unknown, so that a client judges it by the gRPC code.
func TestFinalOfUnknownReasons(t *testing.T) {
	t.Parallel()
	if signetv1.Final(signetv1.ErrorReason(99)) {
		t.Error("Final(99) = true, want false")
	}
	for _, name := range []string{"", "NO_SUCH_REASON", "LEDGER_WITNESS_ALARM", "ERROR_REASON_"} {
		if final, known := signetv1.FinalName(name); final || known {
			t.Errorf("FinalName(%q) = %v, %v; want false, false", name, final, known)
		}
	}
}

// TestUnsupportedClientVersionIsNotFinal: the version refusal, the one reason that is no
// ErrorReason, is known and not final, so a forwarder keeps its objects waiting for the
// roll-out that cures it; its TitleCase form is a condition reason.
func TestUnsupportedClientVersionIsNotFinal(t *testing.T) {
	t.Parallel()
	for _, name := range []string{signetv1.ReasonUnsupportedClientVersion, "ERROR_REASON_" + signetv1.ReasonUnsupportedClientVersion} {
		if final, known := signetv1.FinalName(name); final || !known {
			t.Errorf("FinalName(%q) = %v, %v; want false, true", name, final, known)
		}
	}
	if _, ok := signetv1.ParseReason(signetv1.ReasonUnsupportedClientVersion); ok {
		t.Errorf("%s is an ErrorReason: then the decision core's table must answer it (server/wire)", signetv1.ReasonUnsupportedClientVersion)
	}
	if got := signetv1.ConditionReason(signetv1.ReasonUnsupportedClientVersion); got != "UnsupportedClientVersion" {
		t.Errorf("ConditionReason = %q", got)
	}
}

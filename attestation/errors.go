package attestation

import (
	"errors"
	"fmt"
)

// ErrMalformed wraps every refusal of evidence that does not parse: a missing or unexpected
// PEM block, data that is not the JSON of a supported version, a TPM structure that does not
// decode.
var ErrMalformed = errors.New("malformed attestation")

// ErrRefused wraps every refusal of evidence that parses but fails a check (see Failure).
var ErrRefused = errors.New("attestation refused")

// Check names one check of Verify, CheckKeys or a server's stateful checks. Refusals carry
// the check that failed, so that a test, a log or an operator can tell them apart.
type Check string

// The checks, in the order Verify runs them.
const (
	CheckFormat       Check = "format"
	CheckVersion      Check = "version"
	CheckEK           Check = "endorsement key"
	CheckEKTrust      Check = "endorsement key trust"
	CheckAK           Check = "attestation key"
	CheckTicket       Check = "ticket"
	CheckTicketExpiry Check = "ticket expiry"
	CheckTicketNode   Check = "ticket node"
	CheckTicketKeys   Check = "ticket keys"
	CheckKey          Check = "binding key"
	CheckCertify      Check = "certification"
	CheckNonce        Check = "nonce"
	CheckCertifySig   Check = "certification signature"
	CheckBinding      Check = "binding signature"
	CheckBootState    Check = "boot state"
	CheckProviderID   Check = "provider ID"
	// The checks a server makes with its state, after Verify.
	CheckChallenge  Check = "challenge"
	CheckTicketUsed Check = "ticket single use"
	CheckEKBinding  Check = "endorsement key binding"
)

// Failure is a refusal: the check that failed and what was found. It wraps ErrRefused, or
// ErrMalformed for CheckFormat and CheckVersion.
type Failure struct {
	Check  Check
	Detail string
}

// Error implements error: "attestation refused: <check>: <detail>".
func (f *Failure) Error() string {
	return fmt.Sprintf("%v: %s: %s", f.sentinel(), f.Check, f.Detail)
}

// Unwrap returns ErrMalformed or ErrRefused.
func (f *Failure) Unwrap() error { return f.sentinel() }

func (f *Failure) sentinel() error {
	if f.Check == CheckFormat || f.Check == CheckVersion {
		return ErrMalformed
	}
	return ErrRefused
}

// refuse returns a Failure of check with a formatted detail.
func refuse(check Check, format string, args ...any) error {
	return &Failure{Check: check, Detail: fmt.Sprintf(format, args...)}
}

// FailedCheck returns the check err failed, "" when err is not a Failure.
func FailedCheck(err error) Check {
	var f *Failure
	if errors.As(err, &f) {
		return f.Check
	}
	return ""
}

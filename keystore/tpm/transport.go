package tpm

import (
	"errors"
	"fmt"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/signet-pki/signet/internal/tpmconn"
	"github.com/signet-pki/signet/keystore/keyerr"
)

// openTransport opens the TPM loc names: opts.Transport when set, else the socket or device
// (internal/tpmconn). Failing to reach the TPM wraps keyerr.ErrUnavailable (swtpm may be
// restarting, the device busy); a path that is not a socket or device, or cannot be accessed,
// does not.
func openTransport(loc location, opts Options) (transport.TPMCloser, error) {
	if opts.Transport != nil {
		t, err := opts.Transport()
		if err != nil {
			return nil, fmt.Errorf("opening the TPM: %w: %w", keyerr.ErrUnavailable, err)
		}
		return t, nil
	}
	var t transport.TPMCloser
	var err error
	if loc.socket != "" {
		t, err = tpmconn.OpenSocket(loc.socket)
	} else {
		t, err = tpmconn.OpenDevice(loc.device)
	}
	if errors.Is(err, tpmconn.ErrUnavailable) {
		return nil, unreachable{err}
	}
	return t, err
}

// unreachable is an error of tpmconn's that wraps tpmconn.ErrUnavailable, made a
// keyerr.ErrUnavailable too with its message unchanged.
type unreachable struct{ error }

// Is makes an unreachable a keyerr.ErrUnavailable.
func (e unreachable) Is(target error) bool { return target == keyerr.ErrUnavailable }

// Unwrap returns tpmconn's error, which wraps tpmconn.ErrUnavailable and the cause.
func (e unreachable) Unwrap() error { return e.error }

// unavailableRCs are the TPM response codes that say the TPM, not the request, is at fault
// for now: busy, self-testing, not started after a reset, or in failure mode.
var unavailableRCs = []tpm2.TPMRC{
	tpm2.TPMRCRetry, tpm2.TPMRCYielded, tpm2.TPMRCTesting, tpm2.TPMRCCanceled,
	tpm2.TPMRCNVRate, tpm2.TPMRCNVUnavailable, tpm2.TPMRCInitialize, tpm2.TPMRCFailure,
	tpm2.TPMRCMemory, tpm2.TPMRCSessionMemory,
}

// isUnavailable reports whether err, returned by a TPM command, is a failure of the device
// rather than of the command: any transport error (connection refused, EOF, broken pipe, a
// closed transport, EBUSY) or one of unavailableRCs.
func isUnavailable(err error) bool {
	var rc tpm2.TPMRC
	if errors.As(err, &rc) {
		for _, u := range unavailableRCs {
			if errors.Is(rc, u) {
				return true
			}
		}
		return false
	}
	return err != nil
}

// isHandleGone reports whether err says the object at a command's first handle is not there:
// a transient object flushed by a TPM restart, or a persistent key evicted.
func isHandleGone(err error) bool {
	return errors.Is(err, tpm2.TPMRCHandle) || errors.Is(err, tpm2.TPMRCReferenceH0)
}

// tpmError wraps err from a TPM command (op names it) for the caller, wrapping
// keyerr.ErrUnavailable when the device is at fault.
func tpmError(op string, err error) error {
	if isUnavailable(err) {
		return fmt.Errorf("%s: %w: %w", op, keyerr.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

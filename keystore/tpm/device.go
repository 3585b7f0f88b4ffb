//go:build !windows

package tpm

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/google/go-tpm/tpm2/transport"
	"github.com/google/go-tpm/tpm2/transport/linuxtpm"

	"github.com/signet-pki/signet/keystore/keyerr"
)

// openDevice opens the TPM character device loc names. A device that is missing (no TPM
// driver yet) or busy (/dev/tpm0 is open elsewhere) is unavailable; one that is not a device
// or that this user may not open is a configuration error.
func openDevice(loc location) (transport.TPMCloser, error) {
	t, err := linuxtpm.Open(loc.device)
	switch {
	case err == nil:
		return t, nil
	case errors.Is(err, linuxtpm.ErrFileIsNotDevice), errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("opening the TPM at %s: %w", loc.tpmName(), err)
	default:
		return nil, fmt.Errorf("opening the TPM at %s: %w: %w", loc.tpmName(), keyerr.ErrUnavailable, err)
	}
}

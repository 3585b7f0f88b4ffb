//go:build !windows

package tpmconn

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/google/go-tpm/tpm2/transport"
	"github.com/google/go-tpm/tpm2/transport/linuxtpm"
)

// OpenDevice opens the TPM character device at path (such as /dev/tpmrm0) and keeps it open
// until Close. A device that is missing (no TPM driver yet) or busy (/dev/tpm0 is open
// elsewhere) wraps ErrUnavailable; a path that is not a device, or that this user may not
// open, does not. On Windows it refuses every path: use a socket.
func OpenDevice(path string) (transport.TPMCloser, error) {
	t, err := linuxtpm.Open(path)
	switch {
	case err == nil:
		return t, nil
	case errors.Is(err, linuxtpm.ErrFileIsNotDevice), errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("opening the TPM at device=%s: %w", path, err)
	default:
		return nil, fmt.Errorf("opening the TPM at device=%s: %w: %w", path, ErrUnavailable, err)
	}
}

// Package tpmconn reaches a TPM 2.0: the kernel's resource manager (/dev/tpmrm0), another TPM
// character device, or a unix socket serving raw TPM 2.0 commands as
// `swtpm socket --tpm2 --server type=unixio,path=…` does. It returns go-tpm transports, so
// that the CA keys (keystore/tpm) and the node agent (attestation/nodetpm) share one way of
// opening a TPM while the node agent links no CA-key code. It imports nothing of Signet's.
//
// A socket is reached with one connection per command (swtpm serves one connection at a
// time, so a connection held open would lock other users out), a command the TPM answers
// TPM_RC_RETRY is sent again a few times, a response is bounded in size and each command's
// exchange in time.
//
// Errors name the TPM as socket=path or device=path. Failing to reach the TPM now (no such
// socket or device, a busy device) wraps ErrUnavailable; a path that is not a socket or
// device, or that this user may not open, does not: retrying cannot fix it. The transports'
// Send returns an error only when the exchange with the TPM failed (connection refused, EOF,
// a broken pipe, a response out of bounds); the TPM's own answers come back from go-tpm's
// Execute as a tpm2.TPMRC.
package tpmconn

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/google/go-tpm/tpm2/transport"
)

// ErrUnavailable marks a failure to reach the TPM now rather than a wrong path: the socket
// does not exist (swtpm is not running or restarting), the device is missing (no driver yet)
// or busy. A caller may retry later.
var ErrUnavailable = errors.New("TPM unavailable")

// Open opens the TPM at path by its file type: a unix socket through OpenSocket, anything
// else through OpenDevice. A path that does not exist wraps ErrUnavailable.
func Open(path string) (transport.TPMCloser, error) {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("opening the TPM at %s: %w: no such socket or device", path, ErrUnavailable)
	case err != nil:
		return nil, fmt.Errorf("opening the TPM at %s: %w", path, err)
	case info.Mode()&fs.ModeSocket != 0:
		return OpenSocket(path)
	}
	return OpenDevice(path)
}

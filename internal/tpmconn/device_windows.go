package tpmconn

import (
	"fmt"

	"github.com/google/go-tpm/tpm2/transport"
)

// OpenDevice refuses: this package reaches a TPM device through Linux's character devices
// only. A socket (OpenSocket) works everywhere.
func OpenDevice(path string) (transport.TPMCloser, error) {
	return nil, fmt.Errorf("opening the TPM at device=%s: TPM devices are supported on Linux only; use socket=", path)
}

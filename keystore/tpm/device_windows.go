package tpm

import (
	"fmt"

	"github.com/google/go-tpm/tpm2/transport"
)

// openDevice refuses: this backend reaches a TPM device through Linux's character devices
// only. A socket= TPM works everywhere.
func openDevice(loc location) (transport.TPMCloser, error) {
	return nil, fmt.Errorf("opening the TPM at %s: TPM devices are supported on Linux only; use socket=", loc.tpmName())
}

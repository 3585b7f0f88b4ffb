//go:build !windows

package tpmconn_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-tpm/tpm2/transport"

	"github.com/signet-pki/signet/internal/tpmconn"
)

// TestOpenDevice: a missing device is unavailable (its driver may not be loaded yet); a
// character device opens, through OpenDevice and through Open, which picks OpenDevice for
// anything that is not a socket.
func TestOpenDevice(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "tpm0")
	_, err := tpmconn.OpenDevice(missing)
	if !errors.Is(err, tpmconn.ErrUnavailable) || !strings.Contains(err.Error(), "device="+missing) {
		t.Errorf("OpenDevice(%s) = %v, want ErrUnavailable naming device=%s", missing, err, missing)
	}
	// /dev/null stands in for a TPM device: only the opening is tested.
	for _, open := range []struct {
		name string
		open func(string) (transport.TPMCloser, error)
	}{{"OpenDevice", tpmconn.OpenDevice}, {"Open", tpmconn.Open}} {
		tpm, err := open.open("/dev/null")
		if err != nil {
			t.Errorf("%s(/dev/null): %v", open.name, err)
			continue
		}
		if err := tpm.Close(); err != nil {
			t.Errorf("%s(/dev/null): Close: %v", open.name, err)
		}
	}
}

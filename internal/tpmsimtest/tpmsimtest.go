// Package tpmsimtest gives a test binary its TPM simulator (go-tpm's, on go-tpm-tools' in-process
// simulator, which allows one per process): opened on first use, shared by every test of the
// binary with its commands serialized, and left to the process's end. A simulator that cannot
// start fails the test: it is never skipped.
package tpmsimtest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-tpm/tpm2/transport"
	"github.com/google/go-tpm/tpm2/transport/simulator"
)

var (
	once sync.Once
	tpm  *locked
	err  error
)

// Open returns the process's simulator. Tests that use it must not leave transient objects
// loaded (it has three slots).
func Open(t testing.TB) transport.TPM {
	t.Helper()
	sim, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	return sim
}

// Shared is Open for a TestMain, which has no test to fail: the error says why the simulator
// did not start.
func Shared() (transport.TPM, error) {
	once.Do(func() {
		var sim transport.TPMCloser
		if sim, err = simulator.OpenSimulator(); err == nil {
			tpm = &locked{tpm: sim}
		} else {
			err = fmt.Errorf("opening the TPM simulator: %w", err)
		}
	})
	if err != nil {
		return nil, err
	}
	return tpm, nil
}

// locked serializes the commands of several tests to one simulator.
type locked struct {
	mu  sync.Mutex
	tpm transport.TPM
}

func (l *locked) Send(cmd []byte) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tpm.Send(cmd)
}

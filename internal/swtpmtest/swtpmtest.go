// Package swtpmtest runs a real software TPM 2.0 (swtpm, internal/swtpm) for tests: a
// separate process that serves raw TPM commands on a unix socket, keeps its state in a
// directory, and can be restarted on that state to test how clients recover.
//
// swtpm must be installed (Debian: apt-get install swtpm swtpm-tools; hack/node-deps.sh does
// it for CI). A missing swtpm fails the test: it is never skipped.
package swtpmtest

import (
	"testing"

	"github.com/signet-pki/signet/internal/swtpm"
)

// TPM is a running swtpm whose state is in the test's temporary directory.
type TPM struct {
	*swtpm.TPM
}

// Start runs a swtpm with a fresh state directory, waits until its socket accepts
// connections, and stops it when the test ends (t.Cleanup), whether the test passes or not.
func Start(t testing.TB) *TPM {
	t.Helper()
	tpm, err := swtpm.Start(t.TempDir())
	if err != nil {
		t.Fatalf("swtpmtest: %v", err)
	}
	t.Cleanup(tpm.Close)
	return &TPM{tpm}
}

// Restart kills swtpm (SIGKILL, as a crash or power loss would) and starts it again on the
// same state directory and socket, failing the test if it cannot.
func (s *TPM) Restart(t testing.TB) {
	t.Helper()
	if err := s.TPM.Restart(); err != nil {
		t.Fatalf("swtpmtest: %v", err)
	}
}

// RestartAfter is Restart that runs down while swtpm is down (see swtpm.TPM.RestartAfter).
func (s *TPM) RestartAfter(t testing.TB, down func()) {
	t.Helper()
	if err := s.TPM.RestartAfter(down); err != nil {
		t.Fatalf("swtpmtest: %v", err)
	}
}

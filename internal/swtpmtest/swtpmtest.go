// Package swtpmtest runs a real software TPM 2.0 (swtpm, internal/swtpm) for tests: a
// separate process that serves raw TPM commands on a unix socket, keeps its state in a
// directory, and can be restarted on that state to test how clients recover.
//
// swtpm must be installed (Debian: apt-get install swtpm swtpm-tools; hack/node-deps.sh does
// it for CI). A missing swtpm fails the test: it is never skipped.
package swtpmtest

import (
	"crypto/x509"
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

// Manufactured is a swtpm whose state swtpm_setup made first, as a TPM's manufacturer would:
// EKs with certificates signed by a local CA of the test's own (swtpm.LocalCA).
type Manufactured struct {
	*TPM
	// Root is the local CA's root certificate, the manufacturer root the EK certificates
	// chain to; Intermediate is the CA that signed them.
	Root, Intermediate *x509.Certificate
	// EKCertificates are the DER EK certificates in the TPM's NV, by key type ("rsa2048",
	// "secp384r1"; see swtpm.Manufactured).
	EKCertificates map[string][]byte
	// CA is the local CA, whose directory is in the test's temporary directory.
	CA *swtpm.LocalCA
}

// StartManufactured manufactures a TPM state with a fresh local CA (swtpm_setup
// --create-ek-cert --create-platform-cert, see swtpm.LocalCA.Manufacture), then runs a swtpm
// on it as Start does. A missing swtpm, swtpm_setup or certtool fails the test.
func StartManufactured(t testing.TB) *Manufactured {
	t.Helper()
	ca, err := swtpm.NewLocalCA(t.TempDir())
	if err != nil {
		t.Fatalf("swtpmtest: %v", err)
	}
	state := t.TempDir()
	made, err := ca.Manufacture(state)
	if err != nil {
		t.Fatalf("swtpmtest: %v", err)
	}
	root, intermediate, err := ca.Certificates()
	if err != nil {
		t.Fatalf("swtpmtest: %v", err)
	}
	tpm, err := swtpm.Start(state)
	if err != nil {
		t.Fatalf("swtpmtest: %v", err)
	}
	t.Cleanup(tpm.Close)
	return &Manufactured{TPM: &TPM{tpm}, Root: root, Intermediate: intermediate, EKCertificates: made.EKCertificates, CA: ca}
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

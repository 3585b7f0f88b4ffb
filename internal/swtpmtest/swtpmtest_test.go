package swtpmtest

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport/linuxudstpm"

	"github.com/signet-pki/signet/internal/swtpm"
)

// TestRestartKeepsState: swtpm answers TPM commands on its socket; a persistent object
// survives Restart (a new process on the same state); Stop ends the process and is idempotent.
func TestRestartKeepsState(t *testing.T) {
	t.Parallel()
	s := Start(t)
	tpm, err := linuxudstpm.Open(s.Socket)
	if err != nil {
		t.Fatal(err)
	}
	srk, err := tpm2.CreatePrimary{PrimaryHandle: tpm2.TPMRHOwner, InPublic: tpm2.New2B(tpm2.ECCSRKTemplate)}.Execute(tpm)
	if err != nil {
		t.Fatalf("CreatePrimary: %v", err)
	}
	const persistent = tpm2.TPMHandle(0x81000001)
	if _, err := (tpm2.EvictControl{
		Auth:             tpm2.TPMRHOwner,
		ObjectHandle:     tpm2.NamedHandle{Handle: srk.ObjectHandle, Name: srk.Name},
		PersistentHandle: persistent,
	}).Execute(tpm); err != nil {
		t.Fatalf("EvictControl: %v", err)
	}

	first := s.pid()
	s.Restart(t)
	if s.pid() == first || alive(first) {
		t.Errorf("Restart did not replace process %d", first)
	}
	if _, err := (tpm2.ReadPublic{ObjectHandle: persistent}).Execute(tpm); err != nil {
		t.Errorf("the persistent object is gone after Restart: %v", err)
	}
	if _, err := (tpm2.ReadPublic{ObjectHandle: srk.ObjectHandle}).Execute(tpm); err == nil {
		t.Errorf("a transient object survived Restart")
	}

	second := s.pid()
	s.Stop()
	s.Stop()
	if alive(second) {
		t.Errorf("swtpm %d still runs after Stop", second)
	}
	if conn, err := net.Dial("unix", s.Socket); err == nil {
		conn.Close()
		t.Errorf("the socket accepts connections after Stop")
	}
}

// TestCleanupStops: the process ends with the test that started it.
func TestCleanupStops(t *testing.T) {
	t.Parallel()
	var pid int
	t.Run("start", func(t *testing.T) { pid = Start(t).pid() })
	if alive(pid) {
		t.Errorf("swtpm %d still runs after its test ended", pid)
	}
}

// TestURI: the URI carries the socket in its query.
func TestURI(t *testing.T) {
	t.Parallel()
	s := &TPM{&swtpm.TPM{Socket: "/tmp/a b&c/tpm.sock"}}
	if got, want := s.URI("handle=0x81000100"), "tpm:handle=0x81000100?socket=/tmp/a%20b%26c/tpm.sock"; got != want {
		t.Errorf("URI = %q, want %q", got, want)
	}
}

func (s *TPM) pid() int { return s.PID() }

func alive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// TestMissingSwtpmFails: without swtpm, Start fails the test and says how to install it; it
// never skips.
func TestMissingSwtpmFails(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(rec)
	}()
	<-done
	if !strings.Contains(rec.msg, "apt-get install swtpm swtpm-tools") {
		t.Errorf("Start without swtpm: Fatalf(%q), want it to name apt-get install swtpm swtpm-tools", rec.msg)
	}
}

// fatalRecorder records Fatalf and ends the goroutine, as testing.T's Fatalf does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestStartManufactured: the TPM runs, and the CA's root and intermediate are the chain of its
// EK certificates.
func TestStartManufactured(t *testing.T) {
	t.Parallel()
	s := StartManufactured(t)
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(s.Root)
	inter.AddCert(s.Intermediate)
	if len(s.EKCertificates) == 0 {
		t.Fatal("no EK certificates")
	}
	for keyType, der := range s.EKCertificates {
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatalf("%s EK certificate: %v", keyType, err)
		}
		// EK certificates carry a critical subject alternative name that crypto/x509 leaves
		// unhandled (attestation.CheckKeys accepts it).
		cert.UnhandledCriticalExtensions = nil
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Errorf("%s EK certificate does not chain to the root: %v", keyType, err)
		}
	}
	tpm, err := linuxudstpm.Open(s.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (tpm2.NVReadPublic{NVIndex: tpm2.TPMHandle(0x01c00002)}).Execute(tpm); err != nil {
		t.Errorf("the RSA EK certificate's NV index: %v", err)
	}
}

// TestStartManufacturedMissingToolsFails: without swtpm's tools, StartManufactured fails the
// test and says how to install them; it never skips.
func TestStartManufacturedMissingToolsFails(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		StartManufactured(rec)
	}()
	<-done
	if !strings.Contains(rec.msg, "apt-get install swtpm swtpm-tools") {
		t.Errorf("StartManufactured without swtpm: Fatalf(%q), want it to name apt-get install swtpm swtpm-tools", rec.msg)
	}
}

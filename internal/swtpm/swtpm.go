// Package swtpm runs a software TPM 2.0 (swtpm) as a separate process that serves raw TPM
// commands on a unix socket and keeps its state in a directory, for the tests
// (internal/swtpmtest), the demo and the benchmarks. It can be restarted on that state to
// test how clients recover. A state directory may first be manufactured (LocalCA.Manufacture:
// swtpm_setup with a local CA of its own), so that the TPM holds EKs with certificates that
// chain to that CA's root, as a TPM vendor's do to the vendor's.
//
// swtpm must be installed (Debian: apt-get install swtpm swtpm-tools; hack/node-deps.sh does
// it for CI).
package swtpm

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// startTimeout bounds how long Start waits for swtpm's socket to accept connections.
const startTimeout = 10 * time.Second

// stopTimeout bounds how long Stop waits after SIGTERM before it kills swtpm.
const stopTimeout = 5 * time.Second

// TPM is a running swtpm process. Its state survives Restart, as a TPM's NV memory survives
// a reboot: persistent keys stay, transient objects and sessions are gone.
type TPM struct {
	// Socket is the unix socket on which swtpm serves raw TPM 2.0 commands (one client
	// connection at a time).
	Socket string
	// StateDir is the directory of swtpm's NV state.
	StateDir string

	ctrl    string // swtpm's control channel socket
	sockDir string // holds the sockets; Close removes it

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	out  *syncBuffer   // swtpm's combined output, for failure messages
}

// InstallHint is the command that installs swtpm on the CI's distribution.
const InstallHint = "apt-get install swtpm swtpm-tools, or hack/node-deps.sh"

// Start runs swtpm on stateDir (fresh or kept from an earlier run) and waits until its socket
// accepts connections. The TPM is started (TPM2_Startup(CLEAR)) by swtpm itself. Close ends
// it.
func Start(stateDir string) (*TPM, error) {
	if _, err := exec.LookPath("swtpm"); err != nil {
		return nil, fmt.Errorf("swtpm is not installed (%w): run %s", err, InstallHint)
	}
	// Unix socket paths are limited to 108 bytes, which a test's or the demo's folder can
	// exceed; the sockets live in a short directory of their own.
	sockDir, err := os.MkdirTemp("", "swtpm-")
	if err != nil {
		return nil, fmt.Errorf("creating swtpm's socket directory: %w", err)
	}
	tpm := &TPM{
		Socket:   filepath.Join(sockDir, "tpm.sock"),
		StateDir: stateDir,
		ctrl:     filepath.Join(sockDir, "ctrl.sock"),
		sockDir:  sockDir,
	}
	if err := tpm.start(); err != nil {
		_ = os.RemoveAll(sockDir)
		return nil, fmt.Errorf("starting swtpm: %w", err)
	}
	return tpm, nil
}

// URI returns the keystore URI of a key on this TPM: key is the part after "tpm:" and before
// the query, such as "handle=0x81000100" or "blob=/path/ca.tpmkey", or "" for the TPM itself.
func (s *TPM) URI(key string) string {
	return "tpm:" + key + "?socket=" + escapeQuery(s.Socket)
}

// Restart kills swtpm (SIGKILL, as a crash or power loss would) and starts it again on the
// same state directory and socket. Clients see their connections fail while it is down.
func (s *TPM) Restart() error { return s.RestartAfter(nil) }

// RestartAfter is Restart that runs down, if not nil, while swtpm is down: a test can keep
// the TPM away until its clients have seen it gone.
func (s *TPM) RestartAfter(down func()) error {
	s.kill(syscall.SIGKILL)
	if down != nil {
		down()
	}
	if err := s.start(); err != nil {
		return fmt.Errorf("restarting swtpm: %w", err)
	}
	return nil
}

// PID is the process ID of the running swtpm, 0 when it is stopped.
func (s *TPM) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Close stops swtpm and removes its sockets' directory.
func (s *TPM) Close() {
	s.Stop()
	_ = os.RemoveAll(s.sockDir)
}

// Stop ends swtpm: SIGTERM, then SIGKILL if it has not exited within a few seconds. It is
// safe to call more than once; Restart starts it again.
func (s *TPM) Stop() {
	s.kill(syscall.SIGTERM)
}

func (s *TPM) kill(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

// start runs swtpm and waits until its server socket accepts a connection.
func (s *TPM) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := exec.Command("swtpm", "socket", "--tpm2",
		"--tpmstate", "dir="+s.StateDir,
		"--server", "type=unixio,path="+s.Socket,
		"--ctrl", "type=unixio,path="+s.ctrl,
		"--flags", "not-need-init,startup-clear")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.cmd, s.done, s.out = cmd, done, out
	deadline := time.Now().Add(startTimeout)
	for {
		conn, err := net.Dial("unix", s.Socket)
		if err == nil {
			_ = conn.Close()
			return nil
		}
		select {
		case <-done:
			s.cmd = nil
			return errors.New("swtpm exited at start: " + strings.TrimSpace(out.String()))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			s.cmd = nil
			return errors.New("swtpm's socket did not accept connections within " + startTimeout.String() + ": " + err.Error() + "; output: " + strings.TrimSpace(out.String()))
		}
	}
}

// escapeQuery escapes the characters that would end or change a URI query value, keeping
// the path's slashes readable.
func escapeQuery(v string) string {
	return strings.NewReplacer("%", "%25", "&", "%26", "#", "%23", "+", "%2B", " ", "%20", ";", "%3B").Replace(v)
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a process's stdout and
// stderr.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

package main

// The devices behind -hardware: a SoftHSM2 token, the go-tpm-tools in-process TPM simulator
// (and a unix socket that serves it to the server) and a swtpm process. internal/softhsmtest
// and internal/swtpmtest do the same for tests, but take a testing.TB; these few lines are
// the bench's own.

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/google/go-tpm/tpm2/transport"
	"github.com/google/go-tpm/tpm2/transport/simulator"

	"github.com/signet-pki/signet/internal/softhsm"
)

// newSoftHSM initializes a token labelled signet-bench in dir (internal/softhsm) and points
// SOFTHSM2_CONF at its configuration: SoftHSM reads the variable when the module is first
// loaded, so this must run before any pkcs11: key is opened.
func newSoftHSM(dir string) (*softhsm.Token, error) {
	tok, err := softhsm.Init(dir, "signet-bench")
	if err != nil {
		return nil, err
	}
	return tok, os.Setenv("SOFTHSM2_CONF", tok.ConfPath)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// simTPM is the process's one go-tpm-tools TPM simulator (one per process, in C): each key
// gets a connection to it through conn, and the socket started by serve reaches it for the
// server, whose configuration can name a TPM only by device= or socket=. The simulator runs
// one command at a time.
type simTPM struct {
	mu  sync.Mutex
	tpm transport.TPMCloser
	lis net.Listener
}

func openSimTPM() (*simTPM, error) {
	t, err := simulator.OpenSimulator()
	if err != nil {
		return nil, fmt.Errorf("opening the TPM simulator: %w", err)
	}
	return &simTPM{tpm: t}, nil
}

// Send runs one command on the simulator.
func (s *simTPM) Send(cmd []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tpm.Send(cmd)
}

// conn is keystore.Options.TPM: a connection whose Close leaves the simulator running.
func (s *simTPM) conn() (transport.TPMCloser, error) { return simConn{s}, nil }

type simConn struct{ *simTPM }

func (simConn) Close() error { return nil }

// serve listens on a unix socket at path and answers each connection's one raw TPM command
// from the simulator, as swtpm's unixio server does for keystore/tpm's socket transport
// (which connects once per command).
func (s *simTPM) serve(path string) error {
	lis, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	s.lis = lis
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go s.answer(c)
		}
	}()
	return nil
}

func (s *simTPM) answer(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	header := make([]byte, 10) // tag, size, command code
	if _, err := io.ReadFull(c, header); err != nil {
		return
	}
	size := binary.BigEndian.Uint32(header[2:6])
	if size < 10 || size > 1<<16 {
		return
	}
	cmd := make([]byte, size)
	copy(cmd, header)
	if _, err := io.ReadFull(c, cmd[10:]); err != nil {
		return
	}
	rsp, err := s.Send(cmd)
	if err != nil {
		return
	}
	_, _ = c.Write(rsp)
}

func (s *simTPM) close() {
	if s.lis != nil {
		_ = s.lis.Close()
	}
	_ = s.tpm.Close()
}

package tpmconn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// socketIOTimeout bounds one command's exchange with a TPM socket, so that a hung swtpm
// cannot hold its caller (and the caller's locks) forever. It is long enough for RSA key
// generation.
const socketIOTimeout = 2 * time.Minute

// maxResponseSize bounds a TPM response read from a socket; TPM responses are a few KiB.
const maxResponseSize = 1 << 16

// retryAttempts bounds how often a socket command answered TPM_RC_RETRY (the TPM did not
// start it) is sent, as go-tpm does for a device.
const retryAttempts = 6

// OpenSocket checks that path is a unix socket and returns a transport that connects to it
// for each command. swtpm serves one connection at a time, so a connection held open would
// lock other users out; connecting per command lets several users share one swtpm and rides
// over its restarts. A missing socket wraps ErrUnavailable; a path that is not a socket does
// not. Close releases nothing: there is no connection between commands.
func OpenSocket(path string) (transport.TPMCloser, error) {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("opening the TPM at socket=%s: %w: no such socket (is swtpm running?)", path, ErrUnavailable)
	case err != nil:
		return nil, fmt.Errorf("opening the TPM at socket=%s: %w", path, err)
	case info.Mode()&fs.ModeSocket == 0:
		return nil, fmt.Errorf("opening the TPM at socket=%s: not a socket (%s)", path, info.Mode())
	}
	return &socketTPM{path: path}, nil
}

// socketTPM sends raw TPM 2.0 commands on a unix socket (swtpm socket --server type=unixio),
// one connection per command.
type socketTPM struct {
	path string
}

// Send implements transport.TPM: it sends the command, again after a short pause while the
// TPM answers TPM_RC_RETRY (up to retryAttempts times), and returns the response.
func (s *socketTPM) Send(cmd []byte) ([]byte, error) {
	pause := time.Millisecond
	for attempt := 1; ; attempt++ {
		rsp, err := s.send(cmd)
		if err != nil || attempt == retryAttempts || binary.BigEndian.Uint32(rsp[6:10]) != uint32(tpm2.TPMRCRetry) {
			return rsp, err
		}
		time.Sleep(pause)
		pause *= 4
	}
}

// send writes the command on a new connection and reads one response, whose size the
// response header gives.
func (s *socketTPM) send(cmd []byte) ([]byte, error) {
	deadline := time.Now().Add(socketIOTimeout)
	conn, err := s.dial(deadline)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if _, err := conn.Write(cmd); err != nil {
		return nil, err
	}
	header := make([]byte, 10) // tag, size, response code
	if _, err := io.ReadFull(conn, header); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(header[2:6])
	if size < 10 || size > maxResponseSize {
		return nil, fmt.Errorf("TPM response size %d is out of range", size)
	}
	rsp := make([]byte, size)
	copy(rsp, header)
	if _, err := io.ReadFull(conn, rsp[10:]); err != nil {
		return nil, err
	}
	return rsp, nil
}

// dial connects to the socket. swtpm serves one connection at a time from a short listen
// queue, and a unix socket whose queue is full refuses a connection with EAGAIN at once
// instead of waiting: dial waits for its turn, as a connection to a busy TCP server would.
func (s *socketTPM) dial(deadline time.Time) (net.Conn, error) {
	pause := time.Millisecond
	for {
		conn, err := net.DialTimeout("unix", s.path, time.Until(deadline))
		if err == nil || !errors.Is(err, syscall.EAGAIN) || time.Now().After(deadline) {
			return conn, err
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// Close implements transport.TPMCloser; there is no connection between commands.
func (s *socketTPM) Close() error { return nil }

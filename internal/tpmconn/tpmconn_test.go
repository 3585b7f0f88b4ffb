package tpmconn_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/signet-pki/signet/internal/swtpmtest"
	"github.com/signet-pki/signet/internal/tpmconn"
)

// TestOpenRefuses: a path that does not exist is unavailable (swtpm may not be running yet);
// a regular file is refused with an error that names it and does not wrap ErrUnavailable,
// since retrying cannot fix it.
func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.sock")
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, []byte("not a TPM"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		open        func(string) (transport.TPMCloser, error)
		path        string
		errHas      string
		unavailable bool
	}{
		{"OpenSocket of a missing path", tpmconn.OpenSocket, missing, "socket=" + missing + ": TPM unavailable: no such socket", true},
		{"Open of a missing path", tpmconn.Open, missing, missing + ": TPM unavailable: no such socket or device", true},
		{"OpenSocket of a regular file", tpmconn.OpenSocket, regular, "socket=" + regular + ": not a socket", false},
		{"Open of a regular file", tpmconn.Open, regular, "device=" + regular, false},
		{"OpenDevice of a regular file", tpmconn.OpenDevice, regular, "device=" + regular, false},
	} {
		tpm, err := tc.open(tc.path)
		if err == nil {
			_ = tpm.Close()
			t.Errorf("%s: succeeded", tc.name)
			continue
		}
		t.Logf("%s: %v", tc.name, err)
		if !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("%s: error %q does not contain %q", tc.name, err, tc.errHas)
		}
		if got := errors.Is(err, tpmconn.ErrUnavailable); got != tc.unavailable {
			t.Errorf("%s: error %q wraps ErrUnavailable = %v, want %v", tc.name, err, got, tc.unavailable)
		}
	}
}

// TestSwtpm: a real swtpm answers TPM2_GetRandom through OpenSocket and through Open (which
// finds the socket by its file type), from several goroutines at once (each waits for its turn
// at swtpm's one connection), and again after swtpm restarts, through the same transport.
func TestSwtpm(t *testing.T) {
	t.Parallel()
	sw := swtpmtest.Start(t)
	for _, open := range []struct {
		name string
		open func(string) (transport.TPMCloser, error)
	}{{"OpenSocket", tpmconn.OpenSocket}, {"Open", tpmconn.Open}} {
		tpm, err := open.open(sw.Socket)
		if err != nil {
			t.Fatalf("%s(%s): %v", open.name, sw.Socket, err)
		}
		defer tpm.Close()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { getRandom(t, open.name, tpm) })
		}
		wg.Wait()
	}

	tpm, err := tpmconn.OpenSocket(sw.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer tpm.Close()
	sw.Restart(t)
	getRandom(t, "OpenSocket after a restart", tpm)
}

// getRandom asks tpm for 16 random bytes and checks that it got them.
func getRandom(t *testing.T, name string, tpm transport.TPM) {
	t.Helper()
	rsp, err := tpm2.GetRandom{BytesRequested: 16}.Execute(tpm)
	if err != nil {
		t.Errorf("%s: GetRandom: %v", name, err)
		return
	}
	if len(rsp.RandomBytes.Buffer) != 16 {
		t.Errorf("%s: GetRandom returned %d bytes, want 16", name, len(rsp.RandomBytes.Buffer))
	}
}

// TestSocketRetries: a command the TPM answers TPM_RC_RETRY is sent again on a new
// connection until the TPM starts it, at most six times in all.
func TestSocketRetries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		retries  int32  // answers TPM_RC_RETRY before it succeeds
		wantRC   uint32 // the response code Send returns
		wantSent int32  // commands (and connections) the TPM sees
	}{
		{"two retries", 2, 0, 3},
		{"no end of retries", 100, uint32(tpm2.TPMRCRetry), 6},
	} {
		var answered atomic.Int32
		path := fakeTPM(t, func([]byte) []byte {
			if answered.Add(1) <= tc.retries {
				return response(uint32(tpm2.TPMRCRetry), 10)
			}
			return response(0, 12)
		})
		tpm, err := tpmconn.OpenSocket(path)
		if err != nil {
			t.Fatal(err)
		}
		rsp, err := tpm.Send(command())
		if err != nil {
			t.Fatalf("%s: Send: %v", tc.name, err)
		}
		if rc := binary.BigEndian.Uint32(rsp[6:10]); rc != tc.wantRC {
			t.Errorf("%s: Send returned response code %#x, want %#x", tc.name, rc, tc.wantRC)
		}
		if got := answered.Load(); got != tc.wantSent {
			t.Errorf("%s: the TPM got the command %d times, want %d", tc.name, got, tc.wantSent)
		}
	}
}

// TestSocketResponseBound: a response whose header claims fewer than 10 or more than 64 KiB
// bytes is refused without reading it.
func TestSocketResponseBound(t *testing.T) {
	t.Parallel()
	for _, size := range []uint32{9, 1<<16 + 1, 1 << 31} {
		path := fakeTPM(t, func([]byte) []byte { return response(0, size)[:10] })
		tpm, err := tpmconn.OpenSocket(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tpm.Send(command()); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("Send with a response of %d bytes = %v, want an error saying it is out of range", size, err)
		}
	}
}

// fakeTPM serves answer's response to each command on a unix socket, one connection per
// command, until the test ends, and returns the socket's path. Commands are handled one at a
// time, as swtpm does.
func fakeTPM(t *testing.T, answer func(cmd []byte) []byte) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tpmconn-") // unix socket paths are short; t.TempDir() may not be
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "tpm.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = l.Close()
		<-done
	})
	go func() {
		defer close(done)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			header := make([]byte, 10)
			if _, err := io.ReadFull(conn, header); err == nil {
				cmd := make([]byte, binary.BigEndian.Uint32(header[2:6]))
				copy(cmd, header)
				if _, err := io.ReadFull(conn, cmd[10:]); err == nil {
					_, _ = conn.Write(answer(cmd))
				}
			}
			_ = conn.Close()
		}
	}()
	return path
}

// command is a TPM2_GetRandom command for 16 bytes.
func command() []byte {
	cmd := make([]byte, 12)
	binary.BigEndian.PutUint16(cmd[0:], uint16(tpm2.TPMSTNoSessions))
	binary.BigEndian.PutUint32(cmd[2:], 12)
	binary.BigEndian.PutUint32(cmd[6:], uint32(tpm2.TPMCCGetRandom))
	binary.BigEndian.PutUint16(cmd[10:], 16)
	return cmd
}

// response is a response of size bytes (its header says so) with response code rc.
func response(rc, size uint32) []byte {
	rsp := make([]byte, max(size, 10))
	binary.BigEndian.PutUint16(rsp[0:], uint16(tpm2.TPMSTNoSessions))
	binary.BigEndian.PutUint32(rsp[2:], size)
	binary.BigEndian.PutUint32(rsp[6:], rc)
	return rsp
}

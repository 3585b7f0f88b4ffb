package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server"
)

// getReadyz fetches /readyz from srv's HTTP port.
func getReadyz(t *testing.T, srv *server.Server) (int, string, error) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + srv.HTTPAddr() + "/readyz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body)), err
}

// TestCloseWhileServing checks that Close, called while Serve runs and a client is connected,
// stops serving first: Serve returns nil, Close returns, the server answers neither gRPC nor
// HTTP afterwards, and nothing of the server still runs past a health-loop tick (which would
// read the released ledger).
func TestCloseWhileServing(t *testing.T) {
	t.Parallel()
	cfg, dir := devConfig(t)
	logs := &logBuffer{}
	srv, err := server.New(context.Background(), cfg, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), lis) }()
	s := &testServer{addr: lis.Addr().String(), dir: dir, logs: logs, srv: srv}
	client := signetv1.NewSignerServiceClient(s.dial(t, s.clientTLS(t, s.devClient(t))))
	csrPEM := testpki.CSR(t, testpki.Key(t, testpki.P256), nil)
	if _, err := client.SignCertificateSigningRequest(callContext(t), signRequest(csrPEM, "uid-before-close")); err != nil {
		t.Fatalf("signing before Close: %v", err)
	}
	if code, body, err := getReadyz(t, srv); err != nil || code != http.StatusOK {
		t.Fatalf("/readyz before Close = %d %q, %v; want 200", code, body, err)
	}

	// Two callers at once: both return once the server is stopped and released.
	var closers sync.WaitGroup
	for range 2 {
		closers.Go(srv.Close)
	}
	closed := make(chan struct{})
	go func() { closers.Wait(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while Serve was running")
	}
	serveReturned := false
	select {
	case err := <-served:
		serveReturned = true
		if err != nil {
			t.Errorf("Serve = %v after Close, want nil", err)
		}
	default:
		t.Error("Close returned before Serve did")
	}

	// Past a tick of the health loop: a loop still running would read the closed ledger.
	time.Sleep(1500 * time.Millisecond)
	if !serveReturned {
		select {
		case err := <-served:
			t.Logf("Serve returned late: %v", err)
		case <-time.After(5 * time.Second):
			t.Error("Serve is still running after Close")
		}
	}
	if _, err := client.SignCertificateSigningRequest(callContext(t), signRequest(csrPEM, "uid-after-close")); status.Code(err) != codes.Unavailable {
		t.Errorf("signing after Close = %v, want Unavailable", err)
	}
	if code, body, err := getReadyz(t, srv); err == nil {
		t.Errorf("/readyz after Close answered %d %q, want no HTTP server", code, body)
	}
	if logs.Contains(`"level":"ERROR"`) {
		t.Error("an error was logged around Close")
	}
	srv.Close() // again, after the fact
}

// TestCloseBeforeServe checks that a server closed before it served can be closed again, and
// that Serve then refuses with ErrClosed and releases the listener.
func TestCloseBeforeServe(t *testing.T) {
	t.Parallel()
	cfg, _ := devConfig(t)
	srv, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv.Close()
	srv.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background(), lis) }()
	select {
	case err := <-served:
		if !errors.Is(err, server.ErrClosed) || !strings.Contains(err.Error(), "serving gRPC") {
			t.Errorf("Serve after Close = %v, want ErrClosed wrapped with the operation", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve after Close did not return")
	}
	if conn, err := net.DialTimeout("tcp", lis.Addr().String(), 5*time.Second); err == nil {
		_ = conn.Close()
		t.Error("Serve after Close left the listener open")
	}
	// The ledger was released: another server can open the same directory.
	again, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("New on the closed server's ledger: %v", err)
	}
	again.Close()
}

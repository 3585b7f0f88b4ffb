package httpserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/signet-pki/signet/server/metrics"
)

// syncBuffer is a log sink safe for concurrent writes.
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

func newTestServer(t *testing.T, ready func() error) (*Server, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "signet_server_ledger_records_total 0\n")
	})
	return New("127.0.0.1:0", metrics, ready, slog.New(slog.NewTextHandler(logs, nil))), logs
}

func do(t *testing.T, h http.Handler, method, path string) (int, string, http.Header) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Code, rec.Body.String(), rec.Header()
}

func TestRoutes(t *testing.T) {
	s, _ := newTestServer(t, func() error { return nil })
	tests := []struct {
		method, path string
		wantCode     int
		wantBody     string
	}{
		{http.MethodGet, "/metrics", http.StatusOK, "signet_server_ledger_records_total 0\n"},
		{http.MethodGet, "/livez", http.StatusOK, "ok\n"},
		{http.MethodGet, "/readyz", http.StatusOK, "ok\n"},
		{http.MethodGet, "/", http.StatusNotFound, ""},
		{http.MethodGet, "/healthz", http.StatusNotFound, ""},
		{http.MethodGet, "/metrics/extra", http.StatusNotFound, ""},
		{http.MethodGet, "/debug/pprof/", http.StatusNotFound, ""},
		{http.MethodPost, "/metrics", http.StatusMethodNotAllowed, ""},
		{http.MethodDelete, "/livez", http.StatusMethodNotAllowed, ""},
	}
	for _, tt := range tests {
		code, body, header := do(t, s.http.Handler, tt.method, tt.path)
		if code != tt.wantCode {
			t.Errorf("%s %s = %d, want %d", tt.method, tt.path, code, tt.wantCode)
		}
		if tt.wantBody != "" && body != tt.wantBody {
			t.Errorf("%s %s body = %q, want %q", tt.method, tt.path, body, tt.wantBody)
		}
		if code == http.StatusMethodNotAllowed && header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without an Allow header", tt.method, tt.path)
		}
	}
}

func TestReadyz(t *testing.T) {
	var notReady atomic.Pointer[error]
	s, logs := newTestServer(t, func() error {
		if err := notReady.Load(); err != nil {
			return *err
		}
		return nil
	})
	set := func(err error) {
		if err == nil {
			notReady.Store(nil)
		} else {
			notReady.Store(&err)
		}
	}
	check := func(wantCode int, wantBody string) {
		t.Helper()
		code, body, header := do(t, s.http.Handler, http.MethodGet, "/readyz")
		if code != wantCode || body != wantBody {
			t.Fatalf("GET /readyz = %d %q, want %d %q", code, body, wantCode, wantBody)
		}
		if header.Get("Cache-Control") != "no-store" {
			t.Errorf("Cache-Control = %q", header.Get("Cache-Control"))
		}
	}
	check(http.StatusOK, "ok\n")
	set(errors.New("ledger is not writable"))
	check(http.StatusServiceUnavailable, "not ready: ledger is not writable\n")
	check(http.StatusServiceUnavailable, "not ready: ledger is not writable\n")
	// Liveness does not depend on readiness.
	if code, _, _ := do(t, s.http.Handler, http.MethodGet, "/livez"); code != http.StatusOK {
		t.Errorf("GET /livez while not ready = %d", code)
	}
	set(nil)
	check(http.StatusOK, "ok\n")

	// Only changes are logged.
	if n := strings.Count(logs.String(), `msg="not ready"`); n != 1 {
		t.Errorf("logged \"not ready\" %d times, want 1:\n%s", n, logs)
	}
	if n := strings.Count(logs.String(), `msg=ready`); n != 1 {
		t.Errorf("logged \"ready\" %d times, want 1:\n%s", n, logs)
	}
}

func TestNilReadyMeansReady(t *testing.T) {
	s, _ := newTestServer(t, nil)
	if code, _, _ := do(t, s.http.Handler, http.MethodGet, "/readyz"); code != http.StatusOK {
		t.Fatalf("GET /readyz = %d", code)
	}
}

func TestTimeoutsAreSet(t *testing.T) {
	s, _ := newTestServer(t, nil)
	h := s.http
	if h.ReadHeaderTimeout <= 0 || h.ReadTimeout <= 0 || h.WriteTimeout <= 0 || h.IdleTimeout <= 0 || h.MaxHeaderBytes <= 0 {
		t.Fatalf("unbounded server: %+v", h)
	}
}

// serve starts s on a loopback listener and returns its base URL and a function that stops
// it and returns Serve's error.
func serve(t *testing.T, s *Server) (string, func() error) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, lis) }()
	return "http://" + lis.Addr().String(), func() error {
		cancel()
		select {
		case err := <-errc:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return after its context ended")
			return nil
		}
	}
}

func TestServeAndGracefulShutdown(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	s, _ := newTestServer(t, func() error {
		close(entered)
		<-release // an in-flight probe
		return nil
	})
	base, stop := serve(t, s)

	resp, err := http.Get(base + "/livez")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok\n" {
		t.Fatalf("GET /livez = %d %q", resp.StatusCode, body)
	}

	// A request in flight when the context ends still gets its answer.
	type result struct {
		code int
		err  error
	}
	inflight := make(chan result, 1)
	go func() {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			inflight <- result{err: err}
			return
		}
		resp.Body.Close()
		inflight <- result{code: resp.StatusCode}
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	time.Sleep(50 * time.Millisecond) // let Shutdown begin
	close(release)
	if r := <-inflight; r.err != nil || r.code != http.StatusOK {
		t.Fatalf("in-flight request: %d, %v", r.code, r.err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Serve = %v, want nil after shutdown", err)
	}
	if _, err := http.Get(base + "/livez"); err == nil {
		t.Fatal("the server still answers after shutdown")
	}
}

func TestServeReturnsWhenListenerFails(t *testing.T) {
	s, _ := newTestServer(t, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis.Close()
	err = s.Serve(context.Background(), lis)
	if err == nil || !strings.Contains(err.Error(), "serving HTTP") {
		t.Fatalf("Serve on a closed listener = %v, want a serving error", err)
	}
}

func TestListenAndServe(t *testing.T) {
	logs := &syncBuffer{}
	s := New("127.0.0.1:0", http.NotFoundHandler(), nil, slog.New(slog.NewTextHandler(logs, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.ListenAndServe(ctx); err != nil {
		t.Fatalf("ListenAndServe with an ended context = %v", err)
	}
	bad := New("256.0.0.1:http", http.NotFoundHandler(), nil, slog.New(slog.NewTextHandler(logs, nil)))
	if err := bad.ListenAndServe(context.Background()); err == nil || !strings.Contains(err.Error(), "listening on 256.0.0.1:http") {
		t.Fatalf("ListenAndServe on a bad address = %v", err)
	}
}

func TestMetricsEndpointServesRegistry(t *testing.T) {
	m := metrics.New("test", "", []string{"example.com/serving"})
	m.ObserveLedgerAppend(time.Millisecond)
	s := New("127.0.0.1:0", m.Handler(), nil, slog.New(slog.DiscardHandler))
	base, stop := serve(t, s)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"signet_server_ledger_records_total 1", `signet_server_build_info{commit="",go_version=`, "go_goroutines "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("GET /metrics lacks %q", want)
		}
	}
}

// TestMiddlewareWrapsEveryRequest: the middleware given to New sees every request, to each
// endpoint and to the paths and methods that are refused, outermost first; InternalError is
// the plain 500 a containing middleware answers with.
func TestMiddlewareWrapsEveryRequest(t *testing.T) {
	var order []string
	wrap := func(name string) func(http.Handler) http.Handler {
		return func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				order = append(order, name)
				next.ServeHTTP(w, r)
			})
		}
	}
	s := New("127.0.0.1:0", http.NotFoundHandler(), nil, slog.New(slog.DiscardHandler), wrap("outer"), wrap("inner"))
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/metrics"}, {http.MethodGet, "/livez"}, {http.MethodGet, "/readyz"},
		{http.MethodGet, "/nope"}, {http.MethodPost, "/livez"},
	} {
		order = nil
		do(t, s.http.Handler, tc.method, tc.path)
		if len(order) != 2 || order[0] != "outer" || order[1] != "inner" {
			t.Errorf("%s %s went through %v, want [outer inner]", tc.method, tc.path, order)
		}
	}
	rec := httptest.NewRecorder()
	InternalError(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "internal error") {
		t.Errorf("InternalError answered %d %q, want 500 internal error", rec.Code, rec.Body.String())
	}
}

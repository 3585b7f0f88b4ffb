// Package httpserver serves signet-server's operational endpoints on their own port:
// GET /metrics, GET /livez and GET /readyz. Every other path is 404 and every other method
// 405.
package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
)

// Timeouts of the HTTP server. Scrapes and probes are small; slow clients are cut off.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second // a scrape gathers every metric
	idleTimeout       = 60 * time.Second
	maxHeaderBytes    = 16 << 10
	// shutdownGrace is how long in-flight requests may run after the context ends.
	shutdownGrace = 5 * time.Second
)

// Log keys used by the server.
const (
	logKeyAddress = "address"
	logKeyReason  = "reason"
	logKeyError   = "error"
)

// Server serves the operational endpoints.
type Server struct {
	http  *http.Server
	ready func() error
	log   *slog.Logger
	// notReady is the last readiness answer, to log only changes.
	notReady atomic.Bool
}

// New returns a Server for addr (used by ListenAndServe) serving metrics at /metrics and
// the readiness of ready at /readyz. A nil ready means always ready; ready is called on every
// probe, so it must be fast and safe for concurrent use, and its error is shown to the
// caller, so it must not contain secrets. A nil log discards. middleware wraps every request,
// outermost first (signet-server contains a handler's panic with it).
func New(addr string, metrics http.Handler, ready func() error, log *slog.Logger, middleware ...func(http.Handler) http.Handler) *Server {
	if ready == nil {
		ready = func() error { return nil }
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{ready: ready, log: log}
	s.http = &http.Server{
		Addr:              addr,
		Handler:           s.routes(metrics, middleware),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return s
}

// routes builds the router: exactly the three endpoints, behind middleware.
func (s *Server) routes(metrics http.Handler, middleware []func(http.Handler) http.Handler) http.Handler {
	r := chi.NewRouter()
	r.Use(middleware...)
	r.Method(http.MethodGet, "/metrics", metrics)
	r.Get("/livez", s.livez)
	r.Get("/readyz", s.readyz)
	return r
}

// livez answers 200 "ok" for as long as the process serves HTTP.
func (s *Server) livez(w http.ResponseWriter, _ *http.Request) {
	writeText(w, http.StatusOK, "ok")
}

// readyz answers 200 "ok" when ready returns nil, else 503 with the reason. Changes of
// readiness are logged.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	err := s.ready()
	if err != nil {
		if !s.notReady.Swap(true) {
			s.log.Warn("not ready", logKeyReason, err.Error())
		}
		writeText(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
		return
	}
	if s.notReady.Swap(false) {
		s.log.Info("ready")
	}
	writeText(w, http.StatusOK, "ok")
}

// InternalError answers 500 "internal error": what a handler that failed (a contained panic)
// answers; the server log has the detail.
func InternalError(w http.ResponseWriter, _ *http.Request) {
	writeText(w, http.StatusInternalServerError, "internal error; the server log has the details")
}

func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = fmt.Fprintln(w, body)
}

// ListenAndServe listens on the address given to New and serves until ctx ends.
func (s *Server) ListenAndServe(ctx context.Context) error {
	lis, err := net.Listen("tcp", s.http.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.http.Addr, err)
	}
	return s.Serve(ctx, lis)
}

// Serve serves HTTP on lis (wrap it with tls.NewListener for HTTPS) until ctx ends, then
// shuts down gracefully: in-flight requests get shutdownGrace, then connections are closed.
// It returns nil after a shutdown caused by ctx, or the error if serving fails first (for
// example when lis is closed). Serve closes lis.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	s.log.Info("serving HTTP", logKeyAddress, lis.Addr().String())
	// Cancelled when http.Serve returns on its own, so the stopper below never waits forever.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdownCtx, cancelShutdown := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancelShutdown()
		if err := s.http.Shutdown(shutdownCtx); err != nil {
			s.log.Warn("HTTP shutdown grace expired; closing connections", logKeyError, err.Error())
			_ = s.http.Close()
		}
	}()
	err := s.http.Serve(lis)
	cancel()
	<-done
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving HTTP: %w", err)
	}
	return nil
}

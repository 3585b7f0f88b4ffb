// Package webhook is the HTTPS front door of the decision core, for clients of
// k8s.io/apiserver's generic webhook (as gcp-controller-manager's signer was): a POST of a
// certificates.k8s.io/v1 CertificateSigningRequest as JSON is answered with the same object
// with status.certificate set, or with a Google API error body
// ({"error":{"code","message","status","details"}}) whose status and message are the ones the
// gRPC service gives for the same refusal (server/wire). The caller is named from its verified
// mTLS certificate (access.Identity), as on gRPC; authorization, rate limits, idempotency,
// the lint gate, the ledger and the decision metrics are the core's, for the webhook's own
// refusals too (decision.Core.RefuseCSR). The webhook counts its answers by HTTP status
// (metrics.ObserveWebhookRequest). docs/webhook.md is the contract.
package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"google.golang.org/grpc/codes"
	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/guard"
	"github.com/signet-pki/signet/server/metrics"
)

// Timeouts and limits of the HTTP server. A signing call may wait for an HSM or TPM
// (keys.timeout, 10s by default) and a durable ledger append, so writes get more room than
// reads; a body is at most Options.MaxRequestBytes.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
	// shutdownGrace is how long in-flight requests may run after the context ends; then
	// their contexts are cancelled and Serve waits for their handlers to return.
	shutdownGrace = 10 * time.Second
)

// Path is where the webhook is served: the path of the server URL in a client's kubeconfig.
const Path = "/"

// Log keys used by the webhook.
const (
	logKeyAddress = "address"
	logKeyClient  = "client"
	logKeyStatus  = "status"
	logKeyReason  = "reason"
	logKeyError   = "error"
)

// Options configure a Server.
type Options struct {
	// Core decides on every request. Required.
	Core *decision.Core
	// TLS is the server's TLS configuration; it must require and verify client certificates
	// (the gRPC listener's, so that reloads and the client check apply to both). Required.
	TLS *tls.Config
	// MaxRequestBytes bounds a request body; a larger one gets 413 before it is read whole.
	// Required (config.Webhook.MaxRequestBytes).
	MaxRequestBytes int64
	// Log receives serving events and the requests whose body could not be read (the core
	// logs every refusal); nil discards.
	Log *slog.Logger
	// Metrics counts every answer by HTTP status, with its duration; nil counts nothing.
	Metrics *metrics.Metrics
	// Clock times the answers; nil is the real clock.
	Clock clock.PassiveClock
	// HandshakeFailed is told of every failed TLS handshake, except those that Serve's end
	// aborted, with the client's address and the handshake's error (a refused client
	// certificate among them: the server logs and counts those as on gRPC); nil ignores them.
	// It is called from the handshake's own goroutine and must be safe for concurrent use.
	HandshakeFailed func(remote net.Addr, err error)
	// Guard, if set, contains a panic in a handler: 500 INTERNAL with the error body, counted
	// and logged as signet_server_panics_total{method="webhook"}.
	Guard *guard.Guard
}

// Server serves the webhook.
type Server struct {
	core     *decision.Core
	tls      *tls.Config
	maxBytes int64
	log      *slog.Logger
	metrics  *metrics.Metrics
	clock    clock.PassiveClock
	http     *http.Server
	// handshakeFailed is Options.HandshakeFailed.
	handshakeFailed func(remote net.Addr, err error)
	guard           *guard.Guard

	// base is the context of every request: cancelled when the shutdown grace has passed.
	base       context.Context
	cancelBase context.CancelFunc
	// mu guards closed and the Add of handlers, so that no handler starts once Serve waits.
	mu       sync.Mutex
	closed   bool
	handlers sync.WaitGroup
}

// New returns a Server for opts; Serve serves it.
func New(opts Options) (*Server, error) {
	switch {
	case opts.Core == nil:
		return nil, errors.New("webhook: no decision core")
	case opts.TLS == nil:
		return nil, errors.New("webhook: no TLS configuration")
	case opts.MaxRequestBytes <= 0:
		return nil, fmt.Errorf("webhook: request body limit %d is not positive", opts.MaxRequestBytes)
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	s := &Server{core: opts.Core, tls: TLSConfig(opts.TLS), maxBytes: opts.MaxRequestBytes, log: opts.Log,
		metrics: opts.Metrics, clock: opts.Clock, handshakeFailed: opts.HandshakeFailed, guard: opts.Guard}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	s.http = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return s.base },
		ErrorLog:          slog.NewLogLogger(opts.Log.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// Handler is the router: POST on Path signs; any other method there gets 501 UNIMPLEMENTED
// (with Allow: POST), any other path 404, both with the error body. Every answer is counted in
// the metrics (the 503 of a server that is stopping, and the 500 of a contained panic, too),
// and every request is counted in, so that Serve returns only once every handler has.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.observe, s.track)
	if s.guard != nil {
		r.Use(s.guard.HTTP(metrics.PanicMethodWebhook, func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, answerFor(decision.ErrPanicked))
		}))
	}
	r.Post(Path, s.sign)
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, answer{code: codes.NotFound,
			message: "no such path: the webhook is served at " + Path})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, answer{code: codes.Unimplemented,
			message: "the webhook accepts POST only"})
	})
	return r
}

// observe counts the answer to every request by its HTTP status (200 when the handler set
// none), with the time the handler took.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.clock.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		code := ww.Status()
		if code == 0 {
			code = http.StatusOK
		}
		s.metrics.ObserveWebhookRequest(code, s.clock.Since(start))
	})
}

// track counts a handler in for Serve to wait for, or answers 503 once Serve is stopping.
func (s *Server) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			writeError(w, unavailable("the server is shutting down; retry on another server or later"))
			return
		}
		s.handlers.Add(1)
		s.mu.Unlock()
		defer s.handlers.Done()
		next.ServeHTTP(w, r)
	})
}

// Serve serves HTTPS on lis (a plain TCP listener: Serve adds TLS, running every handshake
// itself, see handshakingListener) until ctx ends, then shuts down: handshakes in progress are
// aborted, in-flight requests get shutdownGrace, then their contexts are cancelled and the
// connections closed, and Serve returns once every handler has returned, so that the caller
// may release what they use. It returns nil after a shutdown caused by ctx, or the error if
// serving fails first (lis closed). Serve closes lis and may be called once.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	s.log.Info("serving the signing webhook", logKeyAddress, lis.Addr().String())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdownCtx, cancelShutdown := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancelShutdown()
		if err := s.http.Shutdown(shutdownCtx); err != nil {
			s.log.Warn("webhook shutdown grace expired; cancelling requests", logKeyError, err.Error())
			s.cancelBase()
			_ = s.http.Close()
		}
	}()
	err := s.http.Serve(newHandshakingListener(lis, s.tls, handshakeTimeout, s.handshakeFailed))
	cancel()
	<-done
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.handlers.Wait()
	s.cancelBase()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving the webhook: %w", err)
	}
	return nil
}

// alpn is what the webhook offers in ALPN: HTTP/2, as Kubernetes clients prefer, and
// HTTP/1.1.
var alpn = []string{"h2", "http/1.1"}

// TLSConfig returns base with the webhook's ALPN protocols added, also to the configurations
// base's GetConfigForClient returns (the server's, which loads the latest certificates at every
// handshake): without them a handshake would negotiate no protocol and fall back to HTTP/1.1.
// Everything else, client verification included, is base's.
func TLSConfig(base *tls.Config) *tls.Config {
	cfg := base.Clone()
	cfg.NextProtos = alpn
	if get := base.GetConfigForClient; get != nil {
		cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := get(hello)
			if err != nil || c == nil {
				return c, err
			}
			c = c.Clone()
			c.NextProtos = alpn
			return c, nil
		}
	}
	return cfg
}

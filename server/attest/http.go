package attest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"golang.org/x/time/rate"

	"github.com/signet-pki/signet/attestation"
)

// The endpoint's paths.
const (
	PathChallenge = "/attest/v1/challenge"
	PathActivate  = "/attest/v1/activate"
)

// maxBodyBytes bounds a request body: an EK certificate and two public areas, in JSON.
const maxBodyBytes = 64 << 10

// Limits bound how fast the endpoint answers one source address and one endorsement key.
type Limits struct {
	// PerSource is the rate of calls of one client address (default 5/s, burst 20): a node
	// makes two calls per attestation.
	PerSource rate.Limit
	// PerEK is the rate of challenges for one endorsement key (default 1/s, burst 5).
	PerEK rate.Limit
}

// Observer is told the outcome of each call: step "challenge" or "activate", result "ok",
// "refused", "malformed", "rate_limited" or "error".
type Observer func(step, result string)

// Endpoint serves the challenge round trip over HTTPS with the server's certificate and no
// client certificate: a node has none before it attests. It answers only challenges; it
// signs nothing.
type Endpoint struct {
	svc       *Service
	log       *slog.Logger
	observe   Observer
	sources   *limiterSet
	eks       *limiterSet
	http      *http.Server
	tlsConfig *tls.Config
}

// NewEndpoint returns the endpoint of svc, served with tlsConfig (which must not ask for
// client certificates).
func NewEndpoint(svc *Service, tlsConfig *tls.Config, limits Limits, observe Observer, log *slog.Logger) *Endpoint {
	if limits.PerSource <= 0 {
		limits.PerSource = 5
	}
	if limits.PerEK <= 0 {
		limits.PerEK = 1
	}
	if observe == nil {
		observe = func(string, string) {}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Endpoint{svc: svc, log: log, observe: observe, tlsConfig: tlsConfig,
		sources: newLimiterSet(limits.PerSource, 20), eks: newLimiterSet(limits.PerEK, 5)}
	r := chi.NewRouter()
	r.Post(PathChallenge, e.challenge)
	r.Post(PathActivate, e.activate)
	e.http = &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		IdleTimeout: 60 * time.Second, MaxHeaderBytes: 16 << 10, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	return e
}

// Handler is the endpoint's HTTP handler, for tests and for wrapping.
func (e *Endpoint) Handler() http.Handler { return e.http.Handler }

// Wrap puts middleware around the handler (the server's panic guard).
func (e *Endpoint) Wrap(mw func(http.Handler) http.Handler) { e.http.Handler = mw(e.http.Handler) }

// Serve serves HTTPS on lis until ctx ends.
func (e *Endpoint) Serve(ctx context.Context, lis net.Listener) error {
	done := make(chan error, 1)
	go func() { done <- e.http.Serve(tls.NewListener(lis, e.tlsConfig)) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.http.Shutdown(shutdown)
		<-done
		return nil
	}
}

// ErrorBody is the JSON of a refused call.
type ErrorBody struct {
	// Check is the attestation check that refused (attestation.Check), or "rate limit",
	// "request" or "internal".
	Check   string `json:"check"`
	Message string `json:"message"`
}

func (e *Endpoint) challenge(w http.ResponseWriter, r *http.Request) {
	const step = "challenge"
	if !e.sources.allow(sourceOf(r)) {
		e.fail(w, step, http.StatusTooManyRequests, "rate limit", "too many attestation calls from this address; retry later")
		return
	}
	var req attestation.ChallengeRequest
	if !e.decode(w, r, step, &req) {
		return
	}
	if fp, err := attestation.EKFingerprint(req.EKPublic); err == nil && !e.eks.allow(fp) {
		e.fail(w, step, http.StatusTooManyRequests, "rate limit", "too many challenges for this endorsement key; retry later")
		return
	}
	ch, keys, err := e.svc.Challenge(req)
	if err != nil {
		e.refuse(w, step, err)
		return
	}
	e.log.Info("attestation challenge issued", "node", req.Node, "ek", keys.EK, "ek_trust", keys.EKTrust, "source", sourceOf(r))
	e.answer(w, step, ch)
}

func (e *Endpoint) activate(w http.ResponseWriter, r *http.Request) {
	const step = "activate"
	if !e.sources.allow(sourceOf(r)) {
		e.fail(w, step, http.StatusTooManyRequests, "rate limit", "too many attestation calls from this address; retry later")
		return
	}
	var req attestation.ActivationRequest
	if !e.decode(w, r, step, &req) {
		return
	}
	act, keys, err := e.svc.Activate(req)
	if err != nil {
		e.refuse(w, step, err)
		return
	}
	e.log.Info("attestation ticket issued", "ek", keys.EK, "ak", keys.AKName, "expires", act.Expires, "source", sourceOf(r))
	e.answer(w, step, act)
}

// decode reads a JSON body of at most maxBodyBytes with no unknown field into v.
func (e *Endpoint) decode(w http.ResponseWriter, r *http.Request, step string, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		e.fail(w, step, http.StatusBadRequest, "request", fmt.Sprintf("the body is not the JSON this call takes: %v", err))
		return false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		e.fail(w, step, http.StatusBadRequest, "request", "data after the JSON body")
		return false
	}
	return true
}

// refuse answers a Service error: 400 for a malformed request, 403 for a refused one, 503
// when the state is full, 500 otherwise.
func (e *Endpoint) refuse(w http.ResponseWriter, step string, err error) {
	var f *attestation.Failure
	switch {
	case errors.As(err, &f) && errors.Is(err, attestation.ErrMalformed):
		e.fail(w, step, http.StatusBadRequest, string(f.Check), err.Error())
	case errors.As(err, &f):
		e.fail(w, step, http.StatusForbidden, string(f.Check), err.Error())
	case errors.Is(err, ErrFull):
		e.fail(w, step, http.StatusServiceUnavailable, "internal", "too many challenges are pending; retry later")
	default:
		e.log.Error("attestation call failed", "step", step, "error", err.Error())
		e.fail(w, step, http.StatusInternalServerError, "internal", "internal error; the server log has the details")
	}
}

func (e *Endpoint) fail(w http.ResponseWriter, step string, status int, check, message string) {
	result := map[int]string{http.StatusBadRequest: "malformed", http.StatusForbidden: "refused", http.StatusTooManyRequests: "rate_limited"}[status]
	if result == "" {
		result = "error"
	}
	e.observe(step, result)
	if status == http.StatusForbidden {
		e.log.Info("attestation call refused", "step", step, "check", check, "message", message)
	}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, ErrorBody{Check: check, Message: message})
}

func (e *Endpoint) answer(w http.ResponseWriter, step string, v any) {
	e.observe(step, "ok")
	writeJSON(w, http.StatusOK, v)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// sourceOf is the client's address without its port.
func sourceOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// limiterSet is a token bucket per key, the set bounded: when it is full, it starts over (a
// flood of distinct keys costs memory only up to the bound).
type limiterSet struct {
	mu    sync.Mutex
	rate  rate.Limit
	burst int
	m     map[string]*rate.Limiter
}

const maxLimiters = 65536

func newLimiterSet(r rate.Limit, burst int) *limiterSet {
	return &limiterSet{rate: r, burst: burst, m: map[string]*rate.Limiter{}}
}

func (l *limiterSet) allow(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.m[key]
	if !ok {
		if len(l.m) >= maxLimiters {
			l.m = map[string]*rate.Limiter{}
		}
		lim = rate.NewLimiter(l.rate, l.burst)
		l.m[key] = lim
	}
	return lim.Allow()
}

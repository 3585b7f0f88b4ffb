package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/signet-pki/signet/keystore"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// keyOptions is how the CA keys of signer are opened: the configured PIN rule and timeout,
// and every signature counted in the metrics under the signer's name.
func (s *Server) keyOptions(signer string) keystore.Options {
	return keystore.Options{
		AllowPINValue: s.cfg.Keys.AllowPINValue,
		Timeout:       s.cfg.Keys.Timeout.Duration,
		Observe: func(op keystore.Operation) {
			s.metrics.ObserveKeyOperation(signer, op.Backend, op.Outcome, op.Duration)
		},
	}
}

// keyError is why signer ls's active CA key cannot sign now, or nil. Only an HSM or TPM key
// (a keystore.Device) can become unavailable.
func keyError(ls *loadedSigner) error {
	d, ok := ls.authority.Active().Key.(*keystore.Device)
	if !ok || d.Available() {
		return nil
	}
	if err := d.Err(); err != nil {
		return err
	}
	return keystore.ErrUnavailable
}

// updateSignerHealth sets each signer's grpc.health.v1 status (SignerHealthService) and its
// key_available metric: SERVING when the server is ready (serverErr nil) and the signer's
// active key can sign. It logs each signer whose key was lost or came back since the last call
// (last holds the previous statuses, by signer name).
func (s *Server) updateSignerHealth(serverErr error, last map[string]bool) {
	s.mu.Lock()
	signers := append([]*loadedSigner(nil), s.signers...)
	s.mu.Unlock()
	for _, ls := range signers {
		name := ls.signer.Issuer.SignerName()
		keyErr := keyError(ls)
		s.metrics.SetKeyAvailable(name, keyErr == nil)
		caErr := caError(ls, time.Now())
		serving := serverErr == nil && keyErr == nil && caErr == nil
		st := healthpb.HealthCheckResponse_SERVING
		if !serving {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		s.health.SetServingStatus(signetv1.SignerHealthService(name), st)
		was, known := last[name]
		switch {
		case keyErr != nil && (!known || was):
			s.log.Error("signer's CA key cannot sign: its device is being re-opened; requests fail as KEY_UNAVAILABLE meanwhile",
				"signer", name, "error", keyErr.Error())
		case keyErr == nil && known && !was:
			s.log.Info("signer's CA key can sign again", "signer", name)
		}
		last[name] = keyErr == nil
		caKey := name + "\x00ca"
		was, known = last[caKey]
		switch {
		case caErr != nil && (!known || was):
			s.log.Error("signer is not ready: its active CA certificate cannot issue; rotate the CA (signetctl ca stage, activate)",
				"signer", name, "error", caErr.Error())
		case caErr == nil && known && !was:
			s.log.Info("signer's active CA certificate is valid again", "signer", name)
		}
		last[caKey] = caErr == nil
	}
}

// caError is why signer ls's active CA certificate cannot issue at now (expired, or not valid
// yet), or nil: the signer reports NOT_SERVING, so that clients fail over, and the start says
// so.
func caError(ls *loadedSigner, now time.Time) error {
	c := ls.authority.Active().Certificate
	switch {
	case now.After(c.NotAfter):
		return fmt.Errorf("the active CA certificate (%s) expired at %s", c.Subject, c.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(c.NotBefore):
		return fmt.Errorf("the active CA certificate (%s) is not valid before %s", c.Subject, c.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

// signerHealth is the grpc.health.v1 service: the standard server, except that a signer's
// service name (SignerHealthService) of a signer the server does not serve reports the
// server's overall health. A watcher of such a signer then reaches the server and is told
// UNKNOWN_SIGNER, a final answer, instead of finding no healthy endpoint and retrying forever.
type signerHealth struct {
	*health.Server
	served func(signer string) bool
}

func (h signerHealth) service(name string) string {
	if signer, ok := strings.CutPrefix(name, signetv1.HealthService+"/"); ok && !h.served(signer) {
		return signetv1.HealthService
	}
	return name
}

// Check answers for the service asked, or the overall one (see signerHealth).
func (h signerHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return h.Server.Check(ctx, &healthpb.HealthCheckRequest{Service: h.service(req.GetService())})
}

// Watch streams the status of the service asked, or the overall one (see signerHealth).
func (h signerHealth) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	return h.Server.Watch(&healthpb.HealthCheckRequest{Service: h.service(req.GetService())}, stream)
}

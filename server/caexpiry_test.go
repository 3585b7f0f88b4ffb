package server_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/testpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/config"
)

// TestExpiredCASignerNotReady: a signer whose active CA certificate has expired reports
// NOT_SERVING under its own health service name while the server and its other signers
// serve, and the server says so at start.
func TestExpiredCASignerNotReady(t *testing.T) {
	t.Parallel()
	expired := testpki.CA(t, func(c *x509.Certificate) {
		c.Subject = pkix.Name{CommonName: "expired signer CA"}
		c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
	})
	s := startServer(t, func(cfg *config.Config) {
		dir := t.TempDir()
		cert, key := filepath.Join(dir, "expired.crt"), filepath.Join(dir, "expired.key")
		if err := os.WriteFile(cert, expired.CertPEM(), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(key, testpki.KeyPEM(t, expired.Key), 0o600); err != nil {
			t.Fatal(err)
		}
		for i := range cfg.Signers {
			if cfg.Signers[i].Name == devpki.DefaultSigner {
				cfg.Signers[i].Key, cfg.Signers[i].Certificate = key, cert
			}
		}
	})
	conn := s.dial(t, s.clientTLS(t, s.devClient(t)))
	health := healthpb.NewHealthClient(conn)
	for service, want := range map[string]healthpb.HealthCheckResponse_ServingStatus{
		signetv1.HealthService:                                        healthpb.HealthCheckResponse_SERVING,
		signetv1.SignerHealthService(devpki.DefaultSigner):            healthpb.HealthCheckResponse_NOT_SERVING,
		signetv1.SignerHealthService(devpki.DefaultPodIdentitySigner): healthpb.HealthCheckResponse_SERVING,
	} {
		hr, err := health.Check(callContext(t), &healthpb.HealthCheckRequest{Service: service})
		if err != nil || hr.GetStatus() != want {
			t.Errorf("health of %q = %v (%v), want %s", service, hr.GetStatus(), err, want)
		}
	}
	if !s.logs.Contains("signer is not ready: its active CA certificate cannot issue") || !s.logs.Contains("expired at") {
		t.Error("the server did not say at start that the signer's CA expired")
	}
}

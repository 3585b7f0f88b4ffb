package server

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"

	"golang.org/x/time/rate"

	"github.com/signet-pki/signet/internal/httpserver"
	"github.com/signet-pki/signet/server/attest"
	"github.com/signet-pki/signet/server/configcheck"
	"github.com/signet-pki/signet/server/metrics"
)

// newAttestation builds the attestation service when the configuration turns it on, before
// the ledger is opened, so that the EK-to-node bindings are rebuilt from its records.
func (s *Server) newAttestation() error {
	ac := s.cfg.Attestation
	if !ac.Enabled() {
		return nil
	}
	trust, err := configcheck.LoadTrust(ac)
	if err != nil {
		return err
	}
	boot, err := configcheck.LoadBootPolicy(ac.BootState)
	if err != nil {
		return err
	}
	var ticketKey []byte
	if ac.TicketKeyFile != "" {
		if ticketKey, err = os.ReadFile(ac.TicketKeyFile); err != nil {
			return fmt.Errorf("reading attestation.ticketKeyFile: %w", err)
		}
		if len(ticketKey) < 32 {
			return fmt.Errorf("attestation.ticketKeyFile %s holds %d bytes, fewer than 32: make it with head -c 32 /dev/urandom", ac.TicketKeyFile, len(ticketKey))
		}
	}
	challengeTTL, ticketTTL := ac.TTLs()
	s.attest, err = attest.New(attest.Options{Trust: trust, Boot: boot, ChallengeTTL: challengeTTL, TicketTTL: ticketTTL, TicketKey: ticketKey, Log: s.log})
	if err != nil {
		return err
	}
	s.log.Info("TPM attestation on", "address", ac.Address, "ek_roots", ac.EKRootsFile, "ek_allow_list", ac.EKAllowListFile,
		"allowed_eks", len(trust.AllowedEKs))
	return nil
}

// buildAttestationEndpoint listens for the challenge endpoint, served with the server's
// certificate and no client certificate, behind the panic guard.
func (s *Server) buildAttestationEndpoint() error {
	if s.attest == nil {
		return nil
	}
	ac := s.cfg.Attestation
	s.attestEndpoint = attest.NewEndpoint(s.attest, s.tls.serverOnlyConfig(),
		attest.Limits{PerSource: rate.Limit(ac.PerSourceRate), PerEK: rate.Limit(ac.PerEKRate)}, s.metrics.ObserveAttestation, s.log)
	s.attestEndpoint.Wrap(s.guard.HTTP(metrics.PanicMethodAttestation, httpserver.InternalError))
	var err error
	if s.attestLis, err = net.Listen("tcp", ac.Address); err != nil {
		return fmt.Errorf("listening on %s (attestation.address): %w", ac.Address, err)
	}
	return nil
}

// AttestationAddr is the address the attestation endpoint is served on, "" when it is off.
func (s *Server) AttestationAddr() string {
	if s.attestLis == nil {
		return ""
	}
	return s.attestLis.Addr().String()
}

// serverOnlyConfig is the attestation endpoint's TLS configuration: TLS 1.3 with the server
// certificate of the latest generation, and no client certificate asked for.
func (s *tlsSource) serverOnlyConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			m := s.material.Current()
			return &m.cert, nil
		},
	}
}

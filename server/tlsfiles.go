package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/signet-pki/signet/internal/filereload"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/metrics"
)

// tlsMaterial is one loaded generation of the server certificate and the client CA pool.
type tlsMaterial struct {
	cert      tls.Certificate
	clientCAs *x509.CertPool
}

// tlsSource serves TLS configurations from files that may be replaced at any time: every
// handshake uses the latest generation that loaded successfully.
type tlsSource struct {
	material *filereload.Value[*tlsMaterial]
	// authorize, when set, runs after the client chain is verified (authorization of the
	// client identity); its refusals are reported to refusals as identity_not_configured.
	authorize func(tls.ConnectionState) error
	// refusals reports refused clients (see tlsrefusal.go); nil reports nothing.
	refusals *refusalLog
}

// newTLSSource loads the files once; an error names the file that is wrong.
func newTLSSource(files config.TLS) (*tlsSource, error) {
	load := func() (*tlsMaterial, error) {
		cert, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("loading TLS certificate %s and key %s: %w", files.CertFile, files.KeyFile, err)
		}
		caCerts, err := filereload.ReadCertificates(files.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("loading client CA: %w", err)
		}
		pool := x509.NewCertPool()
		for _, ca := range caCerts {
			pool.AddCert(ca)
		}
		return &tlsMaterial{cert: cert, clientCAs: pool}, nil
	}
	material, err := filereload.New([]string{files.CertFile, files.KeyFile, files.ClientCAFile}, load, filereload.Options{})
	if err != nil {
		return nil, err
	}
	return &tlsSource{material: material}, nil
}

// reload reads the files again and swaps them in if their contents changed. It reports
// whether a new generation is in use; on error the previous one stays.
func (s *tlsSource) reload() (bool, error) { return s.material.Check() }

// certificate is the leaf of the server certificate in use (tls.LoadX509KeyPair fills Leaf),
// read at every scrape by signet_server_tls_certificate_expiry_timestamp_seconds.
func (s *tlsSource) certificate() *x509.Certificate { return s.material.Current().cert.Leaf }

// guard makes authorize decide on every client whose chain verified, and reports refused
// clients to log and m (see tlsrefusal.go).
func (s *tlsSource) guard(authorize func(tls.ConnectionState) error, log *slog.Logger, m *metrics.Metrics) {
	s.authorize = authorize
	s.refusals = newRefusalLog(log, m, time.Now)
}

// config is the listener's TLS configuration: TLS 1.3, client certificates required and
// verified by crypto/tls against the client CA pool (why not by hand: tlsrefusal.go), then
// authorized, material from the latest generation at each handshake.
func (s *tlsSource) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			m := s.material.Current()
			var remote net.Addr
			if hello.Conn != nil {
				remote = hello.Conn.RemoteAddr()
			}
			return &tls.Config{
				MinVersion:       tls.VersionTLS13,
				Certificates:     []tls.Certificate{m.cert},
				ClientAuth:       tls.RequireAndVerifyClientCert,
				ClientCAs:        m.clientCAs,
				VerifyConnection: s.verifyConnection(remote),
			}, nil
		},
	}
}

// verifyConnection is the VerifyConnection hook of a connection from remote: authorize, its
// refusal reported; nil without authorize.
func (s *tlsSource) verifyConnection(remote net.Addr) func(tls.ConnectionState) error {
	if s.authorize == nil {
		return nil
	}
	return func(cs tls.ConnectionState) error {
		err := s.authorize(cs)
		if err == nil || s.refusals == nil {
			return err
		}
		var leaf *x509.Certificate
		if len(cs.PeerCertificates) > 0 {
			leaf = cs.PeerCertificates[0]
		}
		s.refusals.refused(remote, metrics.TLSRefusedIdentityNotConfigured, leaf, err)
		return reportedError{err}
	}
}

// credentials are the gRPC listener's transport credentials: config, with every failed
// handshake reported.
func (s *tlsSource) credentials() credentials.TransportCredentials {
	return refusingCreds{TransportCredentials: credentials.NewTLS(s.config()), refusals: s.refusals}
}

package server

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/signet-pki/signet/server/config"
)

// tlsMaterial is one loaded generation of the server certificate and the client CA pool.
type tlsMaterial struct {
	cert      tls.Certificate
	clientCAs *x509.CertPool
	digest    [sha256.Size]byte
}

// tlsSource serves TLS configurations from files that may be replaced at any time: every
// handshake uses the latest generation that loaded successfully.
type tlsSource struct {
	files config.TLS
	cur   atomic.Pointer[tlsMaterial]
	// verifyConnection, when set, runs after the client chain is verified (authorization of
	// the client identity).
	verifyConnection func(tls.ConnectionState) error
}

// newTLSSource loads the files once; an error names the file that is wrong.
func newTLSSource(files config.TLS) (*tlsSource, error) {
	s := &tlsSource{files: files}
	if _, err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// reload reads the files again and swaps them in if their contents changed. It reports
// whether a new generation is in use; on error the previous one stays.
func (s *tlsSource) reload() (bool, error) {
	digest, err := digestFiles(s.files.CertFile, s.files.KeyFile, s.files.ClientCAFile)
	if err != nil {
		return false, err
	}
	if cur := s.cur.Load(); cur != nil && cur.digest == digest {
		return false, nil
	}
	cert, err := tls.LoadX509KeyPair(s.files.CertFile, s.files.KeyFile)
	if err != nil {
		return false, fmt.Errorf("loading TLS certificate %s and key %s: %w", s.files.CertFile, s.files.KeyFile, err)
	}
	caCerts, err := readCertificates(s.files.ClientCAFile)
	if err != nil {
		return false, fmt.Errorf("loading client CA: %w", err)
	}
	pool := x509.NewCertPool()
	for _, ca := range caCerts {
		pool.AddCert(ca)
	}
	s.cur.Store(&tlsMaterial{cert: cert, clientCAs: pool, digest: digest})
	return true, nil
}

// config is the listener's TLS configuration: TLS 1.3, client certificates required and
// verified, material from the latest generation at each handshake.
func (s *tlsSource) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := s.cur.Load()
			return &tls.Config{
				MinVersion:       tls.VersionTLS13,
				Certificates:     []tls.Certificate{m.cert},
				ClientAuth:       tls.RequireAndVerifyClientCert,
				ClientCAs:        m.clientCAs,
				VerifyConnection: s.verifyConnection,
			}, nil
		},
	}
}

// digestFiles hashes the contents of the files, in order, with their lengths.
func digestFiles(paths ...string) ([sha256.Size]byte, error) {
	h := sha256.New()
	for _, p := range paths {
		if p == "" {
			fmt.Fprint(h, "-|")
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return [sha256.Size]byte{}, fmt.Errorf("reading %s: %w", p, err)
		}
		fmt.Fprintf(h, "%d|", len(data))
		h.Write(data)
	}
	var out [sha256.Size]byte
	copy(out[:], h.Sum(nil))
	return out, nil
}

package signerclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"time"

	"google.golang.org/grpc/credentials"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/internal/filereload"
)

// reloadInterval is the least time between two checks of the TLS files (client certificate
// and key, server CA bundle).
const reloadInterval = 5 * time.Second

// newFileValue loads a value from files with filereload, checked on use at most once per
// reloadInterval (a changed content, not a changed modification time). A failed load (a
// certificate written before its key, a bundle being rewritten) keeps the previous value, is
// logged once per version of the files, and is retried at the next check.
func newFileValue[T any](what string, paths []string, load func() (T, error), clk clock.PassiveClock, logger klog.Logger) (*filereload.Value[T], error) {
	return filereload.New(paths, load, filereload.Options{
		Clock:    clk,
		Interval: reloadInterval,
		OnReload: func() { logger.Info("Reloaded TLS files", "what", what, "files", paths) },
		OnError:  func(err error) { logger.Error(err, "Keeping the previous TLS files", "what", what, "files", paths) },
	})
}

// certReloader serves the client certificate and key from disk, reloaded as newFileValue
// says.
type certReloader struct {
	*filereload.Value[*tls.Certificate]
}

// newCertReloader loads the pair once, so that a bad configuration fails at start.
func newCertReloader(certFile, keyFile string, clk clock.PassiveClock, logger klog.Logger) (*certReloader, error) {
	load := func() (*tls.Certificate, error) {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("loading client certificate %s: %w", certFile, err)
		}
		return &cert, nil
	}
	r, err := newFileValue("client certificate", []string{certFile, keyFile}, load, clk, logger)
	if err != nil {
		return nil, err
	}
	return &certReloader{r}, nil
}

// GetClientCertificate implements tls.Config.GetClientCertificate.
func (r *certReloader) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.Get(), nil
}

// ClientCertificate returns the leaf of the client certificate the next handshake presents
// (tls.LoadX509KeyPair fills Leaf), after checking its files as a handshake does (at most once
// per reloadInterval): the source of signet_watcher_client_certificate_expiry_timestamp_seconds,
// which thus follows a renewed file even while the connection made with the old one lasts.
func (c *Client) ClientCertificate() *x509.Certificate { return c.certs.Get().Leaf }

// newCAReloader loads the server CA bundle once, so that a bad configuration fails at start;
// a bundle without a certificate is an error.
func newCAReloader(caFile string, clk clock.PassiveClock, logger klog.Logger) (*filereload.Value[*x509.CertPool], error) {
	load := func() (*x509.CertPool, error) {
		data, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("reading server CA: %w", err)
		}
		certs, err := filereload.ParseCertificates(data)
		if err != nil {
			return nil, fmt.Errorf("reading server CA %s: %w", caFile, err)
		}
		roots := x509.NewCertPool()
		for _, c := range certs {
			roots.AddCert(c)
		}
		return roots, nil
	}
	return newFileValue("server CA bundle", []string{caFile}, load, clk, logger)
}

// reloadingTLS is gRPC transport credentials that build the TLS configuration afresh for
// every connection: base with RootCAs set to the current server CA bundle. Each handshake is
// then exactly credentials.NewTLS's, with the standard library verifying the server's chain,
// name (the authority gRPC dials, which resolverAddresses sets), and key usage (server auth);
// no verification is done by hand. An established connection keeps the bundle it was
// verified with; new connections use the reloaded one.
type reloadingTLS struct {
	base  *tls.Config // without RootCAs
	roots *filereload.Value[*x509.CertPool]
}

// current returns the credentials of a new connection.
func (c *reloadingTLS) current() credentials.TransportCredentials {
	cfg := c.base.Clone()
	cfg.RootCAs = c.roots.Get()
	return credentials.NewTLS(cfg)
}

// ClientHandshake implements credentials.TransportCredentials.
func (c *reloadingTLS) ClientHandshake(ctx context.Context, authority string, rawConn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.current().ClientHandshake(ctx, authority, rawConn)
}

// ServerHandshake implements credentials.TransportCredentials.
func (c *reloadingTLS) ServerHandshake(rawConn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.current().ServerHandshake(rawConn)
}

// Info implements credentials.TransportCredentials.
func (c *reloadingTLS) Info() credentials.ProtocolInfo {
	return credentials.NewTLS(c.base).Info()
}

// Clone implements credentials.TransportCredentials; the clone shares the CA reloader.
func (c *reloadingTLS) Clone() credentials.TransportCredentials {
	return &reloadingTLS{base: c.base.Clone(), roots: c.roots}
}

// OverrideServerName implements credentials.TransportCredentials (deprecated there).
func (c *reloadingTLS) OverrideServerName(name string) error {
	c.base.ServerName = name
	return nil
}

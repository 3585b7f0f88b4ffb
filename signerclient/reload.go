package signerclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// reloadInterval is the least time between two checks of the TLS files (client certificate
// and key, server CA bundle).
const reloadInterval = 5 * time.Second

// fileReloader holds a value loaded from files and loads it again when one of them changes
// (modification time or size), checked at most once per reloadInterval, on use. A failed
// load (a certificate written before its key, a bundle being rewritten) keeps the previous
// value, is logged once per change of the files, and is retried at the next check.
type fileReloader[T any] struct {
	what   string // what the files hold, for logs
	paths  []string
	load   func() (T, error)
	clock  clock.PassiveClock
	logger klog.Logger

	mu        sync.Mutex
	cur       T
	stamp     []fileStamp // of the files cur was loaded from
	failed    []fileStamp // of the files whose load failed last, already logged
	lastCheck time.Time
}

// fileStamp identifies one version of a file: its modification time in Unix nanoseconds and
// its size; a file that cannot be examined has size -1.
type fileStamp struct{ mod, size int64 }

// newFileReloader loads the value once, so that a bad configuration fails at start.
func newFileReloader[T any](what string, paths []string, load func() (T, error), clk clock.PassiveClock, logger klog.Logger) (*fileReloader[T], error) {
	stamp := stampFiles(paths)
	v, err := load()
	if err != nil {
		return nil, err
	}
	return &fileReloader[T]{what: what, paths: paths, load: load, clock: clk, logger: logger,
		cur: v, stamp: stamp, lastCheck: clk.Now()}, nil
}

// get returns the current value, first reloading it if the files changed and the last check
// is at least reloadInterval ago.
func (r *fileReloader[T]) get() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	if now.Sub(r.lastCheck) < reloadInterval {
		return r.cur
	}
	r.lastCheck = now
	stamp := stampFiles(r.paths)
	if slices.Equal(stamp, r.stamp) {
		return r.cur
	}
	v, err := r.load()
	if err != nil {
		if !slices.Equal(stamp, r.failed) {
			r.failed = stamp
			r.logger.Error(err, "Keeping the previous TLS files", "what", r.what, "files", r.paths)
		}
		return r.cur
	}
	r.cur, r.stamp, r.failed = v, stamp, nil
	r.logger.Info("Reloaded TLS files", "what", r.what, "files", r.paths)
	return r.cur
}

// stampFiles returns the current stamp of each file.
func stampFiles(paths []string) []fileStamp {
	out := make([]fileStamp, len(paths))
	for i, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			out[i] = fileStamp{size: -1}
			continue
		}
		out[i] = fileStamp{mod: info.ModTime().UnixNano(), size: info.Size()}
	}
	return out
}

// certReloader serves the client certificate and key from disk, reloaded as fileReloader
// says.
type certReloader struct {
	*fileReloader[*tls.Certificate]
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
	r, err := newFileReloader("client certificate", []string{certFile, keyFile}, load, clk, logger)
	if err != nil {
		return nil, err
	}
	return &certReloader{r}, nil
}

// GetClientCertificate implements tls.Config.GetClientCertificate.
func (r *certReloader) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.get(), nil
}

// newCAReloader loads the server CA bundle once, so that a bad configuration fails at start;
// a bundle without a certificate is an error.
func newCAReloader(caFile string, clk clock.PassiveClock, logger klog.Logger) (*fileReloader[*x509.CertPool], error) {
	load := func() (*x509.CertPool, error) {
		caPEM, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("reading server CA: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("reading server CA %s: no PEM certificates found", caFile)
		}
		return roots, nil
	}
	return newFileReloader("server CA bundle", []string{caFile}, load, clk, logger)
}

// reloadingTLS is gRPC transport credentials that build the TLS configuration afresh for
// every connection: base with RootCAs set to the current server CA bundle. Each handshake is
// then exactly credentials.NewTLS's, with the standard library verifying the server's chain,
// name (the authority gRPC dials, which resolverAddresses sets), and key usage (server auth);
// no verification is done by hand. An established connection keeps the bundle it was
// verified with; new connections use the reloaded one.
type reloadingTLS struct {
	base  *tls.Config // without RootCAs
	roots *fileReloader[*x509.CertPool]
}

// current returns the credentials of a new connection.
func (c *reloadingTLS) current() credentials.TransportCredentials {
	cfg := c.base.Clone()
	cfg.RootCAs = c.roots.get()
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

package signerclient

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// reloadInterval is the least time between two checks of the client certificate files.
const reloadInterval = 5 * time.Second

// certReloader serves the client certificate from disk, re-reading the files when their
// modification time or size changes, checked at most once per reloadInterval. A failed
// reload (for example a certificate written before its key) keeps the previous pair and is
// retried at the next check.
type certReloader struct {
	certFile, keyFile string
	clock             clock.PassiveClock
	logger            klog.Logger

	mu       sync.Mutex
	cert     *tls.Certificate
	stamp    fileStamp
	lastSeen time.Time
}

// fileStamp identifies one version of the certificate and key files.
type fileStamp struct {
	certMod, keyMod   int64 // modification times, Unix nanoseconds
	certSize, keySize int64
}

// newCertReloader loads the pair once, so that a bad configuration fails at start.
func newCertReloader(certFile, keyFile string, clk clock.PassiveClock, logger klog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, clock: clk, logger: logger}
	stamp, err := r.statFiles()
	if err != nil {
		return nil, err
	}
	if err := r.load(stamp); err != nil {
		return nil, err
	}
	r.lastSeen = clk.Now()
	return r, nil
}

// GetClientCertificate implements tls.Config.GetClientCertificate.
func (r *certReloader) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	if now.Sub(r.lastSeen) < reloadInterval {
		return r.cert, nil
	}
	r.lastSeen = now
	stamp, err := r.statFiles()
	if err == nil && stamp != r.stamp {
		err = r.load(stamp)
		if err == nil {
			r.logger.Info("Reloaded client certificate", "certFile", r.certFile)
		}
	}
	if err != nil {
		r.logger.Error(err, "Keeping the previous client certificate", "certFile", r.certFile)
	}
	return r.cert, nil
}

// statFiles returns the current stamp of the certificate and key files.
func (r *certReloader) statFiles() (fileStamp, error) {
	certInfo, err := os.Stat(r.certFile)
	if err != nil {
		return fileStamp{}, fmt.Errorf("reading client certificate: %w", err)
	}
	keyInfo, err := os.Stat(r.keyFile)
	if err != nil {
		return fileStamp{}, fmt.Errorf("reading client key: %w", err)
	}
	return fileStamp{
		certMod: certInfo.ModTime().UnixNano(), keyMod: keyInfo.ModTime().UnixNano(),
		certSize: certInfo.Size(), keySize: keyInfo.Size(),
	}, nil
}

// load reads the pair and, if it parses and matches, makes it current under stamp.
func (r *certReloader) load(stamp fileStamp) error {
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("loading client certificate %s: %w", r.certFile, err)
	}
	r.cert = &cert
	r.stamp = stamp
	return nil
}

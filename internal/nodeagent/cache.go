package nodeagent

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/signet-pki/signet/internal/atomicfile"
)

// kind is a certificate the agent keeps: the kubelet's client or serving certificate. Its
// files in the cache directory are <kind>.crt, <kind>.key and <kind>-failures.json.
type kind string

const (
	clientKind  kind = "client"
	servingKind kind = "serving"
)

// lockFile is the cache directory's lock.
const lockFile = ".lock"

// CertFile and KeyFile are the paths of the certificate and key of kind in dir: what the
// kubelet's --tls-cert-file and --tls-private-key-file name for the serving certificate.
func CertFile(dir string, serving bool) string {
	return filepath.Join(dir, string(kindOf(serving))+".crt")
}
func KeyFile(dir string, serving bool) string {
	return filepath.Join(dir, string(kindOf(serving))+".key")
}

func kindOf(serving bool) kind {
	if serving {
		return servingKind
	}
	return clientKind
}

// Credential is a client certificate and its key, as the agent hands it to the kubelet.
type Credential struct {
	CertPEM, KeyPEM     []byte
	NotBefore, NotAfter time.Time
	// RenewAt is when the agent attests again for a new certificate: the ExecCredential's
	// expiration, so that client-go calls the agent again then.
	RenewAt time.Time
}

// leaf parses the credential's certificate.
func (c *Credential) leaf() (*x509.Certificate, error) {
	pair, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(pair.Certificate[0])
}

// lock takes the cache directory's lock (an exclusive flock, held by the open file): the
// kubelet may run the plugin several times at once, and only one may attest at a time.
func lock(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the cache directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the cache lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("locking the cache: %w", err)
	}
	return func() { _ = f.Close() }, nil
}

// readCache returns the cached credential, nil when there is none or it does not load (a
// torn or foreign file is not trusted: the agent attests again).
func readCache(dir string, k kind, renewFraction float64) *Credential {
	certPEM, err1 := os.ReadFile(filepath.Join(dir, string(k)+".crt"))
	keyPEM, err2 := os.ReadFile(filepath.Join(dir, string(k)+".key"))
	if err1 != nil || err2 != nil {
		return nil
	}
	c, err := newCredential(certPEM, keyPEM, renewFraction)
	if err != nil {
		return nil
	}
	return c
}

// newCredential checks that the certificate and key match and computes the renewal time.
func newCredential(certPEM, keyPEM []byte, renewFraction float64) (*Credential, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the certificate and key do not form a pair: %w", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	return &Credential{CertPEM: certPEM, KeyPEM: keyPEM, NotBefore: leaf.NotBefore, NotAfter: leaf.NotAfter,
		RenewAt: leaf.NotBefore.Add(time.Duration(float64(life) * renewFraction))}, nil
}

// writeCache stores a credential: the key first (0600), then the certificate, each replaced
// atomically.
func writeCache(dir string, k kind, c *Credential) error {
	if err := atomicfile.Write(filepath.Join(dir, string(k)+".key"), c.KeyPEM, 0o600); err != nil {
		return fmt.Errorf("writing the key: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, string(k)+".crt"), c.CertPEM, 0o644); err != nil {
		return fmt.Errorf("writing the certificate: %w", err)
	}
	return nil
}

// failures is the record of consecutive failed renewals, for the back-off.
type failures struct {
	Count int       `json:"count"`
	Last  time.Time `json:"last"`
}

func readFailures(dir string, k kind) failures {
	var f failures
	data, err := os.ReadFile(filepath.Join(dir, string(k)+"-failures.json"))
	if err == nil {
		_ = json.Unmarshal(data, &f)
	}
	return f
}

func writeFailures(dir string, k kind, f failures) {
	path := filepath.Join(dir, string(k)+"-failures.json")
	if f.Count == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return
		}
		return
	}
	data, _ := json.Marshal(f)
	_ = atomicfile.Write(path, data, 0o600)
}

// Package filereload holds a value loaded from files and loads it again when their contents
// change: the TLS material and CA files of the server and of its clients, which operators and
// cert-manager replace in place. A change is a change of the files' contents (a SHA-256
// digest), not of their modification times, so a file touched but unchanged costs nothing and
// one replaced within the same second is still seen.
package filereload

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Options configures a Value.
type Options struct {
	// Clock paces Get; default the real clock.
	Clock clock.PassiveClock
	// Interval is the least time between two checks made by Get; 0 checks on every Get.
	Interval time.Duration
	// OnReload, if set, is called after a new value is loaded (not for the first load).
	OnReload func()
	// OnError, if set, is called when loading changed files fails, once per version of the
	// files: the previous value stays in use and the load is tried again at the next check.
	OnError func(error)
}

// Value is a value loaded from files. It is safe for concurrent use.
type Value[T any] struct {
	paths []string
	load  func() (T, error)
	opts  Options

	mu        sync.Mutex
	cur       T
	digest    [sha256.Size]byte // of the files cur was loaded from
	failed    [sha256.Size]byte // of the files whose load failed last, already reported
	hasFailed bool
	lastCheck time.Time
}

// New loads the value once from paths with load, so that a bad configuration fails at start.
func New[T any](paths []string, load func() (T, error), opts Options) (*Value[T], error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	// Load first: its error says what the files are for.
	v, err := load()
	if err != nil {
		return nil, err
	}
	digest, err := Digest(paths...)
	if err != nil {
		return nil, err
	}
	return &Value[T]{paths: paths, load: load, opts: opts, cur: v, digest: digest, lastCheck: opts.Clock.Now()}, nil
}

// Current returns the value in use, without looking at the files.
func (v *Value[T]) Current() T {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.cur
}

// Get returns the value in use after checking the files, if the last check is at least
// Options.Interval ago.
func (v *Value[T]) Get() T {
	v.mu.Lock()
	defer v.mu.Unlock()
	if now := v.opts.Clock.Now(); now.Sub(v.lastCheck) >= v.opts.Interval {
		v.lastCheck = now
		_, _ = v.check()
	}
	return v.cur
}

// Check reads the files now and loads the value again if their contents changed. It reports
// whether a new value is in use; on error the previous one stays.
func (v *Value[T]) Check() (bool, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lastCheck = v.opts.Clock.Now()
	return v.check()
}

func (v *Value[T]) check() (bool, error) {
	digest, err := Digest(v.paths...)
	if err == nil && digest == v.digest {
		return false, nil
	}
	var loaded T
	if err == nil {
		loaded, err = v.load()
	}
	if err != nil {
		if !v.hasFailed || digest != v.failed {
			v.failed, v.hasFailed = digest, true
			if v.opts.OnError != nil {
				v.opts.OnError(err)
			}
		}
		return false, err
	}
	v.cur, v.digest, v.hasFailed = loaded, digest, false
	if v.opts.OnReload != nil {
		v.opts.OnReload()
	}
	return true, nil
}

// Digest hashes the contents of the files, in order, with their lengths; an empty path
// stands for an absent optional file.
func Digest(paths ...string) ([sha256.Size]byte, error) {
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

// ReadCertificates reads every CERTIFICATE block of a PEM file; there must be at least one.
func ReadCertificates(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading certificate file: %w", err)
	}
	certs, err := ParseCertificates(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return certs, nil
}

// ParseCertificates parses every CERTIFICATE block of PEM data (other blocks are skipped);
// there must be at least one.
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing certificate: %w", err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("no CERTIFICATE block")
	}
	return certs, nil
}

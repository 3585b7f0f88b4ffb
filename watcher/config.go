// Package watcher runs Signet's in-cluster controllers: it watches approved
// CertificateSigningRequests for the configured signer names, forwards them to the signing
// server over gRPC with mTLS, and writes the answer into the object's status.
package watcher

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/internal/configfile"
)

// APIVersion and Kind identify the watcher's configuration file format.
const (
	APIVersion = "signet.dev/v1alpha1"
	Kind       = "WatcherConfiguration"
)

// Defaults applied by (*Config).Default to fields left at their zero value.
const (
	DefaultWorkers        = 4
	DefaultRPCTimeout     = 10 * time.Second
	DefaultBackoffInitial = 250 * time.Millisecond
	DefaultBackoffMax     = 30 * time.Second
)

// Config is the watcher's configuration file (apiVersion signet.dev/v1alpha1,
// kind WatcherConfiguration). Its zero value, after Default, holds every default; only
// signerNames and the server connection must be supplied.
type Config struct {
	// APIVersion must be signet.dev/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind must be WatcherConfiguration.
	Kind string `json:"kind"`
	// SignerNames are the spec.signerName values this watcher serves (required), each of the
	// form domain/path, for example example.com/serving.
	SignerNames []string `json:"signerNames"`
	// Server is how to reach the signing server.
	Server ServerConfig `json:"server"`
	// Workers is the number of CSRs processed in parallel (default 4).
	Workers int `json:"workers,omitempty"`
	// RPCTimeout bounds each call to the signing server (default 10s).
	RPCTimeout metav1.Duration `json:"rpcTimeout,omitempty"`
	// Backoff is the per-object retry back-off after a transient failure.
	Backoff BackoffConfig `json:"backoff"`
}

// ServerConfig is the gRPC connection to the signing server, authenticated with mTLS.
type ServerConfig struct {
	// Address is the server's host:port.
	Address string `json:"address"`
	// CAFile is the PEM bundle of CA certificates that verify the server.
	CAFile string `json:"caFile"`
	// CertFile is the watcher's PEM client certificate (chain). Reloaded when it changes.
	CertFile string `json:"certFile"`
	// KeyFile is the PEM private key of CertFile. Reloaded when it changes.
	KeyFile string `json:"keyFile"`
	// ServerName overrides the name verified in the server's certificate; by default the host
	// part of Address.
	ServerName string `json:"serverName,omitempty"`
}

// BackoffConfig is an exponential per-object back-off.
type BackoffConfig struct {
	// Initial is the first delay (default 250ms); it doubles on every failure.
	Initial metav1.Duration `json:"initial,omitempty"`
	// Max caps the delay (default 30s).
	Max metav1.Duration `json:"max,omitempty"`
}

// LoadConfig reads the configuration file at path, strictly: field names are case-sensitive,
// and every unknown or duplicated field is an error naming its path (server.adress).
// apiVersion and kind must be present and match. It applies Default but does not call
// Validate, so that flags may still fill required fields.
func LoadConfig(path string) (*Config, error) {
	cfg := &Config{}
	if err := configfile.Decode(path, APIVersion, Kind, cfg); err != nil {
		return nil, fmt.Errorf("loading watcher config: %w", err)
	}
	cfg.Default()
	return cfg, nil
}

// Default fills every field left at its zero value with its default, including apiVersion and
// kind. Fields that are set, even to invalid values, are left for Validate to report.
func (c *Config) Default() {
	if c.APIVersion == "" {
		c.APIVersion = APIVersion
	}
	if c.Kind == "" {
		c.Kind = Kind
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.RPCTimeout.Duration == 0 {
		c.RPCTimeout.Duration = DefaultRPCTimeout
	}
	if c.Backoff.Initial.Duration == 0 {
		c.Backoff.Initial.Duration = DefaultBackoffInitial
	}
	if c.Backoff.Max.Duration == 0 {
		c.Backoff.Max.Duration = DefaultBackoffMax
	}
}

// Validate checks a defaulted Config and returns every problem found, joined, each prefixed
// with the field it concerns; nil when the Config is usable.
func (c *Config) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.APIVersion != APIVersion {
		add("apiVersion", "is %q, want %q", c.APIVersion, APIVersion)
	}
	if c.Kind != Kind {
		add("kind", "is %q, want %q", c.Kind, Kind)
	}
	if len(c.SignerNames) == 0 {
		add("signerNames", "at least one signer name is required")
	}
	seen := make(map[string]bool, len(c.SignerNames))
	for i, name := range c.SignerNames {
		field := fmt.Sprintf("signerNames[%d]", i)
		if seen[name] {
			add(field, "%q is listed twice", name)
		}
		seen[name] = true
		for _, problem := range configfile.SignerNameProblems(name) {
			add(field, "%q %s", name, problem)
		}
	}
	if err := validateAddress(c.Server.Address); err != nil {
		add("server.address", "%v", err)
	}
	for _, f := range []struct{ field, value string }{
		{"server.caFile", c.Server.CAFile},
		{"server.certFile", c.Server.CertFile},
		{"server.keyFile", c.Server.KeyFile},
	} {
		if f.value == "" {
			add(f.field, "is required")
		}
	}
	if c.Workers < 1 {
		add("workers", "is %d, must be at least 1", c.Workers)
	}
	if c.RPCTimeout.Duration <= 0 {
		add("rpcTimeout", "is %s, must be positive", c.RPCTimeout.Duration)
	}
	if c.Backoff.Initial.Duration <= 0 {
		add("backoff.initial", "is %s, must be positive", c.Backoff.Initial.Duration)
	}
	if c.Backoff.Max.Duration < c.Backoff.Initial.Duration {
		add("backoff.max", "is %s, must be at least backoff.initial (%s)", c.Backoff.Max.Duration, c.Backoff.Initial.Duration)
	}
	return errors.Join(errs...)
}

// validateAddress checks that address is host:port with a port in 1–65535.
func validateAddress(address string) error {
	if address == "" {
		return errors.New("is required (host:port)")
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", address, err)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", address)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q has an invalid port %q", address, port)
	}
	return nil
}

// Package config is the versioned configuration file of signet-server: its schema, defaults
// and checks of the values themselves (Validate). What the values name (files, keys) is
// checked by server/configcheck, and the server's wiring builds profiles, lint gates and
// client rules from it.
package config

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/signet-pki/signet/internal/configfile"
	"github.com/signet-pki/signet/keystore"
	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/profile/spec"
)

// APIVersion and Kind identify a signet-server configuration file.
const (
	APIVersion = "signet.dev/v1alpha1"
	Kind       = "ServerConfiguration"
)

// Defaults applied by Default.
const (
	DefaultGRPCAddress = "127.0.0.1:8443"
	DefaultHTTPAddress = "127.0.0.1:9464"
	DefaultMaxLifetime = 24 * time.Hour
	// DefaultKubernetesMaxLifetime is the maximum lifetime of a signer whose profile
	// reproduces a kubernetes.io signer: kube-controller-manager's --cluster-signing-duration
	// default, so that a cut-over keeps the lifetimes (and the outages) the cluster lives with.
	DefaultKubernetesMaxLifetime = 8760 * time.Hour
	DefaultReloadInterval        = 10 * time.Second
	// DefaultRetention is idempotency.retention's default (the idempotency store's own).
	DefaultRetention = 24 * time.Hour
	// DefaultCheckpointInterval is ledger.checkpoint.interval's default (the checkpointer's
	// own).
	DefaultCheckpointInterval = 250 * time.Millisecond
	// DefaultMinPropagationDelay is signers[].rotation.minPropagationDelay's default.
	DefaultMinPropagationDelay = time.Hour
)

// The webhook's request body limits. The default sits above the JSON of the largest object an
// apiserver can store (etcd's 1.5 MiB, with bytes fields base64-encoded), as gRPC's receive
// limit does, so that every CertificateSigningRequest a cluster can hold gets an answer with a
// reason from Signet, not a 413. The floor fits a CSR at Signet's own limit on the PKCS#10
// request (64 KiB, base64-encoded) with room for its metadata.
const (
	DefaultWebhookMaxRequestBytes = 4 << 20
	MinWebhookRequestBytes        = 128 << 10
	MaxWebhookRequestBytes        = 64 << 20
)

// Config is the signet-server configuration.
type Config struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// GRPC is the gRPC listener.
	GRPC GRPC `json:"grpc"`
	// HTTP is the listener of /metrics, /livez and /readyz.
	HTTP HTTP `json:"http"`
	// TLS holds the server's certificate and the CA that client certificates must chain to.
	TLS TLS `json:"tls"`
	// Clients are the mTLS client identities allowed to connect, each with the signers it may
	// use and an optional rate limit. A client not listed never completes a handshake.
	Clients []access.Client `json:"clients"`
	// Signers are the signer names served, each with its CA and profile.
	Signers []Signer `json:"signers"`
	// Ledger is the durable decision log; no certificate leaves the server unrecorded.
	Ledger Ledger `json:"ledger"`
	// Idempotency configures how long an object UID keeps returning the same certificate.
	Idempotency Idempotency `json:"idempotency"`
	// State says where the ledger, the answers and the CA rotation live: ledger.dir (file,
	// the default) or a fleet's PostgreSQL database.
	State State `json:"state,omitempty"`
	// Lint is the pre-issuance lint gate of every signer that does not set its own.
	Lint Lint `json:"lint"`
	// ReloadInterval is how often the TLS and CA files are checked for changes. Default 10s.
	ReloadInterval metav1.Duration `json:"reloadInterval,omitempty"`
	// Keys configures how CA keys in HSMs and TPMs are used.
	Keys Keys `json:"keys,omitempty"`
	// Webhook is the HTTPS signing webhook, next to gRPC; off unless its address is set.
	Webhook Webhook `json:"webhook,omitempty"`
	// Attestation is TPM node attestation, for the kubelet-client-tpm profile; off unless
	// its address is set.
	Attestation Attestation `json:"attestation,omitempty"`
}

// Webhook configures the HTTPS signing webhook (docs/webhook.md): the front door for clients
// of k8s.io/apiserver's generic webhook, served with the same TLS certificate, client CA and
// client rules as gRPC.
type Webhook struct {
	// Address is host:port to listen on. Empty (the default) turns the webhook off.
	Address string `json:"address,omitempty"`
	// MaxRequestBytes bounds a request body; a larger one is refused with 413 before it is
	// read whole. Default 4 MiB (DefaultWebhookMaxRequestBytes), when the webhook is on;
	// at least MinWebhookRequestBytes, at most MaxWebhookRequestBytes.
	MaxRequestBytes int64 `json:"maxRequestBytes,omitempty"`
}

// Enabled reports whether the webhook is served.
func (w Webhook) Enabled() bool { return w.Address != "" }

// Keys configures the CA keys of every signer.
type Keys struct {
	// AllowPINValue accepts a PKCS#11 URI's pin-value= attribute (a PIN written into this
	// file). Off by default: use pin-source=file:... Only for tests and demos.
	AllowPINValue bool `json:"allowPINValue,omitempty"`
	// Timeout bounds each signature of an HSM or TPM key; a device that does not answer in
	// time is treated as lost and re-opened. Default 10s.
	Timeout metav1.Duration `json:"timeout,omitempty"`
}

// GRPC configures the gRPC listener.
type GRPC struct {
	// Address is host:port to listen on. Default 127.0.0.1:8443.
	Address string `json:"address,omitempty"`
	// Reflection turns on the gRPC reflection service. Off by default.
	Reflection bool `json:"reflection,omitempty"`
}

// HTTP configures the metrics and health listener.
type HTTP struct {
	// Address is host:port to listen on. Default 127.0.0.1:9464.
	Address string `json:"address,omitempty"`
}

// Ledger configures the decision log.
type Ledger struct {
	// Dir is the folder of the ledger files (required). It must be writable and on a local
	// filesystem that honours fsync.
	Dir string `json:"dir"`
	// Checkpoint configures the ledger's signed checkpoints (docs/ledger.md).
	Checkpoint Checkpoint `json:"checkpoint,omitempty"`
	// SegmentSize is the size past which the ledger closes its current segment file and
	// begins the next (a quantity: "1Gi", "256Mi"; at least 1Mi). Default 1Gi. Closed
	// segments may be moved to archive storage (docs/ledger.md).
	SegmentSize *resource.Quantity `json:"segmentSize,omitempty"`
}

// MinSegmentSize is the least ledger.segmentSize.
const MinSegmentSize = 1 << 20

// SegmentBytes returns ledger.segmentSize in bytes, 0 when it is not set (the default).
func (l Ledger) SegmentBytes() int64 {
	if l.SegmentSize == nil {
		return 0
	}
	return l.SegmentSize.Value()
}

// Checkpoint configures the signed checkpoints of the ledger: its size and the root of the
// Merkle tree of its records, signed (C2SP signed note) and kept in the ledger directory.
type Checkpoint struct {
	// Key is the checkpoint key, named like a signer's CA key (a file path, file:, pkcs11: or
	// tpm: URI): Ed25519 or ECDSA P-256. Default: checkpoint-key.pem in the ledger
	// directory, an Ed25519 key created at the first start.
	Key string `json:"key,omitempty"`
	// Origin names the ledger in its checkpoints (their first line and the signature's key
	// name). Default: "signet-ledger/" and the first 16 hex digits of the SHA-256 of the
	// key's public key, so that it changes only with the key.
	Origin string `json:"origin,omitempty"`
	// Interval is the least time between two checkpoints; a record is covered by a signed
	// checkpoint about this long after it is recorded. Default 250ms.
	Interval metav1.Duration `json:"interval,omitempty"`
	// WitnessedFile is a signed checkpoint witnessed outside this host (for example the one
	// the watcher keeps in the cluster, see docs/ledger.md): the server refuses to start on a
	// ledger that does not extend it. Optional.
	WitnessedFile string `json:"witnessedFile,omitempty"`
}

// Idempotency configures replayed answers.
type Idempotency struct {
	// Retention is how long a certificate is returned again for the same object UID and
	// request. Default 24h (a CSR is garbage-collected an hour after approval).
	Retention metav1.Duration `json:"retention,omitempty"`
}

// Lint configures a pre-issuance lint gate.
type Lint struct {
	// Disabled turns the gate off. It is on by default: every certificate is linted before
	// the CA key signs it.
	Disabled bool `json:"disabled,omitempty"`
	// Sources are the zlint lint sources that apply, spelled as zlint's lint sources
	// ("RFC5280", "Community", "CABF_BR", ...). Empty: Signet's default set for a private CA
	// (every RFC source, the community lints and Mozilla's root store policy).
	Sources []string `json:"sources,omitempty"`
	// Exclude names lints not to run, on top of the default exclusions. Every name must be a
	// lint zlint knows (checked when the server builds the gate).
	Exclude []string `json:"exclude,omitempty"`
	// ReplaceDefaultExclusions makes Exclude the complete list: the default exclusions no
	// longer apply (the always-excluded lints stay out).
	ReplaceDefaultExclusions bool `json:"replaceDefaultExclusions,omitempty"`
}

// TLS configures mutual TLS. All three files are required: the server never serves without
// verifying client certificates.
type TLS struct {
	CertFile     string `json:"certFile"`
	KeyFile      string `json:"keyFile"`
	ClientCAFile string `json:"clientCAFile"`
}

// Signer binds a signer name to its CAs: one CA with key and certificate, or a list in cas.
type Signer struct {
	// Name is the Kubernetes signer name, e.g. example.com/serving.
	Name string `json:"name"`
	// Key is the CA key URI: a path, file:///path, pkcs11:... or tpm:....
	Key string `json:"key,omitempty"`
	// Certificate is the PEM file of the CA certificate.
	Certificate string `json:"certificate,omitempty"`
	// Intermediates is an optional PEM file of certificates appended to every chain.
	Intermediates string `json:"intermediates,omitempty"`
	// CAs lists the signer's CAs instead of key, certificate and intermediates: exactly one
	// active (it issues), optionally a staged one (the next, published before it issues) and
	// retired ones (published while their leaves may be in use). Every CA's certificate is in
	// the signer's trust bundle (GetTrustAnchors).
	CAs []CA `json:"cas,omitempty"`
	// MaxLifetime caps issued lifetimes. Default 8760h for the profiles that reproduce a
	// kubernetes.io signer (kube-controller-manager's default), 24h for the others; never past
	// the CA certificate's NotAfter.
	MaxLifetime *metav1.Duration `json:"maxLifetime,omitempty"`
	// Profile is the signer's policy: one of the kubernetes.io profiles, custom, or
	// pod-identity (PodCertificateRequests only).
	Profile spec.Spec `json:"profile"`
	// RateLimit bounds the signer's issuance rate across all clients; none by default.
	RateLimit *access.Rate `json:"rateLimit,omitempty"`
	// Lint overrides the top-level lint gate for this signer.
	Lint *Lint `json:"lint,omitempty"`
	// Rotation configures the staged rotation of the signer's CAs (signetctl ca).
	Rotation Rotation `json:"rotation,omitempty"`
}

// Rotation configures how a staged CA of a signer becomes active.
type Rotation struct {
	// Clusters are the names of the clusters (each watcher's clusterName) that must each
	// report a published trust bundle holding a staged CA before it may be activated; reports
	// from other clusters are refused. Empty: every cluster that reported in the last few
	// minutes when the CA was staged, and any that reports it later, must.
	Clusters []string `json:"clusters,omitempty"`
	// MinPropagationDelay is how long after the last cluster published a staged CA it may be
	// activated, for consumers that read bundles late (the kubelet's projected volumes).
	// Default 1h.
	MinPropagationDelay *metav1.Duration `json:"minPropagationDelay,omitempty"`
}

// The states of a CA, the values of CA.State.
const (
	StateActive  = "active"
	StateStaged  = "staged"
	StateRetired = "retired"
)

// CA is one CA of a signer.
type CA struct {
	// Key is the CA key URI; a retired CA may have none.
	Key string `json:"key,omitempty"`
	// Certificate is the PEM file of the CA certificate.
	Certificate string `json:"certificate"`
	// Intermediates is an optional PEM file of certificates appended to every chain.
	Intermediates string `json:"intermediates,omitempty"`
	// State is active (default), staged or retired.
	State string `json:"state,omitempty"`
}

// Authorities returns the signer's CAs: cas, or the one CA of key, certificate and
// intermediates.
func (s Signer) Authorities() []CA {
	if len(s.CAs) > 0 {
		return s.CAs
	}
	return []CA{{Key: s.Key, Certificate: s.Certificate, Intermediates: s.Intermediates}}
}

// DefaultMaxLifetimeFor is the default maximum lifetime of a signer with the profile named
// profileName: DefaultKubernetesMaxLifetime for the four that reproduce kube-controller-manager's
// signers, DefaultMaxLifetime for the others.
func DefaultMaxLifetimeFor(profileName string) time.Duration {
	if _, ok := spec.KubernetesProfileFor("kubernetes.io/" + profileName); ok {
		return DefaultKubernetesMaxLifetime
	}
	return DefaultMaxLifetime
}

// Load reads, defaults and validates the configuration file at path. Unknown and duplicate
// fields are errors; field names are case-sensitive. Relative file paths in the file are
// resolved against the file's directory. A duration that is not one is reported with its
// field path and line, together with every other problem of the file.
func Load(path string) (*Config, error) {
	cfg, problems, err := Read(path)
	if err != nil {
		if len(problems) > 0 {
			return nil, fmt.Errorf("config %s: %w", path, errors.Join(append(problems, err)...))
		}
		return nil, err
	}
	if err := errors.Join(append(problems, cfg.Validate())...); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// Read reads the configuration file at path as Load does, without validating it: relative
// paths resolved, defaults applied. problems are the values that could not be decoded (a
// duration that is not one), each naming its field path and line; the rest of the file is
// decoded without them. err is for a file that cannot be read or decoded, and then cfg is
// nil.
func Read(path string) (cfg *Config, problems []error, err error) {
	cfg, problems, err = decode(path)
	if err != nil {
		return nil, problems, fmt.Errorf("loading server config: %w", err)
	}
	cfg.resolvePaths(filepath.Dir(path))
	cfg.Default()
	return cfg, problems, nil
}

// Default fills in every unset field that has a default.
func (c *Config) Default() {
	if c.APIVersion == "" {
		c.APIVersion = APIVersion
	}
	if c.Kind == "" {
		c.Kind = Kind
	}
	if c.GRPC.Address == "" {
		c.GRPC.Address = DefaultGRPCAddress
	}
	if c.HTTP.Address == "" {
		c.HTTP.Address = DefaultHTTPAddress
	}
	if c.Ledger.Checkpoint.Interval.Duration == 0 {
		c.Ledger.Checkpoint.Interval.Duration = DefaultCheckpointInterval
	}
	if c.Idempotency.Retention.Duration == 0 {
		c.Idempotency.Retention.Duration = DefaultRetention
	}
	c.State.defaults()
	if c.Keys.Timeout.Duration == 0 {
		c.Keys.Timeout.Duration = keystore.DefaultTimeout
	}
	if c.ReloadInterval.Duration == 0 {
		c.ReloadInterval.Duration = DefaultReloadInterval
	}
	if c.Webhook.Enabled() && c.Webhook.MaxRequestBytes == 0 {
		c.Webhook.MaxRequestBytes = DefaultWebhookMaxRequestBytes
	}
	for i := range c.Signers {
		if c.Signers[i].MaxLifetime == nil {
			c.Signers[i].MaxLifetime = &metav1.Duration{Duration: DefaultMaxLifetimeFor(c.Signers[i].Profile.Name)}
		}
		if c.Signers[i].Rotation.MinPropagationDelay == nil {
			c.Signers[i].Rotation.MinPropagationDelay = &metav1.Duration{Duration: DefaultMinPropagationDelay}
		}
	}
}

// Validate reports every problem in the configuration at once.
func (c *Config) Validate() error {
	var errs []error
	if c.APIVersion != APIVersion || c.Kind != Kind {
		errs = append(errs, fmt.Errorf("apiVersion/kind is %s/%s, want %s/%s", c.APIVersion, c.Kind, APIVersion, Kind))
	}
	if _, _, err := net.SplitHostPort(c.GRPC.Address); err != nil {
		errs = append(errs, fmt.Errorf("grpc.address: %w", err))
	}
	for _, f := range []struct{ name, value string }{
		{"tls.certFile", c.TLS.CertFile}, {"tls.keyFile", c.TLS.KeyFile}, {"tls.clientCAFile", c.TLS.ClientCAFile},
	} {
		if f.value == "" {
			errs = append(errs, fmt.Errorf("%s is required (mTLS is always on)", f.name))
		}
	}
	if c.Keys.Timeout.Duration < 0 {
		errs = append(errs, fmt.Errorf("keys.timeout %s is negative", c.Keys.Timeout.Duration))
	}
	if c.ReloadInterval.Duration != 0 && c.ReloadInterval.Duration < time.Second {
		errs = append(errs, fmt.Errorf("reloadInterval %s is below 1s", c.ReloadInterval.Duration))
	}
	if c.HTTP.Address != "" {
		if _, _, err := net.SplitHostPort(c.HTTP.Address); err != nil {
			errs = append(errs, fmt.Errorf("http.address: %w", err))
		}
	}
	errs = append(errs, c.Webhook.validate(c.GRPC.Address, c.HTTP.Address)...)
	errs = append(errs, c.State.validate(c)...)
	if c.Ledger.SegmentSize != nil && c.Ledger.SegmentBytes() < MinSegmentSize {
		errs = append(errs, fmt.Errorf("ledger.segmentSize %s is less than 1Mi", c.Ledger.SegmentSize.String()))
	}
	if c.Idempotency.Retention.Duration < 0 {
		errs = append(errs, fmt.Errorf("idempotency.retention %s is negative", c.Idempotency.Retention.Duration))
	}
	if len(c.Signers) == 0 {
		errs = append(errs, errors.New("signers: at least one signer is required"))
	}
	if len(c.Clients) == 0 {
		errs = append(errs, errors.New("clients: at least one client identity is required (clients are authorized by the identity in their certificate)"))
	} else if _, err := access.NewAuthorizer(c.Clients, c.signerNames()); err != nil {
		errs = append(errs, err)
	}
	seen := map[string]bool{}
	for i, s := range c.Signers {
		at := fmt.Sprintf("signers[%d]", i)
		if problems := configfile.SignerNameProblems(s.Name); len(problems) > 0 {
			errs = append(errs, fmt.Errorf("%s.name %q is not a signer name: %s", at, s.Name, strings.Join(problems, "; ")))
		} else if seen[s.Name] {
			errs = append(errs, fmt.Errorf("%s.name %q is listed twice", at, s.Name))
		}
		seen[s.Name] = true
		errs = append(errs, s.validateCAs(at)...)
		if s.MaxLifetime != nil {
			if err := spec.CheckMaxLifetime(s.Profile.Name, s.MaxLifetime.Duration); err != nil {
				errs = append(errs, fmt.Errorf("%s.maxLifetime %w", at, err))
			}
		}
		if err := s.Profile.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s.profile: %w", at, err))
		}
		if s.RateLimit != nil {
			if err := s.RateLimit.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("%s.rateLimit: %w", at, err))
			}
		}
		errs = append(errs, s.Rotation.validate(at+".rotation")...)
	}
	errs = append(errs, c.Attestation.validate(c.Signers, c.GRPC.Address, c.HTTP.Address, c.Webhook.Address)...)
	return errors.Join(errs...)
}

// validate checks the webhook's address (host:port, not the gRPC or HTTP one) and its body
// limit. A limit without an address is an error: it would suggest a webhook that is off.
func (w Webhook) validate(grpcAddress, httpAddress string) []error {
	var errs []error
	if w.Address == "" {
		if w.MaxRequestBytes != 0 {
			errs = append(errs, errors.New("webhook.maxRequestBytes is set but webhook.address is not (the webhook is off without an address)"))
		}
		return errs
	}
	if _, port, err := net.SplitHostPort(w.Address); err != nil {
		errs = append(errs, fmt.Errorf("webhook.address: %w", err))
	} else if port != "0" && (w.Address == grpcAddress || w.Address == httpAddress) {
		errs = append(errs, fmt.Errorf("webhook.address %s is also the grpc or http address; the webhook needs its own", w.Address))
	}
	if n := w.MaxRequestBytes; n != 0 && (n < MinWebhookRequestBytes || n > MaxWebhookRequestBytes) {
		errs = append(errs, fmt.Errorf("webhook.maxRequestBytes %d is outside [%d, %d]", n, MinWebhookRequestBytes, MaxWebhookRequestBytes))
	}
	return errs
}

// validateCAs checks the signer's CAs: key and certificate, or cas with exactly one active CA
// and a key for every CA that is not retired.
func (s Signer) validateCAs(at string) []error {
	if len(s.CAs) == 0 {
		var errs []error
		if s.Key == "" {
			errs = append(errs, fmt.Errorf("%s.key is required (or list the CAs in %s.cas)", at, at))
		}
		if s.Certificate == "" {
			errs = append(errs, fmt.Errorf("%s.certificate is required (or list the CAs in %s.cas)", at, at))
		}
		return errs
	}
	var errs []error
	if s.Key != "" || s.Certificate != "" || s.Intermediates != "" {
		errs = append(errs, fmt.Errorf("%s: give either cas or key, certificate and intermediates, not both", at))
	}
	active := 0
	for j, ca := range s.CAs {
		caAt := fmt.Sprintf("%s.cas[%d]", at, j)
		state := ca.State
		switch state {
		case "":
			state = StateActive
		case StateActive, StateStaged, StateRetired:
		default:
			errs = append(errs, fmt.Errorf("%s.state %q is not one of %q, %q, %q", caAt, ca.State, StateActive, StateStaged, StateRetired))
		}
		if state == StateActive {
			active++
		}
		if ca.Certificate == "" {
			errs = append(errs, fmt.Errorf("%s.certificate is required", caAt))
		}
		if ca.Key == "" && state != StateRetired {
			errs = append(errs, fmt.Errorf("%s.key is required for a CA that is not retired", caAt))
		}
	}
	if active != 1 {
		errs = append(errs, fmt.Errorf("%s.cas has %d active CAs, want exactly one", at, active))
	}
	return errs
}

// validate checks the cluster names and the delay.
func (r Rotation) validate(at string) []error {
	var errs []error
	seen := map[string]bool{}
	for i, c := range r.Clusters {
		if problems := validation.IsDNS1123Label(c); len(problems) > 0 {
			errs = append(errs, fmt.Errorf("%s.clusters[%d] %q is not a cluster name (a DNS-1123 label, as the watcher's clusterName): %s", at, i, c, strings.Join(problems, "; ")))
		} else if seen[c] {
			errs = append(errs, fmt.Errorf("%s.clusters[%d] %q is listed twice", at, i, c))
		}
		seen[c] = true
	}
	if d := r.MinPropagationDelay; d != nil && d.Duration < 0 {
		errs = append(errs, fmt.Errorf("%s.minPropagationDelay %s is negative", at, d.Duration))
	}
	return errs
}

// PropagationDelay is the signer's minimum propagation delay, or the default when the
// configuration was built without Default.
func (r Rotation) PropagationDelay() time.Duration {
	if r.MinPropagationDelay == nil {
		return DefaultMinPropagationDelay
	}
	return r.MinPropagationDelay.Duration
}

func (c *Config) signerNames() []string {
	names := make([]string, len(c.Signers))
	for i, s := range c.Signers {
		names[i] = s.Name
	}
	return names
}

// resolvePaths makes relative file paths relative to dir.
func (c *Config) resolvePaths(dir string) {
	paths := []*string{&c.TLS.CertFile, &c.TLS.KeyFile, &c.TLS.ClientCAFile, &c.Ledger.Dir, &c.Ledger.Checkpoint.WitnessedFile,
		&c.Attestation.EKRootsFile, &c.Attestation.EKAllowListFile, &c.Attestation.TicketKeyFile, &c.State.Postgres.PasswordFile}
	if c.Attestation.BootState != nil {
		paths = append(paths, &c.Attestation.BootState.ReferenceFile)
	}
	paths = append(paths, keyPath(&c.Ledger.Checkpoint.Key)...)
	for i := range c.Signers {
		s := &c.Signers[i]
		paths = append(paths, caPaths(&s.Key, &s.Certificate, &s.Intermediates)...)
		for j := range s.CAs {
			ca := &s.CAs[j]
			paths = append(paths, caPaths(&ca.Key, &ca.Certificate, &ca.Intermediates)...)
		}
	}
	configfile.ResolvePaths(dir, paths...)
}

// caPaths are the file paths of one CA to resolve.
func caPaths(key, certificate, intermediates *string) []*string {
	return append([]*string{certificate, intermediates}, keyPath(key)...)
}

// keyPath is key if it is a plain file path to resolve, else nothing: a file:// URI is taken
// as written, and so is any other key URI. keystore parses the URI, so the config and the key
// store never disagree on what names a file.
func keyPath(key *string) []*string {
	if path, ok := keystore.FilePath(*key); ok && path == *key && path != "" {
		return []*string{key}
	}
	return nil
}

// Package watcher runs Signet's in-cluster controllers: it watches approved
// CertificateSigningRequests and pending PodCertificateRequests for the configured signer
// names, forwards them to the signing server over gRPC with mTLS, and writes the answer into
// the object's status.
package watcher

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/signet-pki/signet/internal/configfile"
	"github.com/signet-pki/signet/watcher/pcrsigner"
)

// APIVersion and Kind identify the watcher's configuration file format.
const (
	APIVersion = "signet.dev/v1alpha1"
	Kind       = "WatcherConfiguration"
)

// Defaults applied by (*Config).Default to fields left at their zero value.
const (
	DefaultWorkers        = 32
	DefaultRPCTimeout     = 10 * time.Second
	DefaultBackoffInitial = 250 * time.Millisecond
	DefaultBackoffMax     = 30 * time.Second

	// DefaultPCRGiveUpAfter is the default podCertificateRequests.giveUpAfter (the
	// controller's own default), and MaxPCRGiveUpAfter its maximum: the age at which
	// kube-controller-manager's cleaner deletes a PodCertificateRequest.
	DefaultPCRGiveUpAfter = pcrsigner.DefaultGiveUpAfter
	MaxPCRGiveUpAfter     = 15 * time.Minute

	// DefaultTrustBundlePeriod is the default trustBundles.period, and MinTrustBundlePeriod
	// its minimum. With the default, a CA staged on the signing server is in the cluster's
	// bundle within one period plus one pass: about 2s.
	DefaultTrustBundlePeriod = 2 * time.Second
	MinTrustBundlePeriod     = time.Second

	// DefaultClusterName is the default clusterName.
	DefaultClusterName = "default"

	DefaultLeaseName     = "signet-watcher"
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Defaults of the file format applied by LoadConfig (and DefaultDeployment), not by Default:
// a Config built in Go runs without leader election and without a metrics listener unless
// it asks for them.
const (
	// DefaultMetricsAddress serves /metrics, /livez and /readyz on every interface of the
	// pod, port 9465, where Prometheus and the kubelet's probes reach it.
	DefaultMetricsAddress = ":9465"
	// DefaultLeaderElectionEnabled turns leader election on, for a Deployment of several
	// replicas.
	DefaultLeaderElectionEnabled = true
)

// MetricsDisabled as metricsAddress turns the metrics and health listener off.
const MetricsDisabled = "0"

// Config is the watcher's configuration file (apiVersion signet.dev/v1alpha1,
// kind WatcherConfiguration). Its zero value, after Default, holds every default; only
// signerNames and the server connection must be supplied. Two defaults differ between the
// file and a Config built in Go: a file (LoadConfig) turns leader election on and listens for
// metrics on :9465; a Config built in Go does neither unless its fields say so.
type Config struct {
	// APIVersion must be signet.dev/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind must be WatcherConfiguration.
	Kind string `json:"kind"`
	// SignerNames are the spec.signerName values this watcher serves (required), each of the
	// form domain/path, for example example.com/serving.
	SignerNames []string `json:"signerNames"`
	// ClusterName is the name of this cluster as the signing server knows it (default
	// "default"): a DNS-1123 label (lower-case letters, digits and "-", at most 63
	// characters). The watcher reports every trust bundle it publishes under this name
	// (ReportTrustBundle), the proof of propagation that lets the server activate a staged CA;
	// where the server's configuration lists the clusters of a signer, it must be one of them,
	// or the server refuses the report (FailedPrecondition) and the staged CA cannot be
	// activated. Give each cluster served by the same signing server a name of its own.
	ClusterName string `json:"clusterName,omitempty"`
	// Server is how to reach the signing server.
	Server ServerConfig `json:"server"`
	// Workers is the number of CSRs processed in parallel (default 32), and separately the
	// number of PodCertificateRequests. A worker spends most of an object waiting on two
	// round trips, the signing call and the status write; docs/benchmarks.md has why the
	// default is 32. Workers cost a goroutine each; the signing server batches their ledger
	// syncs.
	Workers int `json:"workers,omitempty"`
	// RPCTimeout bounds each call to the signing server (default 10s).
	RPCTimeout metav1.Duration `json:"rpcTimeout,omitempty"`
	// Backoff is the per-object retry back-off after a transient failure.
	Backoff BackoffConfig `json:"backoff"`
	// MetricsAddress is the host:port of the operational HTTP listener: /metrics, /livez
	// and /readyz. In a file it defaults to ":9465" (every interface, for Prometheus and the
	// kubelet's probes in a pod); empty in a Config built in Go, or "0", turns it off.
	MetricsAddress string `json:"metricsAddress,omitempty"`
	// LeaderElection makes replicas elect one leader that alone runs the controllers.
	LeaderElection LeaderElectionConfig `json:"leaderElection"`
	// SignedEvents says which signed CSRs get a Normal Event Signed (serial and expiry):
	// "retried" (default) only those whose signing was retried, closing the trail of Warning
	// Events they already carry; "all" every one. Refusals, retries and give-ups always get
	// Events. Not "all" by default, as kube-controller-manager's signer records none: an
	// Event is one more API write and one more stored object per certificate (5,000 for a
	// burst of 5,000), while the certificate itself, the server's log line and
	// ledger already record the issuance. The same applies to PodCertificateRequests.
	SignedEvents string `json:"signedEvents,omitempty"`
	// PodCertificateRequests configures the signing of PodCertificateRequests for the same
	// signer names.
	PodCertificateRequests PodCertificateRequestsConfig `json:"podCertificateRequests"`
	// TrustBundles configures the publishing of every signer's trust anchors as a
	// signer-linked ClusterTrustBundle.
	TrustBundles TrustBundlesConfig `json:"trustBundles"`
	// LedgerWitness configures the witness of the signing server's ledger (witness.go).
	LedgerWitness LedgerWitnessConfig `json:"ledgerWitness"`
	// TPMApprover configures the approver of the TPM-attested signers (approver.go).
	TPMApprover TPMApproverConfig `json:"tpmApprover,omitzero"`
	// NodeAddresses configures the forwarding of node addresses with the requests of signers
	// that bind serving certificates to their node (nodeaddresses.go).
	NodeAddresses NodeAddressesConfig `json:"nodeAddresses,omitzero"`
}

// TrustBundlesConfig configures the ClusterTrustBundle publisher (watcher/trustbundle). On
// the leader, every period, it asks the signing server for each signer name's trust anchors
// (GetTrustAnchors) and keeps the signer-linked ClusterTrustBundle
// "<signer name with / replaced by :>:signet" (certificates.k8s.io/v1 from Kubernetes 1.37,
// else v1beta1, found by discovery), labelled signet.dev/managed-by: signet-watcher, equal to
// them: created if missing, rewritten when the anchors change or the bundle was edited, left
// alone when it is up to date or was not created by the watcher. It needs the `attest` verb on
// the signer names and get, create and update on clustertrustbundles (deploy/watcher/rbac.yaml);
// without them every attempt is refused, reported (a Warning Event, the metric
// signet_watcher_trust_bundle_publish_errors_total) and retried the next period. After each
// successful pass for a signer it reports the bundle as it stands in the cluster (its hash and
// the fingerprints of its certificates) to the signing server under clusterName, which
// activates a staged CA only once every cluster has published it; a refused report is
// reported the same way (signet_watcher_trust_bundle_reports_total) and never undoes the
// publication. A server too old to take reports is logged once and not asked again for a while.
type TrustBundlesConfig struct {
	// Enabled turns publishing on (default true). Where the cluster serves no
	// ClusterTrustBundles the watcher logs it once and publishes nothing.
	Enabled *bool `json:"enabled,omitempty"`
	// Period is the time between two publications of every signer's bundle (default 2s, at
	// least 1s): a change of the anchors on the server (a CA staged, activated or retired), or
	// a bundle edited or deleted by hand, is published or repaired within about one period.
	// Each pass costs, per signer, one GetTrustAnchors call and one ReportTrustBundle call to
	// the signing server and one GET of the bundle from the API server (with the default and
	// 3 signers, 3 calls per second to the signing server and 1.5 to the API server); writes
	// only when something differs.
	Period metav1.Duration `json:"period,omitempty"`
}

// IsEnabled reports whether publishing is on: Enabled unset or true.
func (t *TrustBundlesConfig) IsEnabled() bool { return t.Enabled == nil || *t.Enabled }

// PodCertificateRequestsConfig configures the PodCertificateRequest signing controller. It
// runs next to the CSR controller, with the same signer names, signing server, workers,
// back-off and signedEvents, when the cluster serves PodCertificateRequests
// (certificates.k8s.io/v1 from Kubernetes 1.37, else v1beta1, found by discovery) and the
// watcher may list, watch and update the status of them; otherwise the watcher logs why and
// signs CSRs only.
type PodCertificateRequestsConfig struct {
	// Enabled turns PodCertificateRequest signing on (default true); false leaves
	// PodCertificateRequests alone even where the cluster serves them.
	Enabled *bool `json:"enabled,omitempty"`
	// GiveUpAfter is the age (since creation) after which a request whose signing still fails
	// transiently is no longer retried (default 10m, at most 15m): kube-controller-manager
	// deletes every PodCertificateRequest 15 minutes after creation, and the kubelet replaces
	// a request that stays pending. Such a request gets a Warning Event, never a Failed
	// condition, which the kubelet would treat as permanent for the pod.
	GiveUpAfter metav1.Duration `json:"giveUpAfter,omitempty"`
}

// IsEnabled reports whether PodCertificateRequest signing is on: Enabled unset or true.
func (p *PodCertificateRequestsConfig) IsEnabled() bool { return p.Enabled == nil || *p.Enabled }

// Values of Config.SignedEvents.
const (
	SignedEventsRetried = "retried"
	SignedEventsAll     = "all"
)

// LeaderElectionConfig is leader election with a coordination.k8s.io Lease in the watcher's
// own namespace.
type LeaderElectionConfig struct {
	// Enabled turns leader election on. Absent in a file means true; nil in a Config built
	// in Go means false.
	Enabled *bool `json:"enabled,omitempty"`
	// Namespace holds the Lease; default $POD_NAMESPACE, else the pod's service-account
	// namespace. Never kube-system by default: with leader election on and no namespace
	// found, the watcher refuses to start.
	Namespace string `json:"namespace,omitempty"`
	// LeaseName is the Lease's name (default signet-watcher).
	LeaseName string `json:"leaseName,omitempty"`
	// Identity is this replica's holderIdentity; default $POD_NAME, else the host name and
	// a random suffix.
	Identity string `json:"identity,omitempty"`
	// LeaseDuration is how long a standby waits, after the last renewal it saw, before
	// taking the Lease over (default 15s): a dead leader is replaced within about this long.
	LeaseDuration metav1.Duration `json:"leaseDuration,omitempty"`
	// RenewDeadline is how long the leader keeps retrying a failed renewal before it gives
	// up, stops its controllers and exits (default 10s).
	RenewDeadline metav1.Duration `json:"renewDeadline,omitempty"`
	// RetryPeriod is the interval between attempts to acquire or renew (default 2s).
	RetryPeriod metav1.Duration `json:"retryPeriod,omitempty"`
}

// IsEnabled reports whether leader election is on: Enabled set and true.
func (l *LeaderElectionConfig) IsEnabled() bool { return l.Enabled != nil && *l.Enabled }

// MetricsEnabled reports whether the operational HTTP listener is on.
func (c *Config) MetricsEnabled() bool {
	return c.MetricsAddress != "" && c.MetricsAddress != MetricsDisabled
}

// ServerConfig is the gRPC connection to the signing server, authenticated with mTLS.
type ServerConfig struct {
	// Address is the server's host:port.
	Address string `json:"address"`
	// Addresses are further host:port endpoints of the same signing service, for fail-over:
	// calls go to the connected, healthy endpoints among address and addresses. Either may
	// be empty, not both.
	Addresses []string `json:"addresses,omitempty"`
	// CAFile is the PEM bundle of CA certificates that verify the server. Reloaded when it
	// changes, so the server can move to a new CA (publish old and new in the bundle first).
	// A relative path is relative to the config file's folder.
	CAFile string `json:"caFile"`
	// CertFile is the watcher's PEM client certificate (chain). Reloaded when it changes. A
	// relative path is relative to the config file's folder.
	CertFile string `json:"certFile"`
	// KeyFile is the PEM private key of CertFile. Reloaded when it changes. A relative path is
	// relative to the config file's folder.
	KeyFile string `json:"keyFile"`
	// ServerName overrides the name verified in the server's certificate; by default the host
	// part of each address.
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
// apiVersion and kind must be present and match. Relative file paths (server.caFile,
// server.certFile, server.keyFile) are made relative to the file's folder, as signet-server
// does. It applies DefaultDeployment and Default but does not call Validate, so that flags may
// still fill required fields.
func LoadConfig(path string) (*Config, error) {
	cfg := &Config{}
	if err := configfile.Decode(path, APIVersion, Kind, cfg); err != nil {
		return nil, fmt.Errorf("loading watcher config: %w", err)
	}
	s := &cfg.Server
	configfile.ResolvePaths(filepath.Dir(path), &s.CAFile, &s.CertFile, &s.KeyFile)
	cfg.DefaultDeployment()
	cfg.Default()
	return cfg, nil
}

// DefaultDeployment applies the defaults of the file format that Default leaves off: leader
// election enabled and metricsAddress ":9465", each only where unset. LoadConfig calls it;
// call it on a Config built from flags alone to get a deployment's behaviour.
func (c *Config) DefaultDeployment() {
	if c.LeaderElection.Enabled == nil {
		enabled := DefaultLeaderElectionEnabled
		c.LeaderElection.Enabled = &enabled
	}
	if c.MetricsAddress == "" {
		c.MetricsAddress = DefaultMetricsAddress
	}
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
	if c.SignedEvents == "" {
		c.SignedEvents = SignedEventsRetried
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
	pcr := &c.PodCertificateRequests
	if pcr.Enabled == nil {
		enabled := true
		pcr.Enabled = &enabled
	}
	if pcr.GiveUpAfter.Duration == 0 {
		pcr.GiveUpAfter.Duration = DefaultPCRGiveUpAfter
	}
	if c.ClusterName == "" {
		c.ClusterName = DefaultClusterName
	}
	tb := &c.TrustBundles
	if tb.Enabled == nil {
		enabled := true
		tb.Enabled = &enabled
	}
	if tb.Period.Duration == 0 {
		tb.Period.Duration = DefaultTrustBundlePeriod
	}
	le := &c.LeaderElection
	if le.LeaseName == "" {
		le.LeaseName = DefaultLeaseName
	}
	for _, d := range []struct {
		field *metav1.Duration
		def   time.Duration
	}{{&le.LeaseDuration, DefaultLeaseDuration}, {&le.RenewDeadline, DefaultRenewDeadline}, {&le.RetryPeriod, DefaultRetryPeriod}} {
		if d.field.Duration == 0 {
			d.field.Duration = d.def
		}
	}
	c.LedgerWitness.defaults()
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
	if c.Server.Address != "" || len(c.Server.Addresses) == 0 {
		if err := validateAddress(c.Server.Address); err != nil {
			add("server.address", "%v", err)
		}
	}
	for i, a := range c.Server.Addresses {
		if err := validateAddress(a); err != nil {
			add(fmt.Sprintf("server.addresses[%d]", i), "%v", err)
		}
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
	if c.SignedEvents != SignedEventsRetried && c.SignedEvents != SignedEventsAll {
		add("signedEvents", "is %q, must be %q or %q", c.SignedEvents, SignedEventsRetried, SignedEventsAll)
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
	if giveUp := c.PodCertificateRequests.GiveUpAfter.Duration; giveUp <= c.Backoff.Max.Duration || giveUp > MaxPCRGiveUpAfter {
		add("podCertificateRequests.giveUpAfter", "is %s, must be more than backoff.max (%s) and at most %s",
			giveUp, c.Backoff.Max.Duration, MaxPCRGiveUpAfter)
	}
	for _, problem := range validation.IsDNS1123Label(c.ClusterName) {
		add("clusterName", "%q %s", c.ClusterName, problem)
	}
	if period := c.TrustBundles.Period.Duration; period < MinTrustBundlePeriod {
		add("trustBundles.period", "is %s, must be at least %s", period, MinTrustBundlePeriod)
	}
	if c.MetricsEnabled() {
		if err := validateListenAddress(c.MetricsAddress); err != nil {
			add("metricsAddress", "%v", err)
		}
	}
	errs = append(errs, c.LeaderElection.validate()...)
	errs = append(errs, c.LedgerWitness.validate()...)
	errs = append(errs, c.TPMApprover.validate()...)
	errs = append(errs, c.NodeAddresses.validate()...)
	return errors.Join(errs...)
}

// validate checks the leader-election fields, each error prefixed with its field.
func (l *LeaderElectionConfig) validate() []error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("leaderElection.%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if l.Namespace != "" {
		for _, problem := range validation.IsDNS1123Label(l.Namespace) {
			add("namespace", "%q %s", l.Namespace, problem)
		}
	}
	for _, problem := range validation.IsDNS1123Subdomain(l.LeaseName) {
		add("leaseName", "%q %s", l.LeaseName, problem)
	}
	lease, renew, retry := l.LeaseDuration.Duration, l.RenewDeadline.Duration, l.RetryPeriod.Duration
	if retry <= 0 {
		add("retryPeriod", "is %s, must be positive", retry)
	}
	if minRenew := time.Duration(leaderelection.JitterFactor * float64(retry)); renew <= minRenew {
		add("renewDeadline", "is %s, must be more than %.1f × retryPeriod (%s)", renew, leaderelection.JitterFactor, minRenew)
	}
	if lease <= renew {
		add("leaseDuration", "is %s, must be more than renewDeadline (%s)", lease, renew)
	}
	return errs
}

// validateListenAddress checks that address is [host]:port with a port in 0–65535 (0: any
// free port).
func validateListenAddress(address string) error {
	_, port, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%q is not [host]:port (or %q to disable): %w", address, MetricsDisabled, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q has an invalid port %q", address, port)
	}
	return nil
}

// validateAddress checks that address is host:port with a port in 1–65535.
func validateAddress(address string) error {
	if address == "" {
		return errors.New("is required (host:port), or server.addresses")
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

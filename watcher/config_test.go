package watcher

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestDefaultsGolden pins the defaults of a zero Config. Rewrite the golden file with
// UPDATE_GOLDEN=1 go test ./watcher/.
func TestDefaultsGolden(t *testing.T) {
	var cfg Config
	cfg.Default()
	checkGolden(t, &cfg, filepath.Join("testdata", "defaults.golden.yaml"))
}

// checkGolden compares cfg as YAML with the golden file, rewriting it with UPDATE_GOLDEN=1.
func checkGolden(t *testing.T, cfg *Config, golden string) {
	t.Helper()
	got, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatalf("marshalling: %v", err)
	}
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatalf("updating golden file: %v", err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("reading golden file (UPDATE_GOLDEN=1 writes it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("defaults differ from %s (UPDATE_GOLDEN=1 to accept):\n--- got\n%s\n--- want\n%s", golden, got, want)
	}
}

// TestFileDefaultsGolden pins what a minimal file loads as: Default plus the file format's
// own defaults (leader election on, metrics on :9465). Rewrite the golden file with
// UPDATE_GOLDEN=1 go test ./watcher/.
func TestFileDefaultsGolden(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("testdata", "minimal.yaml"))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if !cfg.LeaderElection.IsEnabled() || !cfg.MetricsEnabled() {
		t.Errorf("a file without leaderElection.enabled or metricsAddress: leader election %v, metrics %q; want both on",
			cfg.LeaderElection.IsEnabled(), cfg.MetricsAddress)
	}
	checkGolden(t, cfg, filepath.Join("testdata", "file-defaults.golden.yaml"))
}

// TestGoConfigLeavesOptionalServicesOff checks that a Config built in Go, once defaulted,
// runs without leader election and without a metrics listener: tests and embedders opt in.
func TestGoConfigLeavesOptionalServicesOff(t *testing.T) {
	cfg := validConfig()
	if cfg.LeaderElection.IsEnabled() || cfg.MetricsEnabled() {
		t.Errorf("defaulted Go Config: leader election %v, metrics %q; want both off", cfg.LeaderElection.IsEnabled(), cfg.MetricsAddress)
	}
	disabled := false
	cfg.LeaderElection.Enabled = &disabled
	cfg.MetricsAddress = MetricsDisabled
	cfg.DefaultDeployment()
	if cfg.LeaderElection.IsEnabled() || cfg.MetricsEnabled() {
		t.Errorf("DefaultDeployment overrode explicit settings: %+v, %q", cfg.LeaderElection, cfg.MetricsAddress)
	}
}

// TestPodCertificateRequestsDefaultOn: PodCertificateRequest signing is on unless turned
// off, in a file and in a Config built in Go, and Default keeps an explicit false.
func TestPodCertificateRequestsDefaultOn(t *testing.T) {
	var zero PodCertificateRequestsConfig
	if !zero.IsEnabled() {
		t.Error("zero PodCertificateRequestsConfig is disabled, want enabled")
	}
	cfg := validConfig()
	if !cfg.PodCertificateRequests.IsEnabled() || cfg.PodCertificateRequests.GiveUpAfter.Duration != DefaultPCRGiveUpAfter {
		t.Errorf("defaulted Config: %+v, want enabled with giveUpAfter %s", cfg.PodCertificateRequests, DefaultPCRGiveUpAfter)
	}
	disabled := false
	cfg = Config{PodCertificateRequests: PodCertificateRequestsConfig{Enabled: &disabled}}
	cfg.Default()
	if cfg.PodCertificateRequests.IsEnabled() {
		t.Error("Default turned an explicitly disabled podCertificateRequests on")
	}
}

// TestTrustBundlesDefaultOn: ClusterTrustBundle publishing is on unless turned off, every
// DefaultTrustBundlePeriod, and Default keeps an explicit false and period.
func TestTrustBundlesDefaultOn(t *testing.T) {
	var zero TrustBundlesConfig
	if !zero.IsEnabled() {
		t.Error("zero TrustBundlesConfig is disabled, want enabled")
	}
	cfg := validConfig()
	if !cfg.TrustBundles.IsEnabled() || cfg.TrustBundles.Period.Duration != DefaultTrustBundlePeriod {
		t.Errorf("defaulted Config: %+v, want enabled with period %s", cfg.TrustBundles, DefaultTrustBundlePeriod)
	}
	disabled := false
	cfg = Config{TrustBundles: TrustBundlesConfig{Enabled: &disabled, Period: metav1.Duration{Duration: time.Minute}}}
	cfg.Default()
	if cfg.TrustBundles.IsEnabled() || cfg.TrustBundles.Period.Duration != time.Minute {
		t.Errorf("Default changed explicit trustBundles settings: %+v", cfg.TrustBundles)
	}
}

// TestClusterName: clusterName defaults to "default", in a file and in a Config built in Go;
// a file's value is kept.
func TestClusterName(t *testing.T) {
	if cfg := validConfig(); cfg.ClusterName != DefaultClusterName {
		t.Errorf("defaulted Config: clusterName %q, want %q", cfg.ClusterName, DefaultClusterName)
	}
	cfg, err := LoadConfig(filepath.Join("testdata", "minimal.yaml"))
	if err != nil || cfg.ClusterName != DefaultClusterName {
		t.Errorf("minimal file: clusterName %q, %v; want %q", cfg.ClusterName, err, DefaultClusterName)
	}
	path := filepath.Join(t.TempDir(), "watcher.yaml")
	content := "apiVersion: signet.dev/v1alpha1\nkind: WatcherConfiguration\nclusterName: prod-eu-1\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err := LoadConfig(path); err != nil || cfg.ClusterName != "prod-eu-1" {
		t.Errorf("clusterName: prod-eu-1 loaded as %q, %v", cfg.ClusterName, err)
	}
}

func TestDefaultKeepsSetFields(t *testing.T) {
	cfg := Config{Workers: 9, RPCTimeout: metav1.Duration{Duration: time.Second}}
	cfg.Default()
	if cfg.Workers != 9 || cfg.RPCTimeout.Duration != time.Second {
		t.Errorf("Default overwrote set fields: %+v", cfg)
	}
	if cfg.Backoff.Initial.Duration != DefaultBackoffInitial || cfg.Backoff.Max.Duration != DefaultBackoffMax {
		t.Errorf("Default left back-off unset: %+v", cfg.Backoff)
	}
}

func TestLoadConfigExample(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("testdata", "example.yaml"))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	enabled, disabled := true, false
	want := Config{
		APIVersion:  APIVersion,
		Kind:        Kind,
		SignerNames: []string{"example.com/serving", "example.com/client"},
		Server: ServerConfig{
			Address:    "signet.example.com:8443",
			CAFile:     "/etc/signet/server-ca.pem",
			CertFile:   "/etc/signet/tls/tls.crt",
			KeyFile:    "/etc/signet/tls/tls.key",
			ServerName: "signet.internal",
		},
		Workers:    8,
		RPCTimeout: metav1.Duration{Duration: 5 * time.Second},
		Backoff: BackoffConfig{
			Initial: metav1.Duration{Duration: 500 * time.Millisecond},
			Max:     metav1.Duration{Duration: DefaultBackoffMax},
		},
		MetricsAddress: "127.0.0.1:9465",
		SignedEvents:   SignedEventsAll,
		PodCertificateRequests: PodCertificateRequestsConfig{
			Enabled:     &disabled,
			GiveUpAfter: metav1.Duration{Duration: DefaultPCRGiveUpAfter},
		},
		TrustBundles: TrustBundlesConfig{Enabled: &enabled, Period: metav1.Duration{Duration: 30 * time.Second}},
		ClusterName:  DefaultClusterName,
		LedgerWitness: LedgerWitnessConfig{
			PublicKeyFiles: []string{"/etc/signet/ledger-checkpoint.pub"},
			Period:         metav1.Duration{Duration: DefaultWitnessPeriod},
			ConfigMapName:  DefaultWitnessConfigMap,
		},
		LeaderElection: LeaderElectionConfig{
			Enabled:       &enabled,
			Namespace:     "signet-system",
			LeaseName:     DefaultLeaseName,
			LeaseDuration: metav1.Duration{Duration: 20 * time.Second},
			RenewDeadline: metav1.Duration{Duration: DefaultRenewDeadline},
			RetryPeriod:   metav1.Duration{Duration: DefaultRetryPeriod},
		},
	}
	gotYAML, _ := yaml.Marshal(cfg)
	wantYAML, _ := yaml.Marshal(&want)
	if !bytes.Equal(gotYAML, wantYAML) {
		t.Errorf("LoadConfig =\n%s\nwant\n%s", gotYAML, wantYAML)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		name, content, wantErr string
	}{
		{"unknown field", "apiVersion: signet.dev/v1alpha1\nkind: WatcherConfiguration\nworkerz: 3\n", `unknown field "workerz"`},
		{"unknown nested field", "apiVersion: signet.dev/v1alpha1\nkind: WatcherConfiguration\nserver:\n  adress: x:1\n", `unknown field "server.adress"`},
		{"every unknown field is listed", "apiVersion: signet.dev/v1alpha1\nkind: WatcherConfiguration\nworkerz: 3\nSignerNames: []\n", "unknown field \"SignerNames\" (line 4)\nunknown field \"workerz\" (line 3)"},
		{"duplicate field", "apiVersion: signet.dev/v1alpha1\nkind: WatcherConfiguration\nworkers: 1\nworkers: 2\n", `"workers"`},
		{"missing apiVersion", "kind: WatcherConfiguration\n", `apiVersion/kind is ""/"WatcherConfiguration"`},
		{"wrong kind", "apiVersion: signet.dev/v1alpha1\nkind: ServerConfiguration\n", `"ServerConfiguration"`},
		{"bad duration", "apiVersion: signet.dev/v1alpha1\nkind: WatcherConfiguration\nrpcTimeout: soon\n", `soon`},
		{"wrong type", "apiVersion: signet.dev/v1alpha1\nkind: WatcherConfiguration\nsignerNames: example.com/x\n", `signerNames`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadConfig(path)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("LoadConfig() error = %v, want one containing %s", err, tt.wantErr)
			}
		})
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("LoadConfig(missing file) succeeded")
	}
}

// validConfig is a defaulted Config that passes Validate.
func validConfig() Config {
	cfg := Config{
		SignerNames: []string{"example.com/serving"},
		Server:      ServerConfig{Address: "signet:8443", CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem"},
	}
	cfg.Default()
	return cfg
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr []string // substrings, each must appear; none means valid
	}{
		{"valid", func(*Config) {}, nil},
		{"IPv6 address", func(c *Config) { c.Server.Address = "[::1]:8443" }, nil},
		{"kubernetes.io signer", func(c *Config) { c.SignerNames = []string{"kubernetes.io/kube-apiserver-client"} }, nil},
		{"namespaced path", func(c *Config) { c.SignerNames = []string{"example.com/ns.name"} }, nil},
		{"no signer names", func(c *Config) { c.SignerNames = nil }, []string{"signerNames: at least one"}},
		{"signer name without path", func(c *Config) { c.SignerNames = []string{"example.com"} }, []string{`signerNames[0]: "example.com" must look like domain/path`}},
		{"signer name with two slashes", func(c *Config) { c.SignerNames = []string{"example.com/a/b"} }, []string{"signerNames[0]"}},
		{"single-label domain", func(c *Config) { c.SignerNames = []string{"example/serving"} }, []string{"at least two dot-separated labels"}},
		{"upper-case path", func(c *Config) { c.SignerNames = []string{"example.com/Serving"} }, []string{`path segment "Serving"`}},
		{"duplicate signer", func(c *Config) { c.SignerNames = []string{"example.com/a", "example.com/a"} }, []string{"signerNames[1]: \"example.com/a\" is listed twice"}},
		{"address without port", func(c *Config) { c.Server.Address = "signet" }, []string{"server.address"}},
		{"address with bad port", func(c *Config) { c.Server.Address = "signet:0" }, []string{"invalid port"}},
		{"address without host", func(c *Config) { c.Server.Address = ":8443" }, []string{"has no host"}},
		{"negative workers", func(c *Config) { c.Workers = -1 }, []string{"workers: is -1"}},
		{"witness period too short", func(c *Config) { c.LedgerWitness.Period.Duration = time.Millisecond }, []string{"ledgerWitness.period: is 1ms"}},
		{"witness key file empty", func(c *Config) { c.LedgerWitness.PublicKeyFiles = []string{""} }, []string{"ledgerWitness.publicKeyFiles[0]: is empty"}},
		{"unknown signedEvents", func(c *Config) { c.SignedEvents = "some" }, []string{`signedEvents: is "some", must be "retried" or "all"`}},
		{"negative timeout", func(c *Config) { c.RPCTimeout.Duration = -time.Second }, []string{"rpcTimeout"}},
		{"max below initial", func(c *Config) { c.Backoff.Max.Duration = time.Millisecond }, []string{"backoff.max"}},
		{"wrong apiVersion", func(c *Config) { c.APIVersion = "signet.dev/v1" }, []string{"apiVersion"}},
		{"addresses only", func(c *Config) { c.Server.Address, c.Server.Addresses = "", []string{"a:1", "b:2"} }, nil},
		{"address and addresses", func(c *Config) { c.Server.Addresses = []string{"b:2"} }, nil},
		{"bad fail-over address", func(c *Config) { c.Server.Addresses = []string{"b:2", "c"} }, []string{"server.addresses[1]"}},
		{"metrics on every interface", func(c *Config) { c.MetricsAddress = ":9465" }, nil},
		{"metrics on a free port", func(c *Config) { c.MetricsAddress = "127.0.0.1:0" }, nil},
		{"metrics disabled", func(c *Config) { c.MetricsAddress = MetricsDisabled }, nil},
		{"metrics without port", func(c *Config) { c.MetricsAddress = "localhost" }, []string{"metricsAddress"}},
		{"metrics with bad port", func(c *Config) { c.MetricsAddress = ":99999" }, []string{"metricsAddress", "invalid port"}},
		{"lease namespace", func(c *Config) { c.LeaderElection.Namespace = "signet-system" }, nil},
		{"bad lease namespace", func(c *Config) { c.LeaderElection.Namespace = "Signet_System" }, []string{"leaderElection.namespace"}},
		{"bad lease name", func(c *Config) { c.LeaderElection.LeaseName = "Signet Watcher" }, []string{"leaderElection.leaseName"}},
		{"lease not above renew deadline", func(c *Config) { c.LeaderElection.LeaseDuration.Duration = 10 * time.Second }, []string{"leaderElection.leaseDuration: is 10s, must be more than renewDeadline (10s)"}},
		{"renew deadline within jitter of retry", func(c *Config) { c.LeaderElection.RenewDeadline.Duration = 2 * time.Second }, []string{"leaderElection.renewDeadline"}},
		{"negative retry", func(c *Config) { c.LeaderElection.RetryPeriod.Duration = -time.Second }, []string{"leaderElection.retryPeriod"}},
		{"PCR give-up at the cleaner's age", func(c *Config) { c.PodCertificateRequests.GiveUpAfter.Duration = MaxPCRGiveUpAfter }, nil},
		{"PCR give-up past the cleaner's age", func(c *Config) { c.PodCertificateRequests.GiveUpAfter.Duration = 16 * time.Minute },
			[]string{"podCertificateRequests.giveUpAfter: is 16m0s, must be more than backoff.max (30s) and at most 15m0s"}},
		{"trust bundle period at its minimum", func(c *Config) { c.TrustBundles.Period.Duration = MinTrustBundlePeriod }, nil},
		{"trust bundle period below a second", func(c *Config) { c.TrustBundles.Period.Duration = 500 * time.Millisecond },
			[]string{"trustBundles.period: is 500ms, must be at least 1s"}},
		{"cluster name", func(c *Config) { c.ClusterName = "prod-eu-1" }, nil},
		{"cluster name of 63 characters", func(c *Config) { c.ClusterName = strings.Repeat("c", 63) }, nil},
		{"cluster name of 64 characters", func(c *Config) { c.ClusterName = strings.Repeat("c", 64) },
			[]string{`clusterName: "` + strings.Repeat("c", 64) + `" must be no more than 63 characters`}},
		{"upper-case cluster name", func(c *Config) { c.ClusterName = "Prod_EU" }, []string{`clusterName: "Prod_EU" a lowercase RFC 1123 label`}},
		{"cluster name with a dot", func(c *Config) { c.ClusterName = "prod.eu" }, []string{`clusterName: "prod.eu"`}},
		{"cluster name starting with a hyphen", func(c *Config) { c.ClusterName = "-prod" }, []string{`clusterName: "-prod"`}},
		{"PCR give-up within back-off", func(c *Config) { c.PodCertificateRequests.GiveUpAfter.Duration = 30 * time.Second },
			[]string{"podCertificateRequests.giveUpAfter"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := validConfig()
			tt.mutate(&cfg)
			err := cfg.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Errorf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate() = %v, want it to contain %q", err, want)
				}
			}
		})
	}
}

// TestValidateListsEveryProblem checks that a zero Config, once defaulted, reports each
// missing required field, one per line.
func TestValidateListsEveryProblem(t *testing.T) {
	var cfg Config
	cfg.Default()
	err := cfg.Validate()
	if err == nil {
		t.Fatal("Validate() = nil for an empty configuration")
	}
	want := []string{
		"signerNames: at least one signer name is required",
		"server.address: is required (host:port), or server.addresses",
		"server.caFile: is required",
		"server.certFile: is required",
		"server.keyFile: is required",
	}
	if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Validate() problems =\n%s\nwant\n%s", err, strings.Join(want, "\n"))
	}
}

// TestLoadConfigRelativePaths: relative server file paths in a file are relative to the
// file's folder, whatever the working directory; absolute paths are kept as written.
func TestLoadConfigRelativePaths(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tls"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls", "ca.crt"), []byte("CA"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "watcher.yaml")
	content := `apiVersion: signet.dev/v1alpha1
kind: WatcherConfiguration
server:
  address: signet:8443
  caFile: tls/ca.crt
  certFile: /etc/signet/tls/tls.crt
  keyFile: ../keys/tls.key
`
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	want := ServerConfig{
		CAFile:   filepath.Join(dir, "tls", "ca.crt"),
		CertFile: "/etc/signet/tls/tls.crt",
		KeyFile:  filepath.Join(filepath.Dir(dir), "keys", "tls.key"),
	}
	if got := cfg.Server; got.CAFile != want.CAFile || got.CertFile != want.CertFile || got.KeyFile != want.KeyFile {
		t.Errorf("server files = %q, %q, %q; want %q, %q, %q",
			got.CAFile, got.CertFile, got.KeyFile, want.CAFile, want.CertFile, want.KeyFile)
	}
	if data, err := os.ReadFile(cfg.Server.CAFile); err != nil || string(data) != "CA" {
		t.Errorf("reading caFile from another working directory: %q, %v", data, err)
	}
}

// TestDeployConfig: the sample configuration in deploy/watcher loads and validates.
func TestDeployConfig(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("..", "deploy", "watcher", "config.yaml"))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if cfg.ClusterName != "prod-eu-1" {
		t.Errorf("clusterName = %q, want the sample's prod-eu-1", cfg.ClusterName)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"github.com/signet-pki/signet/internal/version"
	"github.com/signet-pki/signet/watcher"
)

// TestBuildConfigOverrides: flags replace the file's values; the file's relative paths are
// relative to its folder, a flag's to the working directory.
func TestBuildConfigOverrides(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	content := `apiVersion: signet.dev/v1alpha1
kind: WatcherConfiguration
signerNames: [example.com/from-file]
server:
  address: file:8443
  caFile: file-ca.pem
  certFile: file-cert.pem
  keyFile: file-key.pem
`
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	var names stringList
	for _, n := range []string{"example.com/a", "example.com/b"} {
		if err := names.Set(n); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := buildConfig(options{configFile: path, signerNames: names, servers: stringList{"flag:9443"}, tlsCert: "flag-cert.pem"})
	if err != nil {
		t.Fatalf("buildConfig: %v", err)
	}
	if !slices.Equal(cfg.SignerNames, []string{"example.com/a", "example.com/b"}) {
		t.Errorf("signerNames = %v, want the flags'", cfg.SignerNames)
	}
	s := cfg.Server
	if s.Address != "flag:9443" || s.Addresses != nil || s.CertFile != "flag-cert.pem" ||
		s.CAFile != filepath.Join(dir, "file-ca.pem") || s.KeyFile != filepath.Join(dir, "file-key.pem") {
		t.Errorf("server = %+v, want flags over file, the file's paths in %s", s, dir)
	}
	if !cfg.LeaderElection.IsEnabled() || cfg.MetricsAddress != ":9465" {
		t.Errorf("leader election %v, metrics %q; want the file format's defaults (on, :9465)", cfg.LeaderElection.IsEnabled(), cfg.MetricsAddress)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestBuildConfigFlagsOnly(t *testing.T) {
	cfg, err := buildConfig(options{
		signerNames: stringList{"example.com/a"}, servers: stringList{"signet:8443"},
		tlsCA: "ca.pem", tlsCert: "cert.pem", tlsKey: "key.pem",
	})
	if err != nil {
		t.Fatalf("buildConfig: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if cfg.Workers != watcher.DefaultWorkers {
		t.Errorf("workers = %d, want the default %d", cfg.Workers, watcher.DefaultWorkers)
	}
	if !cfg.PodCertificateRequests.IsEnabled() {
		t.Error("flags alone: PodCertificateRequest signing off, want on by default")
	}
	if !cfg.LeaderElection.IsEnabled() || cfg.MetricsAddress != ":9465" {
		t.Errorf("flags alone: leader election %v, metrics %q; want a deployment's defaults", cfg.LeaderElection.IsEnabled(), cfg.MetricsAddress)
	}
}

// TestFlags parses a command line as main does and checks every production flag.
func TestFlags(t *testing.T) {
	fs, opts := newFlagSet()
	err := fs.Parse([]string{
		"--signer-name=example.com/a",
		"--server=a:1,b:2", "--server", "c:3",
		"--tls-ca=ca.pem", "--tls-cert=c.pem", "--tls-key=k.pem",
		"--leader-elect=false", "--leader-election-namespace=ops",
		"--metrics-address=0", "--kube-api-qps=50", "--kube-api-burst=70",
		"--pod-certificate-requests=false", "--kube-api-content-type=application/json",
	})
	if err != nil {
		t.Fatal(err)
	}
	if opts.kubeQPS != 50 || opts.kubeBurst != 70 {
		t.Errorf("kube API limits = %v/%d, want 50/70", opts.kubeQPS, opts.kubeBurst)
	}
	if opts.kubeContentType != "application/json" {
		t.Errorf("--kube-api-content-type = %q, want application/json", opts.kubeContentType)
	}
	cfg, err := buildConfig(*opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if cfg.Server.Address != "a:1" || !slices.Equal(cfg.Server.Addresses, []string{"b:2", "c:3"}) {
		t.Errorf("servers = %q + %q, want a:1 + [b:2 c:3]", cfg.Server.Address, cfg.Server.Addresses)
	}
	if cfg.LeaderElection.IsEnabled() || cfg.LeaderElection.Namespace != "ops" {
		t.Errorf("leader election = %+v, want disabled, namespace ops", cfg.LeaderElection)
	}
	if cfg.MetricsEnabled() {
		t.Errorf("metrics address %q, want disabled", cfg.MetricsAddress)
	}
	if cfg.PodCertificateRequests.IsEnabled() {
		t.Error("--pod-certificate-requests=false left PodCertificateRequest signing on")
	}

	fs, opts = newFlagSet()
	if err := fs.Parse([]string{"--leader-elect"}); err != nil {
		t.Fatal(err)
	}
	if !opts.leaderElect.set || !opts.leaderElect.value {
		t.Errorf("--leader-elect alone = %+v, want set and true", opts.leaderElect)
	}
	if opts.kubeQPS != defaultKubeQPS || opts.kubeBurst != defaultKubeBurst {
		t.Errorf("default kube API limits = %v/%d, want %d/%d", opts.kubeQPS, opts.kubeBurst, defaultKubeQPS, defaultKubeBurst)
	}
	if opts.kubeContentType != "application/vnd.kubernetes.protobuf" {
		t.Errorf("default --kube-api-content-type = %q, want protobuf, as kube-controller-manager", opts.kubeContentType)
	}
}

// TestLeaderElectFlagOverridesFile: --leader-elect=false turns off what the file enables.
func TestLeaderElectFlagOverridesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	content := "apiVersion: signet.dev/v1alpha1\nkind: WatcherConfiguration\nleaderElection: {enabled: true}\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := buildConfig(options{configFile: path, leaderElect: optionalBool{set: true, value: false}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LeaderElection.IsEnabled() {
		t.Error("--leader-elect=false did not override the file")
	}
}

// runMain runs the command in-process and returns its exit code, stdout and stderr.
func runMain(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestVersionFlag(t *testing.T) {
	for _, arg := range []string{"--version", "-version"} {
		code, stdout, stderr := runMain(arg)
		if code != 0 || stdout != version.String()+"\n" || stderr != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 0, %q, nothing", arg, code, stdout, stderr, version.String())
		}
	}
}

// TestValidateConfig: the file with the flags applied; "configuration is valid" and 0, or every
// problem with its field and 1.
func TestValidateConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	content := "apiVersion: signet.dev/v1alpha1\nkind: WatcherConfiguration\nsignerNames: [example.com/a]\n" +
		"server: {address: signet:8443, caFile: ca.pem, certFile: cert.pem, keyFile: key.pem}\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runMain("--config", path, "--validate-config")
	if code != 0 || stdout != "configuration is valid\n" || stderr != "" {
		t.Errorf("valid file: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = runMain("--config", path, "--validate-config", "--signer-name", "nope", "--server", "no-port")
	if code != 1 || stdout != "" || !strings.HasPrefix(stderr, "invalid configuration:\n") ||
		!strings.Contains(stderr, "\nsignerNames[0]: ") || !strings.Contains(stderr, "\nserver.address: ") {
		t.Errorf("invalid flags: exit %d, stdout %q, stderr %q; want 1 and each field named", code, stdout, stderr)
	}
}

// TestLogFormatJSON: --log-format json writes one JSON object a line (the component-base
// logger), with the message and the error as fields; an unknown format is a usage error.
func TestLogFormatJSON(t *testing.T) {
	t.Cleanup(klog.ClearLogger)
	code, _, stderr := runMain("--log-format", "json", "--kubeconfig", filepath.Join(t.TempDir(), "missing"),
		"--signer-name", "example.com/a", "--server", "127.0.0.1:1", "--tls-ca", "ca", "--tls-cert", "c", "--tls-key", "k")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (no kubeconfig); stderr:\n%s", code, stderr)
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if entry["msg"] == "Building Kubernetes client" && strings.Contains(fmt.Sprint(entry["err"]), "missing") {
			found = true
		}
	}
	if !found {
		t.Errorf("no JSON line for the kubeconfig error in:\n%s", stderr)
	}
	if code, _, stderr := runMain("--log-format", "xml"); code != 2 || !strings.Contains(stderr, `--log-format "xml"`) {
		t.Errorf("--log-format xml: exit %d, stderr %q; want 2 and the flag named", code, stderr)
	}
}

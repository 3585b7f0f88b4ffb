package config_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/signet-pki/signet/server/access"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/profile/spec"
)

// writeConfig writes body as config.yaml in a fresh folder and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const minimal = `apiVersion: signet.dev/v1alpha1
kind: ServerConfiguration
tls:
  certFile: /etc/signet/server.crt
  keyFile: /etc/signet/server.key
  clientCAFile: /etc/signet/clients.crt
clients:
  - identity: signet-watcher
    signers: ["*"]
ledger:
  dir: /var/lib/signet/ledger
signers:
  - name: example.com/serving
    key: /etc/signet/ca.key
    certificate: /etc/signet/ca.crt
    profile: {name: legacy-unknown}
`

// TestDefaultsGolden pins every default a minimal configuration gets. Run with
// UPDATE_GOLDEN=1 to rewrite testdata/defaults.golden.yaml after an intended change.
func TestDefaultsGolden(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(writeConfig(t, minimal))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	got, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "defaults.golden.yaml")
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("reading golden file (run with UPDATE_GOLDEN=1 to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("defaults changed; run with UPDATE_GOLDEN=1 if intended\n--- got\n%s\n--- want\n%s", got, want)
	}
}

func TestDefaultKeepsSetValues(t *testing.T) {
	t.Parallel()
	cfg := config.Config{
		GRPC:    config.GRPC{Address: "0.0.0.0:9443"},
		Signers: []config.Signer{{Name: "example.com/a", MaxLifetime: &metav1.Duration{Duration: time.Hour}}, {Name: "example.com/b"}},
	}
	cfg.Default()
	if cfg.GRPC.Address != "0.0.0.0:9443" {
		t.Errorf("address = %q, want the value set", cfg.GRPC.Address)
	}
	if got := cfg.Signers[0].MaxLifetime.Duration; got != time.Hour {
		t.Errorf("signers[0].maxLifetime = %s, want the value set (1h)", got)
	}
	if got := cfg.Signers[1].MaxLifetime.Duration; got != config.DefaultMaxLifetime {
		t.Errorf("signers[1].maxLifetime = %s, want the default %s", got, config.DefaultMaxLifetime)
	}
	if cfg.APIVersion != config.APIVersion || cfg.Kind != config.Kind {
		t.Errorf("apiVersion/kind = %s/%s, want the defaults", cfg.APIVersion, cfg.Kind)
	}
}

func TestLoadRefusesUnknownAndDuplicateFields(t *testing.T) {
	t.Parallel()
	tests := map[string]struct{ body, field string }{
		"top level":          {minimal + "signer: {}\n", `unknown field "signer"`},
		"nested":             {strings.Replace(minimal, "tls:\n", "grpc:\n  adress: 127.0.0.1:1\ntls:\n", 1), `unknown field "grpc.adress"`},
		"in a list":          {minimal + "    maxLifeTime: 1h\n", `unknown field "signers[0].maxLifeTime"`},
		"differs in case":    {minimal + "    maxLifetime: 1h\n    MaxLifetime: 876000h\n", `unknown field "signers[0].MaxLifetime"`},
		"duplicate key":      {minimal + "    maxLifetime: 1h\n    maxLifetime: 2h\n", `"maxLifetime" already set`},
		"upper-case version": {strings.Replace(minimal, "apiVersion:", "APIVersion:", 1), `unknown field "APIVersion"`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Load(writeConfig(t, tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Load = %v, want an error saying %s", err, tt.field)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	if _, err := config.Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want a not-exist error", err)
	}
	path := writeConfig(t, "signers: [")
	if _, err := config.Load(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Load(bad YAML) = %v, want a parse error naming the file", err)
	}
	path = writeConfig(t, strings.Replace(minimal, "apiVersion: signet.dev/v1alpha1\nkind: ServerConfiguration\n", "", 1))
	if _, err := config.Load(path); err == nil || !strings.Contains(err.Error(), `apiVersion/kind is ""/"", want "signet.dev/v1alpha1"/"ServerConfiguration"`) {
		t.Errorf("Load(no apiVersion/kind) = %v, want a refusal naming the expected apiVersion and kind", err)
	}
	path = writeConfig(t, strings.Replace(minimal, "certificate: /etc/signet/ca.crt\n", "certificate: /etc/signet/ca.crt\n    maxLifetime: 5m\n", 1))
	if _, err := config.Load(path); err == nil || !strings.Contains(err.Error(), "signers[0].maxLifetime 5m0s is below the 10m floor") {
		t.Errorf("Load(maxLifetime 5m) = %v, want the floor error", err)
	}
}

func TestValidateListsEveryProblem(t *testing.T) {
	t.Parallel()
	legacy := spec.Spec{Name: spec.NameLegacyUnknown}
	cfg := config.Config{
		APIVersion: "signet.dev/v0",
		Kind:       "ServerConfiguration",
		GRPC:       config.GRPC{Address: "no-port"},
		TLS:        config.TLS{CertFile: "server.crt"},
		Clients:    []access.Client{{Identity: "w", Signers: []string{access.AllSigners}}},
		Signers: []config.Signer{
			{Name: "not a signer", Key: "k", Certificate: "c", Profile: legacy},
			{Name: "example.com/a", Key: "k", Certificate: "c", Profile: legacy},
			{Name: "example.com/a", Profile: legacy},
			{Name: "example.com/b", Key: "k", Certificate: "c", MaxLifetime: &metav1.Duration{Duration: time.Minute}, Profile: spec.Spec{Name: "nope"},
				Rotation: config.Rotation{Clusters: []string{"east", "East_1", "east"}, MinPropagationDelay: &metav1.Duration{Duration: -time.Second}}},
		},
	}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("Validate accepted a broken configuration")
	}
	for _, want := range []string{
		"apiVersion/kind is signet.dev/v0/ServerConfiguration",
		"grpc.address",
		"tls.keyFile is required",
		"tls.clientCAFile is required",
		`signers[0].name "not a signer" is not a signer name`,
		`signers[2].name "example.com/a" is listed twice`,
		"signers[2].key is required",
		"signers[2].certificate is required",
		"signers[3].maxLifetime 1m0s is below the 10m floor",
		"signers[3].profile: name",
		`signers[3].rotation.clusters[1] "East_1" is not a cluster name`,
		`signers[3].rotation.clusters[2] "east" is listed twice`,
		"signers[3].rotation.minPropagationDelay -1s is negative",
		"ledger.dir is required",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error does not mention %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "tls.certFile") || strings.Contains(err.Error(), "signers[1]") {
		t.Errorf("Validate reports fields that are fine:\n%v", err)
	}
	if got := strings.Count(err.Error(), "\n") + 1; got != 14 {
		t.Errorf("Validate reported %d problems, want 14:\n%v", got, err)
	}
	if err := (&config.Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "at least one signer") {
		t.Errorf("Validate(zero config) = %v, want it to ask for a signer", err)
	}
}

func TestSignerNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ok   bool
	}{
		{"example.com/serving", true},
		{"kubernetes.io/kube-apiserver-client", true},
		{"signet.dev/dev", true},
		{"my-org.example.com/team.serving-v2", true},
		// The kube-apiserver refuses these (pkg/apis/core/validation ValidateSignerName).
		{"my-org.example.com/team/serving", false},
		{"example.com/Serving_v2", false},
		{"", false},
		{"serving", false},
		{"example.com", false},
		{"example.com/", false},
		{"example/serving", false},
		{"Example.com/serving", false},
		{"-example.com/serving", false},
		{"example-.com/serving", false},
		{"example..com/serving", false},
		{"/example.com/serving", false},
		{"example.com/has space", false},
		{"example.com/serving\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := config.Config{
				TLS:     config.TLS{CertFile: "a", KeyFile: "b", ClientCAFile: "c"},
				Clients: []access.Client{{Identity: "w", Signers: []string{access.AllSigners}}},
				Ledger:  config.Ledger{Dir: "/l"},
				Signers: []config.Signer{{Name: tt.name, Key: "k", Certificate: "c", Profile: spec.Spec{Name: spec.NameLegacyUnknown}}},
			}
			cfg.Default()
			err := cfg.Validate()
			if tt.ok && err != nil {
				t.Errorf("Validate refused signer name %q: %v", tt.name, err)
			}
			if !tt.ok && (err == nil || !strings.Contains(err.Error(), "is not a signer name")) {
				t.Errorf("Validate(%q) = %v, want a signer name error", tt.name, err)
			}
		})
	}
}

func TestLoadResolvesRelativePaths(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "etc", "signet")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	body := `apiVersion: signet.dev/v1alpha1
kind: ServerConfiguration
tls:
  certFile: tls/server.crt
  keyFile: ./tls/server.key
  clientCAFile: /abs/clients.crt
clients: [{identity: w, signers: ["*"]}]
ledger: {dir: var/ledger}
signers:
  - name: example.com/a
    key: ca-a.key
    certificate: ca-a.crt
    intermediates: chain/a.pem
    profile: {name: legacy-unknown}
  - name: example.com/b
    key: file:///abs/ca-b.key
    certificate: ../ca-b.crt
    profile: {name: legacy-unknown}
  - name: example.com/c
    key: pkcs11:token=signet;object=ca-c
    certificate: /abs/ca-c.crt
    profile: {name: legacy-unknown}
  - name: example.com/d
    key: tpm:handle=0x81000001
    certificate: ca-d.crt
    profile: {name: legacy-unknown}
`
	path := filepath.Join(dir, "server.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	in := func(p string) string { return filepath.Join(dir, p) }
	for _, c := range []struct{ field, got, want string }{
		{"tls.certFile", cfg.TLS.CertFile, in("tls/server.crt")},
		{"tls.keyFile", cfg.TLS.KeyFile, in("tls/server.key")},
		{"tls.clientCAFile", cfg.TLS.ClientCAFile, "/abs/clients.crt"},
		{"ledger.dir", cfg.Ledger.Dir, in("var/ledger")},
		{"signers[0].key", cfg.Signers[0].Key, in("ca-a.key")},
		{"signers[0].certificate", cfg.Signers[0].Certificate, in("ca-a.crt")},
		{"signers[0].intermediates", cfg.Signers[0].Intermediates, in("chain/a.pem")},
		{"signers[1].key", cfg.Signers[1].Key, "file:///abs/ca-b.key"},
		{"signers[1].certificate", cfg.Signers[1].Certificate, filepath.Join(dir, "..", "ca-b.crt")},
		{"signers[1].intermediates", cfg.Signers[1].Intermediates, ""},
		{"signers[2].key", cfg.Signers[2].Key, "pkcs11:token=signet;object=ca-c"},
		{"signers[3].key", cfg.Signers[3].Key, "tpm:handle=0x81000001"},
		{"signers[3].certificate", cfg.Signers[3].Certificate, in("ca-d.crt")},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.field, c.got, c.want)
		}
	}
}

// TestDeployExampleLoads keeps the documented example configuration (README.md and
// deploy/server/server.yaml, which adds a pod-identity signer) valid.
func TestDeployExampleLoads(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(filepath.Join("..", "..", "deploy", "server", "server.yaml"))
	if err != nil {
		t.Fatalf("deploy/server/server.yaml: %v", err)
	}
	if len(cfg.Signers) != 3 || cfg.Signers[1].Profile.Custom == nil || len(cfg.Clients) != 2 || !cfg.Clients[1].Admin ||
		len(cfg.Signers[1].Rotation.Clusters) != 1 || cfg.Signers[1].Rotation.PropagationDelay() != time.Hour {
		t.Errorf("example parsed as %+v", cfg)
	}
	if pi := cfg.Signers[2].Profile.PodIdentity; cfg.Signers[2].Profile.Name != spec.NamePodIdentity || pi == nil ||
		pi.TrustDomain != "prod.example.com" || len(pi.AllowedAnnotations) != 1 {
		t.Errorf("example pod-identity signer parsed as %+v", cfg.Signers[2].Profile)
	}
}

// TestLintAndBootstrapFields: the lint gate's exclusions (added to the defaults, or the whole
// list with replaceDefaultExclusions) and the kubelet profile's bootstrap settings are read
// from the file as written.
func TestLintAndBootstrapFields(t *testing.T) {
	t.Parallel()
	body := strings.Replace(minimal, "    profile: {name: legacy-unknown}\n", `    profile:
      name: kube-apiserver-client-kubelet
      bootstrap: {groups: ["acme:node-joiners"]}
    lint: {exclude: [e_rfc_dnsname_empty_label], replaceDefaultExclusions: true}
lint: {exclude: [w_ext_subject_key_identifier_missing_sub_cert]}
`, 1)
	cfg, err := config.Load(writeConfig(t, body))
	if err != nil {
		t.Fatal(err)
	}
	sg := cfg.Signers[0]
	if b := sg.Profile.Bootstrap; b == nil || b.Disabled || len(b.Groups) != 1 || b.Groups[0] != "acme:node-joiners" {
		t.Errorf("bootstrap parsed as %+v", b)
	}
	if sg.Lint == nil || !sg.Lint.ReplaceDefaultExclusions || len(sg.Lint.Exclude) != 1 || cfg.Lint.ReplaceDefaultExclusions || len(cfg.Lint.Exclude) != 1 {
		t.Errorf("lint parsed as signer %+v, top level %+v", sg.Lint, cfg.Lint)
	}
	bad := strings.Replace(body, `bootstrap: {groups: ["acme:node-joiners"]}`, `bootstrap: {groups: ["system:nodes"]}`, 1)
	if _, err := config.Load(writeConfig(t, bad)); err == nil || !strings.Contains(err.Error(), "bootstrap.groups[0]") {
		t.Errorf("system:nodes as a bootstrap group: %v, want an error naming bootstrap.groups[0]", err)
	}
}

// TestSignerCAs: a signer's CAs are key and certificate, or a list in cas with exactly one
// active CA and a key for every CA that is not retired.
func TestSignerCAs(t *testing.T) {
	t.Parallel()
	legacy := spec.Spec{Name: spec.NameLegacyUnknown}
	for _, tc := range []struct {
		name   string
		signer config.Signer
		want   string // "" for valid
	}{
		{"key and certificate", config.Signer{Key: "k", Certificate: "c"}, ""},
		{"active, staged and retired", config.Signer{CAs: []config.CA{
			{Key: "k1", Certificate: "c1"}, {Key: "k2", Certificate: "c2", State: "staged"}, {Certificate: "c3", State: "retired"}}}, ""},
		{"both forms", config.Signer{Key: "k", Certificate: "c", CAs: []config.CA{{Key: "k1", Certificate: "c1"}}}, "either cas or key"},
		{"no active CA", config.Signer{CAs: []config.CA{{Key: "k1", Certificate: "c1", State: "staged"}}}, "0 active CAs"},
		{"two active CAs", config.Signer{CAs: []config.CA{{Key: "k1", Certificate: "c1"}, {Key: "k2", Certificate: "c2", State: "active"}}}, "2 active CAs"},
		{"staged without a key", config.Signer{CAs: []config.CA{{Key: "k1", Certificate: "c1"}, {Certificate: "c2", State: "staged"}}}, "cas[1].key is required"},
		{"unknown state", config.Signer{CAs: []config.CA{{Key: "k1", Certificate: "c1"}, {Key: "k2", Certificate: "c2", State: "next"}}}, `cas[1].state "next"`},
		{"CA without certificate", config.Signer{CAs: []config.CA{{Key: "k1"}}}, "cas[0].certificate is required"},
	} {
		s := tc.signer
		s.Name, s.Profile = "example.com/a", legacy
		cfg := config.Config{
			APIVersion: config.APIVersion, Kind: config.Kind,
			TLS:     config.TLS{CertFile: "a", KeyFile: "b", ClientCAFile: "c"},
			Clients: []access.Client{{Identity: "w", Signers: []string{access.AllSigners}}},
			Signers: []config.Signer{s},
			Ledger:  config.Ledger{Dir: "l"},
		}
		cfg.Default()
		err := cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: Validate = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// TestWebhook: the webhook is off without an address; with one, its body limit defaults to
// DefaultWebhookMaxRequestBytes and must lie within the documented bounds; its address must
// be host:port and not the gRPC or HTTP one.
func TestWebhook(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(writeConfig(t, minimal))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Webhook.Enabled() || cfg.Webhook.MaxRequestBytes != 0 {
		t.Errorf("webhook defaults to %+v, want it off with no limit set", cfg.Webhook)
	}
	cfg, err = config.Load(writeConfig(t, minimal+"webhook: {address: \"127.0.0.1:8444\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Webhook.Enabled() || cfg.Webhook.MaxRequestBytes != config.DefaultWebhookMaxRequestBytes {
		t.Errorf("webhook with an address = %+v, want it on with the default limit %d", cfg.Webhook, config.DefaultWebhookMaxRequestBytes)
	}
	cfg, err = config.Load(writeConfig(t, minimal+"webhook: {address: \"0.0.0.0:8444\", maxRequestBytes: 131072}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Webhook.MaxRequestBytes != 128<<10 {
		t.Errorf("webhook.maxRequestBytes = %d, want the value set", cfg.Webhook.MaxRequestBytes)
	}
	for _, tc := range []struct{ webhook, want string }{
		{`{address: "no-port"}`, "webhook.address"},
		{`{address: "127.0.0.1:8443"}`, "webhook.address 127.0.0.1:8443 is also the grpc or http address"},
		{`{address: "127.0.0.1:9464"}`, "webhook.address 127.0.0.1:9464 is also the grpc or http address"},
		{`{address: "127.0.0.1:8444", maxRequestBytes: 1024}`, "webhook.maxRequestBytes 1024 is outside [131072, 67108864]"},
		{`{address: "127.0.0.1:8444", maxRequestBytes: 134217728}`, "webhook.maxRequestBytes 134217728 is outside"},
		{`{address: "127.0.0.1:8444", maxRequestBytes: -1}`, "webhook.maxRequestBytes -1 is outside"},
		{`{maxRequestBytes: 131072}`, "webhook.maxRequestBytes is set but webhook.address is not"},
		{`{adress: "127.0.0.1:8444"}`, `unknown field "webhook.adress"`},
	} {
		_, err := config.Load(writeConfig(t, minimal+"webhook: "+tc.webhook+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("webhook %s: Load = %v, want an error containing %q", tc.webhook, err, tc.want)
		}
	}
}

// TestDefaultMaxLifetime: the profiles that reproduce kube-controller-manager's signers default
// to its 8760h (a cut-over keeps the lifetimes), every other profile to 24h.
func TestDefaultMaxLifetime(t *testing.T) {
	for name, want := range map[string]time.Duration{
		"kube-apiserver-client": 8760 * time.Hour, "kube-apiserver-client-kubelet": 8760 * time.Hour,
		"kubelet-serving": 8760 * time.Hour, "legacy-unknown": 8760 * time.Hour,
		"custom": 24 * time.Hour, "pod-identity": 24 * time.Hour, "kubelet-client-tpm": 24 * time.Hour,
	} {
		if got := config.DefaultMaxLifetimeFor(name); got != want {
			t.Errorf("DefaultMaxLifetimeFor(%s) = %s, want %s", name, got, want)
		}
	}
}

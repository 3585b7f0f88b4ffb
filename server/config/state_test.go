package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signet-pki/signet/server/config"
)

// stateConfig is a valid file-backed configuration, as YAML, with the state section state.
func stateConfig(state string) string {
	return `apiVersion: signet.dev/v1alpha1
kind: ServerConfiguration
grpc: {address: "127.0.0.1:8443"}
tls: {certFile: s.crt, keyFile: s.key, clientCAFile: c.crt}
clients:
- {identity: "spiffe://example.com/watcher", signers: [example.com/serving]}
signers:
- {name: example.com/serving, key: ca.key, certificate: ca.crt, profile: {name: kubelet-serving}}
ledger: {dir: ledger, checkpoint: {key: cp.pem}}
` + state
}

// TestStateBackends: the file backend is the default and needs nothing; postgres needs its
// DSN and a shared checkpoint key, refuses what only one host can keep, gets its leases'
// defaults, and reads the password file relative to the configuration.
func TestStateBackends(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, state string
		errs        []string // each must appear; none: valid
		check       func(*testing.T, *config.Config)
	}{
		{name: "default is file", check: func(t *testing.T, c *config.Config) {
			if c.State.Backend != config.BackendFile || c.State.Fleet() {
				t.Errorf("backend %q, want file", c.State.Backend)
			}
		}},
		{name: "postgres", state: "state: {backend: postgres, postgres: {dsn: 'postgres://signet@db/signet', passwordFile: pw}}\n",
			check: func(t *testing.T, c *config.Config) {
				p := c.State.Postgres
				if !c.State.Fleet() || p.ClaimLease.Duration != config.DefaultClaimLease || p.IntegratorLease.Duration != config.DefaultIntegratorLease {
					t.Errorf("state %+v, want postgres with the default leases", c.State)
				}
				if !filepath.IsAbs(p.PasswordFile) || filepath.Base(p.PasswordFile) != "pw" {
					t.Errorf("passwordFile %q, want it resolved next to the configuration", p.PasswordFile)
				}
			}},
		{name: "postgres without dsn", state: "state: {backend: postgres}\n", errs: []string{"state.postgres.dsn is required"}},
		{name: "unknown backend", state: "state: {backend: etcd}\n", errs: []string{`state.backend "etcd" is neither`}},
		{name: "postgres settings on file", state: "state: {postgres: {dsn: 'postgres://db/signet'}}\n", errs: []string{"state.backend is file"}},
		{name: "short leases", state: "state: {backend: postgres, postgres: {dsn: 'postgres://db/s', claimLease: 100ms, integratorLease: 500ms}}\n",
			errs: []string{"state.postgres.claimLease 100ms is below 1s", "state.postgres.integratorLease 500ms is below 1s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "server.yaml")
			if err := os.WriteFile(path, []byte(stateConfig(tc.state)), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := config.Load(path)
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				tc.check(t, c)
				return
			}
			if err == nil {
				t.Fatalf("Load accepted state %q", tc.state)
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not say %q:\n%v", want, err)
				}
			}
		})
	}
}

// TestPostgresNeedsASharedCheckpointKey: a fleet's servers each may sign its checkpoints, so
// the key is named, never the per-host default; a witnessed file (one host's) is refused, and
// attestation needs a ticket key every server shares.
func TestPostgresNeedsASharedCheckpointKey(t *testing.T) {
	t.Parallel()
	c := &config.Config{State: config.State{Backend: config.BackendPostgres, Postgres: config.Postgres{DSN: "postgres://db/s"}}}
	c.Ledger.Checkpoint.WitnessedFile = "w"
	c.Attestation.Address = "127.0.0.1:1"
	c.Default()
	err := c.Validate()
	for _, want := range []string{"ledger.checkpoint.key is required with state.backend postgres", "ledger.checkpoint.witnessedFile is for the file ledger",
		"attestation.ticketKeyFile is required with state.backend postgres"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "ledger.dir") {
		t.Errorf("a fleet server needs no ledger.dir: %v", err)
	}
}

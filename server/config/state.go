package config

import (
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// State backends (state.backend).
const (
	// BackendFile keeps the state in ledger.dir: the file ledger, one host (the default).
	BackendFile = "file"
	// BackendPostgres keeps it in one PostgreSQL database shared by a fleet of servers.
	BackendPostgres = "postgres"
)

// Default fleet timings.
const (
	DefaultClaimLease      = 30 * time.Second
	DefaultIntegratorLease = 5 * time.Second
)

// State says where the server keeps its state: the ledger, the idempotent answers and the CA
// rotation.
type State struct {
	// Backend is "file" (the default: the file ledger in ledger.dir, one host) or "postgres"
	// (one database shared by a fleet of servers, docs/operations.md).
	Backend string `json:"backend,omitempty"`
	// Postgres is the fleet's database, for backend postgres.
	Postgres Postgres `json:"postgres,omitempty"`
}

// Postgres is the fleet's database.
type Postgres struct {
	// DSN is the connection string (a postgres:// URL or key=value pairs), without the
	// password; use sslmode=verify-full across hosts.
	DSN string `json:"dsn"`
	// PasswordFile holds the password (a file, or a systemd credential:
	// $CREDENTIALS_DIRECTORY/name); its first line is used. Empty: the DSN's own means
	// (a client certificate, a .pgpass file).
	PasswordFile string `json:"passwordFile,omitempty"`
	// ClaimLease is how long a server's claim on an object holds while it issues; a server
	// that crashed mid-issuance loses the claim after it. Default 30s.
	ClaimLease metav1.Duration `json:"claimLease,omitempty"`
	// IntegratorLease is how long the fleet's integrator (the server that builds the tree and
	// signs checkpoints) holds its lease between renewals; another server takes over within
	// about this long after it dies. Default 5s.
	IntegratorLease metav1.Duration `json:"integratorLease,omitempty"`
}

// Fleet reports whether the state is a fleet's database.
func (s State) Fleet() bool { return s.Backend == BackendPostgres }

func (s *State) defaults() {
	if s.Backend == "" {
		s.Backend = BackendFile
	}
	if s.Fleet() {
		if s.Postgres.ClaimLease.Duration == 0 {
			s.Postgres.ClaimLease.Duration = DefaultClaimLease
		}
		if s.Postgres.IntegratorLease.Duration == 0 {
			s.Postgres.IntegratorLease.Duration = DefaultIntegratorLease
		}
	}
}

// validate checks the state against the rest of the configuration c.
func (s State) validate(c *Config) []error {
	var errs []error
	switch s.Backend {
	case BackendFile, "":
		if c.Ledger.Dir == "" {
			errs = append(errs, errors.New("ledger.dir is required (no certificate is issued without a durable record)"))
		}
		if s.Postgres != (Postgres{}) {
			errs = append(errs, errors.New("state.postgres is set but state.backend is file; set state.backend: postgres to use it"))
		}
	case BackendPostgres:
		if s.Postgres.DSN == "" {
			errs = append(errs, errors.New("state.postgres.dsn is required with state.backend postgres"))
		}
		if c.Ledger.Checkpoint.Key == "" {
			errs = append(errs, errors.New("ledger.checkpoint.key is required with state.backend postgres: every server of the fleet may become its integrator and sign checkpoints, so all of them name the same key (an HSM slot, or one key file copied to each host)"))
		}
		if c.Ledger.Checkpoint.WitnessedFile != "" {
			errs = append(errs, errors.New("ledger.checkpoint.witnessedFile is for the file ledger; a fleet's checkpoints are checked by the cluster witness"))
		}
		if c.Attestation.Enabled() && c.Attestation.TicketKeyFile == "" {
			errs = append(errs, errors.New("attestation.ticketKeyFile is required with state.backend postgres: a node's ticket from one server must verify on the others, so every server names the same key file (at least 32 random bytes)"))
		}
		for _, d := range []struct {
			name string
			v    time.Duration
		}{{"claimLease", s.Postgres.ClaimLease.Duration}, {"integratorLease", s.Postgres.IntegratorLease.Duration}} {
			if d.v != 0 && d.v < time.Second {
				errs = append(errs, fmt.Errorf("state.postgres.%s %s is below 1s", d.name, d.v))
			}
		}
	default:
		errs = append(errs, fmt.Errorf("state.backend %q is neither %q nor %q", s.Backend, BackendFile, BackendPostgres))
	}
	return errs
}

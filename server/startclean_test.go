package server_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/server"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/servertest"
)

// TestFailedStartLeavesNothing: a first start that fails on its configuration (a missing TLS
// file, a lint setting that does not build, a CA certificate that is not one) or on a key (one
// that is not its certificate's) fails before the ledger is created: no ledger folder, no
// checkpoint key.
func TestFailedStartLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		spoil func(cfg *config.Config, dir string)
		want  string
	}{
		{"missing TLS certificate", func(cfg *config.Config, dir string) { cfg.TLS.CertFile = filepath.Join(dir, "missing.crt") }, "missing.crt"},
		{"missing client CA", func(cfg *config.Config, dir string) { cfg.TLS.ClientCAFile = filepath.Join(dir, "missing-ca.crt") }, "missing-ca.crt"},
		{"unknown lint", func(cfg *config.Config, _ string) { cfg.Lint.Exclude = []string{"e_no_such_lint"} }, "e_no_such_lint"},
		{"CA certificate is the server's", func(cfg *config.Config, dir string) {
			cfg.Signers[0].Certificate = filepath.Join(dir, devpki.ServerCert)
		}, "not a CA certificate"},
		// Keys are opened before a first start creates the ledger.
		{"CA key of another CA", func(cfg *config.Config, dir string) { cfg.Signers[0].Key = filepath.Join(dir, devpki.TLSCAKey) }, "signer " + devpki.DefaultSigner},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, dir := servertest.DevConfig(t, devpki.Options{})
			cfg.Ledger.Dir = filepath.Join(dir, "fresh-ledger")
			tc.spoil(cfg, dir)
			srv, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				srv.Close()
				t.Fatal("the server started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want an error naming %s", err, tc.want)
			}
			if _, err := os.Stat(cfg.Ledger.Dir); !os.IsNotExist(err) {
				t.Errorf("the failed start left the ledger folder %s behind (stat: %v)", cfg.Ledger.Dir, err)
			}
		})
	}
}

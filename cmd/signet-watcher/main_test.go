package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestBuildConfigOverrides(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
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
	cfg, err := buildConfig(options{configFile: path, signerNames: names, server: "flag:9443", tlsCert: "flag-cert.pem"})
	if err != nil {
		t.Fatalf("buildConfig: %v", err)
	}
	if !slices.Equal(cfg.SignerNames, []string{"example.com/a", "example.com/b"}) {
		t.Errorf("signerNames = %v, want the flags'", cfg.SignerNames)
	}
	s := cfg.Server
	if s.Address != "flag:9443" || s.CertFile != "flag-cert.pem" || s.CAFile != "file-ca.pem" || s.KeyFile != "file-key.pem" {
		t.Errorf("server = %+v, want flags over file", s)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestBuildConfigFlagsOnly(t *testing.T) {
	cfg, err := buildConfig(options{
		signerNames: stringList{"example.com/a"}, server: "signet:8443",
		tlsCA: "ca.pem", tlsCert: "cert.pem", tlsKey: "key.pem",
	})
	if err != nil {
		t.Fatalf("buildConfig: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if cfg.Workers != 4 {
		t.Errorf("workers = %d, want the default 4", cfg.Workers)
	}
}

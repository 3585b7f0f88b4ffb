package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/signet-pki/signet/internal/configfile"
	"github.com/signet-pki/signet/internal/filereload"
	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/config/fieldscan"
	"github.com/signet-pki/signet/watcher"
)

// validateWatcherFile loads the watcher configuration at path as signet-watcher does and
// validates it, and with checkFiles checks the files it names (watcherFiles). Every problem is
// reported, each with its field and line: a duration that is not one does not hide the others
// (fieldscan), and a problem whose message gives no line gets its field's.
func validateWatcherFile(path string, checkFiles bool) validation {
	v := validation{File: path, Kind: "WatcherConfiguration", Problems: []problem{}}
	data, err := os.ReadFile(path)
	if err != nil {
		v.Problems = append(v.Problems, problem{Message: err.Error()})
		return v
	}
	lines := fieldscan.Lines(data)
	cleaned, errs := fieldscan.Durations(data, reflect.TypeFor[watcher.Config]())
	var cfg *watcher.Config
	if cleaned == nil {
		cfg, err = watcher.LoadConfig(path)
	} else {
		cfg = &watcher.Config{}
		err = fieldscan.DecodeStrict(cleaned, lines, cfg)
		if err == nil && (cfg.APIVersion != watcher.APIVersion || cfg.Kind != watcher.Kind) {
			err = fmt.Errorf("apiVersion/kind is %q/%q, want %q/%q", cfg.APIVersion, cfg.Kind, watcher.APIVersion, watcher.Kind)
		}
		if err == nil {
			s := &cfg.Server
			configfile.ResolvePaths(filepath.Dir(path), &s.CAFile, &s.CertFile, &s.KeyFile)
			cfg.DefaultDeployment()
			cfg.Default()
		}
	}
	errs = append(errs, fieldscan.Split(err)...)
	if err == nil {
		errs = append(errs, fieldscan.Split(cfg.Validate())...)
		if checkFiles {
			errs = append(errs, watcherFiles(cfg)...)
		}
	}
	for _, e := range errs {
		p := parseProblem(e.Error())
		if p.Line == 0 && p.Field != "" {
			p.Line = fieldscan.Line(lines, p.Field)
		}
		v.Problems = append(v.Problems, p)
	}
	v.Valid = len(v.Problems) == 0
	return v
}

// watcherFiles checks the files a watcher start reads: the server CA bundle, the client
// certificate and key (a pair, as crypto/tls loads them), and the witness's checkpoint public
// keys. Each problem names its field.
func watcherFiles(cfg *watcher.Config) []error {
	var errs []error
	s := cfg.Server
	for _, f := range []struct{ field, path string }{{"server.caFile", s.CAFile}, {"server.certFile", s.CertFile}, {"server.keyFile", s.KeyFile}} {
		if _, err := os.Stat(f.path); f.path != "" && err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.field, err))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if _, err := filereload.ReadCertificates(s.CAFile); err != nil {
		errs = append(errs, fmt.Errorf("server.caFile: %w", err))
	}
	if _, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile); err != nil {
		errs = append(errs, fmt.Errorf("server.keyFile: %s and the certificate %s are not a TLS pair: %w", s.KeyFile, s.CertFile, err))
	}
	for i, p := range cfg.LedgerWitness.PublicKeyFiles {
		data, err := os.ReadFile(p)
		if err == nil {
			_, err = ledgerproof.ParsePublicKeyPEM(data)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("ledgerWitness.publicKeyFiles[%d]: %w", i, err))
		}
	}
	return errs
}

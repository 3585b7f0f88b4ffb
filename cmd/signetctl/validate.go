package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/config/fieldscan"
	"github.com/signet-pki/signet/server/configcheck"
)

// validation is validate's answer (-o json|yaml).
type validation struct {
	File     string    `json:"file"`
	Kind     string    `json:"kind"`
	Valid    bool      `json:"valid"`
	Problems []problem `json:"problems"`
	// Signers are, for a valid server file, one line per signer: its profile, its longest
	// certificate lifetime and the signing outage its clients ride out.
	Signers []string `json:"signers,omitempty"`
	// Notes are remarks on a valid server file: what could not be checked (an encrypted key
	// whose passphrase file this user cannot read).
	Notes []string `json:"notes,omitempty"`
}

// problem is one error of a configuration file: its field, line and message.
type problem = fieldscan.Problem

// validateCommand is "signetctl validate".
func validateCommand() *cobra.Command {
	return groupCommand("validate", "Check a signet-server or signet-watcher configuration file (server, watcher)",
		`Loads a configuration file as the binary would at start (strict decoding, defaults, every check)
and prints each problem with the path of its field. Exit 0 when the file is valid, 1 when it is
not, 2 when it cannot be read.`,
		`  signetctl validate server /etc/signet/server.yaml
  signetctl validate watcher deploy/watcher/config.yaml -o json`,
		validateServerCommand(), validateWatcherCommand())
}

// validateWatcherCommand is "signetctl validate watcher FILE".
func validateWatcherCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "watcher FILE",
		Short: "Check a WatcherConfiguration file as signet-watcher loads it",
		Long: `Loads FILE as signet-watcher does (strict: unknown, duplicate or mis-cased fields are errors;
defaults applied) and validates it, printing every problem with its field path and line (a
duration that is not one does not hide the others). The TLS files
(server.caFile, certFile, keyFile) must be in the file: the watcher's --tls-* flags, which can
supply them at start, are not considered. The files live in the watcher's pod (Secret and
ConfigMap mounts); where they are at hand, --check-files checks them as a start would: the CA
bundle, the client certificate and key (a matching pair) and the ledger witness's public keys.

` + exitCodesHelp,
		Example: `  signetctl validate watcher /etc/signet/watcher.yaml
  signetctl validate watcher --check-files /etc/signet-watcher/config.yaml`,
		Args: cobra.ExactArgs(1),
	}
	var checkFiles bool
	cmd.Flags().BoolVar(&checkFiles, "check-files", false, "also check the files the configuration names (TLS files, witness public keys)")
	out := addOutputFlag(cmd, "the file, whether it is valid, and each problem with its field")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		path := args[0]
		if err := readable(path); err != nil {
			return err
		}
		return reportValidation(cmd, out, validateWatcherFile(path, checkFiles))
	}
	return cmd
}

// validateServerCommand is "signetctl validate server FILE".
func validateServerCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "server FILE",
		Short: "Check a ServerConfiguration file as signet-server loads it",
		Long: `Loads FILE as signet-server does at start (strict: unknown, duplicate or mis-cased fields are
errors; relative paths resolved against the file's folder; defaults applied) and checks it as a
start would short of using a key, in process: every value (a duration that is not one does not
hide the others), and the files the configuration names (TLS certificate, key and client CA; CA
certificates; file keys readable by their owner only and matching their certificate; PKCS#11 and
TPM URIs by their syntax and the files they name; checkpoint key, witnessed checkpoint,
attestation files). Every problem is printed with its field path and line; a valid file gets one
line per signer on its certificates' lifetime. Nothing is created and no HSM or TPM is opened.

Not checked here: the names in the lint settings (lint.sources, lint.exclude, signers[].lint),
which only zlint knows and signetctl does not carry. 'signet-server --validate-config FILE' runs
the same checks and those too.

` + exitCodesHelp,
		Example: `  signetctl validate server /etc/signet/server.yaml
  signetctl validate server server.yaml -o json`,
		Args: cobra.ExactArgs(1),
	}
	// --signet-server named the binary signetctl ran to check the file, before it checked
	// in process: accepted, hidden and ignored, with a warning.
	cmd.Flags().String("signet-server", "", "ignored: server files are checked in process")
	_ = cmd.Flags().MarkHidden("signet-server")
	out := addOutputFlag(cmd, "the file, whether it is valid, and each problem with its field")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		if cmd.Flags().Changed("signet-server") {
			fmt.Fprintln(cmd.ErrOrStderr(), "signetctl: --signet-server is ignored: server files are checked in process "+
				"(run 'signet-server --validate-config FILE' to check lint names too)")
		}
		path := args[0]
		if err := readable(path); err != nil {
			return err
		}
		v, err := validateServerFile(path)
		if err != nil {
			return err
		}
		return reportValidation(cmd, out, v)
	}
	return cmd
}

// readable checks that path can be read: an input error (exit 2) otherwise.
func readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return inputError("%v", err)
	}
	defer f.Close()
	if _, err := f.Read(make([]byte, 1)); err != nil && !errors.Is(err, io.EOF) {
		return inputError("reading %s: %v", path, err)
	}
	return nil
}

// validateServerFile checks the server configuration at path with server/configcheck, as
// signet-server --validate-config does without its lint gates: the problems with their field
// and line, and for a valid file each signer's lifetime line and the notes. A file that cannot
// be read is an input error (exit 2).
func validateServerFile(path string) (validation, error) {
	v := validation{File: path, Kind: config.Kind, Problems: []problem{}}
	r, err := configcheck.File(path, nil)
	if err != nil {
		return v, inputError("%v", err)
	}
	for _, p := range r.Problems {
		v.Problems = append(v.Problems, problem{Field: p.Field, Line: p.Line, Message: p.Message})
	}
	if v.Valid = r.Valid(); v.Valid {
		v.Signers = r.Signers()
		for _, n := range r.Notes {
			v.Notes = append(v.Notes, n.String())
		}
	}
	return v, nil
}

// reportValidation prints v and returns exit 1 when it is not valid.
func reportValidation(cmd *cobra.Command, out *outputFlag, v validation) error {
	w := cmd.OutOrStdout()
	if !out.text() {
		if err := out.print(w, v); err != nil {
			return err
		}
	} else if v.Valid {
		fmt.Fprintf(w, "%s: a valid %s\n", v.File, v.Kind)
		for _, line := range v.Signers {
			fmt.Fprintln(w, line)
		}
		for _, note := range v.Notes {
			fmt.Fprintln(w, "note:", note)
		}
	} else {
		noun := "problems"
		if len(v.Problems) == 1 {
			noun = "problem"
		}
		fmt.Fprintf(w, "%s: not a valid %s, %d %s:\n", v.File, v.Kind, len(v.Problems), noun)
		for _, p := range v.Problems {
			switch {
			case p.Field != "" && p.Line > 0:
				fmt.Fprintf(w, "  - %s (line %d): %s\n", p.Field, p.Line, p.Message)
			case p.Field != "":
				fmt.Fprintf(w, "  - %s: %s\n", p.Field, p.Message)
			default:
				fmt.Fprintf(w, "  - %s\n", p.Message)
			}
		}
	}
	if !v.Valid {
		return silentFailure()
	}
	return nil
}

// parseProblem splits a configuration error into its field path, line (when the message gives
// it) and message; a message that does not start with a field path keeps its text whole.
func parseProblem(msg string) problem { return fieldscan.Parse(msg, knownTopField) }

// knownTopField reports whether a single word starting an error message is a top-level field
// of either configuration file rather than an ordinary word.
func knownTopField(w string) bool {
	switch w {
	case "apiVersion", "kind", "signers", "clients", "signerNames", "workers", "rpcTimeout", "signedEvents",
		"clusterName", "metricsAddress", "reloadInterval", "server", "grpc", "http", "tls", "ledger",
		"keys", "lint", "idempotency", "backoff", "leaderElection", "trustBundles", "podCertificateRequests":
		return true
	}
	return false
}

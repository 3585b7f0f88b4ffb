package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
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

// problem is one error of a configuration file: the field it concerns (its path, e.g.
// signers[0].maxLifetime; empty when the message names none), its line in the file when the
// message gives it, and the message.
type problem struct {
	Field   string `json:"field,omitempty"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// validateCommand is "signetctl validate".
func validateCommand() *cobra.Command {
	return groupCommand("validate", "Check a signet-server or signet-watcher configuration file (server, watcher)",
		`Loads a configuration file as the binary would at start (strict decoding, defaults, every check)
and prints each problem with the path of its field. Exit 0 when the file is valid, 1 when it is
not, 2 when it cannot be read (or, for a server file, signet-server cannot be run).`,
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
	var binary string
	cmd := &cobra.Command{
		Use:   "server FILE",
		Short: "Check a ServerConfiguration file as signet-server loads it",
		Long: `Checks FILE with 'signet-server --validate-config FILE', the server's own loader and checks (they
need the server's lint and profile code, which signetctl does not carry), and prints each
problem with its field path and line. The checks are those of a start short of using a key:
strict decoding, every value, and the files the configuration names (TLS certificate, key and
client CA; CA certificates; file keys readable by their owner only and matching their
certificate; PKCS#11 and TPM URIs by their syntax and the files they name; checkpoint key,
witnessed checkpoint, attestation files). Nothing is created. signet-server is
--signet-server, else the one next to signetctl, else the one on $PATH.

` + exitCodesHelp,
		Example: `  signetctl validate server /etc/signet/server.yaml
  signetctl validate server server.yaml --signet-server ./bin/signet-server -o json`,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().StringVar(&binary, "signet-server", "", "`path` of the signet-server binary that checks the file")
	_ = cmd.MarkFlagFilename("signet-server")
	out := addOutputFlag(cmd, "the file, whether it is valid, and each problem with its field")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := out.check(cmd); err != nil {
			return err
		}
		path := args[0]
		if err := readable(path); err != nil {
			return err
		}
		bin, err := findServerBinary(binary)
		if err != nil {
			return inputError("%v", err)
		}
		v, err := validateWithServer(cmd.Context(), bin, path)
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

// findServerBinary is flag, else signet-server next to this executable, else on $PATH.
func findServerBinary(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if self, err := os.Executable(); err == nil {
		next := filepath.Join(filepath.Dir(self), "signet-server")
		if st, err := os.Stat(next); err == nil && !st.IsDir() {
			return next, nil
		}
	}
	bin, err := exec.LookPath("signet-server")
	if err != nil {
		return "", errors.New("signet-server not found next to signetctl nor on $PATH; give --signet-server PATH (validating a server file needs the server's own checks)")
	}
	return bin, nil
}

// validateWithServer runs 'bin --validate-config path': exit 0 valid, 1 invalid (the problems
// follow "invalid configuration:" on its standard error, one per line), anything else an
// error (exit 2).
func validateWithServer(ctx context.Context, bin, path string) (validation, error) {
	v := validation{File: path, Kind: "ServerConfiguration", Problems: []problem{}}
	var stdout, stderr bytes.Buffer
	c := exec.CommandContext(ctx, bin, "--validate-config", path)
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		v.Valid = true
		for line := range strings.SplitSeq(stdout.String(), "\n") {
			if strings.HasPrefix(line, "signer ") {
				v.Signers = append(v.Signers, line)
			}
			if note, ok := strings.CutPrefix(line, "note: "); ok {
				v.Notes = append(v.Notes, note)
			}
		}
		return v, nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
	default:
		return v, inputError("running %s --validate-config: %v: %s", bin, err, strings.TrimSpace(stderr.String()))
	}
	text := strings.TrimSpace(stderr.String())
	text = strings.TrimSpace(strings.TrimPrefix(text, "invalid configuration:"))
	for line := range strings.SplitSeq(text, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			v.Problems = append(v.Problems, parseProblem(line))
		}
	}
	if len(v.Problems) == 0 {
		v.Problems = append(v.Problems, problem{Message: "signet-server refused the file without saying why"})
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

// joined returns the errors joined under err's context ("config PATH: …"), each of which
// names its field; err alone if it joins none; nothing for nil.
func joined(err error) []error {
	if err == nil {
		return nil
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			return j.Unwrap()
		}
	}
	return []error{err}
}

var (
	// fieldPrefix matches a message that starts with a field path, maybe followed by its line:
	// "signers[0].maxLifetime: …", "ledger.dir is required", "workers (line 4): want a number…".
	fieldPrefix = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9]*(?:\[\d+\])?(?:[./][a-zA-Z][a-zA-Z0-9]*(?:\[\d+\])?)*)(?: \(line (\d+)\))?(?::\s*|\s+)(.*)$`)
	// quotedField matches a strict-decoding error: unknown field "server.adress" (line 6).
	quotedField = regexp.MustCompile(`^(?:.*: )?((?:unknown|duplicate) field) "([^"]+)"(?: \(line (\d+)\))?(.*)$`)
)

// parseProblem splits a configuration error into its field path, line (when the message gives
// it) and message. Messages that do not start with a field path (a YAML syntax error) keep
// their text whole.
func parseProblem(msg string) problem {
	if m := quotedField.FindStringSubmatch(msg); m != nil {
		return problem{Field: m[2], Line: atoi(m[3]), Message: m[1] + m[4]}
	}
	m := fieldPrefix.FindStringSubmatch(msg)
	if m == nil || !strings.ContainsAny(m[1], ".[/") && !knownTopField(m[1]) {
		return problem{Message: msg}
	}
	return problem{Field: m[1], Line: atoi(m[2]), Message: m[3]}
}

// atoi is the number in s, 0 for none.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

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

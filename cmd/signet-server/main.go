// Command signet-server is the Signet signing service: it holds the CA keys and signs the
// certificate requests forwarded to it over mTLS gRPC.
//
//	signet-server --config /etc/signet/server.yaml
//	signet-server --dev                     # throwaway CAs and mTLS certificates in ./.signet-dev
//	signet-server --validate-config /etc/signet/server.yaml   # check a file, then exit 0 or 1
//	signet-server --version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/version"
	"github.com/signet-pki/signet/server"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/configcheck"
)

// options are the command-line flags.
type options struct {
	configPath     string
	dev            bool
	devDir         string
	devSigner      string
	devPod         string
	listen         string
	httpListen     string
	reflect        bool
	logFormat      string
	logLevel       string
	validateConfig bool
	version        bool
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses the command line args, then prints the version (--version), checks the
// configuration (--validate-config) or runs the server until SIGINT or SIGTERM. It returns the
// process exit code: 0, 1 on failure, 2 on a usage error.
func run(args []string, stdout, stderr io.Writer) int {
	flags, opts := newFlagSet(stderr)
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if opts.version {
		fmt.Fprintln(stdout, version.String())
		return 0
	}
	if opts.validateConfig {
		if flags.NArg() == 1 && opts.configPath == "" {
			opts.configPath = flags.Arg(0) // signet-server --validate-config FILE
		} else if flags.NArg() > 0 {
			fmt.Fprintf(stderr, "signet-server: unexpected argument %q\n", flags.Arg(0))
			return 2
		}
		if opts.dev || opts.configPath == "" {
			fmt.Fprintln(stderr, "signet-server: --validate-config checks a file: --validate-config FILE or --config FILE --validate-config")
			return 2
		}
		return validateConfig(*opts, stdout, stderr)
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "signet-server: unexpected argument %q\n", flags.Arg(0))
		return 2
	}

	log, err := newLogger(opts.logFormat, opts.logLevel, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "signet-server:", err)
		return 2
	}
	if opts.dev {
		if opts.configPath != "" {
			fmt.Fprintln(stderr, "signet-server: --dev and --config are exclusive")
			return 2
		}
		p, err := devpki.Ensure(devpki.Options{Dir: opts.devDir, SignerName: opts.devSigner, PodIdentitySigner: opts.devPod, Address: opts.listen})
		if err != nil {
			log.Error("preparing dev state", "error", err.Error())
			return 1
		}
		log.Warn("development mode: keys are unprotected files; never use --dev for a real cluster", "state_dir", opts.devDir, "config", p)
		opts.configPath = p
	}
	if opts.configPath == "" {
		fmt.Fprintln(stderr, "signet-server: --config (or --dev) is required")
		return 2
	}
	cfg, err := loadConfig(*opts, log)
	if err != nil {
		log.Error("loading config", "error", err.Error())
		return 1
	}

	server.Version = version.Version
	server.Commit = version.Commit
	log.Info("starting signet-server", "version", version.Version, "commit", version.Commit)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := server.Run(ctx, cfg, log); err != nil {
		log.Error("signet-server stopped", "error", err.Error())
		return 1
	}
	return 0
}

// newFlagSet defines the command-line flags on a new FlagSet that writes its usage and errors
// to stderr.
func newFlagSet(stderr io.Writer) (*flag.FlagSet, *options) {
	fs := flag.NewFlagSet("signet-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := &options{}
	fs.StringVar(&opts.configPath, "config", "", "path of the ServerConfiguration file")
	fs.BoolVar(&opts.dev, "dev", false, "development mode: create a CA, server and client certificates and a config in --dev-state-dir on first start, then serve them")
	fs.StringVar(&opts.devDir, "dev-state-dir", ".signet-dev", "state folder of --dev")
	fs.StringVar(&opts.devSigner, "dev-signer-name", devpki.DefaultSigner, "signer name served in --dev mode")
	fs.StringVar(&opts.devPod, "dev-pod-identity-signer", devpki.DefaultPodIdentitySigner, "pod-identity signer (PodCertificateRequests) also served in --dev mode; empty for none")
	fs.StringVar(&opts.listen, "listen", "", "gRPC listen address host:port (overrides grpc.address)")
	fs.StringVar(&opts.httpListen, "http-listen", "", "listen address of /metrics, /livez and /readyz (overrides http.address)")
	fs.BoolVar(&opts.reflect, "enable-reflection", false, "turn on the gRPC reflection service")
	fs.StringVar(&opts.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&opts.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&opts.validateConfig, "validate-config", false, "validate the configuration (--config, or a FILE argument) with the flags applied and check what a start would short of using a key (the files it names, file keys' modes and their match with their certificates, the lint gates), print every problem with its field and line, and exit 0 or 1; opens no HSM or TPM, listens on nothing and creates nothing")
	fs.BoolVar(&opts.version, "version", false, "print the version and exit")
	return fs, opts
}

// loadConfig loads the configuration file, applies the flag overrides, validates the result
// and checks the files it names (server/configcheck), as --validate-config does: a start that
// would fail on the configuration fails here, before anything is created. The error lists every
// problem, one a line.
func loadConfig(opts options, log *slog.Logger) (*config.Config, error) {
	r, err := opts.check()
	if err != nil {
		return nil, err
	}
	if !r.Valid() {
		lines := make([]string, len(r.Problems))
		for i, p := range r.Problems {
			lines[i] = p.String()
		}
		return nil, fmt.Errorf("config %s is not valid:\n%s", opts.configPath, strings.Join(lines, "\n"))
	}
	for _, n := range r.Notes {
		log.Warn("configuration not fully checked", "note", n.String())
	}
	return r.Config, nil
}

// check is configcheck.File with the flag overrides and the server's own checks; problems of
// a field a flag set name the flag.
func (opts options) check() (configcheck.Result, error) {
	r, err := configcheck.File(opts.configPath, opts.apply, server.CheckPolicies)
	if opts.listen != "" {
		r.Overridden("grpc.address", "--listen")
	}
	if opts.httpListen != "" {
		r.Overridden("http.address", "--http-listen")
	}
	return r, err
}

// apply applies the flag overrides to cfg.
func (opts options) apply(cfg *config.Config) {
	if opts.listen != "" {
		cfg.GRPC.Address = opts.listen
	}
	if opts.httpListen != "" {
		cfg.HTTP.Address = opts.httpListen
	}
	if opts.reflect {
		cfg.GRPC.Reflection = true
	}
}

// validateConfig checks the configuration as signet-watcher --validate-config does, and as a
// start would short of using a key (server/configcheck: the files it names, key modes, key and
// certificate pairs; and the server's own checks, its lint gates): a file that cannot be read
// is reported as is; otherwise configcheck's report ("configuration is valid", each signer's
// lifetimes and any note on stdout and 0, or "invalid configuration:" and every problem, one a
// line with its field and line, on stderr and 1). No key is opened on a device, nothing
// listens, nothing is created.
func validateConfig(opts options, stdout, stderr io.Writer) int {
	r, err := opts.check()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return r.Report(stdout, stderr)
}

func newLogger(format, level string, w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
}

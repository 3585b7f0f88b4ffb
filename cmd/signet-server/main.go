// Command signet-server is the Signet signing service: it holds the CA keys and signs the
// certificate requests forwarded to it over mTLS gRPC.
//
//	signet-server --config /etc/signet/server.yaml
//	signet-server --dev                     # throwaway CAs and mTLS certificates in ./.signet-dev
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/server"
	"github.com/signet-pki/signet/server/config"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		configPath = flag.String("config", "", "path of the ServerConfiguration file")
		dev        = flag.Bool("dev", false, "development mode: create a CA, server and client certificates and a config in --dev-state-dir on first start, then serve them")
		devDir     = flag.String("dev-state-dir", ".signet-dev", "state folder of --dev")
		devSigner  = flag.String("dev-signer-name", devpki.DefaultSigner, "signer name served in --dev mode")
		devPod     = flag.String("dev-pod-identity-signer", devpki.DefaultPodIdentitySigner, "pod-identity signer (PodCertificateRequests) also served in --dev mode; empty for none")
		listen     = flag.String("listen", "", "gRPC listen address host:port (overrides grpc.address)")
		httpListen = flag.String("http-listen", "", "listen address of /metrics, /livez and /readyz (overrides http.address)")
		reflect    = flag.Bool("enable-reflection", false, "turn on the gRPC reflection service")
		logFormat  = flag.String("log-format", "text", "log format: text or json")
		logLevel   = flag.String("log-level", "info", "log level: debug, info, warn or error")
	)
	flag.Parse()

	log, err := newLogger(*logFormat, *logLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "signet-server:", err)
		return 2
	}
	if *dev {
		if *configPath != "" {
			fmt.Fprintln(os.Stderr, "signet-server: --dev and --config are exclusive")
			return 2
		}
		p, err := devpki.Ensure(devpki.Options{Dir: *devDir, SignerName: *devSigner, PodIdentitySigner: *devPod, Address: *listen})
		if err != nil {
			log.Error("preparing dev state", "error", err.Error())
			return 1
		}
		log.Warn("development mode: keys are unprotected files; never use --dev for a real cluster", "state_dir", *devDir, "config", p)
		*configPath = p
	}
	if *configPath == "" {
		fmt.Fprintln(os.Stderr, "signet-server: --config (or --dev) is required")
		return 2
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		log.Error("loading config", "error", err.Error())
		return 1
	}
	if *listen != "" {
		cfg.GRPC.Address = *listen
	}
	if *httpListen != "" {
		cfg.HTTP.Address = *httpListen
	}
	if *reflect {
		cfg.GRPC.Reflection = true
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := server.Run(ctx, cfg, log); err != nil {
		log.Error("signet-server stopped", "error", err.Error())
		return 1
	}
	return 0
}

func newLogger(format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
}

// Command signet-watcher signs approved Kubernetes CertificateSigningRequests for the
// configured signer names by forwarding them to a Signet signing server over gRPC with mTLS.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/signet-pki/signet/watcher"
)

// Client-side rate limits of the clientset. They are deliberately far above what the watcher
// needs so that client-go's token bucket never throttles signing: the kube-apiserver's API
// Priority and Fairness is the guard against overload, server-side, where it can see every
// client.
const (
	kubeQPS   = 1000
	kubeBurst = 2000
)

// options are the command-line flags.
type options struct {
	configFile     string
	kubeconfig     string
	signerNames    stringList
	server         string
	tlsCA          string
	tlsCert        string
	tlsKey         string
	validateConfig bool
}

func main() {
	os.Exit(run())
}

// run parses flags, builds the configuration and the clientset, and runs the watcher until
// SIGINT or SIGTERM. It returns the process exit code.
func run() int {
	fs := flag.NewFlagSet("signet-watcher", flag.ExitOnError)
	var opts options
	fs.StringVar(&opts.configFile, "config", "", "path of the WatcherConfiguration file")
	fs.StringVar(&opts.kubeconfig, "kubeconfig", "", "path of a kubeconfig; default in-cluster, else $KUBECONFIG or ~/.kube/config")
	fs.Var(&opts.signerNames, "signer-name", "signer name to serve (repeatable; replaces the config's signerNames)")
	fs.StringVar(&opts.server, "server", "", "signing server host:port (overrides server.address)")
	fs.StringVar(&opts.tlsCA, "tls-ca", "", "PEM CA bundle verifying the server (overrides server.caFile)")
	fs.StringVar(&opts.tlsCert, "tls-cert", "", "PEM client certificate (overrides server.certFile)")
	fs.StringVar(&opts.tlsKey, "tls-key", "", "PEM client key (overrides server.keyFile)")
	fs.BoolVar(&opts.validateConfig, "validate-config", false, "validate the configuration, print any problems, and exit")
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:]) // ExitOnError: Parse exits on failure.
	defer klog.Flush()
	logger := klog.Background().WithName("signet-watcher")

	cfg, err := buildConfig(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if opts.validateConfig {
		if err := cfg.Validate(); err != nil {
			fmt.Fprintf(os.Stderr, "invalid configuration:\n%v\n", err)
			return 1
		}
		fmt.Println("configuration is valid")
		return 0
	}

	kube, err := newClientset(opts.kubeconfig)
	if err != nil {
		logger.Error(err, "Building Kubernetes client")
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := watcher.Run(ctx, cfg, kube, logger); err != nil {
		logger.Error(err, "Watcher failed")
		return 1
	}
	return 0
}

// buildConfig loads the configuration file (if any), applies the flag overrides, and
// defaults the result.
func buildConfig(opts options) (*watcher.Config, error) {
	cfg := &watcher.Config{}
	if opts.configFile != "" {
		loaded, err := watcher.LoadConfig(opts.configFile)
		if err != nil {
			return nil, err
		}
		cfg = loaded
	}
	if len(opts.signerNames) > 0 {
		cfg.SignerNames = opts.signerNames
	}
	override(&cfg.Server.Address, opts.server)
	override(&cfg.Server.CAFile, opts.tlsCA)
	override(&cfg.Server.CertFile, opts.tlsCert)
	override(&cfg.Server.KeyFile, opts.tlsKey)
	cfg.Default()
	return cfg, nil
}

// override sets *field to value unless value is empty.
func override(field *string, value string) {
	if value != "" {
		*field = value
	}
}

// newClientset builds the clientset from kubeconfig if given, else the in-cluster
// configuration, else the default loading rules ($KUBECONFIG, ~/.kube/config).
func newClientset(kubeconfig string) (kubernetes.Interface, error) {
	var restConfig *rest.Config
	var err error
	switch {
	case kubeconfig != "":
		restConfig, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	default:
		restConfig, err = rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			restConfig, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
				clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	restConfig.QPS = kubeQPS
	restConfig.Burst = kubeBurst
	restConfig = rest.AddUserAgent(restConfig, "signet-watcher")
	kube, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("creating clientset: %w", err)
	}
	return kube, nil
}

// stringList is a repeatable string flag.
type stringList []string

// String implements flag.Value.
func (l *stringList) String() string { return strings.Join(*l, ",") }

// Set implements flag.Value: each use appends one value.
func (l *stringList) Set(value string) error {
	*l = append(*l, value)
	return nil
}

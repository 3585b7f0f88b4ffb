// Command signet-watcher signs approved Kubernetes CertificateSigningRequests, and
// PodCertificateRequests where the cluster serves them, for the configured signer names by
// forwarding them to a Signet signing server over gRPC with mTLS.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	logsapi "k8s.io/component-base/logs/api/v1"
	logsjson "k8s.io/component-base/logs/json"
	"k8s.io/klog/v2"

	"github.com/signet-pki/signet/internal/version"
	"github.com/signet-pki/signet/watcher"
	"github.com/signet-pki/signet/watcher/kubeclient"
)

// Default client-side rate limits of the clientset (--kube-api-qps, --kube-api-burst). They
// are deliberately far above what the watcher needs so that client-go's token bucket never
// throttles signing: client-go's own default (QPS 20) is what caps kube-controller-manager's
// built-in signer at about 20 CSRs per second. The kube-apiserver's API Priority and Fairness
// is the guard against overload, server-side, where it can see every client.
const (
	defaultKubeQPS   = 1000
	defaultKubeBurst = 2000
)

// options are the command-line flags.
type options struct {
	configFile       string
	kubeconfig       string
	signerNames      stringList
	servers          stringList
	tlsCA            string
	tlsCert          string
	tlsKey           string
	metricsAddress   string
	leaderElect      optionalBool
	leaderElectionNS string
	podCertificates  optionalBool
	kubeQPS          float64
	kubeBurst        int
	kubeContentType  string
	validateConfig   bool
	version          bool
	logFormat        string
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses the command line args, prints the version (--version), checks the configuration
// (--validate-config) or builds the configuration and the clientset and runs the watcher until
// SIGINT or SIGTERM. It returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	fs, opts := newFlagSet()
	fs.SetOutput(stderr)
	_ = fs.Parse(args) // ExitOnError: Parse exits on failure.
	defer klog.Flush()
	if err := setLogFormat(fs, opts.logFormat, stderr); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	logger := klog.Background().WithName("signet-watcher")
	if opts.version {
		fmt.Fprintln(stdout, version.String())
		return 0
	}

	cfg, err := buildConfig(*opts)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if opts.kubeQPS <= 0 || opts.kubeBurst < 1 {
		// client-go reads a QPS of 0 as its default of 5, and a negative one as unlimited.
		fmt.Fprintf(stderr, "--kube-api-qps (%v) and --kube-api-burst (%d) must be positive\n", opts.kubeQPS, opts.kubeBurst)
		return 1
	}
	if opts.kubeContentType != runtime.ContentTypeProtobuf && opts.kubeContentType != runtime.ContentTypeJSON {
		fmt.Fprintf(stderr, "--kube-api-content-type %q: want %s or %s\n", opts.kubeContentType, runtime.ContentTypeProtobuf, runtime.ContentTypeJSON)
		return 1
	}
	if opts.validateConfig {
		if err := cfg.Validate(); err != nil {
			fmt.Fprintf(stderr, "invalid configuration:\n%v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, "configuration is valid")
		return 0
	}
	logger.Info("Starting signet-watcher", "version", version.Version, "commit", version.Commit)

	kube, err := newClientset(opts.kubeconfig, float32(opts.kubeQPS), opts.kubeBurst, opts.kubeContentType)
	if err != nil {
		logger.Error(err, "Building Kubernetes client")
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := watcher.Run(ctx, cfg, kube, logger); err != nil {
		// Also after losing the leader Lease: the process exits and is restarted.
		logger.Error(err, "Watcher failed")
		return 1
	}
	return 0
}

// setLogFormat routes klog, and so every logger of the watcher and of client-go, to the
// format asked for: "text" keeps klog's own; "json" writes Kubernetes' JSON log lines (the
// component-base logger kube-apiserver uses with --logging-format=json) to stderr, at klog's
// -v verbosity.
func setLogFormat(fs *flag.FlagSet, format string, stderr io.Writer) error {
	switch format {
	case "text":
		return nil
	case "json":
		v := 0
		if f := fs.Lookup("v"); f != nil {
			v, _ = strconv.Atoi(f.Value.String())
		}
		logger, _ := logsjson.NewJSONLogger(logsapi.VerbosityLevel(v), logsjson.AddNopSync(stderr), nil, nil)
		klog.SetLogger(logger)
		return nil
	}
	return fmt.Errorf("--log-format %q: want text or json", format)
}

// newFlagSet defines the command-line flags, and klog's, on a new FlagSet that exits on
// errors.
func newFlagSet() (*flag.FlagSet, *options) {
	fs := flag.NewFlagSet("signet-watcher", flag.ExitOnError)
	opts := &options{}
	fs.StringVar(&opts.configFile, "config", "", "path of the WatcherConfiguration file")
	fs.StringVar(&opts.kubeconfig, "kubeconfig", "", "path of a kubeconfig; default in-cluster, else $KUBECONFIG or ~/.kube/config")
	fs.Var(&opts.signerNames, "signer-name", "signer name to serve (repeatable; replaces the config's signerNames)")
	fs.Var(&opts.servers, "server", "signing server host:port, repeatable or comma-separated; the first replaces server.address, the rest server.addresses (fail-over)")
	fs.StringVar(&opts.tlsCA, "tls-ca", "", "PEM CA bundle verifying the server (overrides server.caFile)")
	fs.StringVar(&opts.tlsCert, "tls-cert", "", "PEM client certificate (overrides server.certFile)")
	fs.StringVar(&opts.tlsKey, "tls-key", "", "PEM client key (overrides server.keyFile)")
	fs.StringVar(&opts.metricsAddress, "metrics-address", "", `host:port serving /metrics, /livez and /readyz, "0" to disable (overrides metricsAddress; default ":9465")`)
	fs.Var(&opts.leaderElect, "leader-elect", "run only while holding the leader Lease (overrides leaderElection.enabled; default true)")
	fs.StringVar(&opts.leaderElectionNS, "leader-election-namespace", "", "namespace of the leader Lease (overrides leaderElection.namespace; default $POD_NAMESPACE, else the pod's service-account namespace)")
	fs.Var(&opts.podCertificates, "pod-certificate-requests", "sign PodCertificateRequests of the signer names where the cluster serves them (overrides podCertificateRequests.enabled; default true)")
	fs.Float64Var(&opts.kubeQPS, "kube-api-qps", defaultKubeQPS, "client-side queries per second to the kube-apiserver; API Priority and Fairness guards the server")
	fs.IntVar(&opts.kubeBurst, "kube-api-burst", defaultKubeBurst, "client-side burst of queries to the kube-apiserver")
	fs.StringVar(&opts.kubeContentType, "kube-api-content-type", runtime.ContentTypeProtobuf, "content type of requests to the kube-apiserver (application/vnd.kubernetes.protobuf or application/json)")
	fs.BoolVar(&opts.validateConfig, "validate-config", false, "validate the configuration, print any problems, and exit")
	fs.BoolVar(&opts.version, "version", false, "print the version and exit")
	fs.StringVar(&opts.logFormat, "log-format", "text", `log format: "text" (klog) or "json" (one JSON object a line, Kubernetes' component-base JSON logger, as the server's --log-format json)`)
	klog.InitFlags(fs)
	return fs, opts
}

// buildConfig loads the configuration file (if any), applies the flag overrides, and
// defaults the result. Without a file the file format's defaults apply too (leader election
// on, metrics on :9465), so flags alone behave like a minimal file.
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
	if servers := opts.servers.split(); len(servers) > 0 {
		cfg.Server.Address, cfg.Server.Addresses = servers[0], servers[1:]
		if len(cfg.Server.Addresses) == 0 {
			cfg.Server.Addresses = nil
		}
	}
	if opts.leaderElect.set {
		enabled := opts.leaderElect.value
		cfg.LeaderElection.Enabled = &enabled
	}
	if opts.podCertificates.set {
		enabled := opts.podCertificates.value
		cfg.PodCertificateRequests.Enabled = &enabled
	}
	override(&cfg.LeaderElection.Namespace, opts.leaderElectionNS)
	override(&cfg.MetricsAddress, opts.metricsAddress)
	override(&cfg.Server.CAFile, opts.tlsCA)
	override(&cfg.Server.CertFile, opts.tlsCert)
	override(&cfg.Server.KeyFile, opts.tlsKey)
	cfg.DefaultDeployment()
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
func newClientset(kubeconfig string, qps float32, burst int, contentType string) (kubeclient.Interface, error) {
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
	restConfig.QPS = qps
	restConfig.Burst = burst
	// No gzip, as kube-controller-manager and kube-scheduler configure their clients: the watcher
	// runs next to the API server, where compressing every response and watch event costs the
	// API server more CPU than it saves on the network (kubernetes#80919, #112296), and at a
	// burst the API server's CPU is what bounds signing.
	restConfig.DisableCompression = true
	// Protobuf for the built-in types the watcher reads and writes (CSRs, PCRs, Leases,
	// Events, ClusterTrustBundles), as every kube-* component talks to the API server: decoding
	// each watch event and encoding each status write costs the watcher (and the API server,
	// which decodes the writes) several times less CPU than JSON. JSON stays acceptable for
	// anything served without protobuf.
	restConfig.ContentType = contentType
	restConfig.AcceptContentTypes = contentType + ",application/json"
	restConfig = rest.AddUserAgent(restConfig, "signet-watcher")
	kube, err := kubeclient.New(restConfig)
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

// split returns the values with comma-separated ones split, blanks dropped.
func (l stringList) split() []string {
	var out []string
	for _, v := range l {
		for part := range strings.SplitSeq(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// optionalBool is a boolean flag that records whether it was given.
type optionalBool struct{ set, value bool }

// String implements flag.Value.
func (b *optionalBool) String() string {
	if b == nil || !b.set {
		return ""
	}
	return strconv.FormatBool(b.value)
}

// Set implements flag.Value.
func (b *optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.set, b.value = true, v
	return nil
}

// IsBoolFlag makes --leader-elect (--pod-certificate-requests) alone mean true.
func (b *optionalBool) IsBoolFlag() bool { return true }

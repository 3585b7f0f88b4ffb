// Package controlplane starts a real kube-apiserver and etcd on loopback for integration tests
// and demos, and hands out clients for distinct, certificate-authenticated users.
//
// The binaries are built from Go modules by hack/kube-bins.sh (`make kube-bins`) into
// <repo root>/.cache/kube/<version>/; nothing is downloaded. The control plane is driven by
// sigs.k8s.io/controller-runtime/pkg/envtest, whose users authenticate with client
// certificates, so the username and groups the apiserver records (for example in a
// CertificateSigningRequest's spec.username and spec.groups) are the real ones.
package controlplane

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// DefaultVersion is the Kubernetes version started when Options.Version is empty.
const DefaultVersion = "v1.37.1"

// AssetsEnv names the environment variable that overrides the directory holding the etcd
// and kube-apiserver binaries (of whichever version is started: Start refuses a
// kube-apiserver whose build information names another k8s.io/kubernetes version).
const AssetsEnv = "SIGNET_KUBE_ASSETS"

// modulePath is the module whose go.mod marks the repository root.
const modulePath = "github.com/signet-pki/signet"

// Options configures Start. The zero value starts DefaultVersion from the repository cache.
type Options struct {
	// Version selects the binaries under <repo root>/.cache/kube/<Version>. Default DefaultVersion.
	Version string
	// AssetsDir is the directory holding etcd and kube-apiserver. Default: $SIGNET_KUBE_ASSETS,
	// else <repo root>/.cache/kube/<Version>.
	AssetsDir string
	// FeatureGates become --feature-gates (sorted), e.g. {"PodCertificateRequest": true}, on
	// top of the version's own (see VersionFeatureGates); an entry here wins.
	FeatureGates map[string]bool
	// RuntimeConfig becomes --runtime-config (sorted), e.g. {"certificates.k8s.io/v1beta1": "true"},
	// on top of the version's own (see VersionRuntimeConfig); an entry here wins.
	RuntimeConfig map[string]string
	// APIServerFlags are extra kube-apiserver flags by name without dashes; each replaces any
	// default value, e.g. {"v": "4"}.
	APIServerFlags map[string]string
	// ExtraClientCAs are PEM CA certificates the apiserver trusts for client certificates
	// besides the cluster's own user CA (its --client-ca-file holds both), e.g. the CA that
	// signs kubelet client certificates.
	ExtraClientCAs []byte
	// StartTimeout bounds the start of each of etcd and kube-apiserver. Default 60s.
	StartTimeout time.Duration
	// Output, if set, receives the raw output of etcd and kube-apiserver.
	Output io.Writer
}

// Cluster is a running etcd and kube-apiserver pair. Its methods are safe for concurrent use.
type Cluster struct {
	version  string
	plane    *envtest.ControlPlane
	authn    *certAuthn
	admin    *User
	usersMu  sync.Mutex
	stopOnce sync.Once
	stopErr  error
}

// Start starts etcd and kube-apiserver from the configured assets directory and waits until
// the apiserver is healthy and the default namespace exists.
//
// The apiserver binds and advertises 127.0.0.1 only and serves the default API groups
// (certificates.k8s.io/v1 included), what the version needs to serve PodCertificateRequests
// and ClusterTrustBundles (VersionFeatureGates, VersionRuntimeConfig), plus opts.RuntimeConfig.
// ctx's deadline caps the start timeout; the processes run until Stop, whatever happens to
// ctx. A missing binary, or a kube-apiserver built from another Kubernetes version, yields an
// error naming the file and `make kube-bins KUBE_VERSION=<version>`; a failed start yields an
// error carrying the apiserver's own complaint. A start that loses a race for a loopback port
// is retried.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	version := opts.Version
	if version == "" {
		version = DefaultVersion
	}
	dir, err := assetsDir(opts.AssetsDir, version)
	if err != nil {
		return nil, err
	}
	etcdPath, apiPath := filepath.Join(dir, "etcd"), filepath.Join(dir, "kube-apiserver")
	for _, p := range []string{etcdPath, apiPath} {
		if err := checkBinary(p, version); err != nil {
			return nil, err
		}
	}
	if err := checkBinaryVersion(apiPath, version); err != nil {
		return nil, err
	}
	opts.FeatureGates = merged(VersionFeatureGates(version), opts.FeatureGates)
	opts.RuntimeConfig = merged(VersionRuntimeConfig(version), opts.RuntimeConfig)
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = max(time.Until(dl), time.Second)
	}

	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		c, err := startOnce(ctx, version, etcdPath, apiPath, timeout, opts)
		if err == nil {
			return c, nil
		}
		lastErr = err
		// envtest picks free ports and releases them before the processes bind; only a lost
		// race for a port is worth another try.
		if !strings.Contains(err.Error(), "address already in use") || ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// startOnce makes one attempt at starting the control plane.
func startOnce(ctx context.Context, version, etcdPath, apiPath string, timeout time.Duration, opts Options) (*Cluster, error) {
	etcdOut, apiOut := newTail(), newTail()
	plane := &envtest.ControlPlane{
		Etcd: &envtest.Etcd{
			Path: etcdPath, StartTimeout: timeout, StopTimeout: 20 * time.Second,
			Out: tee(etcdOut, opts.Output), Err: tee(etcdOut, opts.Output),
		},
		APIServer: &envtest.APIServer{
			Path: apiPath, StartTimeout: timeout, StopTimeout: 20 * time.Second,
			Out: tee(apiOut, opts.Output), Err: tee(apiOut, opts.Output),
		},
	}
	authn, err := newCertAuthn(opts.ExtraClientCAs)
	if err != nil {
		return nil, fmt.Errorf("starting control plane %s: %w", version, err)
	}
	plane.APIServer.SecureServing.Authn = authn
	// A single member need not wait the default second before electing itself leader.
	plane.Etcd.Configure().Set("heartbeat-interval", "10").Set("election-timeout", "100")
	configureAPIServer(plane.APIServer.Configure(), opts)

	start := time.Now()
	if err := plane.Start(); err != nil {
		// Explain before stopping: etcd's shutdown chatter would bury the cause.
		var why string
		if !strings.Contains(err.Error(), "process etcd") {
			why += apiOut.explain("kube-apiserver")
		}
		if !strings.Contains(err.Error(), "process kube-apiserver") {
			why += etcdOut.explain("etcd")
		}
		_ = plane.Stop()
		return nil, fmt.Errorf("starting control plane %s: %w%s", version, err, why)
	}
	c := &Cluster{version: version, plane: plane, authn: authn}
	admin, err := c.AddUser("signet-testcluster-admin", []string{"system:masters"})
	if err != nil {
		_ = plane.Stop()
		return nil, fmt.Errorf("provisioning admin user: %w", err)
	}
	c.admin = admin
	if err := c.waitForDefaultNamespace(ctx, timeout-time.Since(start)); err != nil {
		_ = plane.Stop()
		return nil, fmt.Errorf("waiting for the default namespace: %w%s", err, apiOut.explain("kube-apiserver"))
	}
	return c, nil
}

// configureAPIServer sets the loopback-only defaults and the caller's flags.
func configureAPIServer(args *envtest.Arguments, opts Options) {
	// Without an explicit advertise address the apiserver picks the interface of the default
	// route, and fails to start on hosts without one. Loopback is not a valid endpoint for the
	// kubernetes Service, so the endpoint reconciler is turned off.
	args.Set("advertise-address", "127.0.0.1")
	args.Set("endpoint-reconciler-type", "none")
	if len(opts.FeatureGates) > 0 {
		var gates []string
		for name, on := range opts.FeatureGates {
			gates = append(gates, name+"="+strconv.FormatBool(on))
		}
		sort.Strings(gates)
		args.Set("feature-gates", strings.Join(gates, ","))
	}
	if len(opts.RuntimeConfig) > 0 {
		var rc []string
		for gv, v := range opts.RuntimeConfig {
			rc = append(rc, gv+"="+v)
		}
		sort.Strings(rc)
		args.Set("runtime-config", strings.Join(rc, ","))
	}
	for name, v := range opts.APIServerFlags {
		args.Set(strings.TrimLeft(name, "-"), v)
	}
}

// waitForDefaultNamespace polls until the apiserver's bootstrap created "default", which
// Events for cluster-scoped objects such as CSRs land in.
func (c *Cluster) waitForDefaultNamespace(ctx context.Context, timeout time.Duration) error {
	timeout = max(timeout, 5*time.Second)
	_, client := c.Admin()
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, nil
	})
}

// SetExtraClientCAs replaces the CAs the running kube-apiserver trusts for client certificates
// besides the cluster's own user CA (Options.ExtraClientCAs), by rewriting its
// --client-ca-file in place, as an operator edits the file of a running cluster. The
// apiserver reloads the file by itself (within a minute; it watches it) and then publishes
// the new bundle in ConfigMap kube-system/extension-apiserver-authentication; callers wait
// for that.
func (c *Cluster) SetExtraClientCAs(pemCerts []byte) error {
	if err := c.authn.setExtra(pemCerts); err != nil {
		return fmt.Errorf("setting the extra client CAs: %w", err)
	}
	return nil
}

// Stop stops kube-apiserver and etcd and removes their data. It is idempotent.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		if err := c.plane.Stop(); err != nil {
			c.stopErr = fmt.Errorf("stopping control plane: %w", err)
		}
	})
	return c.stopErr
}

// EtcdURL returns the client URL of the cluster's etcd, for tests that must store what the
// apiserver would refuse to create.
func (c *Cluster) EtcdURL() string { return c.plane.Etcd.URL.String() }

// Version returns the Kubernetes version this cluster was started as (Options.Version).
func (c *Cluster) Version() string { return c.version }

// Admin returns a fresh copy of the cluster-admin (group system:masters) REST config and a
// client for it.
func (c *Cluster) Admin() (*rest.Config, kubernetes.Interface) {
	return c.admin.Config(), c.admin.Client()
}

// AssetsDir returns the directory Start looks in for the binaries of version (DefaultVersion
// if empty) when Options.AssetsDir is empty: $SIGNET_KUBE_ASSETS if set, else
// <repo root>/.cache/kube/<version>, the repository root being found from the working
// directory upwards. Tools that need further binaries of the same build, such as
// kube-controller-manager, find them there.
func AssetsDir(version string) (string, error) {
	if version == "" {
		version = DefaultVersion
	}
	return assetsDir("", version)
}

// assetsDir resolves the binary directory: explicit, $SIGNET_KUBE_ASSETS, or the repo cache.
func assetsDir(explicit, version string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if env := os.Getenv(AssetsEnv); env != "" {
		return env, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("locating kube binaries (set %s or Options.AssetsDir): %w", AssetsEnv, err)
	}
	return filepath.Join(root, ".cache", "kube", version), nil
}

// repoRoot walks up from the working directory to the go.mod of modulePath.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getting working directory: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if isModuleRoot(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.mod for module %s in %s or above", modulePath, wd)
		}
	}
}

// isModuleRoot reports whether the go.mod at path declares modulePath.
func isModuleRoot(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == modulePath
		}
	}
	return false
}

// checkBinary returns an actionable error when the binary at path is missing or unusable.
func checkBinary(path, version string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("kube binary %s is missing: run `make kube-bins KUBE_VERSION=%s` (hack/kube-bins.sh %s) to build it, or set %s", path, version, version, AssetsEnv)
	case err != nil:
		return fmt.Errorf("checking kube binary: %w", err)
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		return fmt.Errorf("kube binary %s is not an executable file: run `make kube-bins KUBE_VERSION=%s` (hack/kube-bins.sh %s) to rebuild it", path, version, version)
	}
	return nil
}

package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/testpki"
)

// This file runs a real node for the end-to-end kubelet test: containerd from the
// distribution's packages (hack/node-deps.sh installs it) and the kubelet built from the
// Kubernetes modules (hack/kube-bins.sh ... kubelet). Both run as root, as on a real node.

// nodeDir returns a short-named folder for a node's files, removed at the end of the test
// after every process registered later has stopped (kept if the test failed). Unix socket
// paths are limited to 108 bytes, too few for t.TempDir's names. The kubelet bind-mounts its
// root folder onto itself (to make it a shared mount); the cleanup unmounts whatever is
// mounted under the folder, even when it keeps the files.
func nodeDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "signet-node-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unmountUnder(dir); err != nil {
			t.Errorf("unmounting the node's folders: %v", err)
		}
		if t.Failed() {
			t.Logf("node files kept for inspection in %s", dir)
			return
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing the node's folder: %v", err)
		}
	})
	return dir
}

// unmountUnder unmounts every mount point at or under dir, deepest first.
func unmountUnder(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		// Field 5 is the mount point, with spaces and the like octal-escaped.
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			points = append(points, f[4])
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// requireRoot fails the test unless it runs as root: a kubelet and a container runtime need
// it. CI runs as root; the test does not skip, so a run that cannot prove the kubelet flow
// never passes.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test runs a real kubelet and containerd, which need root: run `make test` as root (CI does)")
	}
}

// startProcess starts a node process and stops it when the test ends.
func startProcess(t *testing.T, name, path string, args []string, dir string) *controlplane.Process {
	t.Helper()
	p, err := controlplane.StartProcess(name, path, args, filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("%s log: %s%s", name, p.LogPath(), p.Explain())
		}
	})
	return p
}

// startContainerd runs containerd with its state, sockets and CRI configuration under dir and
// returns its CRI endpoint once it serves. No CNI network is configured: the node registers
// and runs only host-network pods, in sandboxes of pauseImage (importPauseImage). Where root
// lacks CAP_SYS_RESOURCE (a sandboxed CI machine), containerd keeps every container's
// oom_score_adj at or above its own (restrict_oom_score_adj, as for rootless containerd):
// runc cannot set the sandbox's -998 there and fails with "can't get final child's PID".
func startContainerd(t *testing.T, dir string) string {
	t.Helper()
	return startContainerdWith(t, dir, nil)
}

// startContainerdWith is startContainerd pulling from the plain-HTTP registries insecure
// (host:port), such as the tests' own (go-containerregistry's pkg/registry).
func startContainerdWith(t *testing.T, dir string, insecure []string) string {
	t.Helper()
	path, err := exec.LookPath("containerd")
	if err != nil {
		t.Fatalf("containerd is not installed (hack/node-deps.sh installs it): %v", err)
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Fatalf("runc is not installed (hack/node-deps.sh installs it): %v", err)
	}
	root := filepath.Join(dir, "containerd")
	sock := filepath.Join(root, "containerd.sock")
	config := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  restrict_oom_score_adj = %[6]t
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[5]q
    conf_dir = %[5]q
`, filepath.Join(root, "root"), filepath.Join(root, "state"), sock, filepath.Join(root, "ttrpc.sock"), filepath.Join(root, "cni"), !hasCapability(capSysResource))
	for _, host := range insecure {
		config += fmt.Sprintf("  [plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.%q]\n    endpoint = [%q]\n", host, "http://"+host)
	}
	writeFile(t, filepath.Join(root, "config.toml"), []byte(config))
	p := startProcess(t, "containerd", path, []string{"--config", filepath.Join(root, "config.toml")}, dir)
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		if err := p.Running(); err != nil {
			return false, err
		}
		c, err := net.Dial("unix", sock)
		if err != nil {
			return false, nil
		}
		c.Close()
		return true, nil
	})
	if err != nil {
		t.Fatalf("containerd did not serve %s: %v%s", sock, err, p.Explain())
	}
	return "unix://" + sock
}

// kubeletOptions are what startKubelet needs.
type kubeletOptions struct {
	dir       string // the node's folder
	nodeName  string
	runtime   string // CRI endpoint
	bootstrap *rest.Config
	// clientCAFile is the CA of the clients the kubelet's API accepts (the apiserver's
	// --kubelet-client-certificate).
	clientCAFile string
	port         int
	// kubeconfig, if set, is a kubeconfig the kubelet uses as it is, such as one whose user
	// is an exec credential plugin (signet-node): no bootstrap kubeconfig, no client
	// certificate rotation by the kubelet.
	kubeconfig string
}

// kubeletFiles are where a kubelet started by startKubelet keeps its credentials.
type kubeletFiles struct {
	kubeconfig string // written by the kubelet once it has a client certificate
	certDir    string // kubelet-client-current.pem, kubelet-server-current.pem
}

// startKubelet starts the kubelet as kubeadm configures a joining node: a bootstrap
// kubeconfig, client certificate rotation, serving certificates from the
// kubernetes.io/kubelet-serving signer (serverTLSBootstrap), x509 and webhook authentication
// and webhook authorization of its own API. cgroupsPerQOS is off so that the node leaves no
// cgroups behind, and cgroup v1 hosts are allowed.
func startKubelet(t *testing.T, o kubeletOptions) (*controlplane.Process, kubeletFiles) {
	t.Helper()
	assets, err := controlplane.AssetsDir(controlplane.DefaultVersion)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(assets, "kubelet")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("kubelet not built (hack/kube-bins.sh %s kubelet): %v", controlplane.DefaultVersion, err)
	}
	root := filepath.Join(o.dir, "kubelet")
	files := kubeletFiles{kubeconfig: filepath.Join(root, "kubelet.conf"), certDir: filepath.Join(root, "pki")}
	bootstrapKubeconfig := filepath.Join(root, "bootstrap-kubelet.conf")
	rotate := o.kubeconfig == ""
	if rotate {
		writeKubeconfig(t, bootstrapKubeconfig, o.bootstrap)
	} else {
		files.kubeconfig = o.kubeconfig
	}
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: %q
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
port: %d
readOnlyPort: 0
healthzPort: 0
podLogsDir: %q
volumePluginDir: %q
rotateCertificates: %t
serverTLSBootstrap: true
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization:
  mode: Webhook
`, o.runtime, o.port, filepath.Join(root, "pod-logs"), filepath.Join(root, "volume-plugins"), rotate, o.clientCAFile)
	writeFile(t, filepath.Join(root, "config.yaml"), []byte(config))
	args := []string{
		"--config=" + filepath.Join(root, "config.yaml"),
		"--kubeconfig=" + files.kubeconfig,
		"--cert-dir=" + files.certDir,
		"--root-dir=" + filepath.Join(root, "root"),
		"--hostname-override=" + o.nodeName,
		"--v=2",
	}
	if rotate {
		args = append(args, "--bootstrap-kubeconfig="+bootstrapKubeconfig)
	}
	return startProcess(t, "kubelet", path, args, o.dir), files
}

// writeKubeconfig writes a kubeconfig for cfg's server, CA and bearer token.
func writeKubeconfig(t *testing.T, path string, cfg *rest.Config) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	kc.CurrentContext = "default"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}

// writeFile writes data to path with mode 0600, creating its folder.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// writeCA writes ca's certificate and PKCS#8 key as name.crt and name.key in dir and returns
// their paths.
func writeCA(t *testing.T, dir, name string, ca *testpki.Authority) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	writeFile(t, certFile, ca.CertPEM())
	writeFile(t, keyFile, testpki.KeyPEM(t, ca.Key))
	return certFile, keyFile
}

// freePort returns a TCP port free on every address at the time of the call.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// capSysResource is CAP_SYS_RESOURCE's bit in /proc/self/status's CapEff.
const capSysResource = 24

// hasCapability reports whether this process has the capability of bit number capBit in
// its effective set.
func hasCapability(capBit uint) bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && n&(1<<capBit) != 0
		}
	}
	return false
}

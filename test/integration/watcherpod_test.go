package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/ociimage"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/watcher/trustbundle"
)

// The watcher pod test's node, signer and release.
const (
	podNode      = "signet-image-node"
	podSigner    = "it.signet.dev/from-the-image"
	podRelease   = "signet-watcher"
	podNamespace = "signet-system"
)

// TestWatcherImageRunsAsAPod runs the watcher as an operator does: `make image` builds its
// OCI image without a daemon, and the Helm chart is installed with it by digest on a real node
// (a kubelet joined with a bootstrap token, kube-controller-manager signing its certificate,
// kube-scheduler placing pods; hostNetwork, since the node has no CNI, and the API server's
// loopback address, since no kube-proxy serves the kubernetes Service), the image either
// imported into the node's containerd (`ctr images import`) or pushed by `make image-push` to
// a registry (go-containerregistry's, on loopback) that the kubelet pulls it from. Each time
// the pod starts on the node from the image, takes its Lease, signs an approved CSR through
// the signing server and publishes the signer's ClusterTrustBundle. The image runs as 65532,
// carries its SBOM and its version label.
func TestWatcherImageRunsAsAPod(t *testing.T) {
	requireRoot(t)
	t.Parallel() // minutes of builds and node starts: beside the renewal tests (clientLifetime)
	img := makeImage(t, filepath.Join(t.TempDir(), "image"))
	checkImage(t, img)
	// One after the other: each pod serves its metrics on the host's port 9465.
	t.Run("imported", func(t *testing.T) {
		runWatcherPod(t, img, func(t *testing.T, runtime string) string {
			importImage(t, runtime, img.archive)
			tagByDigest(t, runtime, img.name, img.digest)
			return ""
		}, nil)
	})
	t.Run("pulled", func(t *testing.T) {
		reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		t.Cleanup(reg.Close)
		host := strings.TrimPrefix(reg.URL, "http://")
		if pushed := pushImage(t, img, host); pushed != img.digest {
			t.Fatalf("make image-push printed digest %s, make image built %s", pushed, img.digest)
		}
		runWatcherPod(t, img, func(*testing.T, string) string { return host }, []string{host})
	})
}

// runWatcherPod starts a signing server and a node whose containerd pulls from the insecure
// registries, lets provide put the image on the node (returning the registry to name in the
// chart's image.registry), installs the chart with the image by digest, and checks that the
// pod signs and publishes.
func runWatcherPod(t *testing.T, img builtImage, provide func(t *testing.T, runtime string) (registry string), insecure []string) {
	dir := nodeDir(t)
	ctx := context.Background()
	s := newSignet(t, podSigner, time.Hour)
	s.startServer()

	// The node: kube-controller-manager signs its kubelet's certificates and runs the
	// controllers a Deployment needs; kube-scheduler places the pod on it.
	ca := testpki.CA(t, func(c *x509.Certificate) { c.Subject = pkix.Name{CommonName: "kubernetes"} })
	caFile, keyFile := writeCA(t, filepath.Join(dir, "pki"), "ca", ca)
	c, kubeletClientCA := kubeletClusterWith(t, ca.CertPEM(), caFile, dir)
	adminCfg, admin := c.Admin()
	apiserverCA := filepath.Join(dir, "pki", "apiserver-ca.crt")
	writeFile(t, apiserverCA, adminCfg.CAData)
	tok := controlplane.BootstrapToken{ID: "1mage0", Secret: "0123456789abcdef"}
	if err := c.AddBootstrapToken(ctx, tok, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := c.AllowNodeBootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	kcm, err := c.StartControllerManager(dir,
		[]string{"csrapproving", "csrsigning", "deployment", "replicaset", "serviceaccount", "root-ca-cert-publisher"},
		"--cluster-signing-cert-file="+caFile, "--cluster-signing-key-file="+keyFile, "--root-ca-file="+apiserverCA)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kcm.Stop() })
	sched, err := c.StartScheduler(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sched.Stop() })
	runtime := startContainerdWith(t, dir, insecure)
	importPauseImage(t, runtime, dir)
	imageRegistry := provide(t, runtime)
	kubelet, _ := startKubelet(t, kubeletOptions{dir: dir, nodeName: podNode, runtime: runtime,
		bootstrap: c.BootstrapConfig(tok), clientCAFile: kubeletClientCA, port: freePort(t)})
	alive := func() error { return errors.Join(kubelet.Running(), kcm.Running(), sched.Running()) }
	waitForNodeNamed(t, admin, podNode, alive)

	// helm install, with the image by digest.
	apiserver, err := url.Parse(adminCfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	objs := renderHelm(t, podRelease, podNamespace,
		fmt.Sprintf(`signerNames=[%q]`, podSigner),
		`clusterName="node"`,
		fmt.Sprintf(`server={"address":%q}`, s.addr),
		`replicaCount=1`,
		fmt.Sprintf(`image={"registry":%q,"repository":"signet-watcher","digest":%q}`, imageRegistry, img.digest),
		`hostNetwork=true`,
		`tolerations=[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoSchedule"}]`,
		fmt.Sprintf(`extraEnv=[{"name":"KUBERNETES_SERVICE_HOST","value":%q},{"name":"KUBERNETES_SERVICE_PORT","value":%q}]`, apiserver.Hostname(), apiserver.Port()),
		`namespace={"create":true,"podSecurity":"privileged"}`,
	)
	applyObjectsTo(t, c, objs)
	createWatcherSecret(t, admin, s, podNamespace, "signet-watcher-tls")

	pod := waitWatcherPod(t, admin, alive)
	if id := pod.Status.ContainerStatuses[0].ImageID; !strings.HasSuffix(id, "@"+img.digest) {
		t.Errorf("the pod runs image %s (%s), want the one make image built, %s", pod.Spec.Containers[0].Image, id, img.digest)
	}
	waitLeaseHeldBy(t, admin, podNamespace, podRelease, pod.Name, alive)

	// It signs an approved CSR and publishes the signer's trust anchors.
	requester, err := c.AddRequester("image-test-requester", nil)
	if err != nil {
		t.Fatal(err)
	}
	key := testpki.Key(t, testpki.P256)
	csr := submit(t, requester, podSigner, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "from-the-pod"}}, nil)
	if err := c.Approve(ctx, csr.Name); err != nil {
		t.Fatal(err)
	}
	issued := waitFor(t, admin, csr.Name, 2*time.Minute, "signed by the watcher pod", signed)
	checkChainsTo(t, parseChain(t, issued.Status.Certificate)[0], s.caCert, "the certificate the watcher pod wrote")
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		b, err := admin.CertificatesV1().ClusterTrustBundles().Get(ctx, trustbundle.Name(podSigner), metav1.GetOptions{})
		return err == nil && holds(s.caCert)(b), nil
	})
	if err != nil {
		t.Fatalf("the watcher pod did not publish the ClusterTrustBundle %s holding the signer's CA: %v", trustbundle.Name(podSigner), err)
	}
}

// pushImage runs `make image-push` to the registry at host and returns the digest it printed.
func pushImage(t *testing.T, img builtImage, host string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("make", "-s", "-C", root, "image-push", "REGISTRY="+host, "IMAGE_DIR="+filepath.Dir(img.layout), "VERSION="+img.version).CombinedOutput()
	if err != nil {
		t.Fatalf("make image-push: %v\n%s", err, out)
	}
	digest := regexp.MustCompile(`sha256:[0-9a-f]{64}`).FindAllString(string(out), -1)
	if len(digest) == 0 {
		t.Fatalf("make image-push printed no digest:\n%s", out)
	}
	return digest[len(digest)-1]
}

// waitWatcherPod waits until the release's one pod runs on the node and is ready.
func waitWatcherPod(t *testing.T, admin kubernetes.Interface, alive func() error) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		pods, err := admin.CoreV1().Pods(podNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=signet-watcher"})
		if err != nil || len(pods.Items) == 0 {
			return false, nil
		}
		last = &pods.Items[0]
		for _, c := range last.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return last.Spec.NodeName == podNode, nil
			}
		}
		return false, nil
	})
	if err != nil {
		var events string
		if list, err := admin.CoreV1().Events(podNamespace).List(context.Background(), metav1.ListOptions{}); err == nil {
			for _, e := range list.Items {
				events += fmt.Sprintf("\n  %s %s %s: %s", e.InvolvedObject.Name, e.Type, e.Reason, e.Message)
			}
		}
		t.Fatalf("the watcher pod is not ready on %s: %v; last %+v; events:%s", podNode, err, last, events)
	}
	return last
}

// waitLeaseHeldBy waits until the Lease namespace/name is held by holder.
func waitLeaseHeldBy(t *testing.T, admin kubernetes.Interface, namespace, name, holder string, alive func() error) {
	t.Helper()
	var got string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		l, err := admin.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, nil
		}
		got = *l.Spec.HolderIdentity
		return got == holder, nil
	})
	if err != nil {
		t.Fatalf("Lease %s/%s held by %q, want the pod %s: %v", namespace, name, got, holder, err)
	}
}

// builtImage is what `make image` wrote.
type builtImage struct {
	layout, archive, digest, version string
	name                             string // repository:tag, fully qualified, as containerd names it
}

// makeImage runs `make image` with its output in dir, the version what make computes.
func makeImage(t *testing.T, dir string) builtImage {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	version, err := exec.Command("git", "-C", root, "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		t.Fatalf("git describe: %v", err)
	}
	img := builtImage{version: strings.TrimSpace(string(version)),
		layout: filepath.Join(dir, "signet-watcher"), archive: filepath.Join(dir, "signet-watcher.tar")}
	cmd := exec.Command("make", "-C", root, "image", "IMAGE_DIR="+dir, "VERSION="+img.version)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	digest, err := os.ReadFile(filepath.Join(dir, "signet-watcher.digest"))
	if err != nil {
		t.Fatal(err)
	}
	img.digest = strings.TrimSpace(string(digest))
	_, anns, err := ociimage.ReadLayout(img.layout)
	if err != nil {
		t.Fatal(err)
	}
	if img.name = anns[ociimage.AnnotationContainerName]; img.name == "" {
		t.Fatalf("the layout does not name the image (%s)", ociimage.AnnotationContainerName)
	}
	return img
}

// checkImage reads the image make image wrote, for this machine's platform: it runs as
// 65532:65532, its version label is the version it was built as, and it carries a CycloneDX
// SBOM of the watcher naming its module.
func checkImage(t *testing.T, img builtImage) {
	t.Helper()
	idx, _, err := ociimage.ReadLayout(img.layout)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := idx.Digest(); err != nil || d.String() != img.digest {
		t.Fatalf("the layout's index is %s (%v); make image printed %s", d, err, img.digest)
	}
	im, err := idx.Image(platformDigest(t, idx))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := im.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("the image runs as %q, want 65532:65532", cfg.Config.User)
	}
	if got := cfg.Config.Labels[ociimage.LabelVersion]; got != img.version {
		t.Errorf("the image's version label is %q, want %q", got, img.version)
	}
	sbom := fileInImage(t, im, strings.TrimPrefix(ociimage.SBOMDir, "/")+"/signet-watcher.cdx.json")
	var doc struct {
		BOMFormat string `json:"bomFormat"`
		Metadata  struct {
			Component struct {
				Name string `json:"name"`
			} `json:"component"`
		} `json:"metadata"`
		Components []struct {
			Name string `json:"name"`
		} `json:"components"`
	}
	if err := json.Unmarshal(sbom, &doc); err != nil || doc.BOMFormat != "CycloneDX" || len(doc.Components) == 0 {
		t.Errorf("the image's SBOM is not a CycloneDX document with components (%v): %.200s", err, sbom)
	}
	if !bytes.Contains(sbom, []byte("github.com/signet-pki/signet")) || !bytes.Contains(sbom, []byte("google.golang.org/grpc")) {
		t.Errorf("the image's SBOM names neither the watcher's module nor grpc: %.300s", sbom)
	}
}

// platformDigest returns the digest of idx's image for this machine.
func platformDigest(t *testing.T, idx v1.ImageIndex) v1.Hash {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == goruntime.GOARCH {
			return d.Digest
		}
	}
	t.Fatalf("the image has no linux/%s image", goruntime.GOARCH)
	return v1.Hash{}
}

// fileInImage returns the content of the file at path (no leading slash) in im's file system.
func fileInImage(t *testing.T, im v1.Image, path string) []byte {
	t.Helper()
	rc := mutate.Extract(im)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("the image has no %s: %v", path, err)
		}
		if strings.TrimPrefix(h.Name, "/") == path {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
}

// applyObjectsTo creates objs on c's API server with server-side apply, as cluster-admin,
// and returns the API server's warnings.
func applyObjectsTo(t *testing.T, c *controlplane.Cluster, objs []*unstructured.Unstructured) []string {
	t.Helper()
	cfg, _ := c.Admin()
	cfg = rest.CopyConfig(cfg)
	w := &warnings{}
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", objectKey(o), err)
		}
		var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if o.GetNamespace() != "" {
			r = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		if _, err := r.Apply(context.Background(), o.GetName(), o, metav1.ApplyOptions{FieldManager: "signet-install-test", Force: true}); err != nil {
			t.Fatalf("applying %s: %v", objectKey(o), err)
		}
	}
	return w.list
}

// createWatcherSecret creates the kubernetes.io/tls Secret the installs mount: s's watcher
// client certificate and key, and the CA of s's server certificate.
func createWatcherSecret(t *testing.T, admin kubernetes.Interface, s *signet, namespace, name string) {
	t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       mustRead(t, filepath.Join(s.state, devpki.ClientCert)),
			corev1.TLSPrivateKeyKey: mustRead(t, filepath.Join(s.state, devpki.ClientKey)),
			"ca.crt":                mustRead(t, filepath.Join(s.state, devpki.TLSCACert)),
		},
	}
	if _, err := admin.CoreV1().Secrets(namespace).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

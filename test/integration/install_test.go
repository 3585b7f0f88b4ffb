package integration

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/signet-pki/signet/watcher/trustbundle"
)

// warnings collects the API server's warnings (Pod Security's among them).
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// applyObjects creates objs on the shared test API server with server-side apply, as
// cluster-admin, and returns the API server's warnings.
func applyObjects(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	return applyObjectsTo(t, cluster, objs)
}

// installed is the watcher's objects as one install method rendered them, on the API server.
type installed struct {
	method     string
	namespace  string
	deployment *appsv1.Deployment
}

// install applies objs (without the PodMonitor: the test API server has no Prometheus
// Operator CRDs), then the Secret the install expects, from s's client certificate.
func install(t *testing.T, method string, s *signet, objs []*unstructured.Unstructured) *installed {
	t.Helper()
	in := &installed{method: method}
	var apply []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "PodMonitor":
			continue
		case "Deployment":
			in.deployment = &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, in.deployment); err != nil {
				t.Fatal(err)
			}
			in.namespace = o.GetNamespace()
		}
		apply = append(apply, o)
	}
	if in.deployment == nil {
		t.Fatalf("%s rendered no Deployment", method)
	}
	if w := applyObjects(t, apply); len(w) > 0 {
		t.Errorf("%s: the API server warned: %s", method, strings.Join(w, "; "))
	}
	_, admin := cluster.Admin()
	createWatcherSecret(t, admin, s, in.namespace, secretVolume(t, in.deployment))
	return in
}

// volume returns the Deployment's volume named name.
func volume(t *testing.T, d *appsv1.Deployment, name string) corev1.Volume {
	t.Helper()
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("Deployment %s has no volume %q", d.Name, name)
	return corev1.Volume{}
}

// mountVolume writes what the kubelet would mount for m, a directory mount under /etc/signet
// of the Secret or ConfigMap v (all its keys, or its items), from the API server into the
// folder etc that stands for /etc/signet. A missing object fails the test, as the pod would
// stay in ContainerCreating.
func (in *installed) mountVolume(t *testing.T, v corev1.Volume, m corev1.VolumeMount, etc string) {
	t.Helper()
	ctx := context.Background()
	_, admin := cluster.Admin()
	rel, ok := strings.CutPrefix(m.MountPath, "/etc/signet/")
	if !ok || m.SubPath != "" || !m.ReadOnly {
		t.Fatalf("%s: volume mount %+v: the test mounts read-only directories under /etc/signet only", in.method, m)
	}
	data := map[string][]byte{}
	var items []corev1.KeyToPath
	switch {
	case v.Secret != nil:
		secret, err := admin.CoreV1().Secrets(in.namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: volume %s: %v", in.method, v.Name, err)
		}
		data, items = secret.Data, v.Secret.Items
	case v.ConfigMap != nil:
		cm, err := admin.CoreV1().ConfigMaps(in.namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: volume %s: %v", in.method, v.Name, err)
		}
		for k, s := range cm.Data {
			data[k] = []byte(s)
		}
		maps.Copy(data, cm.BinaryData)
		items = v.ConfigMap.Items
	default:
		t.Fatalf("%s: volume %s: a source the test cannot provide: %+v", in.method, v.Name, v.VolumeSource)
	}
	if items == nil {
		for k := range data {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	dir := filepath.Join(etc, rel)
	for _, item := range items {
		value, ok := data[item.Key]
		if !ok {
			t.Fatalf("%s: volume %s has no key %q", in.method, v.Name, item.Key)
		}
		path := filepath.Join(dir, item.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, value, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func secretVolume(t *testing.T, d *appsv1.Deployment) string {
	return volume(t, d, "tls").Secret.SecretName
}

// checkPodSecurity asks the API server (dry run) to create a Pod from the Deployment's
// template in its namespace: Pod Security admission, enforcing the namespace's level, must
// admit it without a warning, and must refuse a privileged container there.
func (in *installed) checkPodSecurity(t *testing.T) {
	t.Helper()
	cfg, _ := cluster.Admin()
	cfg = rest.CopyConfig(cfg)
	w := &warnings{}
	cfg.WarningHandler = w
	kube := newClient(t, cfg)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: in.deployment.Name + "-", Namespace: in.namespace, Labels: in.deployment.Spec.Template.Labels},
		Spec:       *in.deployment.Spec.Template.Spec.DeepCopy(),
	}
	ctx := context.Background()
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	if _, err := kube.CoreV1().Pods(in.namespace).Create(ctx, pod, dryRun); err != nil {
		t.Errorf("%s: a Pod from the Deployment's template is refused in %s: %v", in.method, in.namespace, err)
	}
	if len(w.list) > 0 {
		t.Errorf("%s: Pod Security warned about the Deployment's pods: %s", in.method, strings.Join(w.list, "; "))
	}
	privileged := pod.DeepCopy()
	privileged.Spec.Containers[0].SecurityContext.Privileged = new(true)
	privileged.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = new(true)
	if _, err := kube.CoreV1().Pods(in.namespace).Create(ctx, privileged, dryRun); !apierrors.IsForbidden(err) {
		t.Errorf("%s: a privileged Pod in %s: err = %v, want Forbidden by Pod Security", in.method, in.namespace, err)
	}
}

// runPod runs the watcher binary as the Deployment's pod named pod would run: its arguments
// and environment, config.yaml and every other volume the container mounts under /etc/signet
// (the TLS Secret, the ledger witness's keys) read back from the ConfigMaps and Secrets on the
// API server into a folder that stands for the pod's /etc/signet, and the API server reached
// with a token of the Deployment's ServiceAccount (what the kubelet mounts). Two things differ
// from a pod, as a process on the test host must: the paths under /etc/signet point into that
// folder, and metricsAddress (":9465" in the pod's own network namespace) takes a free
// loopback port.
func (in *installed) runPod(t *testing.T, bin, pod string) *exec.Cmd {
	t.Helper()
	return in.runPodAt(t, bin, pod, "127.0.0.1:0")
}

// runPodAt is runPod with metricsAddress set to metrics, for a test that scrapes it.
func (in *installed) runPodAt(t *testing.T, bin, pod, metrics string) *exec.Cmd {
	t.Helper()
	ctx := context.Background()
	_, admin := cluster.Admin()
	root := t.TempDir()
	etc := filepath.Join(root, "etc", "signet")
	if err := os.MkdirAll(etc, 0o700); err != nil {
		t.Fatal(err)
	}
	podSpec := in.deployment.Spec.Template.Spec
	c := podSpec.Containers[0]

	cm, err := admin.CoreV1().ConfigMaps(in.namespace).Get(ctx, volume(t, in.deployment, "config").ConfigMap.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var config map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &config); err != nil {
		t.Fatal(err)
	}
	config["metricsAddress"] = metrics
	data, err := yaml.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.ReplaceAll(data, []byte("/etc/signet/"), []byte(etc+"/"))
	if err := os.WriteFile(filepath.Join(etc, "config.yaml"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.VolumeMounts {
		if m.Name == "config" {
			continue
		}
		in.mountVolume(t, volume(t, in.deployment, m.Name), m, etc)
	}

	tok, err := admin.CoreV1().ServiceAccounts(in.namespace).CreateToken(ctx, podSpec.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for ServiceAccount %s/%s: %v", in.namespace, podSpec.ServiceAccountName, err)
	}
	adminCfg, _ := cluster.Admin()
	kubeconfig := filepath.Join(root, "kubeconfig")
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"test": {Server: adminCfg.Host, CertificateAuthorityData: adminCfg.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"sa": {Token: tok.Status.Token}},
		Contexts:       map[string]*clientcmdapi.Context{"test": {Cluster: "test", AuthInfo: "sa"}},
		CurrentContext: "test",
	}
	if err := clientcmd.WriteToFile(kc, kubeconfig); err != nil {
		t.Fatal(err)
	}

	var args []string
	for _, a := range c.Args {
		args = append(args, strings.ReplaceAll(a, "/etc/signet/", etc+"/"))
	}
	args = append(args, "--kubeconfig="+kubeconfig)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=")
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			cmd.Env = append(cmd.Env, e.Name+"="+in.namespace)
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			cmd.Env = append(cmd.Env, e.Name+"="+pod)
		case e.ValueFrom == nil:
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		default:
			t.Fatalf("env %s: a source the test cannot provide: %+v", e.Name, e.ValueFrom)
		}
	}
	logFile, err := os.Create(filepath.Join(root, "watcher.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s watcher log:\n%s", in.method, mustRead(t, logFile.Name()))
		}
	})
	return cmd
}

// TestInstallAndSign installs the watcher from the kustomize base and from the Helm chart,
// each for its own signing server and signer, on the real API server (every object but the
// PodMonitor; no warnings), checks Pod Security on the namespace, runs the watcher as the
// Deployment's pod, and has it take its Lease, sign an approved CSR, publish the signer's trust
// bundle and record an Event about it, with only the RBAC the install granted.
func TestInstallAndSign(t *testing.T) {
	bin := buildWatcher(t)
	methods := []struct {
		name   string
		render func(t *testing.T, s *signet) []*unstructured.Unstructured
	}{
		{"kustomize", func(t *testing.T, s *signet) []*unstructured.Unstructured {
			// What an operator does to the base: set the signer name and the server address.
			objs := renderKustomize(t, true)
			for _, o := range objs {
				data, err := yaml.Marshal(o.Object)
				if err != nil {
					t.Fatal(err)
				}
				data = bytes.ReplaceAll(data, []byte(rbacSignerName), []byte(s.signerName))
				data = bytes.ReplaceAll(data, []byte(placeholderServer), []byte(s.addr))
				o.Object = nil
				if err := yaml.Unmarshal(data, &o.Object); err != nil {
					t.Fatal(err)
				}
			}
			return objs
		}},
		{"helm", func(t *testing.T, s *signet) []*unstructured.Unstructured {
			return renderHelm(t, "signet-watcher-helm", "signet-helm", "namespace.create=true", "podMonitor.enabled=true",
				fmt.Sprintf("signerNames=[%q]", s.signerName), fmt.Sprintf("server.address=%q", s.addr), `clusterName="helm-test"`, `extraArgs=["-v=2"]`)
		}},
	}
	for _, m := range methods {
		t.Run(m.name, func(t *testing.T) {
			s := newSignet(t, "it.signet.dev/install-"+m.name, time.Hour)
			s.startServer()
			in := install(t, m.name, s, m.render(t, s))
			in.checkPodSecurity(t)

			deleteBundlesAtEnd(t, strings.ReplaceAll(s.signerName, "/", ":")+":signet") // after the watcher stops
			pod := in.deployment.Name + "-0"
			in.runPod(t, bin, pod)
			lease := in.deployment.Name // the chart and the base name the Lease after the Deployment
			if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				return leaseHolder(ctx, in.namespace, lease) == pod, nil
			}); err != nil {
				t.Fatalf("%s did not take the Lease %s/%s (holder %q)", pod, in.namespace, lease, leaseHolder(context.Background(), in.namespace, lease))
			}

			requester, err := cluster.AddRequester("install-"+m.name, nil)
			if err != nil {
				t.Fatal(err)
			}
			csr := approvedCSR(t, requester, s.signerName, "install-"+m.name)
			got := waitFor(t, requester.Client(), csr.Name, 30*time.Second, "signed", signed)
			chain := parseChain(t, got.Status.Certificate)
			if chain[0].Subject.CommonName != "install-"+m.name || chain[0].CheckSignatureFrom(s.caCert) != nil {
				t.Errorf("leaf %s, want CN install-%s issued by the signer's CA", chain[0].Subject, m.name)
			}
			bundle := waitBundle(t, s.signerName, 30*time.Second, "published with the signer's CA", holds(s.caCert))
			// An Event in "default" about a cluster-scoped object: the install's Events Role.
			waitEvent(t, bundle.Name, trustbundle.EventCreated)
		})
	}
}

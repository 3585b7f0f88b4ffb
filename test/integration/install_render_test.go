package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/diff"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The watcher's two install methods, and the placeholders both are shipped with.
const (
	kustomizeBase      = "../../deploy/watcher"
	podMonitorComp     = "../../deploy/watcher/components/podmonitor"
	helmChart          = "../../deploy/helm/signet-watcher"
	toolsModfile       = "../../hack/tools/go.mod"
	placeholderServer  = "signet.internal.example.com:8443"
	shippedNamespace   = "signet-system"
	shippedReleaseName = "signet-watcher"
)

// helmOnlyLabels are the labels Helm charts put on every object (the chart's
// signet-watcher.labels) that a kustomize base has no reason to: who manages the object, which
// release and chart version made it.
var helmOnlyLabels = []string{"app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by", "helm.sh/chart"}

// goTool runs a tool pinned in hack/tools/go.mod (helm, kustomize) and returns its output.
func goTool(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", append([]string{"tool", "-modfile=" + toolsModfile}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go tool %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// renderKustomize builds the kustomize base, with the PodMonitor component when podMonitor is
// set (from an overlay in a temp folder, as a user's own kustomization would use them).
func renderKustomize(t *testing.T, podMonitor bool) []*unstructured.Unstructured {
	t.Helper()
	dir := kustomizeBase
	if podMonitor {
		dir = t.TempDir()
		// kustomize takes bases and components by relative path only.
		rel := func(path string) string {
			abs, err := filepath.Abs(path)
			if err != nil {
				t.Fatal(err)
			}
			r, err := filepath.Rel(dir, abs)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		base, comp := rel(kustomizeBase), rel(podMonitorComp)
		overlay := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%q]\ncomponents: [%q]\n", base, comp)
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return decodeObjects(t, "kustomize build", goTool(t, "kustomize", "build", dir))
}

// renderHelm renders the chart as `helm template release chart --namespace ns` with the
// given --set-json values.
func renderHelm(t *testing.T, release, namespace string, values ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"helm", "template", release, helmChart, "--namespace", namespace}
	for _, v := range values {
		args = append(args, "--set-json", v)
	}
	return decodeObjects(t, "helm template", goTool(t, args...))
}

// decodeObjects splits a multi-document YAML stream into objects, skipping empty documents.
func decodeObjects(t *testing.T, what string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: decoding its output: %v", what, err)
		}
		if len(obj) > 0 {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}

// objectKey names an object by kind, namespace and name.
func objectKey(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// kustomizeConfigMapHash is the content hash kustomize's configMapGenerator appends.
var kustomizeConfigMapHash = regexp.MustCompile(`^(signet-watcher-config)-[a-z0-9]{10}$`)

// normalize removes what differs by method only, not by what the cluster runs: Helm's own
// labels and its config checksum annotation (which rolls the pods on a config change, as
// kustomize's hashed ConfigMap name does), and that hash suffix. config.yaml is compared as
// YAML data: the kustomize base's file carries comments, the chart's does not.
func normalize(t *testing.T, objs []*unstructured.Unstructured) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, o := range objs {
		o = o.DeepCopy()
		labels := o.GetLabels()
		for _, l := range helmOnlyLabels {
			delete(labels, l)
		}
		o.SetLabels(labels)
		if m := kustomizeConfigMapHash.FindStringSubmatch(o.GetName()); o.GetKind() == "ConfigMap" && m != nil {
			o.SetName(m[1])
		}
		switch o.GetKind() {
		case "ConfigMap":
			raw, _, _ := unstructured.NestedString(o.Object, "data", "config.yaml")
			var parsed map[string]any
			if err := yaml.UnmarshalStrict([]byte(raw), &parsed); err != nil {
				t.Fatalf("%s: config.yaml: %v", objectKey(o), err)
			}
			if err := unstructured.SetNestedField(o.Object, parsed, "data", "config.yaml"); err != nil {
				t.Fatal(err)
			}
		case "Deployment":
			unstructured.RemoveNestedField(o.Object, "spec", "template", "metadata", "annotations", "checksum/config")
			if a, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "metadata", "annotations"); len(a) == 0 {
				unstructured.RemoveNestedField(o.Object, "spec", "template", "metadata", "annotations")
			}
			volumes, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
			for _, v := range volumes {
				cm, ok := v.(map[string]any)["configMap"].(map[string]any)
				if !ok {
					continue
				}
				if m := kustomizeConfigMapHash.FindStringSubmatch(cm["name"].(string)); m != nil {
					cm["name"] = m[1]
				}
			}
			if err := unstructured.SetNestedSlice(o.Object, volumes, "spec", "template", "spec", "volumes"); err != nil {
				t.Fatal(err)
			}
		}
		if _, dup := out[objectKey(o)]; dup {
			t.Fatalf("%s rendered twice", objectKey(o))
		}
		out[objectKey(o)] = o.Object
	}
	return out
}

// TestInstallMethodsRenderTheSameObjects renders the kustomize base (with its PodMonitor
// component) and the Helm chart with its defaults (plus the two switches that are off by
// default: the namespace and the PodMonitor) through the real kustomize and helm, and
// requires the same objects, field by field, once the method-only differences are removed.
func TestInstallMethodsRenderTheSameObjects(t *testing.T) {
	kustomized := normalize(t, renderKustomize(t, true))
	helmed := normalize(t, renderHelm(t, shippedReleaseName, shippedNamespace, "namespace.create=true", "podMonitor.enabled=true"))

	keys := slices.Sorted(maps.Keys(kustomized))
	if got := slices.Sorted(maps.Keys(helmed)); !slices.Equal(keys, got) {
		t.Fatalf("objects differ:\nkustomize: %s\nhelm:      %s", strings.Join(keys, ", "), strings.Join(got, ", "))
	}
	for _, k := range keys {
		if d := diff.Diff(kustomized[k], helmed[k]); d != "" {
			t.Errorf("%s differs between kustomize (-) and helm (+):\n%s", k, d)
		}
	}
	want := []string{"ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "Namespace", "NetworkPolicy",
		"PodDisruptionBudget", "PodMonitor", "Role", "RoleBinding", "Service", "ServiceAccount"}
	var kinds []string
	for _, k := range keys {
		kinds = append(kinds, strings.Fields(k)[0])
	}
	if kinds = slices.Compact(kinds); !slices.Equal(kinds, want) {
		t.Errorf("kinds = %v, want %v", kinds, want)
	}
	checkWiring(t, renderKustomize(t, true))
}

// checkWiring checks what the API server does not: that the objects point at each other.
// The Service, NetworkPolicy, PodDisruptionBudget and PodMonitor select the Deployment's pods
// and name its metrics port; the Deployment runs as the ServiceAccount the bindings name and
// mounts the ConfigMap that exists; the NetworkPolicy lets the configured server's port out.
func checkWiring(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	byKind := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		byKind[o.GetKind()] = append(byKind[o.GetKind()], o)
	}
	deploy := byKind["Deployment"][0]
	podLabels, _, _ := unstructured.NestedStringMap(deploy.Object, "spec", "template", "metadata", "labels")
	matches := func(sel map[string]string) bool {
		for k, v := range sel {
			if podLabels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	for _, sel := range []struct {
		kind string
		path []string
	}{
		{"Service", []string{"spec", "selector"}},
		{"NetworkPolicy", []string{"spec", "podSelector", "matchLabels"}},
		{"PodDisruptionBudget", []string{"spec", "selector", "matchLabels"}},
		{"PodMonitor", []string{"spec", "selector", "matchLabels"}},
	} {
		got, _, _ := unstructured.NestedStringMap(byKind[sel.kind][0].Object, sel.path...)
		if !matches(got) {
			t.Errorf("%s selects %v, not the Deployment's pods (%v)", sel.kind, got, podLabels)
		}
	}
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	ports := fmt.Sprint(containers[0].(map[string]any)["ports"])
	if !strings.Contains(ports, "name:metrics") || !strings.Contains(ports, "containerPort:9465") {
		t.Errorf("container ports %s, want metrics on 9465", ports)
	}
	svcPorts, _, _ := unstructured.NestedSlice(byKind["Service"][0].Object, "spec", "ports")
	podMonitorEndpoints, _, _ := unstructured.NestedSlice(byKind["PodMonitor"][0].Object, "spec", "podMetricsEndpoints")
	if fmt.Sprint(svcPorts[0].(map[string]any)["targetPort"]) != "metrics" || fmt.Sprint(podMonitorEndpoints[0].(map[string]any)["port"]) != "metrics" {
		t.Errorf("Service ports %v and PodMonitor endpoints %v must name the metrics port", svcPorts, podMonitorEndpoints)
	}
	sa, _, _ := unstructured.NestedString(deploy.Object, "spec", "template", "spec", "serviceAccountName")
	if sa != byKind["ServiceAccount"][0].GetName() {
		t.Errorf("Deployment runs as %q, the ServiceAccount is %q", sa, byKind["ServiceAccount"][0].GetName())
	}
	for _, b := range append(byKind["ClusterRoleBinding"], byKind["RoleBinding"]...) {
		subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		if s := subjects[0].(map[string]any); len(subjects) != 1 || s["name"] != sa || s["namespace"] != deploy.GetNamespace() {
			t.Errorf("%s binds %v, want only ServiceAccount %s/%s", objectKey(b), subjects, deploy.GetNamespace(), sa)
		}
	}
	if cm := byKind["ConfigMap"][0].GetName(); !strings.Contains(fmt.Sprint(deploy.Object["spec"]), "name:"+cm+"]") {
		t.Errorf("Deployment does not mount ConfigMap %s", cm)
	}
	egress, _, _ := unstructured.NestedSlice(byKind["NetworkPolicy"][0].Object, "spec", "egress")
	if port := placeholderServer[strings.LastIndex(placeholderServer, ":")+1:]; !strings.Contains(fmt.Sprint(egress), "port:"+port+" ") {
		t.Errorf("NetworkPolicy egress %v does not let the signing server's port %s out", egress, port)
	}
}

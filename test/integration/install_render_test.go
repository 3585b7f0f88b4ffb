package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/signet-pki/signet/internal/controlplane"
	"github.com/signet-pki/signet/watcher"
)

// The watcher's two install methods, and the placeholders both are shipped with.
const (
	kustomizeBase      = "../../deploy/watcher"
	podMonitorComp     = "../../deploy/watcher/components/podmonitor"
	serviceMonitorComp = "../../deploy/watcher/components/servicemonitor"
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
// set.
func renderKustomize(t *testing.T, podMonitor bool) []*unstructured.Unstructured {
	t.Helper()
	if podMonitor {
		return renderKustomizeWith(t, podMonitorComp)
	}
	return renderKustomizeWith(t)
}

// renderKustomizeWith builds the kustomize base with the given components (from an overlay in
// a temp folder, as a user's own kustomization would use them).
func renderKustomizeWith(t *testing.T, components ...string) []*unstructured.Unstructured {
	t.Helper()
	dir := kustomizeBase
	if len(components) > 0 {
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
		comps := make([]string, len(components))
		for i, c := range components {
			comps[i] = strconv.Quote(rel(c))
		}
		overlay := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%q]\ncomponents: [%s]\n",
			rel(kustomizeBase), strings.Join(comps, ", "))
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

// TestInstallMethodsRenderTheSameObjects renders the kustomize base (with its PodMonitor and
// ServiceMonitor components) and the Helm chart with its defaults (plus the switches that are
// off by default: the namespace, the PodMonitor and the ServiceMonitor) through the real
// kustomize and helm, and requires the same objects, field by field, once the method-only
// differences are removed: among them the image (the kustomize base's images entry is the
// chart's appVersion) and its pull policy.
func TestInstallMethodsRenderTheSameObjects(t *testing.T) {
	kustomizedObjs := renderKustomizeWith(t, podMonitorComp, serviceMonitorComp)
	kustomized := normalize(t, kustomizedObjs)
	helmed := normalize(t, renderHelm(t, shippedReleaseName, shippedNamespace, "namespace.create=true", "podMonitor.enabled=true", "serviceMonitor.enabled=true"))

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
		"PodDisruptionBudget", "PodMonitor", "Role", "RoleBinding", "Service", "ServiceAccount", "ServiceMonitor"}
	var kinds []string
	for _, k := range keys {
		kinds = append(kinds, strings.Fields(k)[0])
	}
	if kinds = slices.Compact(kinds); !slices.Equal(kinds, want) {
		t.Errorf("kinds = %v, want %v", kinds, want)
	}
	checkWiring(t, kustomizedObjs)
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
	for _, sm := range byKind["ServiceMonitor"] {
		sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if svc := byKind["Service"][0]; !selects(sel, svc.GetLabels()) || sm.GetNamespace() != svc.GetNamespace() ||
			fmt.Sprint(endpoints[0].(map[string]any)["port"]) != fmt.Sprint(svcPorts[0].(map[string]any)["name"]) {
			t.Errorf("ServiceMonitor selects %v with endpoints %v: want the Service's labels %v and its port %v", sel, endpoints, svc.GetLabels(), svcPorts)
		}
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

// The optional components of the kustomize base, and the placeholder the approver's is
// shipped with.
const (
	tpmApproverComp      = "../../deploy/watcher/components/tpm-approver"
	nodeAddressesComp    = "../../deploy/watcher/components/node-addresses"
	placeholderTPMSigner = "example.com/kube-apiserver-client-kubelet-tpm"
)

// approverRules are the only rules the approver's ClusterRole may hold: approve on exactly the
// approved signer names, and the approval subresource.
func approverRules(signerNames []string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, Verbs: []string{"approve"}, ResourceNames: signerNames},
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests/approval"}, Verbs: []string{"update"}},
	}
}

// nodeAddressesRules are the only rules the node-addresses ClusterRole may hold.
var nodeAddressesRules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}}

// checkOptionalRBAC checks the RBAC of the two opt-in features in objs, an install whose objects
// are named fullname and run as the ServiceAccount fullname in namespace: with approverNames,
// the ClusterRole <fullname>:tpm-approver holds exactly approverRules(approverNames); with
// nodeAddresses, <fullname>:node-addresses exactly nodeAddressesRules; each bound to the
// watcher's ServiceAccount alone; without them, neither object exists. No other role, in any
// mode, may approve, touch approvals, or reach nodes.
func checkOptionalRBAC(t *testing.T, objs []*unstructured.Unstructured, fullname, namespace string, approverNames []string, nodeAddresses bool) {
	t.Helper()
	roles := map[string][]rbacv1.PolicyRule{}
	bindings := map[string]*rbacv1.ClusterRoleBinding{}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "Role":
			var r rbacv1.ClusterRole // a Role's fields are a subset
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				t.Fatalf("%s: %v", objectKey(o), err)
			}
			roles[objectKey(o)] = r.Rules
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
				t.Fatalf("%s: %v", objectKey(o), err)
			}
			bindings[b.Name] = &b
		}
	}
	approver, nodes := fullname+":tpm-approver", fullname+":node-addresses"
	for key, rules := range roles {
		for _, rule := range rules {
			if key != "ClusterRole /"+approver && (slices.Contains(rule.Verbs, "approve") || slices.Contains(rule.Verbs, "*") ||
				slices.ContainsFunc(rule.Resources, func(r string) bool { return r == "*" || strings.HasSuffix(r, "/approval") })) {
				t.Errorf("%s rule %+v approves, or covers approvals", key, rule)
			}
			if key != "ClusterRole /"+nodes && slices.ContainsFunc(rule.Resources, func(r string) bool { return r == "nodes" || strings.HasPrefix(r, "nodes/") }) {
				t.Errorf("%s rule %+v reaches nodes", key, rule)
			}
		}
	}
	for _, c := range []struct {
		role string
		on   bool
		want []rbacv1.PolicyRule
	}{
		{approver, len(approverNames) > 0, approverRules(approverNames)},
		{nodes, nodeAddresses, nodeAddressesRules},
	} {
		rules, ok := roles["ClusterRole /"+c.role]
		b := bindings[c.role]
		if !c.on {
			if ok || b != nil {
				t.Errorf("ClusterRole %s (%v) or its binding (%v) rendered with the feature off", c.role, ok, b != nil)
			}
			continue
		}
		if !ok {
			t.Errorf("no ClusterRole %s with the feature on", c.role)
		} else if d := diff.Diff(c.want, rules); d != "" {
			t.Errorf("ClusterRole %s rules (-want +got):\n%s", c.role, d)
		}
		wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: fullname, Namespace: namespace}}
		if b == nil {
			t.Errorf("no ClusterRoleBinding %s with the feature on", c.role)
		} else if b.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: c.role}) || !slices.Equal(b.Subjects, wantSubjects) {
			t.Errorf("ClusterRoleBinding %s binds %+v to %+v, want ClusterRole %s to %+v", c.role, b.RoleRef, b.Subjects, c.role, wantSubjects)
		}
	}
}

// checkOptionalConfig checks the rendered config.yaml: the keys tpmApprover and nodeAddresses
// are there only when on, and the watcher loads and validates it with exactly these names.
func checkOptionalConfig(t *testing.T, objs []*unstructured.Unstructured, approverNames, nodeNames []string) {
	t.Helper()
	var raw string
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" {
			raw, _, _ = unstructured.NestedString(o.Object, "data", "config.yaml")
		}
	}
	var keys map[string]any
	if err := yaml.UnmarshalStrict([]byte(raw), &keys); err != nil {
		t.Fatalf("config.yaml: %v\n%s", err, raw)
	}
	if _, has := keys["tpmApprover"]; has != (len(approverNames) > 0) {
		t.Errorf("config.yaml has tpmApprover: %v, want %v:\n%s", has, len(approverNames) > 0, raw)
	}
	if _, has := keys["nodeAddresses"]; has != (len(nodeNames) > 0) {
		t.Errorf("config.yaml has nodeAddresses: %v, want %v:\n%s", has, len(nodeNames) > 0, raw)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := watcher.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("the rendered config.yaml does not validate: %v", err)
	}
	if !slices.Equal(cfg.TPMApprover.SignerNames, approverNames) || !slices.Equal(cfg.NodeAddresses.SignerNames, nodeNames) {
		t.Errorf("config tpmApprover.signerNames %q, nodeAddresses.signerNames %q; want %q, %q",
			cfg.TPMApprover.SignerNames, cfg.NodeAddresses.SignerNames, approverNames, nodeNames)
	}
}

// TestInstallOptionalFeaturesRBAC renders the chart with tpmApprover.signerNames and
// nodeAddresses.signerNames off (the defaults), each on alone, and both on, and checks the
// config and the least-privilege RBAC of each mode (and of the kustomize base, which has
// neither). Then it applies each mode's ClusterRoles, bound to a user instead of the
// ServiceAccount, to the test API server, and asks its authorizer: approve is allowed for
// exactly the approver's names (not another name, not a wildcard), get on a node only with node
// addresses on (never list or watch), and nothing of either with them off.
func TestInstallOptionalFeaturesRBAC(t *testing.T) {
	base := renderKustomize(t, true)
	checkOptionalRBAC(t, base, shippedReleaseName, shippedNamespace, nil, false)
	checkOptionalConfig(t, base, nil, nil)

	approverNames := []string{"it.signet.dev/optional-client-tpm", "it.signet.dev/optional-serving-tpm"}
	nodeNames := []string{"it.signet.dev/optional-serving-tpm"}
	for _, c := range []struct {
		name            string
		approver, nodes []string
	}{
		{"defaults", nil, nil},
		{"approver", approverNames, nil},
		{"node-addresses", nil, nodeNames},
		{"both", approverNames, nodeNames},
	} {
		t.Run(c.name, func(t *testing.T) {
			release, namespace := "opt-"+c.name, "signet-opt"
			fullname := release + "-signet-watcher"
			values := []string{fmt.Sprintf("signerNames=[%q]", "it.signet.dev/optional-"+c.name)}
			if c.approver != nil {
				values = append(values, "tpmApprover.signerNames="+mustJSON(t, c.approver))
			}
			if c.nodes != nil {
				values = append(values, "nodeAddresses.signerNames="+mustJSON(t, c.nodes))
			}
			objs := renderHelm(t, release, namespace, values...)
			checkOptionalRBAC(t, objs, fullname, namespace, c.approver, c.nodes != nil)
			checkOptionalConfig(t, objs, c.approver, c.nodes)
			if t.Failed() {
				return
			}
			checkOptionalRBACAuthorizes(t, objs, &controlplane.User{Name: "signet-" + release}, c.approver, c.nodes != nil)
		})
	}
}

// checkOptionalRBACAuthorizes applies objs' ClusterRoles and ClusterRoleBindings, bound to u,
// and asks the API server's authorizer what u may do. It first waits for one grant of every
// binding to take effect, so that a denial afterwards is the RBAC's, not the cache's.
func checkOptionalRBACAuthorizes(t *testing.T, objs []*unstructured.Unstructured, u *controlplane.User, approverNames []string, nodeAddresses bool) {
	t.Helper()
	var apply []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
		case "ClusterRoleBinding":
			o = o.DeepCopy()
			if err := unstructured.SetNestedSlice(o.Object, []any{map[string]any{"apiGroup": rbacv1.GroupName, "kind": rbacv1.UserKind, "name": u.Name}}, "subjects"); err != nil {
				t.Fatal(err)
			}
		default:
			continue
		}
		apply = append(apply, o)
	}
	if w := applyObjects(t, apply); len(w) > 0 {
		t.Errorf("the API server warned: %s", strings.Join(w, "; "))
	}
	t.Cleanup(func() {
		_, admin := cluster.Admin()
		for _, o := range apply {
			var err error
			if o.GetKind() == "ClusterRole" {
				err = admin.RbacV1().ClusterRoles().Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
			} else {
				err = admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
			}
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s: %v", objectKey(o), err)
			}
		}
	})

	const group = "certificates.k8s.io"
	approve := func(signer string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: "approve", Group: group, Resource: "signers", Name: signer}
	}
	approval := authorizationv1.ResourceAttributes{Verb: "update", Group: group, Resource: "certificatesigningrequests", Subresource: "approval", Name: "any-csr"}
	getNode := authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Name: "node-1"}
	// One grant of each binding: the base role, PodCertificateRequests, and the optional ones.
	mustAllow := []authorizationv1.ResourceAttributes{
		{Verb: "watch", Group: group, Resource: "certificatesigningrequests"},
		{Verb: "watch", Group: group, Resource: "podcertificaterequests"},
	}
	var mustDeny []authorizationv1.ResourceAttributes
	if len(approverNames) > 0 {
		for _, n := range approverNames {
			mustAllow = append(mustAllow, approve(n))
		}
		mustAllow = append(mustAllow, approval)
	} else {
		mustDeny = append(mustDeny, approve("it.signet.dev/optional-client-tpm"), approval)
	}
	if nodeAddresses {
		mustAllow = append(mustAllow, getNode)
	} else {
		mustDeny = append(mustDeny, getNode)
	}
	mustDeny = append(mustDeny,
		approve("it.signet.dev/another"), approve("it.signet.dev/*"), approve("kubernetes.io/kube-apiserver-client-kubelet"),
		authorizationv1.ResourceAttributes{Verb: "list", Resource: "nodes"},
		authorizationv1.ResourceAttributes{Verb: "watch", Resource: "nodes"},
		authorizationv1.ResourceAttributes{Verb: "update", Resource: "nodes", Name: "node-1"},
		authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "proxy", Name: "node-1"},
		authorizationv1.ResourceAttributes{Verb: "delete", Group: group, Resource: "certificatesigningrequests", Name: "any-csr"},
	)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, admin := cluster.Admin()
	for _, attrs := range mustAllow {
		if !allowed(ctx, t, admin, u, attrs) {
			t.Errorf("the rendered RBAC does not allow %+v", attrs)
		}
	}
	for _, attrs := range mustDeny {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Name, Groups: []string{"system:authenticated"}, ResourceAttributes: &attrs,
		}}
		got, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Allowed {
			t.Errorf("the rendered RBAC allows %+v (%s)", attrs, got.Status.Reason)
		}
	}
}

// mustJSON is v as JSON, for a --set-json value.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestInstallMethodsRenderTheSameOptionalComponents renders the kustomize base with every
// component and the chart with the matching values (the components' placeholders), and
// requires the components to add exactly the objects the values add, field by field.
func TestInstallMethodsRenderTheSameOptionalComponents(t *testing.T) {
	nodeSigner := "example.com/kubelet-serving-tpm"
	plainK := normalize(t, renderKustomize(t, true))
	fullK := renderKustomizeWith(t, podMonitorComp, tpmApproverComp, nodeAddressesComp, ledgerWitnessComp)
	kustomized := normalize(t, fullK)
	helmed := normalize(t, renderHelm(t, shippedReleaseName, shippedNamespace, "namespace.create=true", "podMonitor.enabled=true",
		"tpmApprover.signerNames="+mustJSON(t, []string{placeholderTPMSigner}), "nodeAddresses.signerNames="+mustJSON(t, []string{nodeSigner}),
		"ledgerWitness.enabled=true"))

	var added []string
	for k := range kustomized {
		if _, ok := plainK[k]; !ok {
			added = append(added, k)
		}
	}
	slices.Sort(added)
	want := []string{
		"ClusterRole /signet-watcher:node-addresses", "ClusterRole /signet-watcher:tpm-approver",
		"ClusterRoleBinding /signet-watcher:node-addresses", "ClusterRoleBinding /signet-watcher:tpm-approver",
		"Role signet-system/signet-watcher:ledger-witness", "RoleBinding signet-system/signet-watcher:ledger-witness",
	}
	if !slices.Equal(added, want) {
		t.Fatalf("the components add %v, want %v", added, want)
	}
	for _, k := range want {
		if d := diff.Diff(kustomized[k], helmed[k]); d != "" {
			t.Errorf("%s differs between kustomize (-) and helm (+):\n%s", k, d)
		}
	}
	// The chart's other objects are the base's (the Deployment with the witness's key mount that
	// components/ledger-witness patches in), but for the config that now names the features
	// (the kustomize operator sets those keys in config.yaml by hand).
	for k := range plainK {
		if strings.HasPrefix(k, "ConfigMap ") {
			continue
		}
		if d := diff.Diff(kustomized[k], helmed[k]); d != "" {
			t.Errorf("%s differs between kustomize (-) and helm (+):\n%s", k, d)
		}
	}
	checkOptionalRBAC(t, fullK, shippedReleaseName, shippedNamespace, []string{placeholderTPMSigner}, true)
	checkWitnessRBAC(t, fullK, shippedReleaseName, shippedNamespace, placeholderWitnessConfigMap, true)
}

// The ledger witness's component, and the names both installs are shipped with.
const (
	ledgerWitnessComp           = "../../deploy/watcher/components/ledger-witness"
	placeholderWitnessConfigMap = "signet-ledger-witness"         // ledgerWitness.configMapName
	placeholderWitnessKeys      = "signet-ledger-checkpoint-keys" // the mounted ConfigMap of public keys
	placeholderWitnessKey       = "checkpoint.pub"
	witnessKeysDir              = "/etc/signet/ledger-witness"
)

// witnessRules are the only rules the witness's Role may hold: get and update on exactly the
// ConfigMap of accepted checkpoints, and create on configmaps (which cannot be limited by name).
func witnessRules(configMap string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "update"}, ResourceNames: []string{configMap}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
	}
}

// checkWitnessRBAC checks the ledger witness's RBAC in objs, an install whose objects are named
// fullname and run as the ServiceAccount fullname in namespace: with on, the Role
// <fullname>:ledger-witness in namespace holds exactly witnessRules(configMap) and its
// RoleBinding binds it to that ServiceAccount alone; with it off, neither exists. In any mode no
// other role may write ConfigMaps or reach those of the watcher's namespace: at most it may
// read other ConfigMaps, by name, elsewhere (as the API server's own
// kube-system/extension-apiserver-authentication).
func checkWitnessRBAC(t *testing.T, objs []*unstructured.Unstructured, fullname, namespace, configMap string, on bool) {
	t.Helper()
	name := fullname + ":ledger-witness"
	roleKey := "Role " + namespace + "/" + name
	var role *rbacv1.Role
	var binding *rbacv1.RoleBinding
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "Role":
			var r rbacv1.Role // a ClusterRole's rules are the same type
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				t.Fatalf("%s: %v", objectKey(o), err)
			}
			if objectKey(o) == roleKey {
				role = &r
				continue
			}
			for _, rule := range r.Rules {
				if !slices.ContainsFunc(rule.Resources, func(r string) bool { return r == "*" || r == "configmaps" || strings.HasPrefix(r, "configmaps/") }) {
					continue
				}
				readOnly := !slices.ContainsFunc(rule.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" })
				named := len(rule.ResourceNames) > 0 && !slices.Contains(rule.ResourceNames, configMap)
				if !readOnly || !named || o.GetKind() == "ClusterRole" || o.GetNamespace() == namespace {
					t.Errorf("%s rule %+v reaches ConfigMaps beyond reading named ones outside %s (only %s may)", objectKey(o), rule, namespace, roleKey)
				}
			}
		case "RoleBinding":
			if o.GetNamespace() == namespace && o.GetName() == name {
				binding = &rbacv1.RoleBinding{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, binding); err != nil {
					t.Fatalf("%s: %v", objectKey(o), err)
				}
			}
		}
	}
	if !on {
		if role != nil || binding != nil {
			t.Errorf("%s (%v) or its binding (%v) rendered with the witness off", roleKey, role != nil, binding != nil)
		}
		return
	}
	if role == nil {
		t.Errorf("no %s with the witness on", roleKey)
	} else if d := diff.Diff(witnessRules(configMap), role.Rules); d != "" {
		t.Errorf("%s rules (-want +got):\n%s", roleKey, d)
	}
	wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: fullname, Namespace: namespace}}
	if binding == nil {
		t.Errorf("no RoleBinding %s/%s with the witness on", namespace, name)
	} else if binding.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}) || !slices.Equal(binding.Subjects, wantSubjects) {
		t.Errorf("RoleBinding %s/%s binds %+v to %+v, want Role %s to %+v", namespace, name, binding.RoleRef, binding.Subjects, name, wantSubjects)
	}
}

// checkWitnessConfig checks the rendered config.yaml and Deployment for the witness: with on,
// config.yaml's ledgerWitness loads and validates with publicKeyFiles exactly keys under
// witnessKeysDir and configMapName configMap, and the container mounts the ConfigMap keysCM
// there, read-only; with it off, config.yaml has no ledgerWitness and nothing is mounted there.
func checkWitnessConfig(t *testing.T, objs []*unstructured.Unstructured, configMap, keysCM string, keys []string, on bool) {
	t.Helper()
	var raw string
	var deploy *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ConfigMap":
			raw, _, _ = unstructured.NestedString(o.Object, "data", "config.yaml")
		case "Deployment":
			deploy = o
		}
	}
	var top map[string]any
	if err := yaml.UnmarshalStrict([]byte(raw), &top); err != nil {
		t.Fatalf("config.yaml: %v\n%s", err, raw)
	}
	if _, has := top["ledgerWitness"]; has != on {
		t.Errorf("config.yaml has ledgerWitness: %v, want %v:\n%s", has, on, raw)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := watcher.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("the rendered config.yaml does not validate: %v", err)
	}
	var wantFiles []string
	for _, k := range keys {
		wantFiles = append(wantFiles, witnessKeysDir+"/"+k)
	}
	if on && (!slices.Equal(cfg.LedgerWitness.PublicKeyFiles, wantFiles) || cfg.LedgerWitness.ConfigMapName != configMap) {
		t.Errorf("config ledgerWitness.publicKeyFiles %q, configMapName %q; want %q, %q",
			cfg.LedgerWitness.PublicKeyFiles, cfg.LedgerWitness.ConfigMapName, wantFiles, configMap)
	}
	if cfg.LedgerWitness.Enabled() != on {
		t.Errorf("the watcher reads the witness as on: %v, want %v", cfg.LedgerWitness.Enabled(), on)
	}

	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(deploy.Object, &d); err != nil {
		t.Fatal(err)
	}
	var mounted []string // "<volume> <source> <readOnly>" of every mount at witnessKeysDir
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.MountPath != witnessKeysDir && !strings.HasPrefix(m.MountPath, witnessKeysDir+"/") {
			continue
		}
		source := "?"
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && len(v.ConfigMap.Items) == 0 && v.ConfigMap.Optional == nil {
				source = "configMap:" + v.ConfigMap.Name
			}
		}
		mounted = append(mounted, fmt.Sprintf("%s %s %v %s", m.MountPath, source, m.ReadOnly, m.SubPath))
	}
	var want []string
	if on {
		want = []string{witnessKeysDir + " configMap:" + keysCM + " true "}
	}
	if !slices.Equal(mounted, want) {
		t.Errorf("mounts at %s: %q, want %q", witnessKeysDir, mounted, want)
	}
}

// enableWitnessInConfig does what components/ledger-witness tells a kustomize operator to do in
// config.yaml: uncomment its ledgerWitness block. It returns objs with the ConfigMap changed.
func enableWitnessInConfig(t *testing.T, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "ConfigMap" {
			continue
		}
		raw, _, _ := unstructured.NestedString(o.Object, "data", "config.yaml")
		var out []string
		in := false
		found := false
		for _, line := range strings.Split(raw, "\n") {
			switch {
			case line == "# ledgerWitness:":
				in, found = true, true
				line = "ledgerWitness:"
			case in && strings.HasPrefix(line, "#   "):
				line = line[2:]
			default:
				in = false
			}
			out = append(out, line)
		}
		if !found {
			t.Fatalf("config.yaml has no commented ledgerWitness block to uncomment:\n%s", raw)
		}
		if err := unstructured.SetNestedField(o.Object, strings.Join(out, "\n"), "data", "config.yaml"); err != nil {
			t.Fatal(err)
		}
	}
	return objs
}

// TestInstallLedgerWitnessRBAC renders both installs with the ledger witness off (the
// defaults) and on, and checks each mode's config, key mount and RBAC: off, no role reaches
// ConfigMaps and nothing is mounted; on, the Role <name>:ledger-witness grants exactly get and
// update on the ConfigMap of accepted checkpoints (by name, following
// ledgerWitness.configMapName in the chart) and create on configmaps, and config.yaml's
// publicKeyFiles are the files of the mounted ConfigMap (in the kustomize base, once the
// operator uncomments config.yaml's block as the component says). Then it applies the chart's
// Role, bound to a user, to the API server and asks its authorizer what it allows.
func TestInstallLedgerWitnessRBAC(t *testing.T) {
	t.Run("kustomize", func(t *testing.T) {
		base := renderKustomize(t, true)
		checkWitnessRBAC(t, base, shippedReleaseName, shippedNamespace, placeholderWitnessConfigMap, false)
		checkWitnessConfig(t, base, placeholderWitnessConfigMap, placeholderWitnessKeys, nil, false)

		with := enableWitnessInConfig(t, renderKustomizeWith(t, podMonitorComp, ledgerWitnessComp))
		checkWitnessRBAC(t, with, shippedReleaseName, shippedNamespace, placeholderWitnessConfigMap, true)
		checkWitnessConfig(t, with, placeholderWitnessConfigMap, placeholderWitnessKeys, []string{placeholderWitnessKey}, true)
	})
	t.Run("helm-off", func(t *testing.T) {
		objs := renderHelm(t, shippedReleaseName, shippedNamespace)
		checkWitnessRBAC(t, objs, shippedReleaseName, shippedNamespace, placeholderWitnessConfigMap, false)
		checkWitnessConfig(t, objs, placeholderWitnessConfigMap, placeholderWitnessKeys, nil, false)
	})
	t.Run("helm-defaults", func(t *testing.T) {
		objs := renderHelm(t, shippedReleaseName, shippedNamespace, "ledgerWitness.enabled=true")
		checkWitnessRBAC(t, objs, shippedReleaseName, shippedNamespace, placeholderWitnessConfigMap, true)
		checkWitnessConfig(t, objs, placeholderWitnessConfigMap, placeholderWitnessKeys, []string{placeholderWitnessKey}, true)
	})
	t.Run("helm-named", func(t *testing.T) {
		release, namespace := "witness-rbac", "signet-witness-rbac"
		fullname := release + "-signet-watcher"
		const configMap, keysCM = "it-accepted", "it-keys"
		keys := []string{"server-1.pub", "server-2.pub"}
		objs := renderHelm(t, release, namespace, "ledgerWitness.enabled=true",
			"ledgerWitness.configMapName="+mustJSON(t, configMap),
			"ledgerWitness.publicKeys="+mustJSON(t, map[string]any{"configMapName": keysCM, "keys": keys}),
			`ledgerWitness.origins=["signet-ledger/0123456789abcdef"]`, `ledgerWitness.period="2s"`, "ledgerWitness.signOnAlarm=true")
		checkWitnessRBAC(t, objs, fullname, namespace, configMap, true)
		checkWitnessConfig(t, objs, configMap, keysCM, keys, true)
		if t.Failed() {
			return
		}
		checkWitnessRBACAuthorizes(t, objs, namespace, configMap, &controlplane.User{Name: "signet-" + release})
	})
}

// checkWitnessRBACAuthorizes applies objs' witness Role and RoleBinding, bound to u, in
// namespace, and asks the API server's authorizer: get and update on configMap and create on
// configmaps are allowed there; any other ConfigMap, list, watch, patch and delete, Secrets,
// and the same ConfigMap in another namespace are not.
func checkWitnessRBACAuthorizes(t *testing.T, objs []*unstructured.Unstructured, namespace, configMap string, u *controlplane.User) {
	t.Helper()
	createNamespace(t, namespace)
	var apply []*unstructured.Unstructured
	for _, o := range objs {
		if !strings.HasSuffix(o.GetName(), ":ledger-witness") {
			continue
		}
		switch o.GetKind() {
		case "Role":
		case "RoleBinding":
			o = o.DeepCopy()
			if err := unstructured.SetNestedSlice(o.Object, []any{map[string]any{"apiGroup": rbacv1.GroupName, "kind": rbacv1.UserKind, "name": u.Name}}, "subjects"); err != nil {
				t.Fatal(err)
			}
		default:
			continue
		}
		apply = append(apply, o)
	}
	if len(apply) != 2 {
		t.Fatalf("the witness's Role and RoleBinding: found %d objects", len(apply))
	}
	if w := applyObjects(t, apply); len(w) > 0 {
		t.Errorf("the API server warned: %s", strings.Join(w, "; "))
	}
	cm := func(verb, name string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: verb, Resource: "configmaps", Namespace: namespace, Name: name}
	}
	mustAllow := []authorizationv1.ResourceAttributes{cm("get", configMap), cm("update", configMap), cm("create", "")}
	mustDeny := []authorizationv1.ResourceAttributes{
		cm("get", "another"), cm("update", "another"), cm("get", placeholderWitnessConfigMap),
		cm("list", ""), cm("watch", ""), cm("patch", configMap), cm("delete", configMap), cm("deletecollection", ""),
		{Verb: "get", Resource: "configmaps", Namespace: "kube-system", Name: configMap},
		{Verb: "create", Resource: "configmaps", Namespace: "kube-system"},
		{Verb: "get", Resource: "secrets", Namespace: namespace, Name: configMap},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, admin := cluster.Admin()
	for _, attrs := range mustAllow {
		if !allowed(ctx, t, admin, u, attrs) {
			t.Errorf("the rendered witness Role does not allow %+v", attrs)
		}
	}
	for _, attrs := range mustDeny {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Name, Groups: []string{"system:authenticated"}, ResourceAttributes: &attrs,
		}}
		got, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Allowed {
			t.Errorf("the rendered witness Role allows %+v (%s)", attrs, got.Status.Reason)
		}
	}
}

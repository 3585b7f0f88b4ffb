package integration

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"
)

// chartMeta is what the tests read of Chart.yaml.
type chartMeta struct {
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

// loadChartMeta reads the chart's Chart.yaml.
func loadChartMeta(t *testing.T) chartMeta {
	t.Helper()
	var c chartMeta
	if err := yaml.Unmarshal(mustRead(t, helmChart+"/Chart.yaml"), &c); err != nil {
		t.Fatalf("Chart.yaml: %v", err)
	}
	return c
}

// only returns the one object of kind in objs, failing the test when there is not exactly one.
func only(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s objects rendered, want one", len(found), kind)
	}
	return found[0]
}

// ofKind returns the objects of kind in objs.
func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			found = append(found, o)
		}
	}
	return found
}

// typed converts o into out strictly: a field the Go type does not have fails the test (as
// the API server would refuse it).
func typed(t *testing.T, o *unstructured.Unstructured, out any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
		t.Fatalf("%s: %v", objectKey(o), err)
	}
}

// deploymentOf renders the chart with values and returns its Deployment.
func deploymentOf(t *testing.T, values ...string) (*appsv1.Deployment, []*unstructured.Unstructured) {
	t.Helper()
	objs := renderHelm(t, "knobs", "signet-knobs", values...)
	var d appsv1.Deployment
	typed(t, only(t, objs, "Deployment"), &d)
	return &d, objs
}

// TestHelmImage: the image is [registry/]repository:tag with the tag defaulting to the chart's
// appVersion (the release's tag), or [registry/]repository@digest when a digest is set, which
// wins over the tag; the pull policy is IfNotPresent. Chart.yaml's version is appVersion without
// its "v", both a semantic version; the kustomize base runs the same image. No file of either
// install names a :latest image or the pull policy Always.
func TestHelmImage(t *testing.T) {
	meta := loadChartMeta(t)
	if v, err := version.ParseSemantic(meta.Version); err != nil || v.String() != meta.Version || "v"+meta.Version != meta.AppVersion {
		t.Errorf("Chart.yaml: version %q, appVersion %q; want X.Y.Z and vX.Y.Z, the same version (%v)", meta.Version, meta.AppVersion, err)
	}
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, c := range []struct {
		name   string
		values []string
		want   string
	}{
		{"defaults", nil, "signet-watcher:" + meta.AppVersion},
		{"tag", []string{`image.tag="v9.8.7"`}, "signet-watcher:v9.8.7"},
		{"registry", []string{`image.registry="registry.example.com/signet"`}, "registry.example.com/signet/signet-watcher:" + meta.AppVersion},
		{"registry with a slash", []string{`image.registry="registry.example.com:5000/"`}, "registry.example.com:5000/signet-watcher:" + meta.AppVersion},
		{"repository", []string{`image.repository="example/watcher"`, `image.tag="v1.0.0"`}, "example/watcher:v1.0.0"},
		{"digest", []string{`image.digest="` + digest + `"`}, "signet-watcher@" + digest},
		{"digest wins", []string{`image.registry="r.example"`, `image.tag="v9.8.7"`, `image.digest="` + digest + `"`}, "r.example/signet-watcher@" + digest},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, _ := deploymentOf(t, c.values...)
			ctr := d.Spec.Template.Spec.Containers[0]
			if ctr.Image != c.want || ctr.ImagePullPolicy != corev1.PullIfNotPresent {
				t.Errorf("image %q, pull policy %q; want %q, IfNotPresent", ctr.Image, ctr.ImagePullPolicy, c.want)
			}
		})
	}
	for _, bad := range []string{`image.digest="sha256:abc"`, `image.digest="0123"`, `image.pullPolicy=""`, `image.tag="v1:2"`} {
		if out, ok := helmRun(t, withSetJSON([]string{"template", "img", helmChart}, bad)...); ok {
			t.Errorf("helm template with %s succeeds; want the schema to refuse it", bad)
		} else if !strings.Contains(out, "/image/") {
			t.Errorf("helm template with %s: the error does not name the value:\n%s", bad, out)
		}
	}

	var kd appsv1.Deployment
	typed(t, only(t, renderKustomize(t, false), "Deployment"), &kd)
	if got := kd.Spec.Template.Spec.Containers[0]; got.Image != "signet-watcher:"+meta.AppVersion || got.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("kustomize base: image %q, pull policy %q; want signet-watcher:%s (the chart's appVersion), IfNotPresent", got.Image, got.ImagePullPolicy, meta.AppVersion)
	}

	// An overlay's images entry moves the base's image the way the chart's values do, a digest
	// winning over the tag.
	overlay := t.TempDir()
	base, err := filepath.Abs(kustomizeBase)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(overlay, base)
	if err != nil {
		t.Fatal(err)
	}
	kustomization := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%q]\n"+
		"images:\n  - {name: signet-watcher, newName: registry.example.com/signet/signet-watcher, digest: %q}\n", rel, digest)
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o600); err != nil {
		t.Fatal(err)
	}
	typed(t, only(t, decodeObjects(t, "kustomize build", goTool(t, "kustomize", "build", overlay)), "Deployment"), &kd)
	hd, _ := deploymentOf(t, `image.registry="registry.example.com/signet"`, `image.tag="v9.8.7"`, `image.digest="`+digest+`"`)
	if k, h := kd.Spec.Template.Spec.Containers[0].Image, hd.Spec.Template.Spec.Containers[0].Image; k != h || !strings.HasSuffix(k, "@"+digest) {
		t.Errorf("an overlay's images entry gives %q, the chart's values %q; want the same, by digest", k, h)
	}

	latest := regexp.MustCompile(`(?i):latest\b|pullPolicy:\s*"?Always`)
	for _, root := range []string{helmChart, kustomizeBase} {
		err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || strings.Contains(filepath.Base(path), "Dockerfile") || !strings.HasSuffix(path, ".yaml") && !strings.HasSuffix(path, ".tpl") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(data), "\n") {
				if latest.MatchString(line) {
					t.Errorf("%s:%d names a :latest image or the pull policy Always: %s", path, i+1, strings.TrimSpace(line))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestHelmPodDisruptionBudget: the PDB is rendered with two or more replicas (minAvailable 1),
// or with maxUnavailable set (which replaces minAvailable), and never at one replica without
// it, where minAvailable 1 would block every drain of the node; podDisruptionBudget.enabled
// false drops it.
func TestHelmPodDisruptionBudget(t *testing.T) {
	for _, c := range []struct {
		name   string
		values []string
		want   string // "" for none, else "minAvailable=…" or "maxUnavailable=…"
	}{
		{"defaults (2 replicas)", nil, "minAvailable=1"},
		{"1 replica", []string{"replicaCount=1"}, ""},
		{"0 replicas", []string{"replicaCount=0"}, ""},
		{"3 replicas", []string{"replicaCount=3"}, "minAvailable=1"},
		{"3 replicas, minAvailable 2", []string{"replicaCount=3", "podDisruptionBudget.minAvailable=2"}, "minAvailable=2"},
		{"1 replica, maxUnavailable", []string{"replicaCount=1", "podDisruptionBudget.maxUnavailable=1"}, "maxUnavailable=1"},
		{"maxUnavailable percent", []string{`podDisruptionBudget.maxUnavailable="50%"`}, "maxUnavailable=50%"},
		{"disabled", []string{"podDisruptionBudget.enabled=false"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs := renderHelm(t, "pdb", "signet-pdb", c.values...)
			pdbs := ofKind(objs, "PodDisruptionBudget")
			got := ""
			if len(pdbs) > 1 {
				t.Fatalf("%d PodDisruptionBudgets", len(pdbs))
			}
			if len(pdbs) == 1 {
				var p policyv1.PodDisruptionBudget
				typed(t, pdbs[0], &p)
				switch {
				case p.Spec.MinAvailable != nil && p.Spec.MaxUnavailable != nil:
					t.Fatalf("both minAvailable and maxUnavailable: %+v", p.Spec)
				case p.Spec.MinAvailable != nil:
					got = "minAvailable=" + p.Spec.MinAvailable.String()
				case p.Spec.MaxUnavailable != nil:
					got = "maxUnavailable=" + p.Spec.MaxUnavailable.String()
				}
				var d appsv1.Deployment
				typed(t, only(t, objs, "Deployment"), &d)
				if !selects(p.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
					t.Errorf("the PDB selects %v, not the pods (%v)", p.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
				}
			}
			if got != c.want {
				t.Errorf("PodDisruptionBudget %q, want %q", got, c.want)
			}
		})
	}
}

// selects reports whether the non-empty selector matches labels.
func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// TestHelmPodKnobs: each knob operators reach for lands where Kubernetes reads it, and the
// chart's own settings survive it (the selector label, the hardened security context keys not
// overridden, the chart's volumes and environment).
func TestHelmPodKnobs(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		d, objs := deploymentOf(t)
		s := d.Spec.Template.Spec
		if s.PriorityClassName != "" || s.HostNetwork || s.DNSPolicy != "" || len(s.TopologySpreadConstraints) > 0 {
			t.Errorf("defaults: priorityClassName %q, hostNetwork %v, dnsPolicy %q, topologySpreadConstraints %v; want none", s.PriorityClassName, s.HostNetwork, s.DNSPolicy, s.TopologySpreadConstraints)
		}
		var sa corev1.ServiceAccount
		typed(t, only(t, objs, "ServiceAccount"), &sa)
		if sa.Name != s.ServiceAccountName || sa.AutomountServiceAccountToken == nil || !*sa.AutomountServiceAccountToken {
			t.Errorf("ServiceAccount %s (automount %v); the pods run as %s", sa.Name, sa.AutomountServiceAccountToken, s.ServiceAccountName)
		}
	})
	t.Run("scheduling", func(t *testing.T) {
		d, _ := deploymentOf(t, `priorityClassName="system-cluster-critical"`,
			`topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway"},`+
				`{"maxSkew":2,"topologyKey":"kubernetes.io/hostname","whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchLabels":{"x":"y"}}}]`,
			`nodeSelector={"kubernetes.io/os":"linux"}`, `tolerations=[{"key":"node-role.kubernetes.io/control-plane","operator":"Exists","effect":"NoSchedule"}]`,
			`affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"k","operator":"Exists"}]}]}}}`)
		s := d.Spec.Template.Spec
		if s.PriorityClassName != "system-cluster-critical" {
			t.Errorf("priorityClassName %q", s.PriorityClassName)
		}
		if len(s.TopologySpreadConstraints) != 2 || !selects(s.TopologySpreadConstraints[0].LabelSelector.MatchLabels, d.Spec.Template.Labels) ||
			s.TopologySpreadConstraints[0].TopologyKey != "topology.kubernetes.io/zone" ||
			!slices.Equal(slices.Collect(maps.Keys(s.TopologySpreadConstraints[1].LabelSelector.MatchLabels)), []string{"x"}) {
			t.Errorf("topologySpreadConstraints %+v: want the first to select the pods (no selector given), the second its own", s.TopologySpreadConstraints)
		}
		if s.NodeSelector["kubernetes.io/os"] != "linux" || len(s.Tolerations) != 1 || s.Tolerations[0].Effect != corev1.TaintEffectNoSchedule {
			t.Errorf("nodeSelector %v, tolerations %v", s.NodeSelector, s.Tolerations)
		}
		if s.Affinity == nil || s.Affinity.NodeAffinity == nil || s.Affinity.PodAntiAffinity != nil {
			t.Errorf("affinity %+v: want the given one instead of the default anti-affinity", s.Affinity)
		}
	})
	t.Run("labels and annotations", func(t *testing.T) {
		d, _ := deploymentOf(t, `podLabels={"team":"pki","app.kubernetes.io/name":"other"}`, `podAnnotations={"example.com/a":"b"}`)
		l, a := d.Spec.Template.Labels, d.Spec.Template.Annotations
		if l["team"] != "pki" || !selects(d.Spec.Selector.MatchLabels, l) {
			t.Errorf("pod labels %v: want team=pki and the selector %v kept", l, d.Spec.Selector.MatchLabels)
		}
		if a["example.com/a"] != "b" || a["checksum/config"] == "" {
			t.Errorf("pod annotations %v: want example.com/a and the config checksum", a)
		}
	})
	t.Run("service account", func(t *testing.T) {
		d, objs := deploymentOf(t, "serviceAccount.create=false", `serviceAccount.name="signet-sa"`)
		if got := ofKind(objs, "ServiceAccount"); len(got) != 0 {
			t.Errorf("serviceAccount.create=false renders %s", objectKey(got[0]))
		}
		if d.Spec.Template.Spec.ServiceAccountName != "signet-sa" {
			t.Errorf("the pods run as %q, want signet-sa", d.Spec.Template.Spec.ServiceAccountName)
		}
		for _, b := range append(ofKind(objs, "ClusterRoleBinding"), ofKind(objs, "RoleBinding")...) {
			subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
			if s := subjects[0].(map[string]any); len(subjects) != 1 || s["name"] != "signet-sa" || s["namespace"] != "signet-knobs" {
				t.Errorf("%s binds %v, want ServiceAccount signet-knobs/signet-sa", objectKey(b), subjects)
			}
		}
		_, objs = deploymentOf(t, `serviceAccount.annotations={"eks.amazonaws.com/role-arn":"arn"}`, "serviceAccount.automount=false")
		var sa corev1.ServiceAccount
		typed(t, only(t, objs, "ServiceAccount"), &sa)
		if sa.Annotations["eks.amazonaws.com/role-arn"] != "arn" || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			t.Errorf("ServiceAccount annotations %v, automount %v", sa.Annotations, sa.AutomountServiceAccountToken)
		}
	})
	t.Run("security context", func(t *testing.T) {
		d, _ := deploymentOf(t, "podSecurityContext.fsGroup=65532", "podSecurityContext.runAsUser=1000",
			`containerSecurityContext.seccompProfile={"type":"RuntimeDefault"}`, "containerSecurityContext.readOnlyRootFilesystem=null")
		p, c := d.Spec.Template.Spec.SecurityContext, d.Spec.Template.Spec.Containers[0].SecurityContext
		if p.FSGroup == nil || *p.FSGroup != 65532 || p.RunAsUser == nil || *p.RunAsUser != 1000 ||
			p.RunAsNonRoot == nil || !*p.RunAsNonRoot || p.SeccompProfile == nil || p.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("pod securityContext %+v: want fsGroup and runAsUser set, the other hardened keys kept", p)
		}
		if c.SeccompProfile == nil || c.ReadOnlyRootFilesystem != nil || c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation ||
			c.Capabilities == nil || !slices.Equal(c.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("container securityContext %+v: want seccompProfile added, readOnlyRootFilesystem removed (null), the rest kept", c)
		}
	})
	t.Run("extras", func(t *testing.T) {
		d, _ := deploymentOf(t, `extraEnv=[{"name":"HTTPS_PROXY","value":"http://proxy:3128"}]`,
			`extraVolumes=[{"name":"extra-ca","configMap":{"name":"corp-ca"}}]`,
			`extraVolumeMounts=[{"name":"extra-ca","mountPath":"/etc/ssl/corp","readOnly":true}]`,
			`resources={"requests":{"cpu":"100m","memory":"128Mi"},"limits":{"memory":"512Mi"}}`, `extraArgs=["-v=4"]`)
		s := d.Spec.Template.Spec
		c := s.Containers[0]
		names := func(env []corev1.EnvVar) (out []string) {
			for _, e := range env {
				out = append(out, e.Name)
			}
			return out
		}
		if got := names(c.Env); !slices.Equal(got, []string{"POD_NAMESPACE", "POD_NAME", "HTTPS_PROXY"}) {
			t.Errorf("env %v", got)
		}
		var vols, mounts []string
		for _, v := range s.Volumes {
			vols = append(vols, v.Name)
		}
		for _, m := range c.VolumeMounts {
			mounts = append(mounts, m.Name+":"+m.MountPath)
		}
		if !slices.Equal(vols, []string{"config", "tls", "extra-ca"}) || !slices.Equal(mounts, []string{"config:/etc/signet/config.yaml", "tls:/etc/signet/tls", "extra-ca:/etc/ssl/corp"}) {
			t.Errorf("volumes %v, mounts %v", vols, mounts)
		}
		if c.Resources.Limits.Memory().String() != "512Mi" || c.Resources.Requests.Cpu().String() != "100m" || c.Args[len(c.Args)-1] != "-v=4" {
			t.Errorf("resources %v, args %v", c.Resources, c.Args)
		}
	})
	t.Run("host network", func(t *testing.T) {
		d, _ := deploymentOf(t, "hostNetwork=true")
		if s := d.Spec.Template.Spec; !s.HostNetwork || s.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
			t.Errorf("hostNetwork %v, dnsPolicy %q; want true, ClusterFirstWithHostNet", s.HostNetwork, s.DNSPolicy)
		}
		d, _ = deploymentOf(t, "hostNetwork=true", `dnsPolicy="Default"`)
		if d.Spec.Template.Spec.DNSPolicy != corev1.DNSDefault {
			t.Errorf("dnsPolicy %q, want the one given", d.Spec.Template.Spec.DNSPolicy)
		}
		d, _ = deploymentOf(t, "hostNetwork=true", "namespace.create=true", `namespace.podSecurity="privileged"`)
		if !d.Spec.Template.Spec.HostNetwork {
			t.Error("hostNetwork with a privileged namespace: not on")
		}
		out, ok := helmRun(t, withSetJSON([]string{"template", "hn", helmChart}, "hostNetwork=true", "namespace.create=true")...)
		if ok || !strings.Contains(out, "hostNetwork: true needs namespace.podSecurity privileged") {
			t.Errorf("hostNetwork in a namespace the chart labels restricted: want a refusal saying why; got ok=%v:\n%s", ok, out)
		}
	})
	t.Run("names", func(t *testing.T) {
		for _, c := range []struct {
			values []string
			want   string
		}{
			{nil, "knobs-signet-watcher"},
			{[]string{`nameOverride="signer"`}, "knobs-signer"},
			{[]string{`fullnameOverride="pki-watcher"`}, "pki-watcher"},
		} {
			d, objs := deploymentOf(t, c.values...)
			for _, o := range objs {
				if o.GetKind() == "ConfigMap" {
					if o.GetName() != c.want+"-config" {
						t.Errorf("%v: %s, want the name %s-config", c.values, objectKey(o), c.want)
					}
					continue
				}
				if name := o.GetName(); name != c.want && !strings.HasPrefix(name, c.want+":") {
					t.Errorf("%v: %s, want the name %s", c.values, objectKey(o), c.want)
				}
			}
			doc, _ := renderedConfig(t, objs)
			if lease, _ := configValue(doc, "leaderElection.leaseName"); lease != c.want || d.Spec.Template.Spec.ServiceAccountName != c.want {
				t.Errorf("%v: Lease %v, ServiceAccount %s; want %s", c.values, lease, d.Spec.Template.Spec.ServiceAccountName, c.want)
			}
		}
	})
}

// TestHelmMonitoring: the ServiceMonitor scrapes the metrics Service's port and selects that
// Service (and is refused without it); the PrometheusRule is deploy/monitoring's rules: the
// chart's copy, files/signet-rules.yaml, is the same file as deploy/monitoring/signet-rules.yaml,
// and the rendered groups are those of deploy/monitoring/prometheusrule.yaml, less the excluded
// ones, with the labels given.
func TestHelmMonitoring(t *testing.T) {
	objs := renderHelm(t, "mon", "signet-mon", "serviceMonitor.enabled=true", `serviceMonitor.labels={"release":"kps"}`, `serviceMonitor.interval="15s"`)
	sm, svc := only(t, objs, "ServiceMonitor"), only(t, objs, "Service")
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	svcPorts, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if !selects(sel, svc.GetLabels()) || sm.GetNamespace() != svc.GetNamespace() {
		t.Errorf("the ServiceMonitor selects %v in %s, not the Service (%v in %s)", sel, sm.GetNamespace(), svc.GetLabels(), svc.GetNamespace())
	}
	if ep := endpoints[0].(map[string]any); len(endpoints) != 1 || ep["port"] != svcPorts[0].(map[string]any)["name"] || ep["interval"] != "15s" || ep["path"] != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %v, want the Service's port %v, /metrics, 15s", endpoints, svcPorts)
	}
	if sm.GetLabels()["release"] != "kps" {
		t.Errorf("ServiceMonitor labels %v, want release=kps", sm.GetLabels())
	}
	if out, ok := helmRun(t, withSetJSON([]string{"template", "mon", helmChart}, "serviceMonitor.enabled=true", "service.enabled=false")...); ok || !strings.Contains(out, "serviceMonitor.enabled needs service.enabled") {
		t.Errorf("a ServiceMonitor without the Service: want a refusal saying why; got ok=%v:\n%s", ok, out)
	}

	const monitoring = "../../deploy/monitoring/"
	if chartCopy, rules := mustRead(t, helmChart+"/files/signet-rules.yaml"), mustRead(t, monitoring+"signet-rules.yaml"); string(chartCopy) != string(rules) {
		t.Errorf("deploy/helm/signet-watcher/files/signet-rules.yaml differs from deploy/monitoring/signet-rules.yaml: "+
			"cp deploy/monitoring/signet-rules.yaml deploy/helm/signet-watcher/files/\n%s", diff.Diff(string(rules), string(chartCopy)))
	}
	var pr struct {
		Spec struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(mustRead(t, monitoring+"prometheusrule.yaml"), &pr); err != nil {
		t.Fatal(err)
	}
	if len(pr.Spec.Groups) == 0 {
		t.Fatal("deploy/monitoring/prometheusrule.yaml: no groups")
	}
	if got := ofKind(renderHelm(t, "mon", "signet-mon"), "PrometheusRule"); len(got) != 0 {
		t.Error("a PrometheusRule rendered by default")
	}
	for _, exclude := range [][]string{{}, {"signet-server"}} {
		rule := only(t, renderHelm(t, "mon", "signet-mon", "prometheusRule.enabled=true", `prometheusRule.labels={"release":"kps"}`,
			"prometheusRule.excludeGroups="+mustJSON(t, exclude)), "PrometheusRule")
		got, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
		var want []any
		for _, g := range pr.Spec.Groups {
			if !slices.Contains(exclude, g["name"].(string)) {
				want = append(want, any(g))
			}
		}
		if len(want) == len(pr.Spec.Groups) && len(exclude) > 0 {
			t.Fatalf("deploy/monitoring has no group %v", exclude)
		}
		if d := diff.Diff(normalizeJSON(t, want), normalizeJSON(t, got)); d != "" {
			t.Errorf("excluding %v: the chart's PrometheusRule groups differ from deploy/monitoring/prometheusrule.yaml's (-want +got):\n%s", exclude, d)
		}
		if rule.GetLabels()["release"] != "kps" || rule.GetNamespace() != "signet-mon" {
			t.Errorf("PrometheusRule %s labels %v: want release=kps in the release namespace", objectKey(rule), rule.GetLabels())
		}
	}
}

// normalizeJSON returns v as JSON decodes it, so values decoded from different YAML
// documents compare equal when they are.
func normalizeJSON(t *testing.T, v any) any {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := yaml.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

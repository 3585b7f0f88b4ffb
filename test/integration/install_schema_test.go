package integration

import (
	"bytes"
	"encoding/json"
	"maps"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// helmRun runs `go tool helm` with args and returns its combined output and whether it
// succeeded, for the tests that expect helm to refuse something.
func helmRun(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"tool", "-modfile=" + toolsModfile, "helm"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("go tool helm %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), err == nil
}

// withSetJSON appends each value as --set-json.
func withSetJSON(args []string, values ...string) []string {
	for _, v := range values {
		args = append(args, "--set-json", v)
	}
	return args
}

// TestHelmSchemaRefusesUnknownKeys: `helm lint` passes with the defaults, and a key the chart
// does not know, at the top level or nested at any depth (in the chart's own values and inside
// the Kubernetes objects it takes), makes `helm lint` and `helm template` (the check `helm
// install` runs) fail with an error naming the key and where it is.
func TestHelmSchemaRefusesUnknownKeys(t *testing.T) {
	if out, ok := helmRun(t, "lint", "--strict", helmChart); !ok {
		t.Fatalf("helm lint --strict with the defaults fails:\n%s", out)
	}
	// With every template on: each renders, and what it renders passes the linter.
	everything := withSetJSON([]string{"lint", "--strict", helmChart}, "podMonitor.enabled=true", "serviceMonitor.enabled=true",
		"prometheusRule.enabled=true", "ledgerWitness.enabled=true", "replicaCount=1", "podDisruptionBudget.maxUnavailable=1",
		`namespace={"create":true,"podSecurity":"privileged"}`, "hostNetwork=true", `tpmApprover.signerNames=["example.com/a-tpm"]`,
		`nodeAddresses.signerNames=["example.com/a-tpm"]`, `signerNames=["kubernetes.io/kube-apiserver-client-kubelet"]`,
		`topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway"}]`)
	if out, ok := helmRun(t, everything...); !ok {
		t.Fatalf("helm lint --strict with every template on fails:\n%s", out)
	}
	for _, c := range []struct {
		set, key, at string
	}{
		{`signerName=["example.com/x"]`, "signerName", "''"},
		{`server.adress="a:1"`, "adress", "'/server'"},
		{`image.tags="v1"`, "tags", "'/image'"},
		{`ledgerWitness.publicKeys={"configMapName":"k","keys":["a.pub"],"key":"b.pub"}`, "key", "'/ledgerWitness/publicKeys'"},
		{`ledgerWitness.enable=true`, "enable", "'/ledgerWitness'"},
		{`podDisruptionBudget.maxUnavailible=1`, "maxUnavailible", "'/podDisruptionBudget'"},
		{`serviceAccount.automountServiceAccountToken=false`, "automountServiceAccountToken", "'/serviceAccount'"},
		{`serviceMonitor.label={"a":"b"}`, "label", "'/serviceMonitor'"},
		{`podSecurityContext.runAsUsr=1`, "runAsUsr", "'/podSecurityContext'"},
		{`containerSecurityContext.capabilities={"drop":["ALL"],"dorp":["x"]}`, "dorp", "'/containerSecurityContext/capabilities'"},
		{`extraVolumeMounts=[{"name":"v","mountpath":"/v"}]`, "mountpath", "'/extraVolumeMounts/0'"},
		{`extraVolumes=[{"name":"v","emptydir":{}}]`, "emptydir", "'/extraVolumes/0'"},
		{`topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"k","whenUnsatisfiable":"ScheduleAnyway","labelselector":{}}]`, "labelselector", "'/topologySpreadConstraints/0'"},
		{`tolerations=[{"key":"k","operater":"Exists"}]`, "operater", "'/tolerations/0'"},
		{`affinity={"podAntiAfinity":{}}`, "podAntiAfinity", "'/affinity'"},
	} {
		t.Run(c.key, func(t *testing.T) {
			for _, args := range [][]string{
				withSetJSON([]string{"lint", helmChart}, c.set),
				withSetJSON([]string{"template", "schema-test", helmChart}, c.set),
			} {
				out, ok := helmRun(t, args...)
				if ok {
					t.Errorf("helm %s with %s succeeds; want the unknown key %q refused", args[0], c.set, c.key)
					continue
				}
				if want := "at " + c.at + ": additional properties '" + c.key + "' not allowed"; !strings.Contains(out, want) {
					t.Errorf("helm %s with %s: want an error saying %q; got:\n%s", args[0], c.set, want, out)
				}
			}
		})
	}
}

// loadSchema reads the chart's values.schema.json.
func loadSchema(t *testing.T) map[string]any {
	t.Helper()
	var schema map[string]any
	if err := json.Unmarshal(mustRead(t, helmChart+"/values.schema.json"), &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	return schema
}

// resolve follows a local $ref ("#/definitions/x") of node.
func resolve(t *testing.T, schema, node map[string]any) map[string]any {
	t.Helper()
	for {
		ref, ok := node["$ref"].(string)
		if !ok {
			return node
		}
		name, ok := strings.CutPrefix(ref, "#/definitions/")
		if !ok {
			t.Fatalf("$ref %s: only #/definitions/ references", ref)
		}
		node, ok = schema["definitions"].(map[string]any)[name].(map[string]any)
		if !ok {
			t.Fatalf("$ref %s: no such definition", ref)
		}
	}
}

// walkSchema calls fn on node and on every schema below it, with its path.
func walkSchema(path string, node any, fn func(path string, node map[string]any)) {
	m, ok := node.(map[string]any)
	if !ok {
		return
	}
	fn(path, m)
	for k, v := range m {
		switch k {
		case "properties", "definitions":
			for name, sub := range v.(map[string]any) {
				walkSchema(path+"/"+name, sub, fn)
			}
		case "items", "additionalProperties", "not":
			walkSchema(path+"/"+k, v, fn)
		case "allOf", "anyOf", "oneOf":
			for _, sub := range v.([]any) {
				walkSchema(path+"/"+k, sub, fn)
			}
		}
	}
}

// TestHelmSchemaIsClosed checks values.schema.json's structure: every object it describes
// either lists its keys and refuses others (additionalProperties: false), or is a map whose
// values it types (labels, annotations: additionalProperties a schema), or is a Kubernetes
// object passed to the API server as is (a $comment saying so). The Kubernetes objects it spells
// out list exactly the fields of their Kubernetes type (k8s.io/api), so the schema refuses a
// misspelt field without refusing a real one. And every top-level value has its default in
// values.yaml.
func TestHelmSchemaIsClosed(t *testing.T) {
	schema := loadSchema(t)
	walkSchema("", schema, func(path string, node map[string]any) {
		isObject := node["type"] == "object" || node["properties"] != nil
		if !isObject {
			return
		}
		switch ap := node["additionalProperties"].(type) {
		case bool:
			if ap {
				t.Errorf("%s: additionalProperties true", path)
			}
		case map[string]any:
			if node["properties"] != nil {
				t.Errorf("%s: a map with listed properties", path)
			}
		default:
			if c, _ := node["$comment"].(string); !strings.Contains(c, "passed as is") {
				t.Errorf("%s: an object without additionalProperties: false (or a $comment saying it is passed as is)", path)
			}
		}
	})

	props := schema["properties"].(map[string]any)
	at := func(path ...string) map[string]any {
		node := map[string]any{"properties": props}
		for _, p := range path {
			node = resolve(t, schema, node)
			if p == "[]" {
				node = node["items"].(map[string]any)
				continue
			}
			next, ok := node["properties"].(map[string]any)[p].(map[string]any)
			if !ok {
				t.Fatalf("values.schema.json has no %v", path)
			}
			node = next
		}
		return resolve(t, schema, node)
	}
	for _, c := range []struct {
		path []string
		typ  reflect.Type
	}{
		{[]string{"podSecurityContext"}, reflect.TypeFor[corev1.PodSecurityContext]()},
		{[]string{"containerSecurityContext"}, reflect.TypeFor[corev1.SecurityContext]()},
		{[]string{"resources"}, reflect.TypeFor[corev1.ResourceRequirements]()},
		{[]string{"tolerations", "[]"}, reflect.TypeFor[corev1.Toleration]()},
		{[]string{"topologySpreadConstraints", "[]"}, reflect.TypeFor[corev1.TopologySpreadConstraint]()},
		{[]string{"affinity"}, reflect.TypeFor[corev1.Affinity]()},
		{[]string{"extraEnv", "[]"}, reflect.TypeFor[corev1.EnvVar]()},
		{[]string{"extraVolumes", "[]"}, reflect.TypeFor[corev1.Volume]()},
		{[]string{"extraVolumeMounts", "[]"}, reflect.TypeFor[corev1.VolumeMount]()},
		{[]string{"imagePullSecrets", "[]"}, reflect.TypeFor[corev1.LocalObjectReference]()},
	} {
		checkSchemaFields(t, schema, strings.Join(c.path, "/"), at(c.path...), c.typ)
	}

	var values map[string]any
	if err := yaml.Unmarshal(mustRead(t, helmChart+"/values.yaml"), &values); err != nil {
		t.Fatal(err)
	}
	for name := range props {
		if _, ok := values[name]; !ok && name != "global" {
			t.Errorf("values.schema.json's %s has no default in values.yaml", name)
		}
	}
}

// checkSchemaFields requires node, the schema of a Kubernetes object of type typ, to list
// exactly typ's JSON fields, and does the same for every field it spells out in turn.
func checkSchemaFields(t *testing.T, schema map[string]any, path string, node map[string]any, typ reflect.Type) {
	t.Helper()
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		typ = typ.Elem()
	}
	fields := map[string]reflect.Type{}
	var collect func(reflect.Type)
	collect = func(st reflect.Type) {
		for i := range st.NumField() {
			f := st.Field(i)
			tag := f.Tag.Get("json")
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous || strings.Contains(tag, ",inline") {
				collect(f.Type)
				continue
			}
			if name != "" && name != "-" {
				fields[name] = f.Type
			}
		}
	}
	collect(typ)
	props, _ := node["properties"].(map[string]any)
	want, got := slices.Sorted(maps.Keys(fields)), slices.Sorted(maps.Keys(props))
	if !slices.Equal(want, got) {
		t.Errorf("values.schema.json's %s lists %v; the Kubernetes type %s has %v", path, got, typ, want)
		return
	}
	for name, sub := range props {
		sub := resolve(t, schema, sub.(map[string]any))
		if items, ok := sub["items"].(map[string]any); ok && sub["type"] == "array" {
			sub = resolve(t, schema, items)
		}
		if sub["properties"] != nil {
			checkSchemaFields(t, schema, path+"/"+name, sub, fields[name])
		}
	}
}

package integration

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/signet-pki/signet/watcher"
)

// configLeaves returns the dotted JSON paths of every leaf of the configuration type t (a
// struct): a field whose type, pointers removed, is not a struct, or marshals itself
// (metav1.Duration). Embedded and inline fields are walked as their parent's.
func configLeaves(t reflect.Type, prefix string) []string {
	marshaler := reflect.TypeFor[json.Marshaler]()
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		inline := (f.Anonymous && name == "") || strings.Contains(tag, ",inline")
		if name == "" {
			name = f.Name
		}
		path := prefix + name
		if inline {
			path = strings.TrimSuffix(prefix, ".")
		}
		if ft.Kind() == reflect.Struct && !ft.Implements(marshaler) && !reflect.PointerTo(ft).Implements(marshaler) {
			next := path + "."
			if path == "" {
				next = ""
			}
			out = append(out, configLeaves(ft, next)...)
			continue
		}
		out = append(out, path)
	}
	return out
}

// fieldAt returns the field of v (a struct) at the dotted JSON path, following pointers.
func fieldAt(t *testing.T, v reflect.Value, path string) reflect.Value {
	t.Helper()
	for name := range strings.SplitSeq(path, ".") {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}
			}
			v = v.Elem()
		}
		found := false
		for i := range v.NumField() {
			if n, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ","); n == name {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			t.Fatalf("config path %s: no field %q", path, name)
		}
	}
	return v
}

// configValue is the value at the dotted path of config.yaml decoded as a map, and whether it
// is there.
func configValue(doc map[string]any, path string) (any, bool) {
	var cur any = doc
	for name := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[name]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// renderedConfig returns the config.yaml of the rendered objects: as a map, and as the watcher
// loads it (LoadConfig, which is strict: an unknown key fails it).
func renderedConfig(t *testing.T, objs []*unstructured.Unstructured) (map[string]any, *watcher.Config) {
	t.Helper()
	var raw string
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" {
			raw, _, _ = unstructured.NestedString(o.Object, "data", "config.yaml")
		}
	}
	if raw == "" {
		t.Fatal("no ConfigMap with a config.yaml rendered")
	}
	var doc map[string]any
	if err := yaml.UnmarshalStrict([]byte(raw), &doc); err != nil {
		t.Fatalf("config.yaml: %v\n%s", err, raw)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := watcher.LoadConfig(path)
	if err != nil {
		t.Fatalf("the watcher does not load the rendered config.yaml: %v\n%s", err, raw)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("the rendered config.yaml does not validate: %v\n%s", err, raw)
	}
	return doc, cfg
}

// TestHelmValuesReachEveryConfigField walks the watcher's configuration type (watcher.Config,
// by its JSON field names) and requires every field to be either set through a value of the
// chart (settable: the value, and what config.yaml must then hold) or derived by the chart from
// its own objects (derived: what config.yaml must hold, absent meaning the watcher's own
// default, with why). A field added to the configuration fails here until the chart sets it or
// says why it derives it; a stale entry fails too. The chart is rendered once with every
// settable value changed from its default: each must be in config.yaml, the watcher must load
// and validate the file, and every settable field as the watcher reads it must differ from
// what it reads from the defaults' config.yaml.
func TestHelmValuesReachEveryConfigField(t *testing.T) {
	const release, namespace = "values-walk", "signet-values"
	const fullname = release + "-signet-watcher"
	// config path → the --set-json value (path=JSON) and the JSON config.yaml must then hold.
	settable := map[string]struct{ set, want string }{
		"signerNames":                        {`signerNames=["it.signet.dev/a","it.signet.dev/b"]`, ``},
		"clusterName":                        {`clusterName="values-walk"`, ``},
		"server.address":                     {`server.address="signet-1.it.example:9443"`, ``},
		"server.addresses":                   {`server.addresses=["signet-2.it.example:9443"]`, ``},
		"server.serverName":                  {`server.serverName="signet.it.example"`, ``},
		"workers":                            {`workers=7`, ``},
		"rpcTimeout":                         {`rpcTimeout="3s"`, ``},
		"backoff.initial":                    {`backoff.initial="100ms"`, ``},
		"backoff.max":                        {`backoff.max="20s"`, ``},
		"signedEvents":                       {`signedEvents="all"`, ``},
		"podCertificateRequests.enabled":     {`podCertificateRequests.enabled=false`, ``},
		"podCertificateRequests.giveUpAfter": {`podCertificateRequests.giveUpAfter="12m"`, ``},
		"trustBundles.enabled":               {`trustBundles.enabled=false`, ``},
		"trustBundles.period":                {`trustBundles.period="5s"`, ``},
		"tpmApprover.signerNames":            {`tpmApprover.signerNames=["it.signet.dev/a"]`, ``},
		"nodeAddresses.signerNames":          {`nodeAddresses.signerNames=["it.signet.dev/b"]`, ``},
		"ledgerWitness.publicKeyFiles": {`ledgerWitness.publicKeys={"configMapName":"it-keys","keys":["one.pub","two.pub"]}`,
			`["/etc/signet/ledger-witness/one.pub","/etc/signet/ledger-witness/two.pub"]`},
		"ledgerWitness.origins":        {`ledgerWitness.origins=["signet-ledger/0123456789abcdef"]`, ``},
		"ledgerWitness.period":         {`ledgerWitness.period="30s"`, ``},
		"ledgerWitness.configMapName":  {`ledgerWitness.configMapName="it-witness"`, ``},
		"ledgerWitness.signOnAlarm":    {`ledgerWitness.signOnAlarm=true`, ``},
		"leaderElection.enabled":       {`leaderElection.enabled=false`, ``},
		"leaderElection.leaseDuration": {`leaderElection.leaseDuration="20s"`, ``},
		"leaderElection.renewDeadline": {`leaderElection.renewDeadline="12s"`, ``},
		"leaderElection.retryPeriod":   {`leaderElection.retryPeriod="3s"`, ``},
	}
	// config path → the JSON config.yaml holds whatever the values ("" = absent), and why.
	derived := map[string]struct{ want, why string }{
		"apiVersion":               {`"signet.dev/v1alpha1"`, "the file format"},
		"kind":                     {`"WatcherConfiguration"`, "the file format"},
		"server.caFile":            {`"/etc/signet/tls/ca.crt"`, "the Secret tls.secretName, mounted at /etc/signet/tls"},
		"server.certFile":          {`"/etc/signet/tls/tls.crt"`, "the Secret tls.secretName, mounted at /etc/signet/tls"},
		"server.keyFile":           {`"/etc/signet/tls/tls.key"`, "the Secret tls.secretName, mounted at /etc/signet/tls"},
		"metricsAddress":           {`":9465"`, "the container's metrics port, which the probes, the Service, the monitors and the NetworkPolicy name"},
		"leaderElection.namespace": {``, "the release namespace ($POD_NAMESPACE), where the chart's leader-election Role is"},
		"leaderElection.leaseName": {`"` + fullname + `"`, "the chart's name, which the leader-election Role grants by name"},
		"leaderElection.identity":  {``, "the pod's name ($POD_NAME)"},
		"ledgerWitness.namespace":  {``, "the release namespace, where the chart's ledger-witness Role is"},
	}

	leaves := configLeaves(reflect.TypeFor[watcher.Config](), "")
	for _, leaf := range leaves {
		_, s := settable[leaf]
		_, d := derived[leaf]
		if !s && !d {
			t.Errorf("watcher.Config's field %s cannot be set through the chart's values: add a value (values.yaml, values.schema.json, "+
				"the config in templates/_helpers.tpl, the chart's README) and list it here, or list it as derived and say why", leaf)
		}
	}
	for path := range settable {
		if !slices.Contains(leaves, path) {
			t.Errorf("settable %s is no field of watcher.Config", path)
		}
	}
	for path := range derived {
		if !slices.Contains(leaves, path) {
			t.Errorf("derived %s is no field of watcher.Config", path)
		}
	}

	values := []string{"ledgerWitness.enabled=true"}
	for _, path := range slices.Sorted(maps.Keys(settable)) {
		values = append(values, settable[path].set)
	}
	doc, cfg := renderedConfig(t, renderHelm(t, release, namespace, values...))
	_, defaults := renderedConfig(t, renderHelm(t, release, namespace, "ledgerWitness.enabled=true"))

	for path, s := range settable {
		want := s.want
		if want == "" {
			_, want, _ = strings.Cut(s.set, "=")
		}
		got, ok := configValue(doc, path)
		if !ok {
			t.Errorf("%s: set with %s, config.yaml has no %s", path, s.set, path)
			continue
		}
		if !jsonEqual(t, got, want) {
			t.Errorf("%s: set with %s, config.yaml has %s: %v, want %s", path, s.set, path, got, want)
		}
		if reflect.DeepEqual(fieldAt(t, reflect.ValueOf(cfg), path).Interface(), fieldAt(t, reflect.ValueOf(defaults), path).Interface()) {
			t.Errorf("%s: set with %s, the watcher reads the same %s as with the default values", path, s.set, path)
		}
	}
	for path, d := range derived {
		got, ok := configValue(doc, path)
		switch {
		case d.want == "" && ok:
			t.Errorf("%s: config.yaml has %v; the chart leaves it to the watcher (%s)", path, got, d.why)
		case d.want != "" && !ok:
			t.Errorf("%s: config.yaml has none, want %s (%s)", path, d.want, d.why)
		case d.want != "" && !jsonEqual(t, got, d.want):
			t.Errorf("%s: config.yaml has %v, want %s (%s)", path, got, d.want, d.why)
		}
	}
}

// jsonEqual reports whether got (decoded YAML) equals the JSON text want.
func jsonEqual(t *testing.T, got any, want string) bool {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: %v", want, err)
	}
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var gg any
	if err := json.Unmarshal(g, &gg); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(gg, w)
}

package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestValidateWatcher(t *testing.T) {
	code, out, errOut := runCmd("validate", "watcher", "../../deploy/watcher/config.yaml")
	if code != 0 || out != "../../deploy/watcher/config.yaml: a valid WatcherConfiguration\n" {
		t.Errorf("the deployed config: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	bad := writeTemp(t, "watcher.yaml", []byte(`apiVersion: signet.dev/v1alpha1
kind: WatcherConfiguration
signerNames: [bad, example.com/a, example.com/a]
workers: -1
server:
  address: signet:8443
  caFile: ca.crt
  certFile: tls.crt
  keyFile: tls.key
`))
	code, out, _ = runCmd("validate", "watcher", bad)
	for _, want := range []string{
		bad + ": not a valid WatcherConfiguration, 3 problems:\n",
		"  - signerNames[0]: \"bad\" must look like domain/path",
		"  - signerNames[2]: \"example.com/a\" is listed twice\n",
		"  - workers: is -1, must be at least 1\n",
	} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("invalid config: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
	code, out, _ = runCmd("validate", "watcher", bad, "-o", "json")
	var v validation
	if err := json.Unmarshal([]byte(out), &v); code != 1 || err != nil || v.Valid || len(v.Problems) != 3 ||
		v.Problems[2] != (problem{Field: "workers", Message: "is -1, must be at least 1"}) {
		t.Errorf("-o json: exit %d, %v, %+v", code, err, v)
	}
	unknown := writeTemp(t, "watcher.yaml", []byte("apiVersion: signet.dev/v1alpha1\nkind: WatcherConfiguration\nserver:\n  adress: x\n  Address: y\n"))
	code, out, _ = runCmd("validate", "watcher", unknown)
	if code != 1 || !strings.Contains(out, "  - server.adress") || !strings.Contains(out, "  - server.Address") || strings.Count(out, ": unknown field\n") != 2 {
		t.Errorf("unknown fields: exit %d, output:\n%s", code, out)
	}
	if code, out, errOut = runCmd("validate", "watcher", filepath.Join(t.TempDir(), "none.yaml")); code != 2 || out != "" || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing file: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestValidateServer checks server files with a signet-server built from this tree.
func TestValidateServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds signet-server")
	}
	bin := filepath.Join(t.TempDir(), "signet-server")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/signet-pki/signet/cmd/signet-server").CombinedOutput(); err != nil {
		t.Fatalf("building signet-server: %v\n%s", err, out)
	}
	code, out, errOut := runCmd("validate", "server", "../../deploy/server/server.yaml", "--signet-server", bin)
	if code != 0 || !strings.HasPrefix(out, "../../deploy/server/server.yaml: a valid ServerConfiguration\n") ||
		!strings.Contains(out, "signer kubernetes.io/kubelet-serving: profile kubelet-serving, certificates live up to 8760h") ||
		!strings.Contains(out, "ride out a signing outage of about 876h") {
		t.Errorf("the deployed config: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	bad := writeTemp(t, "server.yaml", []byte(`apiVersion: signet.dev/v1alpha1
kind: ServerConfiguration
grpc:
  address: nope
tls: {certFile: s.crt, keyFile: s.key, clientCAFile: ca.crt}
ledger: {dir: /var/lib/signet/ledger}
clients: [{identity: w, signers: [example.com/a]}]
signers:
- name: example.com/a
  key: ca.key
  certificate: ca.crt
  maxLifetime: 1m
  profile: {name: kube-apiserver-client}
`))
	code, out, errOut = runCmd("validate", "server", bad, "--signet-server", bin, "-o", "json")
	var v validation
	if err := json.Unmarshal([]byte(out), &v); code != 1 || err != nil {
		t.Fatalf("invalid config: exit %d, %v, stderr %q\n%s", code, err, errOut, out)
	}
	fields := []string{}
	for _, p := range v.Problems {
		fields = append(fields, p.Field)
	}
	if v.Valid || v.Kind != "ServerConfiguration" || !reflect.DeepEqual(fields, []string{"grpc.address", "signers[0].maxLifetime"}) {
		t.Errorf("problems %+v", v)
	}
	if code, _, errOut = runCmd("validate", "server", bad, "--signet-server", filepath.Join(t.TempDir(), "none")); code != 2 || !strings.Contains(errOut, "--validate-config") {
		t.Errorf("missing signet-server: exit %d, stderr %q", code, errOut)
	}
}

func TestParseProblem(t *testing.T) {
	for msg, want := range map[string]problem{
		"signers[0].maxLifetime -1h0m0s is below the 10m floor": {"signers[0].maxLifetime", 0, "-1h0m0s is below the 10m floor"},
		"grpc.address: address nope: missing port in address":   {"grpc.address", 0, "address nope: missing port in address"},
		"clients: at least one client identity is required":     {"clients", 0, "at least one client identity is required"},
		`unknown field "server.adress"`:                         {"server.adress", 0, "unknown field"},
		`unknown field "server.adress" (line 6)`:                {"server.adress", 6, "unknown field"},
		"workers (line 4): want a number, found a string":       {"workers", 4, "want a number, found a string"},
		`parsing config x: duplicate field "workers"`:           {"workers", 0, "duplicate field"},
		"apiVersion/kind is a/b, want c/d":                      {"apiVersion/kind", 0, "is a/b, want c/d"},
		"error converting YAML to JSON: yaml: line 3: oops":     {"", 0, "error converting YAML to JSON: yaml: line 3: oops"},
	} {
		if got := parseProblem(msg); got != want {
			t.Errorf("parseProblem(%q) = %+v, want %+v", msg, got, want)
		}
	}
}

package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/signet-pki/signet/internal/devpki"
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
		"  - signerNames[0] (line 3): \"bad\" must look like domain/path",
		"  - signerNames[2] (line 3): \"example.com/a\" is listed twice\n",
		"  - workers (line 4): is -1, must be at least 1\n",
	} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("invalid config: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
	code, out, _ = runCmd("validate", "watcher", bad, "-o", "json")
	var v validation
	if err := json.Unmarshal([]byte(out), &v); code != 1 || err != nil || v.Valid || len(v.Problems) != 3 ||
		v.Problems[2] != (problem{Field: "workers", Line: 4, Message: "is -1, must be at least 1"}) {
		t.Errorf("-o json: exit %d, %v, %+v", code, err, v)
	}
	// A duration that is not one names its field and line, and hides no other problem.
	durations := writeTemp(t, "watcher.yaml", []byte(strings.Replace(string(mustRead(t, bad)), "workers: -1\n", "workers: -1\nrpcTimeout: 5seconds\nbackoff: {initial: 10}\n", 1)))
	code, out, _ = runCmd("validate", "watcher", durations)
	for _, want := range []string{
		durations + ": not a valid WatcherConfiguration, 5 problems:\n",
		"  - rpcTimeout (line 5): \"5seconds\" is not a duration",
		"  - backoff.initial (line 6): want a duration such as 24h, 90m or 1h30m, found 10",
		"  - workers (line 4): is -1, must be at least 1\n",
	} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("wrong durations: exit %d, output lacks %q:\n%s", code, want, out)
		}
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

// TestValidateWatcherFiles: --check-files checks the TLS files and the witness's public keys as
// a watcher start reads them; without it, files are not looked at (they live in the pod).
func TestValidateWatcherFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := devpki.Ensure(devpki.Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const head = "apiVersion: signet.dev/v1alpha1\nkind: WatcherConfiguration\nsignerNames: [example.com/a]\n"
	good := write("good.yaml", head+"server: {address: \"signet:8443\", caFile: tls-ca.crt, certFile: client.crt, keyFile: client.key}\n")
	if code, out, errOut := runCmd("validate", "watcher", "--check-files", good); code != 0 {
		t.Errorf("files in place: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	bad := write("bad.yaml", head+"server: {address: \"signet:8443\", caFile: none.crt, certFile: client.crt, keyFile: client.key}\n")
	if code, out, _ := runCmd("validate", "watcher", bad); code != 0 {
		t.Errorf("without --check-files: exit %d, %s", code, out)
	}
	code, out, _ := runCmd("validate", "watcher", "--check-files", bad)
	if code != 1 || !strings.Contains(out, "  - server.caFile (line 4): stat "+filepath.Join(dir, "none.crt")+": no such file or directory\n") {
		t.Errorf("missing CA file: exit %d:\n%s", code, out)
	}
	other := write("other.yaml", head+"server: {address: \"signet:8443\", caFile: tls-ca.crt, certFile: client.crt, keyFile: "+devpki.SignerCAKey+"}\n"+
		"ledgerWitness: {publicKeyFiles: [\""+filepath.Join(dir, "tls-ca.crt")+"\"]}\n")
	code, out, _ = runCmd("validate", "watcher", "--check-files", other)
	if code != 1 || !strings.Contains(out, "  - server.keyFile (line 4): ") || !strings.Contains(out, "are not a TLS pair") ||
		!strings.Contains(out, "  - ledgerWitness.publicKeyFiles[0] (line 5): ") {
		t.Errorf("key of another certificate, a certificate for a public key: exit %d:\n%s", code, out)
	}
}

// serverFiles writes a valid server configuration (the dev state, its signer as
// kube-controller-manager's kubelet-serving signer, its files in place) and an invalid one
// whose files are missing, and returns their paths.
func serverFiles(t *testing.T) (good, bad string) {
	t.Helper()
	dir := t.TempDir()
	good, err := devpki.Ensure(devpki.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	data := strings.Replace(string(mustRead(t, good)), "  - name: signet.dev/dev\n", "  - name: kubernetes.io/kubelet-serving\n", 1)
	data = data[:strings.Index(data, "    profile:\n")] + "    profile: {name: kubelet-serving}\n"
	good = filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(good, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	bad = writeTemp(t, "server.yaml", []byte(`apiVersion: signet.dev/v1alpha1
kind: ServerConfiguration
grpc:
  address: nope
tls: {certFile: s.crt, keyFile: s.key, clientCAFile: ca.crt}
ledger: {dir: ledger}
clients: [{identity: w, signers: [example.com/a]}]
signers:
- name: example.com/a
  key: ca.key
  certificate: ca.crt
  maxLifetime: 24hours
  profile: {name: kube-apiserver-client}
`))
	return good, bad
}

// TestValidateServer checks server files in process: a valid one (its files exist) with each
// signer's lifetimes, and an invalid one with every problem, each with its field and line, the
// files it names included; nothing is created.
func TestValidateServer(t *testing.T) {
	good, bad := serverFiles(t)
	code, out, errOut := runCmd("validate", "server", good)
	if code != 0 || !strings.HasPrefix(out, good+": a valid ServerConfiguration\n") ||
		!strings.Contains(out, "signer kubernetes.io/kubelet-serving: profile kubelet-serving, certificates live up to 8760h") ||
		!strings.Contains(out, "ride out a signing outage of about 876h") {
		t.Errorf("a valid config: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(good), "ledger")); !os.IsNotExist(err) {
		t.Errorf("validating created the ledger folder: %v", err)
	}

	code, out, errOut = runCmd("validate", "server", bad, "-o", "json")
	var v validation
	if err := json.Unmarshal([]byte(out), &v); code != 1 || err != nil {
		t.Fatalf("invalid config: exit %d, %v, stderr %q\n%s", code, err, errOut, out)
	}
	got := []string{}
	for _, p := range v.Problems {
		got = append(got, p.Field+":"+strconv.Itoa(p.Line))
	}
	want := []string{"signers[0].maxLifetime:12", "grpc.address:4", "tls.certFile:5", "tls.keyFile:5", "tls.clientCAFile:5", "signers[0].certificate:11", "signers[0].key:10"}
	if v.Valid || v.Kind != "ServerConfiguration" || !reflect.DeepEqual(got, want) {
		t.Errorf("problems %q, want %q:\n%+v", got, want, v)
	}
	if entries, err := os.ReadDir(filepath.Dir(bad)); err != nil || len(entries) != 1 {
		t.Errorf("the folder of the file holds %v (%v), want only the file", entries, err)
	}
	code, out, _ = runCmd("validate", "server", bad)
	if code != 1 || !strings.Contains(out, bad+": not a valid ServerConfiguration, 7 problems:\n") ||
		!strings.Contains(out, "  - signers[0].maxLifetime (line 12): ") {
		t.Errorf("text output: exit %d:\n%s", code, out)
	}
	// --signet-server, from when signetctl ran the server to check, is accepted and ignored.
	if code, out, errOut = runCmd("validate", "server", good, "--signet-server", filepath.Join(t.TempDir(), "none")); code != 0 ||
		!strings.HasPrefix(out, good+": a valid ServerConfiguration\n") || !strings.Contains(errOut, "--signet-server is ignored") {
		t.Errorf("--signet-server: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut = runCmd("validate", "server", filepath.Join(t.TempDir(), "none.yaml")); code != 2 || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing file: exit %d, stderr %q", code, errOut)
	}
	if code, out, _ = runCmd("validate", "server", "--help"); code != 0 || !strings.Contains(out, "signet-server --validate-config FILE") {
		t.Errorf("help does not say where lint names are checked: exit %d\n%s", code, out)
	}
}

// TestValidateServerAgreesWithSignetServer: signetctl and signet-server --validate-config, built
// from this tree, report the same lifetimes for a valid file and the same problems for an
// invalid one; only the lint names, which need zlint, are the server's alone.
func TestValidateServerAgreesWithSignetServer(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "signet-server")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/signet-pki/signet/cmd/signet-server").CombinedOutput(); err != nil {
		t.Fatalf("building signet-server: %v\n%s", err, out)
	}
	server := func(path string) (int, []string, []string) {
		var stdout, stderr strings.Builder
		c := exec.Command(bin, "--validate-config", path)
		c.Stdout, c.Stderr = &stdout, &stderr
		err := c.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("running signet-server: %v", err)
		}
		return c.ProcessState.ExitCode(), lines(stdout.String()), lines(stderr.String())
	}
	ctl := func(path string) (int, validation) {
		code, out, errOut := runCmd("validate", "server", path, "-o", "json")
		var v validation
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("signetctl validate server %s: exit %d, %v, stderr %q", path, code, err, errOut)
		}
		return code, v
	}
	good, bad := serverFiles(t)

	code, stdout, _ := server(good)
	ctlCode, v := ctl(good)
	if want := append([]string{"configuration is valid"}, v.Signers...); code != 0 || ctlCode != 0 || !reflect.DeepEqual(stdout, want) {
		t.Errorf("a valid file: signet-server exit %d, %q; signetctl exit %d, %q", code, stdout, ctlCode, want)
	}

	code, _, stderr := server(bad)
	ctlCode, v = ctl(bad)
	var fromServer []problem
	for _, line := range stderr[1:] {
		fromServer = append(fromServer, parseProblem(line))
	}
	if code != 1 || ctlCode != 1 || len(stderr) == 0 || stderr[0] != "invalid configuration:" || !reflect.DeepEqual(fromServer, v.Problems) {
		t.Errorf("an invalid file: signet-server exit %d, %q\nsignetctl exit %d, %+v", code, stderr, ctlCode, v.Problems)
	}

	lint := filepath.Join(filepath.Dir(good), "lint.yaml")
	if err := os.WriteFile(lint, append(mustRead(t, good), "lint: {sources: [NoSuchSource]}\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = server(lint)
	if ctlCode, v = ctl(lint); code != 1 || !strings.Contains(strings.Join(stderr, "\n"), "lint (line ") || ctlCode != 0 || !v.Valid {
		t.Errorf("an unknown lint source: signet-server exit %d, %q; signetctl exit %d (it does not check lint names)", code, stderr, ctlCode)
	}
}

// lines splits s into its non-empty lines.
func lines(s string) []string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if line != "" {
			out = append(out, line)
		}
	}
	return out
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseProblem(t *testing.T) {
	for msg, want := range map[string]problem{
		"signers[0].maxLifetime -1h0m0s is below the 10m floor": {Field: "signers[0].maxLifetime", Line: 0, Message: "-1h0m0s is below the 10m floor"},
		"grpc.address: address nope: missing port in address":   {Field: "grpc.address", Line: 0, Message: "address nope: missing port in address"},
		"clients: at least one client identity is required":     {Field: "clients", Line: 0, Message: "at least one client identity is required"},
		`unknown field "server.adress"`:                         {Field: "server.adress", Line: 0, Message: "unknown field"},
		`unknown field "server.adress" (line 6)`:                {Field: "server.adress", Line: 6, Message: "unknown field"},
		"workers (line 4): want a number, found a string":       {Field: "workers", Line: 4, Message: "want a number, found a string"},
		`parsing config x: duplicate field "workers"`:           {Field: "workers", Line: 0, Message: "duplicate field"},
		"apiVersion/kind is a/b, want c/d":                      {Field: "apiVersion/kind", Line: 0, Message: "is a/b, want c/d"},
		"error converting YAML to JSON: yaml: line 3: oops":     {Field: "", Line: 0, Message: "error converting YAML to JSON: yaml: line 3: oops"},
	} {
		if got := parseProblem(msg); got != want {
			t.Errorf("parseProblem(%q) = %+v, want %+v", msg, got, want)
		}
	}
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/version"
)

// devConfig writes the --dev state into a new folder and returns its configuration file.
func devConfig(t *testing.T) string {
	t.Helper()
	path, err := devpki.Ensure(devpki.Options{Dir: filepath.Join(t.TempDir(), "dev"), PodIdentitySigner: devpki.DefaultPodIdentitySigner})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// runMain runs the command in-process and returns its exit code, stdout and stderr.
func runMain(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestVersionFlag(t *testing.T) {
	for _, arg := range []string{"--version", "-version"} {
		code, stdout, stderr := runMain(arg)
		if code != 0 || stdout != version.String()+"\n" || stderr != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 0, %q, nothing", arg, code, stdout, stderr, version.String())
		}
	}
}

// TestValidateConfig: --validate-config prints "configuration is valid" and exits 0, or every
// problem with its field, one a line, and exits 1, as signet-watcher's does; it neither opens
// the keys nor creates the ledger.
// devValid is --validate-config's answer for the dev configuration: valid, and each signer's
// lifetime with the outage its clients ride out.
const devValid = "configuration is valid\nsigner signet.dev/dev: profile custom, certificates live up to 24h (never past the CA certificate's NotAfter); clients renewing at 70–90 % of a certificate's life ride out a signing outage of about 2h24m\nsigner signet.dev/pod-identity: profile pod-identity, certificates live up to 24h (never past the CA certificate's NotAfter); clients renewing at 70–90 % of a certificate's life ride out a signing outage of about 2h24m\n"

func TestValidateConfig(t *testing.T) {
	good := devConfig(t)
	dir := filepath.Dir(good)

	// Its key file does not exist (a start would fail: reported) and its ledger folder is not
	// there yet (a start creates it: not created by the check).
	unopened := filepath.Join(dir, "unopened.yaml")
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.ReplaceAll(data, []byte("signer-ca.key"), []byte("missing.key"))
	data = bytes.ReplaceAll(data, []byte("dir: ledger"), []byte("dir: not-yet-ledger"))
	if !bytes.Contains(data, []byte("missing.key")) || !bytes.Contains(data, []byte("not-yet-ledger")) {
		t.Fatalf("the dev config changed shape; update the test:\n%s", data)
	}
	writeFile(t, unopened, string(data))

	broken := filepath.Join(dir, "broken.yaml")
	writeFile(t, broken, `apiVersion: signet.dev/v1alpha1
kind: ServerConfiguration
grpc: {address: nope}
signers: [{name: not-a-signer-name}]
`)
	unknown := filepath.Join(dir, "unknown.yaml")
	writeFile(t, unknown, "apiVersion: signet.dev/v1alpha1\nkind: ServerConfiguration\ncolour: blue\n")

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr []string // each must appear in stderr
	}{
		{name: "file argument", args: []string{"--validate-config", good}, stdout: devValid},
		{name: "--config", args: []string{"--config", good, "--validate-config"}, stdout: devValid},
		{name: "missing key file", args: []string{"--validate-config", unopened}, code: 1,
			stderr: []string{"invalid configuration:\n", "\nsigners[0].key (line 17): " + filepath.Join(dir, "missing.key") + " does not exist\n"}},
		{
			name: "flags are applied", args: []string{"--config", good, "--validate-config", "--listen", "no-port", "--http-listen", "also-none"}, code: 1,
			stderr: []string{"invalid configuration:\n", "\ngrpc.address (set by --listen): address no-port: missing port in address\n", "\nhttp.address (set by --http-listen): address also-none: missing port in address\n"},
		},
		{
			name: "every problem with its field", args: []string{"--validate-config", broken}, code: 1,
			stderr: []string{
				"invalid configuration:\n", "\ngrpc.address (line 3): ", "\ntls.certFile is required", "\ntls.keyFile is required",
				"\ntls.clientCAFile is required", "\nledger.dir is required", "\nclients: ", "\nsigners[0].name (line 4): ",
				"\nsigners[0].key (line 4): is required", "\nsigners[0].profile (line 4): name: required",
			},
		},
		{name: "unknown field", args: []string{"--validate-config", unknown}, code: 1, stderr: []string{"invalid configuration:\n", `unknown field "colour"`}},
		{name: "missing file", args: []string{"--validate-config", filepath.Join(dir, "nothere.yaml")}, code: 1, stderr: []string{"nothere.yaml: no such file or directory"}},
		{name: "no file", args: []string{"--validate-config"}, code: 2, stderr: []string{"--validate-config FILE"}},
		{name: "with --dev", args: []string{"--validate-config", "--dev"}, code: 2, stderr: []string{"--validate-config FILE"}},
		{name: "two files", args: []string{"--validate-config", good, broken}, code: 2, stderr: []string{"unexpected argument"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runMain(tc.args...)
			if code != tc.code || stdout != tc.stdout {
				t.Errorf("exit %d, stdout %q; want %d, %q (stderr %q)", code, stdout, tc.code, tc.stdout, stderr)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr does not contain %q:\n%s", want, stderr)
				}
			}
			if len(tc.stderr) == 0 && stderr != "" {
				t.Errorf("stderr %q, want nothing", stderr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "not-yet-ledger")); !os.IsNotExist(err) {
		t.Errorf("--validate-config touched the ledger folder: %v", err)
	}
}

func TestUnexpectedArgument(t *testing.T) {
	code, _, stderr := runMain("--config", "x.yaml", "serve")
	if code != 2 || !strings.Contains(stderr, `unexpected argument "serve"`) {
		t.Errorf("exit %d, stderr %q; want 2 and the argument named", code, stderr)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBuiltBinary builds signet-server with the link-time values `make build` sets and checks
// that --version and the build_info metric of a running server report them.
func TestBuiltBinary(t *testing.T) {
	const (
		pkg    = "github.com/signet-pki/signet/internal/version"
		want   = "v9.8.7-3-gabcdef0"
		commit = "abcdef0123456789abcdef0123456789abcdef01"
		date   = "2025-06-01T10:00:00Z"
	)
	bin := filepath.Join(t.TempDir(), "signet-server")
	build := exec.Command("go", "build", "-o", bin,
		"-ldflags=-X="+pkg+".version="+want+" -X="+pkg+".commit="+commit+" -X="+pkg+".commitDate="+date, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("--version: %v", err)
	}
	wantLine := "signet " + want + " (commit " + commit + ", " + date + ", "
	if !strings.HasPrefix(string(out), wantLine) {
		t.Errorf("--version = %q, want it to start with %q", out, wantLine)
	}
	if out, err := exec.Command(bin, "--validate-config", devConfig(t)).CombinedOutput(); err != nil || string(out) != devValid {
		t.Errorf("--validate-config of the dev config: %v, %q", err, out)
	}

	// A running server's build_info.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--dev", "--dev-state-dir", filepath.Join(t.TempDir(), "dev"),
		"--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-format", "json")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	addr := httpAddress(t, stderr)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(metrics), `signet_server_build_info{commit="`+commit+`",go_version="`) ||
		!strings.Contains(string(metrics), `version="`+want+`"} 1`) {
		t.Errorf("build_info does not carry version %s and commit %s:\n%s", want, commit, grepLines(string(metrics), "build_info"))
	}
}

// httpAddress reads the server's JSON log until the "serving HTTP" line and returns its
// address; it keeps draining the log afterwards.
func httpAddress(t *testing.T, log io.Reader) string {
	t.Helper()
	lines := bufio.NewScanner(log)
	for lines.Scan() {
		var line struct{ Msg, Address string }
		if json.Unmarshal(lines.Bytes(), &line) == nil && line.Msg == "serving HTTP" {
			go func() { _, _ = io.Copy(io.Discard, log) }()
			return line.Address
		}
		t.Log(lines.Text())
	}
	t.Fatalf("the server stopped before serving HTTP: %v", lines.Err())
	return ""
}

func grepLines(text, substr string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

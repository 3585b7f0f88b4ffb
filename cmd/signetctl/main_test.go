package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/signet-pki/signet/internal/devpki"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
)

// TestMain keeps the tests away from the environment's connection settings and config file.
func TestMain(m *testing.M) {
	for _, env := range []string{envServer, envServerName, envTLSCA, envTLSCert, envTLSKey, envDevStateDir, envTimeout, envConfig} {
		os.Unsetenv(env)
	}
	dir, err := os.MkdirTemp("", "signetctl-test-config")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runCmd runs signetctl with args and returns the exit code, stdout and stderr.
func runCmd(args ...string) (int, string, string) {
	return runIn(nil, args...)
}

// runIn runs signetctl with args and stdin in, and returns the exit code, stdout and stderr.
func runIn(in []byte, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	s := streams{out: &out, err: &errOut}
	if in != nil {
		s.in = bytes.NewReader(in)
	}
	code := run(context.Background(), s, args)
	return code, out.String(), errOut.String()
}

func TestHelpListsCommands(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		code, out, _ := runCmd(args...)
		for _, name := range []string{"ledger", "signers", "explain", "keys", "ca", "inspect", "health", "trust", "validate", "version", "completion", "help", "Exit codes:"} {
			if code != 0 || !strings.Contains(out, name) {
				t.Errorf("%v: exit %d, output lacks %q:\n%s", args, code, name, out)
			}
		}
	}
	code, out, _ := runCmd("ledger", "help")
	if code != 0 || !strings.Contains(out, "signetctl ledger [command]") || !strings.Contains(out, "verify") {
		t.Errorf("ledger help: exit %d, output:\n%s", code, out)
	}
	code, out, _ = runCmd("help", "ledger")
	if code != 0 || !strings.Contains(out, "verify") {
		t.Errorf("help ledger: exit %d, output:\n%s", code, out)
	}
	code, out, _ = runCmd("ledger", "help", "verify")
	if code != 0 || !strings.Contains(out, "--dir") {
		t.Errorf("ledger help verify: exit %d, stdout:\n%s", code, out)
	}
}

// TestEveryCommandHasHelpWithExamples: every command that runs has a help text with an
// example and the exit codes.
func TestEveryCommandHasHelpWithExamples(t *testing.T) {
	root := newRootCommand(streams{})
	seen := 0
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" || c.IsAdditionalHelpTopicCommand() {
			continue
		}
		for _, leaf := range append(c.Commands(), c) {
			seen++
			if leaf.Example == "" {
				t.Errorf("%s has no example", leaf.CommandPath())
			}
			if !strings.Contains(leaf.Long, "Exit codes:") && leaf.HasParent() && !leaf.HasSubCommands() {
				t.Errorf("%s's help does not give the exit codes", leaf.CommandPath())
			}
			code, out, _ := runCmd(append(strings.Fields(strings.TrimPrefix(leaf.CommandPath(), "signetctl ")), "--help")...)
			if code != 0 || !strings.Contains(out, "Examples:") {
				t.Errorf("%s --help: exit %d, output:\n%s", leaf.CommandPath(), code, out)
			}
		}
	}
	if seen < 20 {
		t.Errorf("only %d commands checked", seen)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{}, {"bogus"}, {"ledger"}, {"ledger", "bogus"}, {"ledger", "verify"}, {"ledger", "verify", "--dir", "x", "extra"},
		{"ledger", "verify", "--nope"}, {"inspect"}, {"trust"}, {"trust", "a", "b"}, {"validate", "server"},
		{"validate", "nope", "f"}, {"version", "extra"}, {"signers", "-o", "xml", "--dev-state-dir", "d"},
		{"ca", "stage", "--signer"}, {"help", "bogus"},
	} {
		code, out, errOut := runCmd(args...)
		if code != 2 || out != "" || errOut == "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and usage on stderr", args, code, out, errOut)
		}
	}
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, errOut := runCmd("completion", shell)
		if code != 0 || !strings.Contains(out, "signetctl") {
			t.Errorf("completion %s: exit %d, stderr %q", shell, code, errOut)
		}
	}
	// The shell asks signetctl for candidates through the hidden __complete command.
	code, out, _ := runCmd("__complete", "ledger", "list", "--decision", "")
	if code != 0 || !strings.Contains(out, "refused") || !strings.Contains(out, "issued") {
		t.Errorf("completion of --decision: exit %d, output:\n%s", code, out)
	}
	code, out, _ = runCmd("__complete", "signers", "-o", "")
	if code != 0 || !strings.Contains(out, "yaml") {
		t.Errorf("completion of -o: exit %d, output:\n%s", code, out)
	}
}

// TestCompleteSigners: signer names complete from the server's ListSigners.
func TestCompleteSigners(t *testing.T) {
	addr, dir := devServer(t)
	for _, args := range [][]string{
		{"__complete", "trust", "--server", addr, "--dev-state-dir", dir, "signet"},
		{"__complete", "health", "--server", addr, "--dev-state-dir", dir, ""},
		{"__complete", "explain", "--server", addr, "--dev-state-dir", dir, "--signer", ""},
	} {
		code, out, _ := runCmd(args...)
		if code != 0 || !strings.Contains(out, devpki.DefaultSigner+"\tcustom") {
			t.Errorf("%v: exit %d, output:\n%s", args, code, out)
		}
	}
	// Without a server: no candidates, no error.
	if code, out, errOut := runCmd("__complete", "trust", "--server", deadAddress(t), "--dev-state-dir", dir, ""); code != 0 || strings.Contains(out, "signet.dev") || strings.Contains(errOut, "rror") {
		t.Errorf("no server: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestSingleDashLongFlags: the flag syntax of signetctl before cobra ("-dir DIR", "-o=json")
// still works; a flag's value that looks like a flag is left alone.
func TestSingleDashLongFlags(t *testing.T) {
	code, out, errOut := runCmd("ledger", "verify", "-dir", newLedger(t, 1))
	if code != 0 || !strings.HasPrefix(out, "ledger OK: 1 record") {
		t.Errorf("-dir: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	fake := &fakeAuthority{}
	conn := authorityServer(t, fake)
	for i := range conn {
		if strings.HasPrefix(conn[i], "--") {
			conn[i] = conn[i][1:] // -server, -tls-ca, ...
		}
	}
	code, _, errOut = runCmd(append([]string{"ca", "activate", "-signer", testSigner, "-force", "-reason", "-force", "-o=json"}, conn...)...)
	want := &signetv1.ActivateCARequest{SignerName: testSigner, Force: true, Reason: "-force"}
	if got := fake.recorded(); code != 0 || len(got) != 1 || !proto.Equal(got[0], want) {
		t.Errorf("exit %d, stderr %q, requests %v, want %v", code, errOut, got, want)
	}
}

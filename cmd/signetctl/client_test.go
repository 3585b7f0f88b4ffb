package main

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/internal/mtlstest"
	"github.com/signet-pki/signet/internal/testpki"
	"github.com/signet-pki/signet/server/config"
	"github.com/signet-pki/signet/server/servertest"
)

// devServer runs a real signet-server in-process on 127.0.0.1 with a fresh dev PKI (the dev
// custom profile, unless a modify function changes the configuration) until the test ends. It
// returns the address and the dev state folder.
func devServer(t *testing.T, modify ...func(*config.Config)) (addr, dir string) {
	t.Helper()
	cfg, dir := servertest.DevConfig(t, devpki.Options{})
	for _, m := range modify {
		m(cfg)
	}
	return servertest.Start(t, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))).Addr, dir
}

// resolveArgs parses args as the connection flags of a command and resolves them.
func resolveArgs(t *testing.T, args ...string) (connSettings, error) {
	t.Helper()
	cmd := &cobra.Command{Use: "x"}
	c := addConnFlags(cmd)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	err := c.resolve()
	return c.settings, err
}

func TestConnFlagsResolve(t *testing.T) {
	_, err := resolveArgs(t, "--tls-ca", "ca.pem")
	if err == nil || !strings.Contains(err.Error(), "missing --tls-cert, --tls-key") || !strings.Contains(err.Error(), "--dev-state-dir") {
		t.Fatalf("resolve = %v", err)
	}
	got, err := resolveArgs(t, "--dev-state-dir", "d", "--tls-ca", "mine.pem")
	if err != nil {
		t.Fatal(err)
	}
	want := connSettings{server: defaultServer, tlsCA: "mine.pem", tlsCert: filepath.Join("d", devpki.ClientCert),
		tlsKey: filepath.Join("d", devpki.ClientKey), timeout: defaultTimeout}
	if got != want {
		t.Fatalf("resolved %+v, want %+v", got, want)
	}
	for _, args := range [][]string{{"--dev-state-dir", "d", "--timeout", "0s"}, {"--dev-state-dir", "d", "--server", ""}} {
		if _, err := resolveArgs(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestConnSettingsPrecedence: each setting comes from its flag, else its environment variable,
// else the config file (relative paths relative to its folder), else the default.
func TestConnSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfgFile := writeTemp(t, "signetctl.yaml", []byte(`apiVersion: signet.dev/v1alpha1
kind: SignetctlConfiguration
server:
  address: file.example:8443
  serverName: file-name
  caFile: file-ca.pem
  certFile: /abs/file-cert.pem
  keyFile: file-key.pem
timeout: 3s
`))
	fileDir := filepath.Dir(cfgFile)
	got, err := resolveArgs(t, "--config", cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	want := connSettings{server: "file.example:8443", serverName: "file-name", tlsCA: filepath.Join(fileDir, "file-ca.pem"),
		tlsCert: "/abs/file-cert.pem", tlsKey: filepath.Join(fileDir, "file-key.pem"), timeout: 3 * time.Second}
	if got != want {
		t.Errorf("file alone: %+v, want %+v", got, want)
	}

	t.Setenv(envServer, "env.example:9443")
	t.Setenv(envTLSCA, "env-ca.pem")
	t.Setenv(envTimeout, "4s")
	t.Setenv(envConfig, cfgFile)
	got, err = resolveArgs(t, "--tls-ca", "flag-ca.pem", "--timeout", "5s")
	if err != nil {
		t.Fatal(err)
	}
	want = connSettings{server: "env.example:9443", serverName: "file-name", tlsCA: "flag-ca.pem",
		tlsCert: "/abs/file-cert.pem", tlsKey: filepath.Join(fileDir, "file-key.pem"), timeout: 5 * time.Second}
	if got != want {
		t.Errorf("flags, env and file: %+v, want %+v", got, want)
	}

	// A dev state folder in a higher source wins over the files of a lower one.
	t.Setenv(envDevStateDir, dir)
	got, err = resolveArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	if got.tlsCA != "env-ca.pem" || got.tlsCert != filepath.Join(dir, devpki.ClientCert) || got.tlsKey != filepath.Join(dir, devpki.ClientKey) {
		t.Errorf("env dev dir: %+v", got)
	}

	// The default file is read when it exists.
	os.Unsetenv(envConfig)
	for _, k := range []string{envServer, envTLSCA, envTimeout, envDevStateDir} {
		t.Setenv(k, "")
	}
	xdg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", xdg)
	if err := os.MkdirAll(filepath.Join(xdg, "signet"), 0o700); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(cfgFile)
	if err := os.WriteFile(filepath.Join(xdg, "signet", "signetctl.yaml"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err = resolveArgs(t); err != nil || got.server != "file.example:8443" || got.tlsCA != filepath.Join(xdg, "signet", "file-ca.pem") {
		t.Errorf("default file: %+v, %v", got, err)
	}
}

func TestConnSettingsErrors(t *testing.T) {
	bad := writeTemp(t, "bad.yaml", []byte("apiVersion: signet.dev/v1alpha1\nkind: SignetctlConfiguration\nserver:\n  adress: x:1\n"))
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{args: []string{"--config", filepath.Join(t.TempDir(), "none.yaml")}, want: "no such file"},
		{args: []string{"--config", bad}, want: `unknown field "server.adress"`},
		{env: map[string]string{envTimeout: "soon"}, args: []string{"--dev-state-dir", "d"}, want: envTimeout},
	} {
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		code, out, errOut := runCmd(append([]string{"signers"}, tc.args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v %v: exit %d, stderr %q; want exit 2 and %q", tc.env, tc.args, code, errOut, tc.want)
		}
		for k := range tc.env {
			t.Setenv(k, "")
		}
	}
}

// TestConnSettingsFromEnvironment: a command finds the server through the environment alone.
func TestConnSettingsFromEnvironment(t *testing.T) {
	addr, dir := devServer(t)
	t.Setenv(envServer, addr)
	t.Setenv(envDevStateDir, dir)
	if code, out, errOut := runCmd("signers", "-o", "json"); code != 0 || !strings.Contains(out, devpki.DefaultSigner) {
		t.Errorf("signers from the environment: exit %d, stderr %q", code, errOut)
	}
}

func TestWrap(t *testing.T) {
	got := wrap("aaa bbb ccc ddddddddddd e\nf", 7)
	want := []string{"aaa bbb", "ccc", "ddddddddddd", "e", "f"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("wrap = %q, want %q", got, want)
	}
}

func TestMissingTLSFlags(t *testing.T) {
	t.Setenv("COLUMNS", "")
	for _, args := range [][]string{
		{"signers"},
		{"signers", "--tls-ca", "ca.crt"},
		{"explain", "--signer", devpki.DefaultSigner, "csr.pem"},
		{"health"},
		{"trust", devpki.DefaultSigner},
		{"ca", "status"},
	} {
		code, out, errOut := runCmd(args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "signet-server requires mutual TLS") || !strings.Contains(errOut, "--tls-cert") {
			t.Errorf("%v: exit %d, stdout %q, stderr:\n%s", args, code, out, errOut)
		}
	}
}

// deadAddress is a local address nothing listens on.
func deadAddress(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	return dead
}

// TestConnectionErrorsExit2: every command that calls the server exits 2, naming Unavailable,
// when nothing answers.
func TestConnectionErrorsExit2(t *testing.T) {
	_, dir := devServer(t)
	conn := []string{"--dev-state-dir", dir, "--server", deadAddress(t), "--timeout", "2s"}
	csr := csrFile(t)
	for _, args := range [][]string{
		{"signers"},
		{"explain", "--signer", devpki.DefaultSigner, csr},
		{"ca", "status"},
		{"ca", "activate", "--signer", devpki.DefaultSigner},
		{"health"},
		{"trust", devpki.DefaultSigner},
	} {
		code, out, errOut := runCmd(append(args, conn...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, "Unavailable") || !strings.Contains(errOut, "is signet-server running at") {
			t.Errorf("%v on a dead address: exit %d, stdout %q, stderr:\n%s", args, code, out, errOut)
		}
	}
	code, _, errOut := runCmd("signers", "--dev-state-dir", filepath.Join(dir, "nope"))
	if code != 2 || !strings.Contains(errOut, "--tls-ca") {
		t.Errorf("signers with a missing dev dir: exit %d, stderr:\n%s", code, errOut)
	}
}

// TestExpiredClientCertificate: an expired client certificate is named before any call.
func TestExpiredClientCertificate(t *testing.T) {
	ca := testpki.CA(t)
	key := testpki.Key(t, testpki.P256)
	cert := ca.Sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: "admin-1"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)}, key.Public())
	certFile := writeTemp(t, "client.crt", testpki.CertPEM(cert))
	keyFile := writeTemp(t, "client.key", testpki.KeyPEM(t, key))
	caFile := writeTemp(t, "ca.crt", ca.CertPEM())
	code, _, errOut := runCmd("signers", "--tls-ca", caFile, "--tls-cert", certFile, "--tls-key", keyFile, "--server", deadAddress(t))
	if code != 2 || !strings.Contains(errOut, "expired at") {
		t.Errorf("expired client certificate: exit %d, stderr %q", code, errOut)
	}
}

// TestConnectionFailuresNamed: each way the mutual TLS handshake fails gets its own name and
// hint: a client identity the server does not know, a client certificate from a CA the server
// does not trust, a server certificate from a CA --tls-ca does not hold, a server certificate
// without the name --server-name gives (the only one whose hint names --server-name).
func TestConnectionFailuresNamed(t *testing.T) {
	addr, dir := devServer(t, func(c *config.Config) { c.Clients[0].Identity = "someone-else" })
	code, _, errOut := runCmd("signers", "--server", addr, "--dev-state-dir", dir)
	if code != 2 || !strings.Contains(errOut, "[client not configured: the server refused the client certificate (identity ") {
		t.Errorf("unknown identity: exit %d, stderr %q", code, errOut)
	}
	addr, dir = devServer(t)
	_, cert, key := mtlstest.NewCA(t).ClientFiles(t, t.TempDir(), "stranger")
	code, _, errOut = runCmd("signers", "--server", addr, "--tls-ca", filepath.Join(dir, devpki.TLSCACert), "--tls-cert", cert, "--tls-key", key)
	if code != 2 || !strings.Contains(errOut, `[untrusted client certificate: the client certificate (identity "stranger") is not issued by a CA in the server's tls.clientCAFile]`) {
		t.Errorf("untrusted client CA: exit %d, stderr %q", code, errOut)
	}
	_, other := devServer(t)
	code, _, errOut = runCmd("signers", "--server", addr, "--dev-state-dir", dir, "--tls-ca", filepath.Join(other, devpki.TLSCACert))
	if code != 2 || !strings.Contains(errOut, "[untrusted server: its certificate is not signed by a CA in --tls-ca]") || strings.Contains(errOut, "--server-name") {
		t.Errorf("untrusted server: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCmd("signers", "--server", addr, "--dev-state-dir", dir, "--server-name", "wrong.example")
	if code != 2 || !strings.Contains(errOut, `does not hold "wrong.example"`) ||
		!strings.Contains(errOut, "[wrong server name: the server's certificate does not name the host of --server; set --server-name to a name it holds]") {
		t.Errorf("wrong server name: exit %d, stderr %q", code, errOut)
	}
}

package main

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/signet-pki/signet/internal/devpki"
	"github.com/signet-pki/signet/server"
	"github.com/signet-pki/signet/server/servertest"
)

// TestClientVersionWithARealServer: signetctl sends its version, and a real signet-server of
// version v0.3.1 applies the skew policy to it as to the watcher. A v0.1.9 or a v0.4.0
// signetctl is refused at every data call (the SignerService, the AuthorityService, the
// LedgerService) with exit 1 and "refused (UNSUPPORTED_CLIENT_VERSION): " followed by the
// server's message naming both versions; the server counts each refusal under the client's
// release line in signet_server_client_version_refused_total. 'signetctl version' still works
// for them (its GetServerInfo carries no version) and shows the server's build, which is how an
// operator finds the signetctl to use. A v0.3.x or v0.2.x signetctl, and a development build,
// is accepted.
//
// Not parallel: it sets the versions of the in-process server (server.Version, read by
// server.New) and of signetctl (clientVersion); the package's parallel tests start only after
// it has returned.
func TestClientVersionWithARealServer(t *testing.T) {
	defer func(s, c string) { server.Version, clientVersion = s, c }(server.Version, clientVersion)
	server.Version = "v0.3.1"
	cfg, dir := servertest.DevConfig(t, devpki.Options{})
	srv := servertest.Start(t, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	conn := []string{"--server", srv.Addr, "--dev-state-dir", dir}
	// Every command that makes a signet.v1 call; health too, which lists the signers.
	dataCalls := []struct {
		path string // the command path, as signetctl names the command in its errors
		args []string
		code int // the exit code when accepted
	}{
		{"signers", nil, 0},
		{"trust", []string{devpki.DefaultSigner}, 0},
		{"explain", []string{"--signer", devpki.DefaultSigner, csrFile(t)}, 1}, // a dry run: alice is refused by policy
		{"ca status", nil, 0},
		{"ledger checkpoint", nil, 0},
		{"health", nil, 0},
	}
	argv := func(path string, args []string) []string {
		return append(append(strings.Fields(path), args...), conn...)
	}

	refused := map[string][]string{
		"v0.1.9": {"signet-server v0.3.1 does not accept clients of version v0.1.9", "v0.3.x or v0.2.x", "upgrade the client"},
		"v0.4.0": {"signet-server v0.3.1 does not accept clients of version v0.4.0, newer than itself", "upgrade the signing servers first"},
	}
	for v, says := range refused {
		clientVersion = v
		for _, c := range dataCalls {
			code, out, errOut := runCmd(argv(c.path, c.args)...)
			prefix := "signetctl " + c.path + ": refused (UNSUPPORTED_CLIENT_VERSION): "
			if code != 1 || out != "" || !strings.HasPrefix(errOut, prefix) {
				t.Errorf("signetctl %s %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", v, c.path, code, out, errOut, prefix+"…")
				continue
			}
			for _, w := range says {
				if !strings.Contains(errOut, w) {
					t.Errorf("signetctl %s %s: stderr %q does not say %q", v, c.path, errOut, w)
				}
			}
		}
		code, out, errOut := runCmd(argv("version", nil)...)
		if code != 0 || !strings.Contains(out, "server: signet v0.3.1 ") {
			t.Errorf("signetctl %s version: exit %d, stdout %q, stderr %q; want both builds shown", v, code, out, errOut)
		}
	}

	for _, v := range []string{"v0.3.1", "v0.3.0", "v0.2.5", "v0.2.0-4-gabc1234", "devel"} {
		clientVersion = v
		for _, c := range dataCalls {
			if code, out, errOut := runCmd(argv(c.path, c.args)...); code != c.code || out == "" || strings.Contains(errOut, "refused (") {
				t.Errorf("signetctl %s %s: exit %d, stdout %q, stderr %q; want accepted, exit %d", v, c.path, code, out, errOut, c.code)
			}
		}
	}

	got := scrape(t, "http://"+srv.HTTPAddr()+"/metrics", "signet_server_client_version_refused_total")
	want := map[string]float64{"v0.1": float64(len(dataCalls)), "v0.4": float64(len(dataCalls)), "v1.0": 0}
	if len(got) != len(want) {
		t.Errorf("signet_server_client_version_refused_total = %v, want %v", got, want)
	}
	for line, n := range want {
		if got[line] != n {
			t.Errorf("signet_server_client_version_refused_total{client_version=%q} = %v, want %v (all: %v)", line, got[line], n, got)
		}
	}
}

// scrape reads the counter name from the server's /metrics, by its client_version label.
func scrape(t *testing.T, url, name string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing %s: %v", url, err)
	}
	out := map[string]float64{}
	for _, m := range families[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "client_version" {
				out[l.GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

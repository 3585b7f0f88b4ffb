package main

import (
	"flag"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/signet-pki/signet/internal/devpki"
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

func TestConnFlagsResolve(t *testing.T) {
	var c connFlags
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.register(fs)
	if err := fs.Parse([]string{"--tls-ca", "ca.pem"}); err != nil {
		t.Fatal(err)
	}
	err := c.resolve()
	if err == nil || !strings.Contains(err.Error(), "missing --tls-cert, --tls-key") || !strings.Contains(err.Error(), "--dev-state-dir") {
		t.Fatalf("resolve = %v", err)
	}
	c = connFlags{}
	fs = flag.NewFlagSet("x", flag.ContinueOnError)
	c.register(fs)
	if err := fs.Parse([]string{"--dev-state-dir", "d", "--tls-ca", "mine.pem"}); err != nil {
		t.Fatal(err)
	}
	if err := c.resolve(); err != nil {
		t.Fatal(err)
	}
	if c.tlsCA != "mine.pem" || c.tlsCert != filepath.Join("d", devpki.ClientCert) || c.tlsKey != filepath.Join("d", devpki.ClientKey) || c.server != defaultServer {
		t.Fatalf("resolved %+v", c)
	}
}

func TestParseInterspersed(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	a := fs.String("a", "", "")
	pos, err := parseInterspersed(fs, []string{"one", "-a", "v", "-", "--", "-b"})
	if err != nil {
		t.Fatal(err)
	}
	if *a != "v" || !reflect.DeepEqual(pos, []string{"one", "-", "-b"}) {
		t.Fatalf("a=%q pos=%q", *a, pos)
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
	} {
		code, out, errOut := runCmd(args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "signet-server requires mutual TLS") || !strings.Contains(errOut, "--tls-cert") {
			t.Errorf("%v: exit %d, stdout %q, stderr:\n%s", args, code, out, errOut)
		}
	}
}

func TestConnectionErrors(t *testing.T) {
	_, dir := devServer(t)
	// Nothing listens on this address once the listener is closed.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	code, _, errOut := runCmd("signers", "--dev-state-dir", dir, "--server", dead, "--timeout", "2s")
	if code != 1 || !strings.Contains(errOut, "Unavailable") {
		t.Errorf("signers on a dead address: exit %d, stderr:\n%s", code, errOut)
	}
	code, _, errOut = runCmd("signers", "--dev-state-dir", filepath.Join(dir, "nope"))
	if code != 2 || !strings.Contains(errOut, "--tls-ca") {
		t.Errorf("signers with a missing dev dir: exit %d, stderr:\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, devpki.ClientCert)); err != nil {
		t.Fatal(err)
	}
}

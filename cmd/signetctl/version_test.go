package main

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/signet-pki/signet/internal/version"
	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server"
)

func TestVersion(t *testing.T) {
	client := "client: " + version.String() + "\n"
	for _, args := range [][]string{{"version"}, {"version", "--client", "--server", "127.0.0.1:1"}} {
		code, out, errOut := runCmd(args...)
		if code != 0 || !strings.HasPrefix(out, client+"server: not asked") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	for _, flag := range []string{"--version", "-v"} {
		if code, out, _ := runCmd(flag); code != 0 || out != version.String()+"\n" || !strings.HasPrefix(out, "signet ") {
			t.Errorf("%s: exit %d, stdout %q", flag, code, out)
		}
	}

	addr, dir := devServer(t)
	code, out, errOut := runCmd("version", "--server", addr, "--dev-state-dir", dir)
	want := client + "server: " + (&version.Info{Version: server.Version, Commit: server.Commit, GoVersion: version.Get().GoVersion}).String() + " at " + addr + "\n"
	if code != 0 || out != want {
		t.Errorf("version of a real server: exit %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
	}
	code, out, _ = runCmd("version", "--server", addr, "--dev-state-dir", dir, "-o", "json")
	var rep versionReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || rep.Client.Version != version.Get().Version ||
		rep.Server == nil || rep.Server.Version != server.Version || rep.ServerAddress != addr {
		t.Errorf("-o json: exit %d, %v, %+v", code, err, rep)
	}

	// A server that predates GetServerInfo, and none at all.
	conn := testServer(t, func(g *grpc.Server) { signetv1.RegisterSignerServiceServer(g, fakeSigners{}) })
	code, out, _ = runCmd(append([]string{"version"}, conn...)...)
	if code != 0 || !strings.Contains(out, "server: not available: the server predates GetServerInfo") {
		t.Errorf("an older server: exit %d, stdout %q", code, out)
	}
	code, out, errOut = runCmd("version", "--server", deadAddress(t), "--dev-state-dir", dir)
	if code != 2 || !strings.HasPrefix(out, client+"server: not available: Unavailable") || !strings.Contains(errOut, "Unavailable") {
		t.Errorf("no server: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

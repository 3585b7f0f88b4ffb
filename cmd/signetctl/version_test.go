package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/signet-pki/signet/internal/version"
)

func TestVersion(t *testing.T) {
	code, out, errOut := runCmd("version")
	want := "client: " + version.String() + "\nserver: " + serverVersionUnavailable + "\n"
	if code != 0 || out != want {
		t.Errorf("version: exit %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
	}
	code, out, _ = runCmd("version", "-o", "json")
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("-o json: exit %d, %v\n%s", code, err, out)
	}
	client, _ := rep["client"].(map[string]any)
	if client["version"] != version.Get().Version || client["goVersion"] == "" || rep["server"] != nil || rep["serverNote"] == "" {
		t.Errorf("-o json = %v", rep)
	}
	for _, flag := range []string{"--version", "-v"} {
		if code, out, _ = runCmd(flag); code != 0 || out != version.String()+"\n" || !strings.HasPrefix(out, "signet ") {
			t.Errorf("%s: exit %d, stdout %q", flag, code, out)
		}
	}
}

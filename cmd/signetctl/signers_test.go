package main

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	signetv1 "github.com/signet-pki/signet/proto/signet/v1"
	"github.com/signet-pki/signet/server/devpki"
)

var kepPoints = []string{"Trust distribution:", "Permitted subjects:", "Permitted extensions:", "Permitted key usages:", "Expiration:", "CA bit:", "Extra PEM blocks:"}

func TestSigners(t *testing.T) {
	t.Setenv("COLUMNS", "80")
	addr, dir := devServer(t)
	code, out, errOut := runCmd("signers", "--server", addr, "--dev-state-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	t.Logf("output:\n%s", out)
	if !strings.HasPrefix(out, devpki.DefaultSigner+"\n") {
		t.Errorf("output does not start with the dev signer name:\n%s", out)
	}
	for _, want := range append([]string{"Profile:", "custom", "Max lifetime:", "Key types:"}, kepPoints...) {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, label := range kepPoints {
		if !strings.Contains(out, "\n  "+label) {
			t.Errorf("point %q is not a labelled line", label)
		}
	}
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if n := len([]rune(line)); n > 80 {
			t.Errorf("line of %d runes exceeds COLUMNS=80: %q", n, line)
		}
		if line != devpki.DefaultSigner && !strings.HasPrefix(line, "  ") {
			t.Errorf("line not indented: %q", line)
		}
	}
}

func TestSignersJSON(t *testing.T) {
	addr, dir := devServer(t)
	code, out, errOut := runCmd("signers", "--server", addr, "--dev-state-dir", dir, "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	var resp signetv1.ListSignersResponse
	if err := protojson.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("output is not a ListSignersResponse: %v\n%s", err, out)
	}
	if len(resp.GetSigners()) != 1 || resp.GetSigners()[0].GetSignerName() != devpki.DefaultSigner || resp.GetSigners()[0].GetCaBit() == "" {
		t.Fatalf("signers = %v", resp.GetSigners())
	}
}

func TestSignersUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"signers", "--output", "yaml", "--dev-state-dir", "d"}, {"signers", "extra", "--dev-state-dir", "d"}, {"signers", "--nope"}} {
		if code, _, _ := runCmd(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

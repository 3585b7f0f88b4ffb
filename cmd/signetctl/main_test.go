package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// runCmd runs signetctl with args and returns the exit code, stdout and stderr.
func runCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), streams{out: &out, err: &errOut}, args)
	return code, out.String(), errOut.String()
}

func TestHelpListsCommands(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		code, out, _ := runCmd(args...)
		if code != 0 || !strings.Contains(out, "ledger") || !strings.Contains(out, "help") {
			t.Errorf("%v: exit %d, output:\n%s", args, code, out)
		}
	}
	code, out, _ := runCmd("ledger", "help")
	if code != 0 || !strings.Contains(out, "signetctl ledger <command>") || !strings.Contains(out, "verify") {
		t.Errorf("ledger help: exit %d, output:\n%s", code, out)
	}
	code, out, _ = runCmd("help", "ledger")
	if code != 0 || !strings.Contains(out, "verify") {
		t.Errorf("help ledger: exit %d, output:\n%s", code, out)
	}
	code, _, errOut := runCmd("ledger", "help", "verify")
	if code != 0 || !strings.Contains(errOut, "--dir") {
		t.Errorf("ledger help verify: exit %d, stderr:\n%s", code, errOut)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"bogus"}, {"ledger"}, {"ledger", "bogus"}, {"ledger", "verify"}, {"ledger", "verify", "--dir", "x", "extra"}, {"ledger", "verify", "--nope"}} {
		code, out, errOut := runCmd(args...)
		if code != 2 || out != "" || errOut == "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and usage on stderr", args, code, out, errOut)
		}
	}
}

//go:build cgo

package softhsmtest

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/pkcs11"
)

// TestNew: the token exists in the configuration SOFTHSM2_CONF names, the PIN file is the
// owner's only, and URI and Env say what the doc says.
func TestNew(t *testing.T) {
	tok := New(t)
	if got := os.Getenv("SOFTHSM2_CONF"); got != tok.ConfPath {
		t.Errorf("SOFTHSM2_CONF = %q, want %q", got, tok.ConfPath)
	}
	out, err := exec.Command("softhsm2-util", "--show-slots").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Label:            "+tok.Label) {
		t.Errorf("softhsm2-util --show-slots: %v\n%s", err, out)
	}
	info, err := os.Stat(tok.PINFile)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("PIN file: %v, mode %v; want 0600", err, info.Mode().Perm())
	}
	if data, _ := os.ReadFile(tok.PINFile); string(data) != tok.PIN || len(tok.PIN) < 8 {
		t.Errorf("PIN file holds %q, PIN is %q", data, tok.PIN)
	}
	want := fmt.Sprintf("pkcs11:token=signet-test;object=kube%%20ca;type=private?module-path=%s&pin-source=%s", tok.Module, tok.PINFile)
	if got := tok.URI("kube ca"); got != want {
		t.Errorf("URI = %q, want %q", got, want)
	}
	env := tok.Env()
	if !slices.Contains(env, "SOFTHSM2_CONF="+tok.ConfPath) || slices.IndexFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "PATH=") }) < 0 {
		t.Errorf("Env lacks SOFTHSM2_CONF or the rest of the environment")
	}
}

// recorder is a testing.TB that records Errorf.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// TestCheckFinalized: a module left initialized is reported and finalized; a finalized one is
// not reported.
func TestCheckFinalized(t *testing.T) {
	tok := New(t)
	ctx := pkcs11.New(tok.Module)
	if ctx == nil {
		t.Fatal("loading the module")
	}
	defer ctx.Destroy()
	if err := ctx.Initialize(); err != nil {
		t.Fatal(err)
	}
	r := &recorder{TB: t}
	checkFinalized(r, tok.Module, tok.Label)
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], "close every PKCS#11 key") {
		t.Errorf("a module left initialized: errors %q", r.errors)
	}
	r.errors = nil
	checkFinalized(r, tok.Module, tok.Label)
	if len(r.errors) != 0 {
		t.Errorf("after it was finalized: errors %q", r.errors)
	}
}

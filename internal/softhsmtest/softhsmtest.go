// Package softhsmtest creates real SoftHSM2 tokens for tests of the PKCS#11 keystore backend and
// of what uses it (the server, signetctl, the demo).
//
// New writes a softhsm2.conf in the test's temporary directory and points SOFTHSM2_CONF at it
// with t.Setenv, so a test that uses it cannot be parallel (t.Setenv panics in a parallel test),
// and SoftHSM reads that variable when the module is initialized: every key opened on a token
// must be closed before the test ends, or the next test's module keeps the old token directory.
// New checks at the end of the test that no key is left open on the module, and fails the
// test if one is. A missing SoftHSM2 fails the test with the command that installs it; it
// never skips.
package softhsmtest

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ModulePaths are the places the SoftHSM2 PKCS#11 module is looked for, in order: Debian and
// Ubuntu (both layouts), Fedora, and Homebrew.
var ModulePaths = []string{
	"/usr/lib/softhsm/libsofthsm2.so",
	"/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
	"/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so",
	"/usr/lib64/pkcs11/libsofthsm2.so",
	"/usr/local/lib/softhsm/libsofthsm2.so",
	"/opt/homebrew/lib/softhsm/libsofthsm2.so",
}

// installHint is the command that installs SoftHSM2 on the CI's distribution (hack/node-deps.sh
// runs it).
const installHint = "install SoftHSM2: apt-get install softhsm2 (or run hack/node-deps.sh)"

// Token is an initialized SoftHSM2 token in a test's temporary directory.
type Token struct {
	// Module is the path of the SoftHSM2 PKCS#11 module (libsofthsm2.so).
	Module string
	// Label is the token's label (token= in a PKCS#11 URI).
	Label string
	// PIN is the user PIN; PINFile holds it (mode 0600, no trailing newline).
	PIN     string
	PINFile string
	// SOPIN is the security officer PIN.
	SOPIN string
	// ConfPath is the softhsm2.conf whose token directory holds the token; SOFTHSM2_CONF names
	// it for the test's process (see Env for a subprocess).
	ConfPath string
}

// Module returns the path of the SoftHSM2 PKCS#11 module, failing the test with the install
// command when it is not in any of ModulePaths.
func Module(t testing.TB) string {
	t.Helper()
	for _, p := range ModulePaths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("softhsmtest: no SoftHSM2 PKCS#11 module in %s; %s", strings.Join(ModulePaths, ", "), installHint)
	return ""
}

// New creates a fresh token labelled "signet-test" with random user and SO PINs in
// t.TempDir(), and sets SOFTHSM2_CONF for the rest of the test (so the test cannot be
// parallel).
func New(t testing.TB) *Token {
	t.Helper()
	module := Module(t)
	util, err := exec.LookPath("softhsm2-util")
	if err != nil {
		t.Fatalf("softhsmtest: softhsm2-util not found: %v; %s", err, installHint)
	}
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.Mkdir(tokens, 0o700); err != nil {
		t.Fatal(err)
	}
	tok := &Token{
		Module:   module,
		Label:    "signet-test",
		PIN:      randomPIN(t),
		PINFile:  filepath.Join(dir, "user.pin"),
		SOPIN:    randomPIN(t),
		ConfPath: filepath.Join(dir, "softhsm2.conf"),
	}
	conf := "directories.tokendir = " + tokens + "\nobjectstore.backend = file\nlog.level = ERROR\n"
	if err := os.WriteFile(tok.ConfPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tok.PINFile, []byte(tok.PIN), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SOFTHSM2_CONF", tok.ConfPath)
	t.Cleanup(func() { checkFinalized(t, module, tok.Label) }) // runs after the cleanups the test adds later
	cmd := exec.Command(util, "--init-token", "--free", "--label", tok.Label, "--pin", tok.PIN, "--so-pin", tok.SOPIN)
	cmd.Env = tok.Env()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("softhsmtest: softhsm2-util --init-token: %v\n%s", err, out)
	}
	return tok
}

// URI returns the RFC 7512 URI of the private key labelled object on the token, with the PIN
// read from PINFile:
// pkcs11:token=<label>;object=<object>;type=private?module-path=<module>&pin-source=<pinfile>.
func (tok *Token) URI(object string) string {
	return "pkcs11:token=" + escape(tok.Label, false) + ";object=" + escape(object, false) +
		";type=private?module-path=" + escape(tok.Module, true) + "&pin-source=" + escape(tok.PINFile, true)
}

// Env returns the test process's environment with SOFTHSM2_CONF naming the token's
// configuration, for a subprocess (a server started by a test) that opens keys on it.
func (tok *Token) Env() []string {
	env := []string{"SOFTHSM2_CONF=" + tok.ConfPath}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SOFTHSM2_CONF=") {
			env = append(env, kv)
		}
	}
	return env
}

func randomPIN(t testing.TB) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// escape percent-encodes v for a PKCS#11 URI: everything but RFC 3986's unreserved characters,
// and, in a query value, '/' and ':' as well.
func escape(v string, query bool) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
			b.WriteByte(c)
		case query && (c == '/' || c == ':'):
			b.WriteByte(c)
		default:
			b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	return b.String()
}

// Package softhsm makes SoftHSM2 tokens in folders of their own, for the tests
// (internal/softhsmtest), the demo and the benchmarks: a softhsm2.conf naming the folder, a
// token initialized by softhsm2-util with random PINs, and the user PIN in a 0600 file for
// pin-source=. SoftHSM reads SOFTHSM2_CONF when its module is first loaded in a process, so
// a process that opens keys on the token sets it (Env for a child) before the first key.
package softhsm

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModulePaths are the places the SoftHSM2 PKCS#11 module is looked for: Debian and Ubuntu
// (per architecture too), Fedora, a source build, Homebrew.
var ModulePaths = []string{
	"/usr/lib/softhsm/libsofthsm2.so",
	"/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
	"/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so",
	"/usr/lib64/pkcs11/libsofthsm2.so",
	"/usr/local/lib/softhsm/libsofthsm2.so",
	"/opt/homebrew/lib/softhsm/libsofthsm2.so",
}

// InstallHint is the command that installs SoftHSM2 on the CI's distribution.
const InstallHint = "install SoftHSM2: apt-get install softhsm2 (or run hack/node-deps.sh)"

// Token is an initialized SoftHSM2 token.
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
	// ConfPath is the softhsm2.conf whose token directory holds the token.
	ConfPath string
}

// Module returns the path of the SoftHSM2 PKCS#11 module, or an error naming the install
// command when it is in none of ModulePaths.
func Module() (string, error) {
	for _, p := range ModulePaths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no SoftHSM2 PKCS#11 module in %s; %s", strings.Join(ModulePaths, ", "), InstallHint)
}

// Init initializes a token labelled label with random user and SO PINs in dir (which must
// exist). The PINs are on softhsm2-util's command line for the instant it runs, which suits a
// throwaway token only; its output is shown only on failure.
func Init(dir, label string) (*Token, error) {
	module, err := Module()
	if err != nil {
		return nil, err
	}
	util, err := exec.LookPath("softhsm2-util")
	if err != nil {
		return nil, fmt.Errorf("finding softhsm2-util: %w; %s", err, InstallHint)
	}
	tokens := filepath.Join(dir, "tokens")
	if err := os.Mkdir(tokens, 0o700); err != nil {
		return nil, fmt.Errorf("creating the token folder: %w", err)
	}
	tok := &Token{
		Module: module, Label: label, PIN: randomPIN(), SOPIN: randomPIN(),
		PINFile: filepath.Join(dir, "user.pin"), ConfPath: filepath.Join(dir, "softhsm2.conf"),
	}
	conf := "directories.tokendir = " + tokens + "\nobjectstore.backend = file\nlog.level = ERROR\n"
	if err := os.WriteFile(tok.ConfPath, []byte(conf), 0o600); err != nil {
		return nil, fmt.Errorf("writing softhsm2.conf: %w", err)
	}
	if err := os.WriteFile(tok.PINFile, []byte(tok.PIN), 0o600); err != nil {
		return nil, fmt.Errorf("writing the PIN file: %w", err)
	}
	cmd := exec.Command(util, "--init-token", "--free", "--label", label, "--pin", tok.PIN, "--so-pin", tok.SOPIN)
	cmd.Env = tok.Env()
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, errors.Join(fmt.Errorf("softhsm2-util --init-token: %w", err), errors.New(strings.TrimSpace(string(out))))
	}
	return tok, nil
}

// URI returns the RFC 7512 URI of the private key labelled object on the token, with the PIN
// read from PINFile:
// pkcs11:token=<label>;object=<object>;type=private?module-path=<module>&pin-source=<pinfile>.
func (tok *Token) URI(object string) string {
	return "pkcs11:token=" + escape(tok.Label, false) + ";object=" + escape(object, false) +
		";type=private?module-path=" + escape(tok.Module, true) + "&pin-source=" + escape(tok.PINFile, true)
}

// Env returns this process's environment with SOFTHSM2_CONF naming the token's
// configuration, for a child process that opens keys on it.
func (tok *Token) Env() []string {
	env := []string{"SOFTHSM2_CONF=" + tok.ConfPath}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SOFTHSM2_CONF=") {
			env = append(env, kv)
		}
	}
	return env
}

func randomPIN() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
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

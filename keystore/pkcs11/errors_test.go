//go:build cgo

package pkcs11_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signet-pki/signet/internal/softhsmtest"
	"github.com/signet-pki/signet/keystore/keyerr"
	"github.com/signet-pki/signet/keystore/pkcs11"
)

// TestStartupErrors: each wrong part of a URI is an Open error that names the URI component
// at fault and does not contain the PIN, and none of them is a device failure.
func TestStartupErrors(t *testing.T) {
	tok := softhsmtest.New(t)
	generate(t, tok, "ca", keyerr.P256)
	dir := t.TempDir()
	notALibrary := filepath.Join(dir, "notalib.so")
	if err := os.WriteFile(notALibrary, []byte("not an ELF file"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyPIN := filepath.Join(dir, "empty.pin")
	if err := os.WriteFile(emptyPIN, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	good := tok.URI("ca")
	for _, tc := range []struct {
		name, uri string
		want      []string
	}{
		{"missing module", strings.Replace(good, tok.Module, "/nonexistent/libnothere.so", 1),
			[]string{`module-path "/nonexistent/libnothere.so"`, "no such file"}},
		{"module that does not load", strings.Replace(good, tok.Module, notALibrary, 1),
			[]string{"module-path", "cannot load"}},
		{"module path is a directory", strings.Replace(good, tok.Module, dir, 1),
			[]string{"module-path", "directory"}},
		{"no such token", strings.Replace(good, "token=signet-test", "token=signet-prod", 1),
			[]string{`token="signet-prod"`, "no such token", `"signet-test"`}},
		{"no such serial", strings.Replace(good, "token=signet-test", "serial=0000", 1),
			[]string{`serial="0000"`, "no such token"}},
		{"no token named", strings.Replace(good, "token=signet-test;", "", 1), []string{"token="}},
		{"no such object", tok.URI("kube-ca"), []string{`object="kube-ca"`, "no such private key", `"ca"`}},
		{"no such id", strings.Replace(good, "object=ca", "id=%99", 1), []string{"id=%99", "no such private key"}},
		{"no key named", strings.Replace(good, "object=ca;", "", 1), []string{"object=", "id="}},
		{"missing PIN file", strings.Replace(good, tok.PINFile, filepath.Join(dir, "absent.pin"), 1),
			[]string{"pin-source", "absent.pin", "no such file"}},
		{"empty PIN file", strings.Replace(good, tok.PINFile, emptyPIN, 1), []string{"pin-source", "empty"}},
		{"no PIN", strings.Replace(good, "&pin-source="+tok.PINFile, "", 1), []string{"pin-source"}},
		{"pin-value not allowed", strings.Replace(good, "pin-source="+tok.PINFile, "pin-value="+tok.PIN, 1),
			[]string{"pin-value", "refused", "pin-source"}},
		{"typo", strings.Replace(good, "object=", "objet=", 1), []string{`unknown attribute "objet"`}},
		{"duplicate", good + "&module-path=" + tok.Module, []string{`duplicate attribute "module-path"`}},
		{"public key", strings.Replace(good, "type=private", "type=public", 1), []string{"type="}},
		{"no module", strings.Replace(good, "module-path="+tok.Module+"&", "", 1), []string{"module-path"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, err := pkcs11.Open(context.Background(), tc.uri, pkcs11.Options{})
			if err == nil {
				_ = key.Close()
				t.Fatalf("Open(%q) succeeded", tc.uri)
			}
			checkError(t, err, tok.PIN, tc.want...)
		})
	}
}

// checkError fails unless err contains every one of want and not the PIN, and is not a device
// failure.
func checkError(t *testing.T, err error, pin string, want ...string) {
	t.Helper()
	msg := err.Error()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not contain %q", msg, w)
		}
	}
	if strings.Contains(msg, pin) {
		t.Errorf("error %q contains the PIN", msg)
	}
	if errors.Is(err, keyerr.ErrUnavailable) {
		t.Errorf("error %q wraps keyerr.ErrUnavailable, but retrying cannot fix it", msg)
	}
}

// Environment of TestHelperProcess: the URI to open, and whether pin-value is allowed.
const (
	helperURI        = "SIGNET_PKCS11_TEST_HELPER_URI"
	helperAllowValue = "SIGNET_PKCS11_TEST_HELPER_ALLOW_PIN_VALUE"
)

// TestHelperProcess is not a test: run by openInFreshProcess in a process of its own, it opens
// the key of $SIGNET_PKCS11_TEST_HELPER_URI and prints "opened" or the error.
func TestHelperProcess(t *testing.T) {
	uri := os.Getenv(helperURI)
	if uri == "" {
		return
	}
	key, err := pkcs11.Open(context.Background(), uri, pkcs11.Options{AllowPINValue: os.Getenv(helperAllowValue) == "1"})
	if err != nil {
		fmt.Printf("error: %v (unavailable: %t)\n", err, errors.Is(err, keyerr.ErrUnavailable))
		os.Exit(3)
	}
	if err := signs(key); err != nil {
		fmt.Printf("sign error: %v\n", err)
		os.Exit(4)
	}
	_ = key.Close()
	fmt.Println("opened")
	os.Exit(0)
}

// openInFreshProcess opens uri in a new process (the test binary running TestHelperProcess),
// where no other login to the token can hide a wrong PIN, and returns its output and whether
// it opened the key.
func openInFreshProcess(t *testing.T, tok *softhsmtest.Token, uri string, allowPINValue bool) (string, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	// GORACE: a race-enabled binary otherwise waits a second before it exits.
	cmd.Env = append(tok.Env(), helperURI+"="+uri, "GORACE=atexit_sleep_ms=0")
	if allowPINValue {
		cmd.Env = append(cmd.Env, helperAllowValue+"=1")
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running the helper process: %v", err)
	}
	return string(out), err == nil && strings.Contains(string(out), "opened")
}

// TestWrongPINInFreshProcess: a wrong or too short PIN, from a file or a pin-value, is refused
// by a process that holds no other login to the token, with an error naming where the PIN came
// from and not containing it; the right PIN opens the key in the same setting.
func TestWrongPINInFreshProcess(t *testing.T) {
	tok := softhsmtest.New(t)
	_, _ = generate(t, tok, "ca", keyerr.P256)
	dir := t.TempDir()
	writePIN := func(name, pin string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(pin), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	wrong := "0" + tok.PIN[1:] + "9"
	for _, tc := range []struct {
		name, uri string
		allow     bool
		ok        bool
		want      []string
		secret    string
	}{
		{"right PIN", tok.URI("ca"), false, true, nil, tok.PIN},
		{"right PIN with a trailing newline", strings.Replace(tok.URI("ca"), tok.PINFile, writePIN("nl.pin", tok.PIN+"\n"), 1), false, true, nil, tok.PIN},
		{"wrong PIN", strings.Replace(tok.URI("ca"), tok.PINFile, writePIN("wrong.pin", wrong), 1), false, false,
			[]string{"pin-source", "wrong.pin", "PIN incorrect"}, wrong},
		{"too short PIN", strings.Replace(tok.URI("ca"), tok.PINFile, writePIN("short.pin", "zq"), 1), false, false,
			[]string{"pin-source", "short.pin", "PIN incorrect"}, "zq"},
		{"wrong pin-value", strings.Replace(tok.URI("ca"), "pin-source="+tok.PINFile, "pin-value="+wrong, 1), true, false,
			[]string{"pin-value", "PIN incorrect"}, wrong},
		{"right pin-value", strings.Replace(tok.URI("ca"), "pin-source="+tok.PINFile, "pin-value="+tok.PIN, 1), true, true, nil, tok.PIN},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := openInFreshProcess(t, tok, tc.uri, tc.allow)
			if ok != tc.ok {
				t.Fatalf("opened = %t, want %t; output:\n%s", ok, tc.ok, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output %q does not contain %q", out, w)
				}
			}
			if !tc.ok && !strings.Contains(out, "unavailable: false") {
				t.Errorf("a wrong PIN is reported as a device failure: %s", out)
			}
			if strings.Contains(out, tc.secret) || strings.Contains(out, tok.PIN) {
				t.Errorf("output %q contains a PIN", out)
			}
		})
	}
}

// TestPINValue: pin-value is refused without Options.AllowPINValue and accepted with it; the
// canonical URI of a key generated with it keeps it (and one made with pin-source has none).
func TestPINValue(t *testing.T) {
	tok := softhsmtest.New(t)
	uri := strings.Replace(tok.URI("ca"), "pin-source="+tok.PINFile, "pin-value="+tok.PIN, 1)
	if err := generateErr(t, uri, keyerr.P256, pkcs11.Options{}); err == nil {
		t.Fatal("Generate accepted pin-value without AllowPINValue")
	} else {
		checkError(t, err, tok.PIN, "pin-value", "AllowPINValue")
	}
	_, canonical := generateURI(t, uri, keyerr.P256, pkcs11.Options{AllowPINValue: true})
	if !strings.Contains(canonical, "pin-value="+tok.PIN) || strings.Contains(canonical, "pin-source") {
		t.Errorf("canonical URI %q does not keep the pin-value it was given", canonical)
	}
	if key, err := pkcs11.Open(context.Background(), canonical, pkcs11.Options{}); err == nil {
		_ = key.Close()
		t.Error("Open accepted pin-value without AllowPINValue")
	} else {
		checkError(t, err, tok.PIN, "pin-value")
	}
	if err := signs(open(t, canonical, pkcs11.Options{AllowPINValue: true})); err != nil {
		t.Errorf("Sign: %v", err)
	}
}

package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/signet-pki/signet/internal/devpki"
)

// edit is a change to a copy of the dev state: replace old by new in config.yaml, or run fn
// on the state folder.
type edit struct {
	old, new string
	fn       func(t *testing.T, dir string)
}

// brokenState writes a fresh dev state, applies the edits and returns the configuration file.
func brokenState(t *testing.T, edits ...edit) string {
	t.Helper()
	path, err := devpki.Ensure(devpki.Options{Dir: filepath.Join(t.TempDir(), "dev"), PodIdentitySigner: devpki.DefaultPodIdentitySigner})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range edits {
		if e.fn != nil {
			e.fn(t, filepath.Dir(path))
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), e.old) {
			t.Fatalf("the dev config has no %q; update the test:\n%s", e.old, data)
		}
		writeFile(t, path, strings.Replace(string(data), e.old, e.new, 1))
	}
	return path
}

// lineOf is the line of the first line of the file at path that contains text.
func lineOf(t *testing.T, path, text string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, text) {
			return i + 1
		}
	}
	t.Fatalf("%s has no line with %q", path, text)
	return 0
}

// listing is every file and folder under dir with its mode.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, p+" "+info.Mode().String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// want is one problem the output must show: the field, the line of the file holding text, and
// part of the message.
type want struct{ field, lineText, message string }

// TestValidateConfigChecksWhatAStartWould: --validate-config finds what only a start used to
// (missing TLS and CA files, a CA key group or others may read, a key for another
// certificate, a lint gate that does not build), reports a duration that is not one with its
// field path, and every problem at once, each with its field and line; it exits 1 and
// creates nothing. A start on the same file fails the same way and creates nothing either
// (no ledger folder, no checkpoint key).
func TestValidateConfigChecksWhatAStartWould(t *testing.T) {
	missingCert := edit{old: "certFile: server.crt", new: "certFile: missing-server.crt"}
	dayHours := edit{old: "    certificate: signer-ca.crt\n", new: "    certificate: signer-ca.crt\n    maxLifetime: 24hours\n"}
	keyMode := edit{fn: func(t *testing.T, dir string) {
		if err := os.Chmod(filepath.Join(dir, devpki.SignerCAKey), 0o644); err != nil {
			t.Fatal(err)
		}
	}}
	for _, tc := range []struct {
		name  string
		edits []edit
		want  []want
	}{
		{"missing TLS file", []edit{missingCert},
			[]want{{"tls.certFile", "certFile:", "missing-server.crt does not exist"}}},
		{"missing client CA file", []edit{{old: "clientCAFile: tls-ca.crt", new: "clientCAFile: missing-ca.crt"}},
			[]want{{"tls.clientCAFile", "clientCAFile:", "missing-ca.crt does not exist"}}},
		{"missing CA certificate", []edit{{old: "certificate: signer-ca.crt", new: "certificate: missing-signer-ca.crt"}},
			[]want{{"signers[0].certificate", "missing-signer-ca.crt", "missing-signer-ca.crt does not exist"}}},
		{"CA key mode 0644", []edit{keyMode},
			[]want{{"signers[0].key", "key: signer-ca.key", "has mode 0644; make it readable by its owner only"}}},
		{"key for another certificate", []edit{{old: "key: signer-ca.key", new: "key: " + devpki.PodIdentityCAKey}},
			[]want{{"signers[0].key", "key: " + devpki.PodIdentityCAKey, "does not match the certificate"}}},
		{"unknown lint", []edit{{old: "ledger:\n", new: "lint: {exclude: [e_no_such_lint]}\nledger:\n"}},
			[]want{{"lint", "lint: {exclude", `unknown certificate lint "e_no_such_lint"`}}},
		{"maxLifetime 24hours", []edit{dayHours},
			[]want{{"signers[0].maxLifetime", "maxLifetime: 24hours", `"24hours" is not a duration`}}},
		{"several at once", []edit{missingCert, dayHours, keyMode, {old: "dir: ledger", new: "dir: ledger\n  checkpoint: {interval: soon}"}},
			[]want{
				{"signers[0].maxLifetime", "maxLifetime: 24hours", `"24hours" is not a duration`},
				{"ledger.checkpoint.interval", "interval: soon", `"soon" is not a duration`},
				{"tls.certFile", "certFile:", "missing-server.crt does not exist"},
				{"signers[0].key", "key: signer-ca.key", "has mode 0644"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := brokenState(t, tc.edits...)
			dir := filepath.Dir(filepath.Dir(path))
			before := listing(t, dir)

			code, stdout, stderr := runMain("--validate-config", path)
			if code != 1 || stdout != "" || !strings.HasPrefix(stderr, "invalid configuration:\n") {
				t.Fatalf("exit %d, stdout %q, stderr:\n%s\nwant 1, nothing, the problems", code, stdout, stderr)
			}
			lines := strings.Split(strings.TrimSpace(strings.TrimPrefix(stderr, "invalid configuration:\n")), "\n")
			if len(lines) != len(tc.want) {
				t.Errorf("%d problems, want %d:\n%s", len(lines), len(tc.want), stderr)
			}
			for _, w := range tc.want {
				prefix := w.field + " (line " + strconv.Itoa(lineOf(t, path, w.lineText)) + "): "
				if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) && strings.Contains(l, w.message) }) {
					t.Errorf("no line %q…%q in:\n%s", prefix, w.message, stderr)
				}
			}

			// A start fails on the same problems before it creates anything.
			code, _, stderr = runMain("--config", path, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
			if code != 1 || !strings.Contains(stderr, tc.want[0].field) {
				t.Errorf("start: exit %d, stderr:\n%s\nwant 1 and %s named", code, stderr, tc.want[0].field)
			}
			if after := listing(t, dir); !slices.Equal(before, after) {
				t.Errorf("the state folder changed:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

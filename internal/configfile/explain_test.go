package configfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/signet-pki/signet/internal/configfile"
)

// testConfig is a configuration shaped like Signet's: nested structs, lists of structs,
// numbers, booleans and durations.
type testConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Server     struct {
		Address string `json:"address"`
		Workers int    `json:"workers"`
		TLS     bool   `json:"tls"`
	} `json:"server"`
	Signers []struct {
		Name        string           `json:"name"`
		MaxLifetime *metav1.Duration `json:"maxLifetime"`
		Usages      []string         `json:"usages"`
	} `json:"signers"`
}

// TestDecodeErrorsNameLineAndKind: a value of the wrong kind, an unknown or a duplicate field
// is reported with its path (list indexes included), its line, what was wanted and what was
// found in words, never with Go type names.
func TestDecodeErrorsNameLineAndKind(t *testing.T) {
	t.Parallel()
	const head = "apiVersion: v1\nkind: Test\n"
	for name, tc := range map[string]struct{ yaml, want string }{
		"number for a string": {head + "server:\n  address: 8443\n", `server.address (line 4): want a string, found a number`},
		"string for a number": {head + "server:\n  workers: many\n", `server.workers (line 4): want a number, found a string`},
		"list for a bool":     {head + "server:\n  tls: [yes]\n", `server.tls (line 4): want true or false, found a list`},
		"list for a duration in the second item": {head + "signers:\n  - name: a/b\n  - name: c/d\n    maxLifetime: [1h]\n",
			`signers[1].maxLifetime (line 6): want a string, found a list`},
		"mapping for a list":  {head + "signers:\n  - usages: {a: b}\n", `signers[0].usages (line 4): want a list, found a mapping`},
		"unknown field":       {head + "signers:\n  - name: a/b\n  - name: c/d\n    maxLifeTime: 1h\n", `unknown field "signers[1].maxLifeTime" (line 6)`},
		"duplicate field":     {head + "server:\n  address: a\n  address: b\n", `line 5`},
		"not a mapping":       {"- a\n", `the file must be a mapping of fields, found a list`},
		"number in a list":    {head + "signers:\n  - usages: [a, 7]\n", `signers[0].usages[1] (line 4): want a string, found a number`},
		"struct for a string": {head + "server: plain\n", `server (line 3): want a mapping of fields, found a string`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			var out testConfig
			err := configfile.Decode(path, "v1", "Test", &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode error = %v, want it to contain %q", err, tc.want)
			}
			for _, leak := range []string{"Go struct", "Go value", "of type", "metav1", "int64", "[]string"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("Decode error %q names Go types (%q)", err, leak)
				}
			}
		})
	}
}

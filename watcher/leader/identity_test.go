package leader

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
)

func testEnv(env map[string]string, files map[string]string) Env {
	return Env{
		Getenv: func(k string) string { return env[k] },
		ReadFile: func(p string) ([]byte, error) {
			if data, ok := files[p]; ok {
				return []byte(data), nil
			}
			return nil, fs.ErrNotExist
		},
		Hostname: func() (string, error) { return "node-1", nil },
		Rand:     bytes.NewReader([]byte{0xde, 0xad, 0xbe, 0xef}),
	}
}

func TestNamespace(t *testing.T) {
	sa := map[string]string{ServiceAccountNamespaceFile: "from-sa\n"}
	tests := []struct {
		name     string
		explicit string
		env      map[string]string
		files    map[string]string
		want     string
		wantErr  string
	}{
		{"explicit wins", "cfg", map[string]string{EnvPodNamespace: "env"}, sa, "cfg", ""},
		{"downward API", "", map[string]string{EnvPodNamespace: "env"}, sa, "env", ""},
		{"service account", "", nil, sa, "from-sa", ""},
		{"none", "", nil, nil, "", "set leaderElection.namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := testEnv(tt.env, tt.files).Namespace(tt.explicit)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Namespace() = %q, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Namespace() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	unreadable := testEnv(nil, nil)
	unreadable.ReadFile = func(string) ([]byte, error) { return nil, errors.New("permission denied") }
	if _, err := unreadable.Namespace(""); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("Namespace() with an unreadable file = %v, want the read error", err)
	}
}

func TestIdentity(t *testing.T) {
	if got, _ := testEnv(map[string]string{EnvPodName: "pod-x"}, nil).Identity("cfg"); got != "cfg" {
		t.Errorf("Identity(explicit) = %q", got)
	}
	if got, _ := testEnv(map[string]string{EnvPodName: "pod-x"}, nil).Identity(""); got != "pod-x" {
		t.Errorf("Identity() with $POD_NAME = %q, want pod-x", got)
	}
	if got, _ := testEnv(nil, nil).Identity(""); got != "node-1_deadbeef" {
		t.Errorf("Identity() = %q, want node-1_deadbeef", got)
	}
	a, _ := ProcessEnv().Identity("")
	b, _ := ProcessEnv().Identity("")
	if a == b && os.Getenv(EnvPodName) == "" {
		t.Errorf("two identities on one host are equal: %q", a)
	}
}

package atomicfile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/signet-pki/signet/internal/atomicfile"
)

// TestWrite: the file gets the data and mode, a second write replaces it whole, and no
// temporary file is left in the folder.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key.pem")
	for _, data := range []string{"first contents, longer than the second", "second"} {
		if err := atomicfile.Write(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("file holds %q, %v; want %q", got, err, data)
		}
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, %v; want 0600", info.Mode().Perm(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, atomicfile.TempPattern("key.pem"))); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if err := atomicfile.Write(filepath.Join(dir, "missing", "f"), nil, 0o600); err == nil {
		t.Error("writing into a missing folder succeeded")
	}
}

package ledger

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/signet-pki/signet/server/ledger/index"
)

// TestReadRefusesALengthNoLineHas: a position whose length no stored line can have (a damaged
// index) is refused as corruption before anything is allocated for it; a true one reads.
func TestReadRefusesALengthNoLineHas(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, segmentFile(1)), []byte("{\"seq\":1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := segmentReaders{dir: dir}
	defer r.close()
	if line, err := r.read(index.Pos{Segment: 1, Offset: 0, Length: 9}); err != nil || string(line) != `{"seq":1}` {
		t.Fatalf("read of the true position = %q, %v", line, err)
	}
	for _, n := range []uint32{maxWrite + 1, 1 << 31, ^uint32(0)} {
		if _, err := r.read(index.Pos{Segment: 1, Offset: 0, Length: n}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("read of a %d-byte line: %v, want ErrCorrupt", n, err)
		}
	}
}

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signet-pki/signet/server/ledger"
)

// TestLedgerReindexAndArchive: reindex refuses while the ledger is open (as with a running
// server), then rebuilds index.db and tiles/ from the segments, after which the ledger opens
// from the index (reading only its end) with the same root; verify names segments moved to an
// archive and succeeds when given it.
func TestLedgerReindexAndArchive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ledger")
	l, err := ledger.Open(dir, ledger.Options{SegmentSize: 64 << 10, Preallocate: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 600 {
		if _, err := l.Append(context.Background(), ledger.Record{Decision: ledger.Refused, Signer: "example.com/s",
			ObjectUID: fmt.Sprintf("uid-%04d", i), Reason: "POLICY_VIOLATION", Message: strings.Repeat("m", 300)}); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, errOut := runCmd("ledger", "reindex", "--dir", dir); code != 1 || !strings.Contains(errOut, "stop signet-server first") {
		t.Fatalf("reindex with the ledger open: exit %d, %q", code, errOut)
	}
	root, _ := l.Tree().Root()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "index.db")); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd("ledger", "reindex", "--dir", dir)
	if code != 0 || !strings.Contains(out, "ledger reindexed: 600 records read") {
		t.Fatalf("reindex: exit %d, %q %q", code, out, errOut)
	}
	l, err = ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Tree().Root(); got != root || l.Stats().ReadAtOpen > 1+255 {
		t.Errorf("after reindex: root %s (want %s), read %d records at open", got, root, l.Stats().ReadAtOpen)
	}
	if seq, _ := l.Last(); seq != 600 {
		t.Errorf("after reindex the ledger ends at %d: reindex appended a record", seq)
	}
	l.Close()

	archive := t.TempDir()
	for _, name := range []string{"ledger-000001.jsonl", "ledger-000002.jsonl"} {
		if err := os.Rename(filepath.Join(dir, name), filepath.Join(archive, name)); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, errOut := runCmd("ledger", "verify", "--dir", dir); code != 2 || !strings.Contains(errOut, "ledger-000001.jsonl to ledger-000002.jsonl") {
		t.Errorf("verify without the archive: exit %d, %q; want the archived segments named", code, errOut)
	}
	code, out, errOut = runCmd("ledger", "verify", "--dir", dir, "--archive", archive)
	if code != 0 || !strings.Contains(out, "ledger OK: 600 records") || !strings.Contains(out, "segments: ") {
		t.Errorf("verify with the archive: exit %d, %q %q", code, out, errOut)
	}
}

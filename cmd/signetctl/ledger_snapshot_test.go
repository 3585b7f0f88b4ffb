package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/ledger"
)

// TestLedgerOfflineLookupsUseTheIndex: with the server stopped, `ledger prove --dir` and
// `ledger list --dir --serial` find a record through the ledger's index and tiles. The proof
// is made, and verifies, with the oldest segments moved to archive storage: reading every
// record, as they did before the index, could not have made it. While the ledger is open
// (the server running) they read every record instead, and say so only by taking longer.
func TestLedgerOfflineLookupsUseTheIndex(t *testing.T) {
	key := newCheckpointKey(t, "ed25519")
	dir := filepath.Join(t.TempDir(), "ledger")
	l, err := ledger.Open(dir, ledger.Options{SegmentSize: 64 << 10, Preallocate: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	for i := 1; i <= n; i++ {
		if _, err := l.Append(context.Background(), issuedRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := l.Tree().Checkpoint(testOrigin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ledgerproof.NewNoteSigner(testOrigin, key.signer)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := ledgerproof.SignCheckpoint(c, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkpoint"), signed, 0o600); err != nil {
		t.Fatal(err)
	}
	serial := issuedRecord(n - 1).Serial

	// Open: the index is the server's; prove reads every record, and still answers.
	code, out, errOut := runCmd("ledger", "prove", "--dir", dir, "--serial", serial)
	if code != 0 || errOut != "" || parseBundle(t, out).Index != n-2 {
		t.Fatalf("prove while the ledger is open: exit %d, stderr %q", code, errOut)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// The segments of records 1-256 go (the tree's right edge, records 257-500, is read from
	// the segments at open, as a server's start reads it).
	segs, err := filepath.Glob(filepath.Join(dir, "ledger-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	archive, moved := t.TempDir(), 0
	for _, seg := range segs {
		lines := segmentLinesOf(t, seg)
		var last ledger.Record
		if err := json.Unmarshal(lines[len(lines)-1], &last); err != nil {
			t.Fatal(err)
		}
		if last.Seq <= 256 {
			if err := os.Rename(seg, filepath.Join(archive, filepath.Base(seg))); err != nil {
				t.Fatal(err)
			}
			moved++
		}
	}
	if moved < 2 {
		t.Fatalf("moved %d segments, want at least 2", moved)
	}
	code, out, errOut = runCmd("ledger", "prove", "--dir", dir, "--serial", serial)
	if code != 0 || errOut != "" {
		t.Fatalf("prove with the closed segments archived: exit %d, stderr %q", code, errOut)
	}
	if b := parseBundle(t, out); b.Index != n-2 {
		t.Fatalf("prove --serial of record %d: index %d", n-1, b.Index)
	}
	bundle := writeTemp(t, "record.proof", []byte(out))
	if code, vout, errOut := runCmd("ledger", "verify-proof", "--key", key.pubFile, bundle); code != 0 || !strings.Contains(vout, "inclusion proof OK: record 499 ") {
		t.Fatalf("verify-proof: exit %d\n%s%s", code, vout, errOut)
	}
	code, out, errOut = runCmd("ledger", "list", "--dir", dir, "--serial", serial)
	if code != 0 || errOut != "" || !strings.Contains(out, issuedRecord(n-1).ObjectUID) || strings.Count(strings.TrimSpace(out), "\n") != 1 {
		t.Fatalf("list --serial with the closed segments archived: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
}

// segmentLinesOf returns the record lines of one segment file.
func segmentLinesOf(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	for _, line := range bytes.Split(bytes.TrimRight(data, "\x00"), []byte{'\n'}) {
		if len(line) > 0 {
			lines = append(lines, line)
		}
	}
	return lines
}

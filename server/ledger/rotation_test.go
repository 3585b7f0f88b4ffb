package ledger_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/ledger"
)

// segmentsOf returns the segment files of dir, in order.
func segmentsOf(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "ledger-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// recordsOf returns the records of one segment file.
func recordsOf(t *testing.T, path string) []ledger.Record {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []ledger.Record
	for _, line := range bytes.Split(bytes.TrimRight(data, "\x00"), []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		var r ledger.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, r)
	}
	return out
}

// TestSegmentsRotateUnderLoad appends 6,000 records from 64 goroutines with 64 KiB segments:
// closed segments are read-only, hold only records, stay within the size, and each begins with
// the hash of the one before. Records at every boundary are proved against the root, a
// consistency proof spans segments, and lookups find records in closed segments, before and
// after a reopen.
func TestSegmentsRotateUnderLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ledger")
	opts := ledger.Options{SegmentSize: 64 << 10, Preallocate: 16 << 10}
	l, err := ledger.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	appendMany(t, l, 0, 6000)
	segs := segmentsOf(t, dir)
	if len(segs) < 10 || l.Stats().Rotations != uint64(len(segs)-1) {
		t.Fatalf("%d segments, %d rotations; want at least 10 segments of 64 KiB", len(segs), l.Stats().Rotations)
	}
	var boundaries []uint64
	prevHash, next := strings.Repeat("0", 64), uint64(1)
	for i, p := range segs {
		recs := recordsOf(t, p)
		if len(recs) == 0 || recs[0].Seq != next || recs[0].PrevHash != prevHash {
			t.Fatalf("%s: first record %+v, want seq %d chained to %s", filepath.Base(p), first(recs), next, prevHash)
		}
		last := recs[len(recs)-1]
		prevHash, next = last.Hash, last.Seq+1
		if i == len(segs)-1 {
			break
		}
		boundaries = append(boundaries, last.Seq, last.Seq+1)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(p)
		if fi.Mode().Perm() != 0o400 || fi.Size() > 64<<10 || data[len(data)-1] != '\n' {
			t.Errorf("closed %s: mode %v, %d bytes, ends %q; want 0400, at most 64 KiB, records only", filepath.Base(p), fi.Mode().Perm(), fi.Size(), data[len(data)-1])
		}
	}
	for _, seq := range boundaries {
		verifyInclusion(t, l, seq)
	}
	mid := l.Tree().Size()
	appendMany(t, l, 10_000, 2000)
	checkConsistency(t, l.Tree(), int64(boundaries[1]), l.Tree().Size())
	checkConsistency(t, l.Tree(), mid, l.Tree().Size())
	found := func(l *ledger.Ledger) {
		t.Helper()
		recs, err := l.Find("uid-0010", "")
		if err != nil || len(recs) != 1 || recs[0].Serial != fmt.Sprintf("%032x", 11) {
			t.Fatalf("Find uid-0010: %v, %v", recs, err)
		}
		recs, err = l.Find("", fmt.Sprintf("0x%x", 11))
		if err != nil || len(recs) != 1 || recs[0].ObjectUID != "uid-0010" {
			t.Fatalf("Find serial 0xb: %v, %v", recs, err)
		}
	}
	found(l)
	root, _ := l.Tree().Root()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := ledger.Verify(dir)
	if err != nil || rep.Segments != len(segmentsOf(t, dir)) || rep.LastSeq != 8000 {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
	l, err = ledger.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got, _ := l.Tree().Root(); got != root {
		t.Errorf("root after reopen %s, want %s", got, root)
	}
	found(l)
	for _, seq := range boundaries {
		verifyInclusion(t, l, seq)
	}
}

func checkConsistency(t *testing.T, tree *ledgerproof.Tree, old, size int64) {
	t.Helper()
	proof, err := tree.ProveConsistency(old, size)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := tree.RootAt(old)
	b, _ := tree.RootAt(size)
	if err := ledgerproof.VerifyConsistency(ledgerproof.Checkpoint{Size: old, Hash: a}, ledgerproof.Checkpoint{Size: size, Hash: b}, proof); err != nil {
		t.Fatalf("consistency %d → %d: %v", old, size, err)
	}
}

// TestArchivedSegments moves the oldest closed segments to another folder, as an operator
// moving them to archive storage would: the server still opens (their state records are in
// the index), a record in them is refused by name, an offline verify and audit say which
// segments are missing and succeed when given the archive, and everything works again once
// they are put back.
func TestArchivedSegments(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ledger")
	opts := ledger.Options{SegmentSize: 64 << 10, Preallocate: 16 << 10}
	l, err := ledger.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	appendMany(t, l, 0, 3000)
	root, _ := l.Tree().Root()
	size := l.Tree().Size()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segmentsOf(t, dir)
	archive := t.TempDir()
	for _, p := range segs[:3] {
		if err := os.Rename(p, filepath.Join(archive, filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}

	var replayed []ledger.Record
	l, err = ledger.Open(dir, ledger.Options{SegmentSize: opts.SegmentSize, ReplayFrom: time.Now().Add(time.Hour), Replay: func(r ledger.Record) error {
		if r.Decision == ledger.Rotated {
			replayed = append(replayed, r)
		}
		return nil
	}})
	if err != nil {
		t.Fatalf("Open with the oldest segments archived: %v", err)
	}
	if len(replayed) != 1 {
		t.Errorf("replayed %d Rotated records, want the one in the archived segment 1 (from the index)", len(replayed))
	}
	if _, err := l.Line(2); !errors.Is(err, ledger.ErrSegmentsArchived) || !strings.Contains(err.Error(), "ledger-000001.jsonl") {
		t.Errorf("Line of a record in an archived segment: %v, want ErrSegmentsArchived naming ledger-000001.jsonl", err)
	}
	verifyInclusion(t, l, uint64(size))
	l.Close()

	if _, err := ledger.Verify(dir); !errors.Is(err, ledger.ErrSegmentsArchived) || !strings.Contains(err.Error(), "ledger-000001.jsonl to ledger-000003.jsonl") {
		t.Errorf("Verify without the archive: %v, want the missing segments named", err)
	}
	tree := &ledgerproof.Tree{}
	rep, err := ledger.Leaves(dir, func(_ ledger.Record, line []byte) {
		if _, err := tree.Append(line); err != nil {
			t.Fatal(err)
		}
	}, archive)
	if err != nil || rep.Segments != len(segs) {
		t.Fatalf("Leaves with the archive: %+v, %v", rep, err)
	}
	if got, _ := tree.RootAt(size); got != root {
		t.Errorf("audit with the archive: root %s, want %s", got, root)
	}

	for _, p := range segs[:3] {
		if err := os.Rename(filepath.Join(archive, filepath.Base(p)), p); err != nil {
			t.Fatal(err)
		}
	}
	l, err = ledger.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	verifyInclusion(t, l, 2)
}

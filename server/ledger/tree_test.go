package ledger_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/ledger"
)

// fileTree builds the tree of the records in dir's segment from its lines, independently of
// the Ledger's own.
func fileTree(t *testing.T, dir string) (*ledgerproof.Tree, [][]byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, segment))
	if err != nil {
		t.Fatal(err)
	}
	tree := &ledgerproof.Tree{}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(bytes.TrimRight(data, "\x00")))
	sc.Buffer(nil, 2<<20)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		lines = append(lines, line)
		if _, err := tree.Append(line); err != nil {
			t.Fatal(err)
		}
	}
	return tree, lines
}

func root(t *testing.T, tree *ledgerproof.Tree) tlog.Hash {
	t.Helper()
	h, err := tree.Root()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestTreeOfAcknowledgedRecords: the Ledger's tree has one leaf per acknowledged record, the
// line as stored; after a failed sync and recovery it holds no leaf of an unacknowledged
// record; after its segment is restored Line reads the restored file; a reopened ledger
// rebuilds the same tree; inclusion proofs verify against its root.
func TestTreeOfAcknowledgedRecords(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ff := &faultyFile{}
	l := f.openFaulty(t, ff)
	if _, errs := appendConcurrently(l, 40); errs[0] != nil {
		t.Fatal(errs[0])
	}
	ff.failSync.Store(true)
	appendConcurrently(l, 8)
	ff.failSync.Store(false)
	ledger.Recover(l)
	appendN(t, l, 100, 5)
	if err := os.Remove(filepath.Join(f.dir, segment)); err != nil {
		t.Fatal(err)
	}
	ledger.CheckSegment(l) // restores it
	appendN(t, l, 300, 5)

	want, lines := fileTree(t, f.dir)
	if got := l.Tree().Size(); got != 50 || want.Size() != 50 {
		t.Fatalf("tree size %d, file has %d lines; want 50 acknowledged records", got, want.Size())
	}
	if root(t, l.Tree()) != root(t, want) {
		t.Fatal("the ledger's tree root differs from the tree of the segment's lines")
	}
	c, err := l.Tree().Checkpoint("example.com/ledger")
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range lines {
		seq := uint64(i + 1)
		got, err := l.Line(seq)
		if err != nil || !bytes.Equal(got, line) {
			t.Fatalf("Line(%d) = %q, %v; want %q", seq, got, err, line)
		}
		proof, err := l.Tree().ProveInclusion(int64(i), c.Size)
		if err != nil {
			t.Fatal(err)
		}
		if err := ledgerproof.VerifyInclusion(got, int64(i), proof, c); err != nil {
			t.Fatalf("inclusion of record %d: %v", seq, err)
		}
	}
	if _, err := l.Line(51); err == nil {
		t.Error("Line(51) of a 50-record ledger succeeded")
	}
	l.Close()
	l2 := f.open(t)
	if l2.Tree().Size() != 50 || root(t, l2.Tree()) != root(t, want) {
		t.Error("the reopened ledger rebuilt another tree")
	}
}

// TestLeaves: Leaves passes every record with its stored line, in seq order, and the tree
// built from the lines is the Ledger's.
func TestLeaves(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	l := f.open(t)
	appendN(t, l, 0, 12)
	tree := &ledgerproof.Tree{}
	var last uint64
	rep, err := ledger.Leaves(f.dir, func(r ledger.Record, line []byte) {
		seq := r.Seq
		if seq != last+1 {
			t.Errorf("leaf seq %d after %d", seq, last)
		}
		last = seq
		if got, err := l.Line(seq); err != nil || !bytes.Equal(got, line) {
			t.Errorf("leaf %d = %q, Line = %q, %v", seq, line, got, err)
		}
		if _, err := tree.Append(line); err != nil {
			t.Fatal(err)
		}
	})
	if err != nil || rep.Records != 12 || last != 12 {
		t.Fatalf("Leaves: %+v, %v, last seq %d", rep, err, last)
	}
	if root(t, tree) != root(t, l.Tree()) {
		t.Error("the tree of Leaves differs from the Ledger's")
	}
}

package ledger

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/signet-pki/signet/ledgerproof"
)

// The ledger's records are the leaves of a Merkle tree (RFC 6962, ledgerproof): leaf i is
// the line of the record of seq i+1 without its newline. The Ledger keeps the tree of its
// acknowledged records in memory (about 64 bytes per record), built by Open from the records
// it verifies and extended by every batch once it is fsynced and checked, and the offset of
// each record's line in the segment, so that a proof can carry the record itself.

// index is the tree of the acknowledged records and where each one's line starts.
type index struct {
	tree *ledgerproof.Tree

	mu     sync.RWMutex
	starts []int64 // starts[i]: offset of the line of seq i+1
	end    int64   // offset just after the last acknowledged line
}

func newIndex() *index { return &index{tree: &ledgerproof.Tree{}} }

// add appends the acknowledged line written at offset start (with or without its newline).
func (x *index) add(start int64, line []byte) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	if _, err := x.tree.Append(line); err != nil {
		// Lines are sealed records: never empty, never holding a newline, at most maxWrite.
		panic(fmt.Sprintf("ledger: a sealed record is not a tree leaf: %v", err))
	}
	x.mu.Lock()
	x.starts = append(x.starts, start)
	x.end = start + int64(len(line)) + 1
	x.mu.Unlock()
}

// span returns the offset and length (newline excluded) of the line of seq.
func (x *index) span(seq uint64) (int64, int, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := uint64(len(x.starts))
	if seq < 1 || seq > n {
		return 0, 0, false
	}
	start, end := x.starts[seq-1], x.end
	if seq < n {
		end = x.starts[seq]
	}
	return start, int(end - start - 1), true
}

// Tree returns the Merkle tree of the acknowledged records (read only; it grows as records
// are acknowledged).
func (l *Ledger) Tree() *ledgerproof.Tree { return l.index.tree }

// Line returns the stored line (without its newline) of the acknowledged record seq: the
// tree's leaf. It fails for a seq not acknowledged yet.
func (l *Ledger) Line(seq uint64) ([]byte, error) {
	start, n, ok := l.index.span(seq)
	if !ok {
		return nil, fmt.Errorf("reading record %d of ledger %s: no such record", seq, l.dir)
	}
	l.fileMu.RLock()
	defer l.fileMu.RUnlock()
	line := make([]byte, n)
	if _, err := l.file.ReadAt(line, start); err != nil {
		return nil, fmt.Errorf("reading record %d of ledger %s: %w", seq, l.dir, err)
	}
	return line, nil
}

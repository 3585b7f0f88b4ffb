package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

// racingFile serves before until a read reaches switchAt, and after from the next read on:
// what a reader sees of a segment while the writer fills the free space behind it.
type racingFile struct {
	before, after []byte
	switchAt      int64
	switched      bool
}

func (r *racingFile) ReadAt(p []byte, off int64) (int, error) {
	src := r.before
	if r.switched {
		src = r.after
	}
	if off+int64(len(p)) > r.switchAt {
		r.switched = true
	}
	if off >= int64(len(src)) {
		return 0, io.EOF
	}
	n := copy(p, src[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// chainOf returns n sealed records' lines.
func chainOf(t *testing.T, n int) []byte {
	t.Helper()
	var b []byte
	prev := zeroHash
	for i := 1; i <= n; i++ {
		r := Record{Seq: uint64(i), Time: time.Unix(int64(i), 0).UTC(), Decision: Refused, Signer: "s", Reason: "X",
			Message: fmt.Sprintf("record %d of a chain that is longer than one write can be", i), PrevHash: prev}
		line, err := r.Seal()
		if err != nil {
			t.Fatal(err)
		}
		b, prev = append(b, line...), r.Hash
	}
	return b
}

// TestWalkRereadsAfterRacingTheWriter: a reader that read the free space at the last complete
// line before the writer filled it, and then records far beyond, reads again from that line
// and goes on; the same view on a second read is corruption.
func TestWalkRereadsAfterRacingTheWriter(t *testing.T) {
	t.Parallel()
	records := chainOf(t, 20000)
	if len(records) < 2*maxWrite {
		t.Fatalf("chain of %d bytes, want more than two writes", len(records))
	}
	after := append(records, make([]byte, 4<<20)...)
	first := bytesAfterLine(records, 10) // the reader saw 10 records, then zeros
	before := append([]byte(nil), after...)
	clear(before[first : first+64<<10])

	rf := &racingFile{before: before, after: after, switchAt: int64(first + maxWrite)}
	c := newChain("dir")
	good, err := c.walk(rf, 1, true, nil, nil)
	rep := c.rep
	if err != nil || rep.Records != 20000 || good != int64(len(records)) || rep.TornTail != 0 || rep.FreeSpace != 4<<20 {
		t.Errorf("walk of the racing view: %+v, good %d, %v; want every record", rep, good, err)
	}

	rf = &racingFile{before: before, after: before, switchAt: int64(first + maxWrite)}
	c = newChain("dir")
	good, err = c.walk(rf, 1, true, nil, nil)
	rep = c.rep
	var ce *CorruptionError
	line := 11 + bytes.Count(before[first:first+maxWrite], []byte{'\n'})
	if !errors.As(err, &ce) || rep.Records != 10 || good != int64(first) || ce.Line != line || ce.Offset != int64(first+maxWrite) {
		t.Errorf("walk of data that stays out of reach: %+v, good %d, %v; want a corruption at line %d", rep, good, err, line)
	}
}

// bytesAfterLine returns the offset just after the n-th line of b.
func bytesAfterLine(b []byte, n int) int {
	off := 0
	for range n {
		for b[off] != '\n' {
			off++
		}
		off++
	}
	return off
}

package ledger

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Report summarizes a ledger that was read (and verified up to its first problem, if any).
type Report struct {
	// Dir is the ledger directory.
	Dir string
	// File is the last segment that was read.
	File string
	// Segments is the number of segments read (their files are FirstSegment's and the
	// following ones, up to File).
	Segments int
	// FirstSegment is the file name of the first segment read.
	FirstSegment string
	// Records is the number of intact records (before the first problem, if any).
	Records int
	// FirstSeq and LastSeq are the seq of the first and last intact records (0 when none).
	FirstSeq, LastSeq uint64
	// FirstTime and LastTime are their times.
	FirstTime, LastTime time.Time
	// LastHash is the last intact record's Hash: the value to anchor outside the ledger.
	LastHash string
	// TornTail is the size in bytes of a torn tail after the last complete line: an
	// unterminated line, or what a crash left of an unacknowledged write (see the package
	// doc's Recovery), up to its last non-zero byte. Verify ignores it; Open truncates it.
	TornTail int64
	// FreeSpace is the number of zero bytes after the records (and after a torn tail, if any):
	// the preallocated space the next records are written into.
	FreeSpace int64
}

// Verify reads the ledger in dir and checks every record: the canonical encoding, each Hash,
// Seq continuity from 1 and the PrevHash links. It needs no lock and never writes. It returns
// the report and, for the first problem found, an error wrapping a *CorruptionError (which
// wraps ErrCorrupt); the report then covers the records before the problem. A torn tail is not
// a problem (Report.TornTail), nor are the zeros of the free space (Report.FreeSpace); data in
// the free space beyond the reach of a torn write is. Every segment is read, in order, and
// the chain runs on from one segment into the next; closed segments moved to archive storage
// are looked for in the archives directories, and one found nowhere is an error naming it.
func Verify(dir string, archives ...string) (Report, error) {
	rep, err := readAll(dir, archives, nil, nil)
	if err != nil {
		return rep, fmt.Errorf("verifying ledger %s: %w", dir, err)
	}
	return rep, nil
}

// Replay verifies the ledger in dir as Verify does and calls fn, in seq order, for every intact
// record whose Time is not before since. It stops at the first problem or at fn's first error,
// and returns it wrapped; records before a problem have already been passed to fn. Replay
// reads without the lock, so it can run while a Ledger appends (a write in progress shows as a
// torn tail and is skipped).
func Replay(dir string, since time.Time, fn func(Record) error) error {
	_, err := readAll(dir, nil, func(r Record) error {
		if r.Time.Before(since) {
			return nil
		}
		if err := fn(r); err != nil {
			return fmt.Errorf("record %d: %w", r.Seq, err)
		}
		return nil
	}, nil)
	if err != nil {
		return fmt.Errorf("replaying ledger %s: %w", dir, err)
	}
	return nil
}

// Leaves verifies the ledger in dir as Verify does and calls fn, in seq order, with every
// intact record and its line as stored, without its newline: the leaves of the ledger's
// Merkle tree (ledgerproof), for audits with no server running. It returns Verify's report
// and error. Segments moved to archive storage are looked for in archives, as Verify does.
func Leaves(dir string, fn func(r Record, line []byte), archives ...string) (Report, error) {
	rep, err := readAll(dir, archives, nil, func(_ uint32, _ int64, r Record, line []byte) error { fn(r, line); return nil })
	if err != nil {
		return rep, fmt.Errorf("verifying ledger %s: %w", dir, err)
	}
	return rep, nil
}

// read reads every segment of dir (readAll with no archives and no leaf function).
func read(dir string, fn func(Record) error) (Report, error) { return readAll(dir, nil, fn, nil) }

// leafFunc is called by a walk for every intact record with its segment, the offset of its
// line, the record and the line (without "\n").
type leafFunc func(segment uint32, start int64, r Record, line []byte) error

// readAll reads the segments of dir (and archives), from segment 1 to the last, read-only,
// checking one chain across them, and calls fn and leaf for every intact record.
func readAll(dir string, archives []string, fn func(Record) error, leaf leafFunc) (Report, error) {
	rep := Report{Dir: dir, File: firstSegment}
	set, err := findSegments(dir, archives...)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return rep, fmt.Errorf("opening %s: %w", filepath.Join(dir, firstSegment), err)
	case err != nil:
		return rep, err
	case len(set.nums) == 0:
		return rep, fmt.Errorf("opening %s: %w", filepath.Join(dir, firstSegment), os.ErrNotExist)
	}
	if err := set.missingBefore(dir); err != nil {
		return rep, err
	}
	c := newChain(dir)
	for _, n := range set.nums {
		f, err := os.Open(set.path(n))
		if err != nil {
			return c.rep, err
		}
		_, err = c.walk(f, n, n == set.last(), fn, leaf)
		f.Close()
		if err != nil {
			return c.rep, err
		}
	}
	return c.rep, nil
}

// newChain starts a walk at the beginning of the history.
func newChain(dir string) *chain {
	return &chain{rep: Report{Dir: dir, File: firstSegment, FirstSegment: firstSegment}, prevHash: zeroHash}
}

// walk reads the records of segment seg from r (from offset 0, or from c.at when resuming
// within it) and checks them against the chain, calling fn (if not nil) for each intact
// record, after leaf (if not nil). It returns the offset just after the last complete line,
// where a torn tail or the free space starts. Only the last segment may end with a torn
// tail: in a closed one, whose writes all completed before the next segment began, it is a
// problem.
func (c *chain) walk(r io.ReaderAt, seg uint32, last bool, fn func(Record) error, leaf leafFunc) (int64, error) {
	c.file = segmentFile(seg)
	if c.rep.Segments == 0 {
		c.rep.FirstSegment = c.file
	}
	c.rep.Segments++
	c.rep.File = c.file
	c.sc = newScannerAt(r, c.at.off, c.at.line)
	c.at = resume{}
	rewound := int64(-1)
	for {
		line, ok, err := c.sc.next()
		var far *dataInFreeSpace
		if errors.As(err, &far) {
			// A reader racing the writer may have read the free space at the last complete line
			// before a write landed there and, later, a write far beyond it. The writer finishes
			// each write before it starts the next, so reading again from that line now shows the
			// earlier write; data still unreachable from there was not written by the ledger.
			if rewound != c.sc.good {
				rewound = c.sc.good
				c.sc.rewind()
				continue
			}
			return c.sc.good, c.freeSpaceProblem(far)
		}
		if err != nil {
			return c.sc.good, fmt.Errorf("reading %s: %w", c.file, err)
		}
		if !ok {
			c.rep.TornTail, c.rep.FreeSpace = c.sc.tail, c.sc.free
			if !last && c.sc.tail > 0 {
				return c.sc.good, &CorruptionError{File: c.file, Line: c.sc.line + 1, Offset: c.sc.good, Seq: c.rep.LastSeq + 1, Problem: fmt.Sprintf(
					"%s (offset %d): a partial record at the end of a closed segment — the segment was changed after it was closed", c.file, c.sc.good)}
			}
			return c.sc.good, nil
		}
		rec, err := c.check(line)
		if err != nil {
			return c.sc.good, err
		}
		c.accept(rec)
		if leaf != nil {
			if err := leaf(seg, c.sc.start, rec, line); err != nil {
				return c.sc.good, err
			}
		}
		if fn != nil {
			if err := fn(rec); err != nil {
				return c.sc.good, err
			}
		}
	}
}

// chain is the state of a walk: the next expected seq and the hash it must link to.
type chain struct {
	sc       *scanner
	rep      Report
	prevHash string
	file     string // the segment being read
	at       resume // where the next walk starts in its segment (the zero value: at its start)
}

// resume is a position within a segment to walk on from: the offset of a line and its
// 1-based line number minus one (0 when the number is not known: problems then give the
// offset).
type resume struct {
	off  int64
	line int
}

// accept advances the chain past an intact record.
func (c *chain) accept(r Record) {
	if c.rep.Records == 0 {
		c.rep.FirstSeq, c.rep.FirstTime = r.Seq, r.Time
	}
	c.rep.Records++
	c.rep.LastSeq, c.rep.LastTime, c.rep.LastHash = r.Seq, r.Time, r.Hash
	c.prevHash = r.Hash
}

// check decodes the line at c.sc.line and checks it against the chain, in this order: it is
// shorter than maxWrite, it decodes, its Hash matches its content, it is canonical, its seq follows, its decision is
// valid, its PrevHash links to the record before it.
func (c *chain) check(line []byte) (Record, error) {
	n, want := c.sc.line, c.rep.LastSeq+1
	if len(line) >= maxWrite { // Append refuses such a record; it is not a tree leaf either
		return Record{}, c.problem(n, want, "line %d of %s: %d bytes, longer than any line the ledger writes (less than %d) — the line was not written by the ledger",
			n, c.file, len(line), maxWrite)
	}
	r, canonical, err := decodeLine(line)
	if err != nil {
		return r, c.problem(n, want, "line %d of %s: not a ledger record (%v) — the line was damaged", n, c.file, err)
	}
	where := fmt.Sprintf("record %d (line %d of %s)", r.Seq, n, c.file)
	if sum, err := r.ComputeHash(); err != nil || sum != r.Hash {
		return r, c.problem(n, r.Seq, "%s: hash mismatch — the record was changed", where)
	}
	if !canonical {
		return r, c.problem(n, r.Seq, "%s: not in canonical encoding — the line was rewritten", where)
	}
	if r.Seq != want {
		return r, c.seqProblem(r.Seq, want)
	}
	if err := r.Validate(); err != nil {
		return r, c.problem(n, r.Seq, "%s: %v", where, err)
	}
	if r.PrevHash != c.prevHash {
		if want == 1 {
			return r, c.problem(n, r.Seq, "%s: prevHash is not all zeros — records before it were removed", where)
		}
		return r, c.problem(n, r.Seq, "%s: chain broken — prevHash does not match the hash of record %d (a record before it was changed and re-hashed, or replaced)", where, want-1)
	}
	return r, nil
}

// seqProblem describes a record at line c.sc.line with seq found where seq want was expected.
// When found is want+1 and the next line holds want, the two were swapped.
func (c *chain) seqProblem(found, want uint64) error {
	n := c.sc.line
	switch {
	case found == want+1:
		if next, ok := c.sc.peek(); ok {
			if r, _, err := decodeLine(next); err == nil && r.Seq == want {
				return c.problem(n, want, "records %d and %d out of order (lines %d and %d of %s) — the records were reordered", want, found, n, n+1, c.file)
			}
		}
		return c.problem(n, want, "record %d missing: expected seq %d, found %d at line %d of %s — a record was removed", want, want, found, n, c.file)
	case found > want:
		return c.problem(n, want, "records %d–%d missing: expected seq %d, found %d at line %d of %s — records were removed", want, found-1, want, found, n, c.file)
	default:
		return c.problem(n, want, "record %d out of order: expected seq %d, found %d at line %d of %s — a record was duplicated, inserted or reordered", found, want, found, n, c.file)
	}
}

// problem reports a problem with the line last returned by the scanner.
func (c *chain) problem(line int, seq uint64, format string, args ...any) error {
	return &CorruptionError{File: c.file, Line: line, Offset: c.sc.start, Seq: seq, Problem: fmt.Sprintf(format, args...)}
}

// freeSpaceProblem reports data in the free space.
func (c *chain) freeSpaceProblem(far *dataInFreeSpace) error {
	line := c.sc.line + 1 + far.newlines
	return &CorruptionError{File: c.file, Line: line, Offset: far.off, Seq: c.rep.LastSeq + 1, Problem: fmt.Sprintf(
		"line %d of %s (offset %d): data in the zero-filled free space after the last record, which ends at offset %d — bytes were written after the end of the ledger",
		line, c.file, far.off, c.sc.good)}
}

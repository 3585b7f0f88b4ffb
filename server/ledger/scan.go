package ledger

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
)

// scanner splits a segment into "\n"-terminated lines, with one line of look-ahead, and
// measures the tail after the last complete line: torn bytes, then free space (see tailScan).
type scanner struct {
	src   io.ReaderAt
	r     *bufio.Reader
	line  int   // 1-based number of the line last returned by next
	start int64 // offset of the line last returned by next
	good  int64 // offset just after the last complete line returned by next
	tail  int64 // once next has returned !ok: bytes of a torn write after good
	free  int64 // once next has returned !ok: the zero bytes after them, to the end
	pk    []byte
	pkOK  bool
	pkErr error
	hasPk bool
}

func newScanner(src io.ReaderAt) *scanner { return newScannerAt(src, 0, 0) }

// newScannerAt returns a scanner that starts at offset off, the start of the line after line
// number line.
func newScannerAt(src io.ReaderAt, off int64, line int) *scanner {
	s := &scanner{src: src, r: bufio.NewReaderSize(nil, 64<<10), good: off, start: off, line: line}
	s.rewind()
	return s
}

// rewind forgets what was read after the last complete line and reads on from there again.
func (s *scanner) rewind() {
	s.r.Reset(io.NewSectionReader(s.src, s.good, math.MaxInt64-s.good))
	s.hasPk, s.pk = false, nil
}

// readLine reads the next line, "\n" included. complete is false when a NUL byte or the end
// of the file comes before a "\n": line then holds the bytes read so far, the start of the
// tail. Records never contain a NUL byte (JSON escapes it).
func (s *scanner) readLine() (line []byte, complete bool, err error) {
	for {
		frag, err := s.r.ReadSlice('\n')
		line = append(line, frag...)
		switch {
		case bytes.IndexByte(frag, 0) >= 0:
			return line, false, nil
		case err == nil:
			return line, true, nil
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return line, false, nil
		default:
			return nil, false, err
		}
	}
}

// read returns the peeked line, if any, or reads the next one.
func (s *scanner) read() ([]byte, bool, error) {
	if s.hasPk {
		s.hasPk = false
		return s.pk, s.pkOK, s.pkErr
	}
	return s.readLine()
}

// next returns the next complete line without its "\n"; ok is false at the tail, once it has
// been read to the end and s.tail and s.free are set. A *dataInFreeSpace error says that
// non-zero bytes lie in the free space beyond where a write of the ledger can reach.
func (s *scanner) next() ([]byte, bool, error) {
	line, complete, err := s.read()
	if err != nil {
		return nil, false, err
	}
	if !complete {
		return nil, false, s.scanTail(line)
	}
	s.line++
	s.start = s.good
	s.good += int64(len(line))
	return bytes.TrimSuffix(line, []byte{'\n'}), true, nil
}

// peek returns the line after the one next last returned, if it is complete, without
// consuming it.
func (s *scanner) peek() ([]byte, bool) {
	if !s.hasPk {
		s.pk, s.pkOK, s.pkErr = s.readLine()
		s.hasPk = true
	}
	if s.pkErr != nil || !s.pkOK {
		return nil, false
	}
	return bytes.TrimSuffix(s.pk, []byte{'\n'}), true
}

// scanTail reads the segment to its end from the last complete line, whose first bytes head
// have already been read, and sets s.tail and s.free.
func (s *scanner) scanTail(head []byte) error {
	t := tailScan{off: s.good, lastData: s.good, limit: s.good + maxWrite}
	if err := t.add(head); err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := s.r.Read(buf)
		if err := t.add(buf[:n]); err != nil {
			return err
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	s.tail, s.free = t.lastData-s.good, t.off-t.lastData
	return nil
}

// tailScan classifies the bytes after the last complete line. Free space is zeros, and the
// ledger writes records only into it, one write at a time, each fsynced before the next, and
// none longer than maxWrite. A write that was never acknowledged (cut short by a crash, or
// still in progress while a reader reads) can leave any mix of its bytes and the zeros they
// replace: an overwrite in place does not reach the disk in order, so a later block can land
// without an earlier one. Those bytes all lie within maxWrite of the last complete line: they
// are the torn tail. Non-zero bytes after a zero byte and further than that were not written by
// the ledger.
type tailScan struct {
	off      int64 // offset of the next byte
	lastData int64 // offset just after the last torn (non-zero) byte; the tail start if none
	limit    int64 // no torn byte lies at or after it
	zero     bool  // a zero byte was seen
	newlines int   // "\n" bytes seen
}

// dataInFreeSpace is a non-zero byte in the free space, past where a write can reach.
type dataInFreeSpace struct {
	off      int64 // its offset
	newlines int   // "\n" bytes between the last complete line and it
}

func (e *dataInFreeSpace) Error() string { return "data in the free space" }

// add scans b, the bytes at t.off.
func (t *tailScan) add(b []byte) error {
	for len(b) > 0 {
		c := b[:min(len(b), len(zeroBlock))]
		if bytes.Equal(c, zeroBlock[:len(c)]) {
			t.zero = true
		} else if err := t.data(c); err != nil {
			return err
		}
		t.off += int64(len(c))
		b = b[len(c):]
	}
	return nil
}

// data scans c, bytes at t.off of which some are not zero.
func (t *tailScan) data(c []byte) error {
	for i, x := range c {
		switch off := t.off + int64(i); {
		case x == 0:
			t.zero = true
		case t.zero && off >= t.limit:
			return &dataInFreeSpace{off: off, newlines: t.newlines + bytes.Count(c[:i], []byte{'\n'})}
		default:
			t.lastData = off + 1
		}
	}
	t.newlines += bytes.Count(c, []byte{'\n'})
	return nil
}

package ledger

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/ledger/index"
)

// The ledger's records are the leaves of a Merkle tree (RFC 6962, ledgerproof): leaf i is
// the line of the record of seq i+1 without its newline. The tree lives on disk as tiles
// (ledgerproof.OpenTiles; its right edge in memory), grown by every batch once it is fsynced
// and checked. A record is found through the index (or, until the indexer has written it,
// the indexer's queue), read from its segment and checked against its leaf before it is
// given out: a proof never carries a record the tree does not hold.

// errShortSegment: a segment ends before a record the index places in it.
var errShortSegment = errors.New("the segment is shorter than the index says")

// maxOpenSegments bounds the read-only segment handles kept open for Line.
const maxOpenSegments = 16

// segmentReaders keeps read-only handles of segments for reading records by position.
type segmentReaders struct {
	dir   string
	mu    sync.Mutex
	files map[uint32]*os.File
	order []uint32 // oldest first
}

// file returns a read-only handle of segment seg.
func (s *segmentReaders) file(seg uint32) (*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.files[seg]; ok {
		return f, nil
	}
	f, err := os.Open(filepath.Join(s.dir, segmentFile(seg)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s is not in %s (moved to archive storage?)", ErrSegmentsArchived, segmentFile(seg), s.dir)
	}
	if err != nil {
		return nil, err
	}
	if s.files == nil {
		s.files = map[uint32]*os.File{}
	}
	if len(s.order) >= maxOpenSegments {
		old := s.order[0]
		s.files[old].Close()
		delete(s.files, old)
		s.order = s.order[1:]
	}
	s.files[seg] = f
	s.order = append(s.order, seg)
	return f, nil
}

// forget closes the handle of seg, if any (its file was replaced or restored).
func (s *segmentReaders) forget(seg uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.files[seg]; ok {
		f.Close()
		delete(s.files, seg)
		s.order = slices.DeleteFunc(s.order, func(n uint32) bool { return n == seg })
	}
}

// read returns the line at pos (without its newline).
func (s *segmentReaders) read(pos index.Pos) ([]byte, error) {
	f, err := s.file(pos.Segment)
	if err != nil {
		return nil, err
	}
	if pos.Length > maxWrite {
		// No stored line is longer: a position that says so comes from a damaged index, and
		// must not become an allocation of up to 4 GiB.
		return nil, fmt.Errorf("%w: the index places a line of %d bytes at %s offset %d, more than a ledger line may have (%d); rebuild the index (signetctl ledger reindex)",
			ErrCorrupt, pos.Length, segmentFile(pos.Segment), pos.Offset, maxWrite)
	}
	line := make([]byte, pos.Length)
	if _, err := f.ReadAt(line, pos.Offset); err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: %s ends before offset %d", errShortSegment, segmentFile(pos.Segment), pos.Offset+int64(pos.Length))
		}
		return nil, err
	}
	return line, nil
}

// firstSeq returns the seq of the first record of segment seg, 0 when it has none.
func (s *segmentReaders) firstSeq(seg uint32) (uint64, error) {
	f, err := s.file(seg)
	if err != nil {
		return 0, err
	}
	line, ok, err := newScanner(f).next()
	if err != nil {
		var far *dataInFreeSpace
		if errors.As(err, &far) {
			return 0, nil
		}
		return 0, fmt.Errorf("reading the first record of %s: %w", segmentFile(seg), err)
	}
	if !ok {
		return 0, nil
	}
	r, _, err := decodeLine(line)
	if err != nil {
		return 0, fmt.Errorf("reading the first record of %s: %w", segmentFile(seg), err)
	}
	return r.Seq, nil
}

func (s *segmentReaders) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.Close())
	}
	s.files, s.order = nil, nil
	return errors.Join(errs...)
}

// Tree returns the Merkle tree of the acknowledged records (read only; it grows as records
// are acknowledged).
func (l *Ledger) Tree() *ledgerproof.Tree { return l.tree }

// Line returns the stored line (without its newline) of the acknowledged record seq: the
// tree's leaf, checked against it. It fails for a seq not acknowledged yet, and with an error
// wrapping ErrSegmentsArchived for a record whose segment is not in the ledger directory.
func (l *Ledger) Line(seq uint64) ([]byte, error) {
	if seq < 1 || int64(seq) > l.tree.Size() {
		return nil, fmt.Errorf("reading record %d of ledger %s: no such record", seq, l.dir)
	}
	pos, ok := l.indexer.pos(seq)
	if !ok {
		var err error
		if pos, ok, err = l.idx.Pos(seq); err != nil || !ok {
			return nil, fmt.Errorf("reading record %d of ledger %s: not in its index (%v)", seq, l.dir, err)
		}
	}
	var line []byte
	var err error
	l.fileMu.RLock()
	if pos.Segment == l.seg {
		line = make([]byte, pos.Length)
		_, err = l.file.ReadAt(line, pos.Offset)
	}
	l.fileMu.RUnlock()
	if line == nil {
		line, err = l.readers.read(pos)
	}
	if err != nil {
		return nil, fmt.Errorf("reading record %d of ledger %s: %w", seq, l.dir, err)
	}
	if err := checkLeaf(l.tree, seq, pos, line); err != nil {
		return nil, fmt.Errorf("reading record %d of ledger %s: %w", seq, l.dir, err)
	}
	return line, nil
}

// checkLeaf checks that line, read at pos, is record seq's leaf in tree: a line that is not
// (its segment was changed under the tree) is a CorruptionError.
func checkLeaf(tree *ledgerproof.Tree, seq uint64, pos index.Pos, line []byte) error {
	want, err := tree.LeafHash(int64(seq) - 1)
	if err != nil {
		return err
	}
	if ledgerproof.LeafHash(line) != want {
		return &CorruptionError{File: segmentFile(pos.Segment), Offset: pos.Offset, Seq: seq,
			Problem: fmt.Sprintf("record %d (%s, offset %d) is not the leaf the ledger's tree holds — the segment was changed", seq, segmentFile(pos.Segment), pos.Offset)}
	}
	return nil
}

// record returns the acknowledged record seq, read and checked as Line does.
func (l *Ledger) record(seq uint64) (Record, error) {
	line, err := l.Line(seq)
	if err != nil {
		return Record{}, err
	}
	r, _, err := decodeLine(line)
	if err != nil {
		return Record{}, fmt.Errorf("reading record %d of ledger %s: %w", seq, l.dir, err)
	}
	return r, nil
}

// Find returns the records about an object UID, or those that issued a certificate serial
// (hex, compared as a number), oldest first: through the index, never a scan of the history.
// Give exactly one of objectUID and serial.
func (l *Ledger) Find(objectUID, serial string) ([]Record, error) {
	var seqs []uint64
	var err error
	switch {
	case (objectUID == "") == (serial == ""):
		return nil, errors.New("finding ledger records: give exactly one of an object UID and a serial")
	case objectUID != "":
		// The queue first: a record the indexer moves meanwhile is then found in the index.
		seqs = l.indexer.match(func(e index.Entry) bool { return e.ObjectUID == objectUID })
		var found []uint64
		found, err = l.idx.ByObjectUID(objectUID)
		seqs = append(seqs, found...)
	default:
		var want string
		if want, err = index.NormalizeSerial(serial); err == nil {
			seqs = l.indexer.match(func(e index.Entry) bool {
				got, err := index.NormalizeSerial(e.Serial)
				return e.Serial != "" && err == nil && got == want
			})
			var found []uint64
			found, err = l.idx.BySerial(serial)
			seqs = append(seqs, found...)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("finding ledger records in %s: %w", l.dir, err)
	}
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	out := make([]Record, 0, len(seqs))
	for _, seq := range seqs {
		r, err := l.record(seq)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

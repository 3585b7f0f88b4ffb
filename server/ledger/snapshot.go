package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/ledger/index"
)

// ErrSnapshotBehind: the ledger holds records after the last one its index holds (the server
// stopped without writing its index, or the index is older than the segments), so a snapshot
// would not see them.
var ErrSnapshotBehind = errors.New("the ledger holds records its index does not")

// Snapshot is a read-only view of a ledger that no server has open, through its index and its
// tree tiles: what offline tools (signetctl ledger prove|list|show --dir) read to find a
// record, instead of the whole history. It reads the index, the tree's right edge (at most
// 255 records) and the records asked for, each checked against its leaf. It needs no segment
// but the records' own: older ones may be in archive storage.
type Snapshot struct {
	dir     string
	idx     *index.Index
	tree    *ledgerproof.Tree
	readers segmentReaders
	meta    index.Meta
}

// OpenSnapshot opens dir's index read-only and its tree at the size the index covers. It fails
// at once with an error wrapping index.ErrLocked while a server has the ledger open (the
// server's index is locked; ask the server, or read every record), with one wrapping
// ErrSnapshotBehind when the segments hold records after the index's last (read every
// record), and with fs.ErrNotExist when there is no index.
func OpenSnapshot(dir string) (*Snapshot, error) {
	path := filepath.Join(dir, indexFile)
	idx, err := index.Open(path, index.Options{ReadOnly: true, Timeout: -1})
	if err != nil {
		return nil, fmt.Errorf("opening a snapshot of ledger %s: %w", dir, err)
	}
	s := &Snapshot{dir: dir, idx: idx, readers: segmentReaders{dir: dir}}
	if err := s.open(); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("opening a snapshot of ledger %s: %w", dir, err)
	}
	return s, nil
}

func (s *Snapshot) open() error {
	meta, err := s.idx.Meta()
	if err != nil {
		return err
	}
	if meta.TreeSize != int64(meta.Seq) {
		return fmt.Errorf("its index covers %d records but its tree %d", meta.Seq, meta.TreeSize)
	}
	s.meta = meta
	if err := s.checkNothingAfter(); err != nil {
		return err
	}
	// The right edge: the records after the last full tile, read and checked as a chain that
	// ends in the last record the index holds.
	n := meta.Seq % ledgerproof.TileWidth
	first := meta.Seq - n + 1
	edge := make([]tlog.Hash, n)
	next := ""
	for seq := meta.Seq; seq >= first && seq > 0; seq-- {
		_, line, err := s.line(seq)
		if err != nil {
			return err
		}
		r, _, err := decodeLine(line)
		if err != nil {
			return fmt.Errorf("reading record %d: %w", seq, err)
		}
		if (seq == meta.Seq && r.Hash != meta.LastHash) || (seq != meta.Seq && r.Hash != next) {
			return fmt.Errorf("record %d is not the one the index holds: the segments were changed under the index (signetctl ledger verify)", seq)
		}
		edge[seq-first], next = ledgerproof.LeafHash(line), r.PrevHash
	}
	tree, err := ledgerproof.OpenTiles(filepath.Join(s.dir, tilesDir), meta.TreeSize, func(i int64) (tlog.Hash, error) {
		if i < int64(first)-1 || i-int64(first)+1 >= int64(len(edge)) {
			return tlog.Hash{}, fmt.Errorf("leaf %d is not on the tree's right edge", i)
		}
		return edge[i-int64(first)+1], nil
	}, ledgerproof.TileOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	s.tree = tree
	return nil
}

// checkNothingAfter fails with ErrSnapshotBehind when a record follows the index's last one:
// a later segment exists, or the bytes after the last record's line are not free space.
func (s *Snapshot) checkNothingAfter() error {
	seg, end := uint32(1), int64(0)
	if s.meta.Seq > 0 {
		pos, ok, err := s.idx.Pos(s.meta.Seq)
		if err != nil || !ok {
			return fmt.Errorf("the index holds no position of its last record %d (%v)", s.meta.Seq, err)
		}
		seg, end = pos.Segment, pos.Offset+int64(pos.Length)+1
	}
	if _, err := os.Stat(filepath.Join(s.dir, segmentFile(seg+1))); err == nil {
		return fmt.Errorf("%w: %s follows segment %d, where the index ends at record %d", ErrSnapshotBehind, segmentFile(seg+1), seg, s.meta.Seq)
	}
	f, err := s.readers.file(seg)
	if err != nil {
		if s.meta.Seq == 0 && errors.Is(err, ErrSegmentsArchived) {
			return nil // an empty ledger
		}
		return err
	}
	b := make([]byte, 1)
	if n, _ := f.ReadAt(b, end); n == 1 && b[0] != 0 {
		return fmt.Errorf("%w: %s holds more after record %d, the last the index holds", ErrSnapshotBehind, segmentFile(seg), s.meta.Seq)
	}
	return nil
}

// Close releases the index and the segments.
func (s *Snapshot) Close() error { return errors.Join(s.idx.Close(), s.readers.close()) }

// Tree returns the tree of the records the snapshot holds.
func (s *Snapshot) Tree() *ledgerproof.Tree { return s.tree }

// line returns where record seq lies and its stored line, unchecked.
func (s *Snapshot) line(seq uint64) (index.Pos, []byte, error) {
	pos, ok, err := s.idx.Pos(seq)
	if err == nil && !ok {
		err = fmt.Errorf("the index holds no record %d", seq)
	}
	if err != nil {
		return pos, nil, err
	}
	line, err := s.readers.read(pos)
	if err != nil {
		return pos, nil, fmt.Errorf("reading record %d: %w", seq, err)
	}
	return pos, line, nil
}

// Line returns the stored line of record seq (without its newline), checked against its leaf.
func (s *Snapshot) Line(seq uint64) ([]byte, error) {
	if seq < 1 || int64(seq) > s.tree.Size() {
		return nil, fmt.Errorf("reading record %d of ledger %s: no such record", seq, s.dir)
	}
	pos, line, err := s.line(seq)
	if err == nil {
		err = checkLeaf(s.tree, seq, pos, line)
	}
	if err != nil {
		return nil, fmt.Errorf("reading record %d of ledger %s: %w", seq, s.dir, err)
	}
	return line, nil
}

// Record returns record seq and its line, checked as Line does.
func (s *Snapshot) Record(seq uint64) (Record, []byte, error) {
	line, err := s.Line(seq)
	if err != nil {
		return Record{}, nil, err
	}
	r, _, err := decodeLine(line)
	if err != nil {
		return Record{}, nil, fmt.Errorf("reading record %d of ledger %s: %w", seq, s.dir, err)
	}
	return r, line, nil
}

// Find returns the records about an object UID, or those of a certificate serial (hex,
// compared as a number), oldest first, through the index. Give exactly one.
func (s *Snapshot) Find(objectUID, serial string) ([]Record, error) {
	var seqs []uint64
	var err error
	switch {
	case (objectUID == "") == (serial == ""):
		return nil, errors.New("finding ledger records: give exactly one of an object UID and a serial")
	case objectUID != "":
		seqs, err = s.idx.ByObjectUID(objectUID)
	default:
		seqs, err = s.idx.BySerial(serial)
	}
	if err != nil {
		return nil, fmt.Errorf("finding ledger records in %s: %w", s.dir, err)
	}
	out := make([]Record, 0, len(seqs))
	for _, seq := range slices.Compact(seqs) {
		r, _, err := s.Record(seq)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

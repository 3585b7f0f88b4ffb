package ledger

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/signet-pki/signet/internal/atomicfile"
	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/ledger/index"
)

// What Open reads. Beside its segments a ledger directory holds index.db (bbolt: where each
// record lies, the lookups by serial and object UID, the state records, and the last indexed
// record with the tree size its tiles cover) and tiles/ (the Merkle tree as C2SP tlog-tiles:
// every full tile, written once; the right edge is kept in memory). Both are derived from the
// segments and can be rebuilt from them (signetctl ledger reindex). Open reads:
//
//   - the last indexed record, which must be where the index says, with the hash it says
//     (else the segments were changed under the index: a *CorruptionError);
//   - the tree's right edge: at most 255 records and at most 255 tiles per level;
//   - the state records Replay needs, each checked against its leaf in the tree;
//   - every record from the first of the idempotency window (Options.ReplayFrom) to the end,
//     checked as a chain and, up to the last indexed record, against the tree; the records
//     after the last indexed one (those a crash left unindexed) are indexed again.
//
// So a start costs the window's traffic, the state and the records since the last index
// write, never the history. A ledger without an index (written before there was one, or
// whose index was removed) is read whole once, from segment 1, to build it; the first such
// build of a ledger is recorded (Migrated).

// Files of a ledger directory besides its segments. FORMAT holds the layout's version, 2:
// written when a ledger is created or migrated (a ledger without it was written before the
// index and the tiles existed, and its migration is recorded once).
const (
	indexFile     = "index.db"
	tilesDir      = "tiles"
	formatFile    = "FORMAT"
	formatVersion = "2"
)

// writeFormat writes FORMAT into dir.
func writeFormat(dir string) error {
	if err := atomicfile.Write(filepath.Join(dir, formatFile), []byte(formatVersion+"\n"), 0o600); err != nil {
		return fmt.Errorf("opening ledger %s: %w", dir, err)
	}
	return nil
}

// DefaultSegmentSize is Options.SegmentSize's default.
const DefaultSegmentSize = 1 << 30

// defaultIndexInterval is Options.IndexInterval's default.
const defaultIndexInterval = time.Second

// catchUpFlush is how many records Open keeps unindexed, while it builds an index, before it
// writes them: the bound of its memory on a ledger read whole.
const catchUpFlush = 1 << 16

// start opens the segments, the index and the tree of dir, replays what opts.Replay needs and
// makes the last segment ready for appending: Open's work after the lock.
func start(dir string, opts Options) (*Ledger, error) {
	set, err := findSegments(dir, opts.archives...)
	if err != nil {
		return nil, fmt.Errorf("opening ledger %s: %w", dir, err)
	}
	idx, err := index.Open(filepath.Join(dir, indexFile), index.Options{})
	if errors.Is(err, index.ErrLayout) {
		// An index of another layout (one written by another version) is rebuilt from the
		// segments: it holds nothing they do not.
		opts.Logger.Warn("ledger: its index has another layout; reading every record to rebuild it", "dir", dir, "problem", err.Error())
		idx, err = openNewIndex(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("opening ledger %s: %w", dir, err)
	}
	l := &Ledger{dir: dir, opts: opts, idx: idx, prevHash: zeroHash, readers: segmentReaders{dir: dir}}
	l.indexer = newIndexer(l)
	ok := false
	defer func() {
		if !ok {
			_ = errors.Join(l.idx.Close(), l.readers.close()) // l.idx: resetIndex may have replaced idx
			if l.file != nil {
				l.file.Close()
			}
		}
	}()
	meta, err := idx.Meta()
	if err != nil {
		return nil, fmt.Errorf("opening ledger %s: %w", dir, err)
	}
	o := &opening{l: l, set: set, meta: meta, c: newChain(dir)}
	if meta.Seq == 0 {
		err = o.fromScratch()
	} else if err = o.fromIndex(); errors.As(err, new(*indexMismatch)) {
		// The segments are not what the index recorded: cut short, replaced by an older copy
		// or changed. Distrust the index and read every record, as a start without one does,
		// so that the answer is the one the records give: a broken chain is refused here, and
		// a cut or replaced history by the server's checkpoint check.
		opts.Logger.Warn("ledger: its segments do not match its index; reading every record to rebuild it", "dir", dir, "problem", err.Error())
		if err = l.resetIndex(); err == nil {
			o = &opening{l: l, set: set, c: newChain(dir)}
			err = o.fromScratch()
		}
	}
	if err == nil {
		err = o.walkToEnd()
	}
	if err == nil {
		err = o.readyToAppend()
	}
	if err != nil {
		return nil, err
	}
	ok = true
	return l, nil
}

// indexMismatch marks a start's finding that the segments do not hold what the index
// recorded (the last indexed record, the tree's edge): start then rebuilds the index.
type indexMismatch struct{ err error }

func (e *indexMismatch) Error() string { return e.err.Error() }
func (e *indexMismatch) Unwrap() error { return e.err }

// resetIndex removes the index and the tiles and opens a new, empty index.
func (l *Ledger) resetIndex() error {
	if err := l.idx.Close(); err != nil {
		return fmt.Errorf("opening ledger %s: %w", l.dir, err)
	}
	idx, err := openNewIndex(l.dir)
	if err != nil {
		return fmt.Errorf("opening ledger %s: %w", l.dir, err)
	}
	l.idx = idx
	l.indexer = newIndexer(l)
	l.readers.close()
	return nil
}

// openNewIndex removes the index and the tiles of dir and opens a new, empty index.
func openNewIndex(dir string) (*index.Index, error) {
	for _, name := range []string{indexFile, tilesDir} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return nil, err
		}
	}
	return index.Open(filepath.Join(dir, indexFile), index.Options{})
}

// opening is the state of a start.
type opening struct {
	l           *Ledger
	set         segmentSet
	meta        index.Meta
	c           *chain
	from        uint32            // the segment the walk starts in
	sawMigrated bool              // a Migrated record was walked
	lines       map[uint64][]byte // the lines recordAt read
	last        index.Pos         // where the last indexed record lies
	edge        []tlog.Hash       // the leaves of the tree's right edge (readEdge)
	good        int64             // end of the last complete line of the last segment
}

// fromScratch prepares a walk of the whole history from segment 1: no index yet.
func (o *opening) fromScratch() error {
	l := o.l
	if o.set.last() > 0 && o.set.where[o.set.last()] != l.dir {
		return fmt.Errorf("opening ledger %s: its last segment %s is not in it", l.dir, segmentFile(o.set.last()))
	}
	if f := o.set.first(); f > 1 {
		return fmt.Errorf("opening ledger %s: building its index: %w", l.dir, o.set.missingBefore(l.dir))
	}
	// Tiles of an index that was removed are written again as the tree grows.
	if err := os.RemoveAll(filepath.Join(l.dir, tilesDir)); err != nil {
		return fmt.Errorf("opening ledger %s: %w", l.dir, err)
	}
	tree, err := ledgerproof.OpenTiles(filepath.Join(l.dir, tilesDir), 0, nil, ledgerproof.TileOptions{})
	if err != nil {
		return fmt.Errorf("opening ledger %s: %w", l.dir, err)
	}
	l.tree, o.from = tree, 1
	if n := len(o.set.nums); n > 0 {
		if first, err := l.readers.firstSeq(o.set.first()); err == nil && first > 0 {
			l.opts.Logger.Info("ledger: building its index and tree tiles from every record (once)", "dir", l.dir, "segments", n)
		}
	}
	return nil
}

// fromIndex checks the last indexed record, opens the tree at the index's size, replays the
// state records before the window and prepares a walk from the window's first record (or
// from after the last indexed one).
func (o *opening) fromIndex() error {
	if err := o.checkIndexed(); err != nil {
		return &indexMismatch{err}
	}
	return o.replayFromIndex()
}

// checkIndexed checks that the segments hold the last indexed record and the tree's edge as
// the index recorded them, and opens the tree.
func (o *opening) checkIndexed() error {
	l, meta := o.l, o.meta
	pos, last, err := o.recordAt(meta.Seq)
	if err != nil {
		return err
	}
	o.last = pos
	if last.Hash != meta.LastHash {
		return fmt.Errorf("opening ledger %s: %w", l.dir, &CorruptionError{File: segmentFile(pos.Segment), Offset: pos.Offset, Seq: meta.Seq, Problem: fmt.Sprintf(
			"record %d (%s, offset %d) is not the one the index holds (hash %s, not %s) — the segment was changed or replaced under the index; verify the ledger (signetctl ledger verify) and rebuild the index (signetctl ledger reindex)",
			meta.Seq, segmentFile(pos.Segment), pos.Offset, last.Hash, meta.LastHash)})
	}
	if meta.TreeSize != int64(meta.Seq) {
		return fmt.Errorf("opening ledger %s: its index covers %d records but its tree %d (rebuild it: signetctl ledger reindex)", l.dir, meta.Seq, meta.TreeSize)
	}
	if err := o.readEdge(last); err != nil {
		return err
	}
	tree, err := ledgerproof.OpenTiles(filepath.Join(l.dir, tilesDir), meta.TreeSize, o.leafHash, ledgerproof.TileOptions{})
	if err != nil {
		return fmt.Errorf("opening ledger %s: %w", l.dir, err)
	}
	l.tree = tree
	return nil
}

// replayFromIndex replays the state records before the window from the index and prepares
// the walk from the window's first record (or from after the last indexed one).
func (o *opening) replayFromIndex() error {
	l, meta, pos := o.l, o.meta, o.last
	var err error
	l.indexer.setIndexed(meta.Seq)
	w := meta.Seq + 1 // the first record to walk
	if l.opts.Replay != nil {
		if first, ok, err := l.idx.FirstSince(l.opts.ReplayFrom); err != nil {
			return fmt.Errorf("opening ledger %s: %w", l.dir, err)
		} else if ok && first <= meta.Seq {
			w = first
		}
		if err := o.replayState(w); err != nil {
			return err
		}
	}
	o.c.rep.LastSeq, o.c.rep.LastHash, o.c.prevHash = meta.Seq, meta.LastHash, meta.LastHash
	start := pos
	if w <= meta.Seq {
		var first Record
		if start, first, err = o.recordAt(w); err != nil {
			return err
		}
		o.c.rep.LastSeq, o.c.prevHash = w-1, first.PrevHash
		o.c.at = resume{off: start.Offset}
	} else {
		o.c.at = resume{off: start.Offset + int64(start.Length) + 1}
	}
	o.from = start.Segment
	line, err := o.lineNumber(start.Segment, w)
	if err != nil {
		return err
	}
	o.c.at.line = line
	return nil
}

// recordAt reads the indexed record seq, checking that it is intact and has that seq.
func (o *opening) recordAt(seq uint64) (index.Pos, Record, error) {
	l := o.l
	pos, ok, err := l.idx.Pos(seq)
	if err == nil && !ok {
		err = fmt.Errorf("the index holds no record %d", seq)
	}
	if err != nil {
		return pos, Record{}, fmt.Errorf("opening ledger %s: %w (rebuild the index: signetctl ledger reindex)", l.dir, err)
	}
	if o.set.where[pos.Segment] == "" {
		return pos, Record{}, &CorruptionError{File: segmentFile(pos.Segment), Offset: pos.Offset, Seq: seq, Problem: fmt.Sprintf(
			"record %d is in %s, which is not in %s — segments were removed from the end of the ledger, or moved away; put them back",
			seq, segmentFile(pos.Segment), l.dir)}
	}
	line, err := l.readers.read(pos)
	l.readAtOpen.Add(1)
	if errors.Is(err, errShortSegment) {
		return pos, Record{}, fmt.Errorf("opening ledger %s: %w", l.dir, &CorruptionError{File: segmentFile(pos.Segment), Offset: pos.Offset, Seq: seq, Problem: fmt.Sprintf(
			"record %d (%s, offset %d): the segment ends before it — records were removed or the segment cut short; verify the ledger (signetctl ledger verify)",
			seq, segmentFile(pos.Segment), pos.Offset)})
	}
	if err != nil {
		return pos, Record{}, fmt.Errorf("opening ledger %s: reading record %d: %w", l.dir, seq, err)
	}
	if o.lines == nil {
		o.lines = map[uint64][]byte{}
	}
	o.lines[seq] = line
	r, _, err := decodeLine(line)
	if err == nil && r.Seq != seq {
		err = fmt.Errorf("it holds record %d", r.Seq)
	}
	if err == nil {
		var sum string
		if sum, err = r.ComputeHash(); err == nil && sum != r.Hash {
			err = errors.New("hash mismatch")
		}
	}
	if err != nil {
		return pos, r, fmt.Errorf("opening ledger %s: %w", l.dir, &CorruptionError{File: segmentFile(pos.Segment), Offset: pos.Offset, Seq: seq, Problem: fmt.Sprintf(
			"record %d (%s, offset %d): not the record the index points to (%v) — the segment was changed under the index; verify the ledger (signetctl ledger verify)",
			seq, segmentFile(pos.Segment), pos.Offset, err)})
	}
	return pos, r, nil
}

// readEdge reads the records of the tree's right edge, those after the last full tile up to
// the last indexed record (at most 255), which OpenTiles takes from the segments, and checks
// them as a chain ending in the last indexed record, whose hash the index holds: so the edge
// is the history the index recorded, not whatever the segment holds now.
func (o *opening) readEdge(last Record) error {
	n := o.meta.Seq % ledgerproof.TileWidth
	o.edge = make([]tlog.Hash, n)
	if n == 0 {
		return nil
	}
	first := o.meta.Seq - n + 1
	next := last
	for seq := o.meta.Seq; seq >= first; seq-- {
		r := last
		if seq != o.meta.Seq {
			pos, rec, err := o.recordAt(seq)
			if err == nil && rec.Hash != next.PrevHash {
				err = fmt.Errorf("opening ledger %s: %w", o.l.dir, &CorruptionError{File: segmentFile(pos.Segment), Offset: pos.Offset, Seq: seq, Problem: fmt.Sprintf(
					"record %d (%s, offset %d) is not the one record %d links to — the segment was changed under the index; verify the ledger (signetctl ledger verify)",
					seq, segmentFile(pos.Segment), pos.Offset, seq+1)})
			}
			r = rec
			if err != nil {
				return err
			}
		}
		o.edge[seq-first] = ledgerproof.LeafHash(o.lines[seq])
		next = r
	}
	return nil
}

// leafHash returns the tree leaf of index i (record i+1) for OpenTiles's right edge, as
// readEdge checked it.
func (o *opening) leafHash(i int64) (tlog.Hash, error) {
	first := int64(o.meta.Seq) - int64(len(o.edge))
	if i < first || i-first >= int64(len(o.edge)) {
		return tlog.Hash{}, fmt.Errorf("leaf %d is not on the tree's right edge", i)
	}
	return o.edge[i-first], nil
}

// replayState replays, in seq order, the state records before seq w, from the index (their
// segments need not be in the ledger directory), each checked against its leaf in the tree,
// and for each signer and CA whose latest issuance is before w, that issuance as the index
// keeps it: an Issued record with only its Seq, Signer, CA and NotAfter.
func (o *opening) replayState(w uint64) error {
	l := o.l
	states, err := l.idx.StateRecords()
	if err != nil {
		return fmt.Errorf("opening ledger %s: %w", l.dir, err)
	}
	leaves, err := l.idx.LatestLeaves()
	if err != nil {
		return fmt.Errorf("opening ledger %s: %w", l.dir, err)
	}
	var replay []Record
	for _, st := range states {
		if st.Seq >= w {
			break
		}
		l.readAtOpen.Add(1)
		r, err := o.stateRecord(st)
		if err != nil {
			return err
		}
		replay = append(replay, r)
	}
	for _, leaf := range leaves {
		if leaf.Seq < w {
			replay = append(replay, Record{Seq: leaf.Seq, Decision: Issued, Signer: leaf.Signer, CA: leaf.CA, NotAfter: leaf.NotAfter})
		}
	}
	slices.SortStableFunc(replay, func(a, b Record) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, r := range replay {
		if err := l.opts.Replay(r); err != nil {
			return fmt.Errorf("opening ledger %s: record %d: %w", l.dir, r.Seq, err)
		}
	}
	return nil
}

// stateRecord decodes a state record kept in the index and checks it: canonical, its hash,
// its seq, and its leaf in the tree.
func (o *opening) stateRecord(st index.StateRecord) (Record, error) {
	r, canonical, err := decodeLine(st.Line)
	if err == nil && (!canonical || r.Seq != st.Seq) {
		err = errors.New("not the canonical line of that record")
	}
	if err == nil {
		var sum string
		if sum, err = r.ComputeHash(); err == nil && sum != r.Hash {
			err = errors.New("hash mismatch")
		}
	}
	if err == nil {
		var leaf tlog.Hash
		if leaf, err = o.l.tree.LeafHash(int64(st.Seq) - 1); err == nil && leaf != ledgerproof.LeafHash(st.Line) {
			err = errors.New("not the leaf the tree holds")
		}
	}
	if err != nil {
		return r, fmt.Errorf("opening ledger %s: state record %d in its index: %w (rebuild the index: signetctl ledger reindex)", o.l.dir, st.Seq, err)
	}
	return r, nil
}

// lineNumber returns the number of lines before record seq in segment seg: seq minus the seq
// of the segment's first record.
func (o *opening) lineNumber(seg uint32, seq uint64) (int, error) {
	first, err := o.l.readers.firstSeq(seg)
	if err != nil {
		return 0, fmt.Errorf("opening ledger %s: %w", o.l.dir, err)
	}
	if first == 0 || seq < first {
		return 0, nil
	}
	return int(seq - first), nil
}

// walkToEnd walks from o.from (at o.c.at in it) through the last segment, which it opens for
// appending (creating segment 1 in a new ledger): every record is checked as a chain and
// replayed; those after the last indexed one join the tree and the index, and those before it
// must be the tree's leaves.
func (o *opening) walkToEnd() error {
	l := o.l
	last := max(o.set.last(), 1)
	for seg := o.from; seg <= last; seg++ {
		path := filepath.Join(l.dir, segmentFile(seg))
		var f *os.File
		var err error
		if seg == last {
			f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		} else {
			if p := o.set.path(seg); p != "" {
				path = p // in an archive (Reindex)
			}
			f, err = os.Open(path)
		}
		if err != nil {
			return dirError("opening ledger "+path, l.dir, err)
		}
		good, err := o.c.walk(f, seg, seg == last, nil, o.visit)
		if seg != last {
			f.Close()
		} else {
			l.file, l.w, l.path, l.seg, o.good = f, File(f), path, seg, good
		}
		if err != nil {
			return fmt.Errorf("opening ledger %s: %w", l.dir, err)
		}
	}
	return nil
}

// visit takes one record of the walk.
func (o *opening) visit(seg uint32, start int64, r Record, line []byte) error {
	l := o.l
	l.readAtOpen.Add(1)
	if r.Decision == Migrated {
		o.sawMigrated = true
	}
	leaf := ledgerproof.LeafHash(line)
	if r.Seq > o.meta.Seq {
		if _, err := l.tree.AppendHash(leaf); err != nil {
			return err
		}
		l.indexer.add(entryOf(seg, start, r, line))
		if l.indexer.backlog() >= catchUpFlush {
			if err := l.indexer.flush(); err != nil && !errors.Is(err, errIndexDeferred) {
				return err
			}
			l.indexer.compact(nil)
		}
	} else if h, err := l.tree.LeafHash(int64(r.Seq) - 1); err != nil || h != leaf {
		return &CorruptionError{File: segmentFile(seg), Offset: start, Seq: r.Seq, Problem: fmt.Sprintf(
			"record %d (%s, offset %d) is not the leaf the ledger's tree holds for it — the segment was changed after the record was indexed; verify the ledger (signetctl ledger verify)",
			r.Seq, segmentFile(seg), start)}
	}
	if l.opts.Replay != nil {
		if err := l.opts.Replay(r); err != nil {
			return fmt.Errorf("record %d: %w", r.Seq, err)
		}
	}
	return nil
}

// readyToAppend truncates a torn tail of the last segment, gives it free space and sets the
// chain's end: what the old single-segment Open did after its walk.
func (o *opening) readyToAppend() error {
	l, rep := o.l, o.c.rep
	good, f := o.good, l.file
	end := good + rep.TornTail + rep.FreeSpace
	var err error
	if rep.TornTail > 0 {
		l.opts.Logger.Warn("ledger: truncating a torn final line (an unacknowledged write cut short by a crash)",
			"file", l.path, "offset", good, "bytes", rep.TornTail, "last_seq", rep.LastSeq)
		end = good
		err = f.Truncate(good)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			return fmt.Errorf("opening ledger %s: truncating the torn tail of %s: %w", l.dir, l.path, writeError(l.dir, err))
		}
	}
	l.off, l.end, l.seq = good, end, rep.LastSeq
	if rep.LastSeq > 0 {
		l.prevHash = rep.LastHash
	}
	if got := l.tree.Size(); got != int64(l.seq) {
		return fmt.Errorf("opening ledger %s: its tree has %d leaves for %d records (rebuild the index: signetctl ledger reindex)", l.dir, got, l.seq)
	}
	if end-good < l.opts.Preallocate/4 {
		err = l.openFreeSpace()
	}
	if err == nil {
		err = syncDir(l.dir)
	}
	if err == nil {
		l.fileInfo, err = f.Stat()
	}
	if err != nil {
		return fmt.Errorf("opening ledger %s: %w", l.dir, writeError(l.dir, err))
	}
	if _, err := os.Stat(filepath.Join(l.dir, formatFile)); errors.Is(err, os.ErrNotExist) {
		if o.meta.Seq == 0 && rep.LastSeq > 0 && !o.sawMigrated {
			l.migrate = fmt.Sprintf("read %d records in %d segments to build them", rep.LastSeq, rep.Segments)
		} else if err := writeFormat(l.dir); err != nil {
			return err
		}
	}
	l.syncs.Store(0) // Stats count the work after Open
	l.idle.L = &l.qmu
	if l.opts.WrapFile != nil {
		l.w = l.opts.WrapFile(f)
	}
	return nil
}

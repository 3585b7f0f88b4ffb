package ledger

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Moving a history between the file ledger and a fleet's database (signetctl ledger export and
// import, server/ledgermove). The records keep their lines byte for byte, so the Merkle tree,
// and every checkpoint signed of it, is the same on both sides: Import writes lines that were
// sealed elsewhere into a new ledger directory, verbatim, and LeavesStopped reads a ledger no
// server has open.

// Import writes already sealed records, verbatim, into a new ledger directory: what a fleet's
// journal holds, exported (server/ledgermove). Add checks each line as Verify checks a
// segment's (canonical, its hash, its seq the next one from 1, its prevHash the hash of the
// record before) and writes it into segments as the ledger's writer fills them (a segment
// closed, 0400, once the next line would take it past Options.SegmentSize); Finish syncs
// them and builds the index and the tree tiles (Reindex), so that the directory is a ledger
// like any other: Verify, audits, proofs and Open accept it.
type Import struct {
	dir      string
	opts     Options
	lock     *os.File
	created  bool     // dir was made by NewImport
	written  []string // the files NewImport and Add created, for Abort
	seg      uint32
	file     *os.File
	w        *bufio.Writer
	off      int64 // bytes written to the current segment
	seq      uint64
	prevHash string
	rep      Report
}

// NewImport begins an import into dir, which must not exist or be empty (an import never
// writes into an existing ledger). It takes the directory's lock until Finish or Abort.
func NewImport(dir string, opts Options) (*Import, error) {
	opts = opts.withDefaults()
	im := &Import{dir: dir, opts: opts, prevHash: zeroHash, rep: Report{Dir: dir}}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, dirError("importing into ledger "+dir, dir, err)
		}
		im.created = true
	case err != nil:
		return nil, fmt.Errorf("importing into ledger %s: %w", dir, err)
	case len(entries) > 0:
		return nil, fmt.Errorf("importing into ledger %s: the directory is not empty (%s, …): import into a new directory", dir, entries[0].Name())
	}
	if im.lock, err = lockDir(dir); err != nil {
		im.Abort()
		return nil, fmt.Errorf("importing into ledger %s: %w", dir, err)
	}
	im.written = append(im.written, lockName)
	if err := im.begin(1); err != nil {
		im.Abort()
		return nil, err
	}
	return im, nil
}

// begin creates segment n and makes it the one written to.
func (im *Import) begin(n uint32) error {
	name := segmentFile(n)
	f, err := os.OpenFile(filepath.Join(im.dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return dirError("importing into ledger "+im.dir, im.dir, err)
	}
	im.written = append(im.written, name)
	im.file, im.seg, im.off = f, n, 0
	if im.w == nil {
		im.w = bufio.NewWriterSize(f, maxWrite)
	} else {
		im.w.Reset(f)
	}
	if im.rep.Segments == 0 {
		im.rep.FirstSegment = name
	}
	im.rep.Segments++
	im.rep.File = name
	return nil
}

// closeSegment flushes and syncs the current segment and closes it; a closed segment is
// made read-only, as the writer's rotation leaves it.
func (im *Import) closeSegment(readOnly bool) error {
	path := filepath.Join(im.dir, segmentFile(im.seg))
	err := im.w.Flush()
	if err == nil {
		err = im.file.Sync()
	}
	if cerr := im.file.Close(); err == nil {
		err = cerr
	}
	im.file = nil
	if err == nil && readOnly {
		err = os.Chmod(path, 0o400)
	}
	if err != nil {
		return dirError("importing into ledger: writing "+path, im.dir, err)
	}
	return nil
}

// Add checks line (a record's line without its newline) against the records added before it
// and writes it. A line that is not the next record of the chain is refused with a
// *CorruptionError naming the record, and nothing more can be added.
func (im *Import) Add(line []byte) error {
	if im.file == nil {
		return fmt.Errorf("importing into ledger %s: the import is over", im.dir)
	}
	r, err := checkSealed(line, im.seq+1, im.prevHash)
	if err != nil {
		im.Abort()
		return fmt.Errorf("importing into ledger %s: %w", im.dir, err)
	}
	if n := int64(len(line)) + 1; im.off > 0 && im.off+n > im.opts.SegmentSize {
		if err := im.closeSegment(true); err != nil {
			im.Abort()
			return err
		}
		if err := im.begin(im.seg + 1); err != nil {
			im.Abort()
			return err
		}
	}
	if _, err := im.w.Write(line); err == nil {
		err = im.w.WriteByte('\n')
	}
	if err != nil {
		im.Abort()
		return dirError("importing into ledger "+im.dir, im.dir, err)
	}
	im.off += int64(len(line)) + 1
	if im.seq == 0 {
		im.rep.FirstSeq, im.rep.FirstTime = r.Seq, r.Time
	}
	im.seq, im.prevHash = r.Seq, r.Hash
	im.rep.Records++
	im.rep.LastSeq, im.rep.LastTime, im.rep.LastHash = r.Seq, r.Time, r.Hash
	return nil
}

// Finish syncs the last segment, writes FORMAT, releases the lock and builds the index and
// the tree tiles (Reindex, which reads the records once more and gives the last segment its
// free space). It returns what was written.
func (im *Import) Finish() (Report, error) {
	if im.file == nil {
		return im.rep, fmt.Errorf("importing into ledger %s: the import is over", im.dir)
	}
	err := im.closeSegment(false)
	if err == nil {
		err = writeFormat(im.dir)
	}
	if err == nil {
		err = syncDir(im.dir)
	}
	if err != nil {
		im.Abort()
		return im.rep, fmt.Errorf("importing into ledger %s: %w", im.dir, err)
	}
	im.lock.Close()
	im.lock = nil
	im.written = append(im.written, formatFile, indexFile, tilesDir)
	if _, err := Reindex(im.dir, im.opts); err != nil {
		im.Abort()
		return im.rep, fmt.Errorf("importing into ledger %s: building its index: %w", im.dir, err)
	}
	im.written, im.created = nil, false
	return im.rep, nil
}

// Abort stops the import and removes what it wrote (and the directory, if it made it).
func (im *Import) Abort() {
	if im.file != nil {
		im.file.Close()
		im.file = nil
	}
	for _, name := range im.written {
		_ = os.RemoveAll(filepath.Join(im.dir, name))
	}
	im.written = nil
	if im.lock != nil {
		im.lock.Close()
		im.lock = nil
	}
	if im.created {
		_ = os.Remove(im.dir)
		im.created = false
	}
}

// checkSealed decodes line and checks it is record want of a chain whose last hash is prev,
// as Verify checks a segment's line: not too long, canonical, its hash, its seq, a valid
// record, its link.
func checkSealed(line []byte, want uint64, prev string) (Record, error) {
	bad := func(format string, args ...any) (Record, error) {
		return Record{}, &CorruptionError{Seq: want, Problem: fmt.Sprintf(format, args...)}
	}
	if len(line) >= maxWrite {
		return bad("record %d: %d bytes, longer than any line the ledger writes (less than %d)", want, len(line), maxWrite)
	}
	r, canonical, err := decodeLine(line)
	if err != nil {
		return bad("record %d: not a ledger record (%v)", want, err)
	}
	if sum, err := r.ComputeHash(); err != nil || sum != r.Hash {
		return bad("record %d: hash mismatch — the record was changed", r.Seq)
	}
	if !canonical {
		return bad("record %d: not in canonical encoding — the line was rewritten", r.Seq)
	}
	if r.Seq != want {
		return bad("record %d: expected seq %d, found %d — records are missing, duplicated or out of order", want, want, r.Seq)
	}
	if err := r.Validate(); err != nil {
		return bad("record %d: %v", r.Seq, err)
	}
	if r.PrevHash != prev {
		if want == 1 {
			return bad("record 1: prevHash is not all zeros — records before it were removed")
		}
		return bad("record %d: chain broken — prevHash does not match the hash of record %d", want, want-1)
	}
	return r, nil
}

// LeavesStopped is Leaves for a ledger no server has open: it takes the ledger's lock for the
// read (ErrLocked while a server appends), verifies every record as Verify does and calls fn
// in seq order with each record and its line, stopping at the first problem or at fn's first
// error, which it returns wrapped. What a fleet imports (server/ledgermove) must be the whole
// of a history that no longer grows.
func LeavesStopped(dir string, fn func(r Record, line []byte) error, archives ...string) (Report, error) {
	if _, err := os.Stat(dir); err != nil {
		return Report{Dir: dir}, fmt.Errorf("reading ledger %s: %w", dir, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return Report{Dir: dir}, fmt.Errorf("reading ledger %s: %w", dir, err)
	}
	defer lock.Close()
	rep, err := readAll(dir, archives, nil, func(_ uint32, _ int64, r Record, line []byte) error { return fn(r, line) })
	if err != nil {
		return rep, fmt.Errorf("reading ledger %s: %w", dir, err)
	}
	return rep, nil
}

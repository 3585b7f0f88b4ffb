package ledger

import (
	"fmt"
	"io"
	"sync/atomic"
)

const (
	// defaultPreallocate is Options.Preallocate's default: the segment grows by 4 MiB of zeros
	// at a time. Writing and fsyncing the zeros costs about 1 ms per MiB on an ext4 VM disk,
	// the same per byte for any chunk size, so the chunk sets only how often (every ~3000
	// records of ~1.4 KiB) and how long (~4–20 ms) one batch waits for it.
	defaultPreallocate = 4 << 20
	// maxWrite bounds the bytes of one write of records: a larger batch is written (and
	// fsynced) in several. Only one write is ever unacknowledged, so after a crash (or while a
	// reader races the writer) bytes of records can lie only within maxWrite of the last
	// complete line; further on, the free space holds nothing but zeros (see the package
	// doc's Recovery). It also caps a single record's line.
	maxWrite = 1 << 20
)

// zeroBlock is read-only: the source of zero-fill writes and what a scanned block of free
// space is compared against.
var zeroBlock [256 << 10]byte

// alignUp rounds n up to a multiple of chunk.
func alignUp(n, chunk int64) int64 {
	return (n + chunk - 1) / chunk * chunk
}

// fillZeros writes zeros to w from offset from up to offset to.
func fillZeros(w io.WriterAt, from, to int64) error {
	for from < to {
		n := min(to-from, int64(len(zeroBlock)))
		if _, err := w.WriteAt(zeroBlock[:n], from); err != nil {
			return err
		}
		from += n
	}
	return nil
}

// extend writes zeros to the segment written through w from offset from up to offset to,
// and fsyncs them; syncs, if not nil, counts the fsync.
//
// The zeros are written, not fallocated: fallocate makes unwritten extents, and the first
// write into one converts it, a metadata change the next fsync must commit to the journal,
// which is exactly the per-batch cost the free space exists to avoid. Writing the zeros once
// (and fsyncing them) makes every later batch an overwrite of allocated, written blocks whose
// fsync flushes only data.
func extend(w File, path string, from, to int64, syncs *atomic.Uint64) error {
	if err := fillZeros(w, from, to); err != nil {
		return fmt.Errorf("extending %s with zeros to %d bytes: %w", path, to, err)
	}
	if syncs != nil {
		syncs.Add(1)
	}
	if err := w.Sync(); err != nil {
		return fmt.Errorf("syncing %s after extending it to %d bytes: %w", path, to, err)
	}
	return nil
}

// reserve makes sure the n bytes at the write offset lie in the free space. If they would not
// fit, it first extends the segment to the next multiple of Options.Preallocate past them.
// Only the writer calls it.
func (l *Ledger) reserve(n int64) error {
	if l.off+n <= l.end {
		return nil
	}
	end := alignUp(l.off+n, l.opts.Preallocate)
	if err := extend(l.w, l.path, l.end, end, &l.syncs); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, writeError(l.dir, err))
	}
	l.end = end
	l.extensions.Add(1)
	return nil
}

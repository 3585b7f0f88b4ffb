package ledger

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"syscall"
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
	// pageSize is the unit of a growth smaller than a chunk: the page of tmpfs and the block
	// of ext4 and xfs, what the file system allocates anyway.
	pageSize = 4 << 10
	// headroom is what the segment's growth leaves free on the ledger's file system, for the
	// server's small writes next to it: the checkpoint's atomic replace (a new file, under
	// 1 KiB, beside the current one until the rename: two pages), the checkpoint key written
	// at a first start (a page), Open's probe file and directory blocks, with room to spare
	// for file systems that allocate metadata blocks as files grow. 16 pages.
	headroom = 64 << 10
)

// zeroBlock is read-only: the source of zero-fill writes and what a scanned block of free
// space is compared against.
var zeroBlock [256 << 10]byte

// alignUp rounds n up to a multiple of chunk.
func alignUp(n, chunk int64) int64 {
	return (n + chunk - 1) / chunk * chunk
}

// SpaceError: the ledger's file system has not enough free space for the segment to grow by
// what the next records need (and the headroom it leaves for the checkpoint). Ledger.Err
// wraps it while the ledger is closed for appends for that reason (errors.As finds it), and
// Ledger.SpaceNeeded returns Need − Free. It matches syscall.ENOSPC.
type SpaceError struct {
	// Dir is the ledger directory.
	Dir string
	// Need is the free space, in bytes, the next growth of the segment needs: the zeros for
	// the next records, rounded up to a page, and the headroom left free for the checkpoint
	// and the server's other small files (64 KiB).
	Need int64
	// Free is the free space, in bytes, of the file system: statfs's f_bavail (in units of
	// f_frsize), what an unprivileged process may still write, so ext4's reserve for root
	// stays unused even by a server running as root.
	Free int64
}

// Error says how many bytes are free, how many the next records need, and how many more must
// be freed.
func (e *SpaceError) Error() string {
	return fmt.Sprintf("the ledger's file system has %d bytes free; the next records need %d (%d of them to stay free "+
		"for the checkpoint and other small files): free at least %d more bytes on %s",
		e.Free, e.Need, min(headroom, e.Need), e.Need-e.Free, e.Dir)
}

// Unwrap returns syscall.ENOSPC: the file system is full for the ledger's purposes.
func (e *SpaceError) Unwrap() error { return syscall.ENOSPC }

// SpaceNeeded returns how many bytes must be freed on the ledger's file system before the
// next records fit (a *SpaceError's Need − Free) while the ledger is closed for appends for
// lack of space (Err wraps a *SpaceError), and 0 otherwise: the server exports it as
// signet_server_ledger_space_needed_bytes. It is as current as the last attempt to write or
// recover (every Options.RecoverInterval while closed).
func (l *Ledger) SpaceNeeded() int64 {
	var se *SpaceError
	if errors.As(l.Err(), &se) {
		return max(se.Need-se.Free, 0)
	}
	return 0
}

// freeSpaceFunc reports the bytes an unprivileged process may still write on the file system
// holding dir, and false where that is not known (another platform, or statfs failed):
// freeSpace (space_linux.go, space_other.go) unless a test sets Options.freeSpace.
type freeSpaceFunc func(dir string) (int64, bool)

// plan returns the size a file of size end (the segment, or a new copy of it from 0) should
// grow to:
//
//   - want (a chunk boundary), when the file system has room for it and the headroom;
//   - less, the largest page-aligned size that leaves the headroom, but at least need;
//   - a *SpaceError when not even need fits, unless need <= end (the growth was optional:
//     then end, the file stays as it is);
//   - want where the free space is not known (then the write finds out: see grow).
func plan(free freeSpaceFunc, dir string, end, need, want int64) (int64, error) {
	avail, known := free(dir)
	if !known || want <= end {
		return max(want, end), nil
	}
	room := end + avail - headroom // the largest size that leaves the headroom
	switch {
	case want <= room:
		return want, nil
	case need <= end:
		return max(room/pageSize*pageSize, end), nil
	case need <= room:
		return max(room/pageSize*pageSize, need), nil
	}
	return end, &SpaceError{Dir: dir, Need: need - end + headroom, Free: avail}
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

// grow extends the segment with zeros from l.end to the size plan chooses between need and
// want, fsyncs, and returns its new size (l.end when it did not grow). Only the writer (or
// Open, before the Ledger is shared) calls it.
//
// A failed extension gives back what it took: the segment is truncated to l.end again and
// fsynced, so no partial fill keeps holding the space (on a volume smaller than two chunks it
// would otherwise hold it for good). When the file system refuses a larger extension with
// ENOSPC (its free space is not known on this platform, or another writer took it since
// statfs; EDQUOT, a quota statfs does not show, counts the same), grow tries need alone.
// When the growth was optional (need <= l.end) and the file system has no room for it, grow
// returns l.end and no error.
func (l *Ledger) grow(need, want int64) (int64, error) {
	to, err := plan(l.opts.freeSpace, l.dir, l.end, need, want)
	if err != nil || to <= l.end {
		return l.end, err
	}
	err = l.extendOrGiveBack(to)
	if noSpace(err) && l.end < need && need < to {
		to, err = need, l.extendOrGiveBack(need)
	}
	switch {
	case err == nil:
		return to, nil
	case need <= l.end && noSpace(err):
		return l.end, nil
	}
	return l.end, err
}

// noSpace reports whether err says the file system (ENOSPC) or the user's quota (EDQUOT)
// has no room left.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// extendOrGiveBack extends the segment from l.end to to (extend) and, if that fails,
// truncates it back to l.end and fsyncs it.
func (l *Ledger) extendOrGiveBack(to int64) error {
	err := extend(l.w, l.path, l.end, to, &l.syncs)
	if err == nil {
		return nil
	}
	return errors.Join(err, l.giveBack())
}

// giveBack truncates the segment to l.end and fsyncs it: what a failed extension wrote past
// the free space is freed.
func (l *Ledger) giveBack() error {
	if err := l.file.Truncate(l.end); err != nil {
		return fmt.Errorf("truncating %s back to %d bytes after a failed extension: %w", l.path, l.end, err)
	}
	l.syncs.Add(1)
	if err := l.w.Sync(); err != nil {
		return fmt.Errorf("syncing %s after truncating it back to %d bytes: %w", l.path, l.end, err)
	}
	return nil
}

// reserve makes sure the n bytes at the write offset lie in the free space. If they would not
// fit, it first grows the segment (grow): to the next multiple of Options.Preallocate past
// them, or, when the file system has not that much room, by as much as it has, down to the
// next page boundary past them. Only the writer calls it.
func (l *Ledger) reserve(n int64) error {
	if l.off+n <= l.end {
		return nil
	}
	want := alignUp(l.off+n, l.opts.Preallocate)
	end, err := l.grow(min(alignUp(l.off+n, pageSize), want), want)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, writeError(l.dir, err))
	}
	l.end = end
	l.extensions.Add(1)
	return nil
}

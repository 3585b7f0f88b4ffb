package ledger

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Storage faults. A write or fsync that fails closes the ledger for appends (see Append); it
// then heals itself where it can, and says so where only an operator can:
//
//   - The write or fsync failed (disk full, file system read-only, I/O error): every
//     RecoverInterval the ledger tries to recover. It overwrites with zeros what the failed
//     writes may have left after the last acknowledged record (so a record whose caller was
//     told "nothing was issued" never becomes part of the history, even if its bytes reached
//     the page cache or the disk), makes sure the segment has free space again, fsyncs, and
//     opens for appends. A retry then succeeds: the error is ErrUnavailable, retryable. The
//     free space follows space.go's rules: room for the write that failed is required (a
//     *SpaceError while the file system has not that much free beyond the headroom, which
//     then replaces Err with the current numbers); up to the chunk boundary past a quarter
//     chunk is taken only as far as the file system has room for it. A growth that fails is
//     truncated away again, so an attempt on a still full disk leaves nothing behind.
//   - The segment was removed (unlinked) while the ledger had it open: the records are still
//     in the open file. The ledger restores the segment at its path from the open file (the
//     acknowledged records and free space) and goes on appending to the restored file; the
//     batch that found it missing was not acknowledged. Nothing is lost.
//   - Another file was put at the segment's path (replaced, or edited by a tool that writes a
//     new file): the ledger will not overwrite it, so only an operator can decide. It stays
//     closed (ErrRestartRequired); its own records are kept next to it in
//     ledger-000001.jsonl.open-<unix time> for the operator to compare and restore.
//
// The check (one stat of the path, compared with the open file) runs after a batch's fsync,
// before its records are acknowledged, at most every segmentCheckEvery, and every
// RecoverInterval on an idle ledger. A segment removed between two checks loses nothing: the
// records acknowledged meanwhile are in the open file, and the restore copies them (and the
// batch being acknowledged) to the new one before the batch is acknowledged; those of a
// replaced segment are in the kept copy. (Measured: a stat of the path after every fsync made
// a lone caller's appends 10-25 % slower on an ext4 VM disk, for no gain.)

// defaultRecoverInterval is Options.RecoverInterval's default.
const defaultRecoverInterval = time.Second

// segmentCheckEvery is the least time between two checks of the segment by the batches.
const segmentCheckEvery = 50 * time.Millisecond

// checkAfterSync is run by the writer after a batch's fsync, before its records (the first
// acked bytes of the open file) are acknowledged: at most every segmentCheckEvery it checks the
// segment, restores a removed one with those bytes (the batch is then acknowledged in the
// restored file), and fails on a replaced one.
func (l *Ledger) checkAfterSync(acked int64) error {
	now := time.Now()
	if now.Sub(l.lastCheck) < segmentCheckEvery {
		return nil
	}
	l.lastCheck = now
	return l.checkRestore(acked)
}

// checkRestore checks the segment, restores a removed one with the first acked bytes of the
// open file, and returns ErrRestartRequired (wrapped) for a replaced one.
func (l *Ledger) checkRestore(acked int64) error {
	err := l.checkSegment()
	if errors.Is(err, errSegmentRemoved) {
		err = l.restore(acked)
	}
	return l.replaced(err)
}

// asWriter runs fn as the writer, unless a batch is being written or the ledger is closing
// (recoverLoop's next tick tries again).
func (l *Ledger) asWriter(fn func()) {
	l.qmu.Lock()
	if l.writing || l.closed {
		l.qmu.Unlock()
		return
	}
	l.writing = true
	l.qmu.Unlock()
	fn()
	l.release()
}

// tryCheck checks the segment of a healthy, idle ledger (recoverLoop's tick), as the writer.
func (l *Ledger) tryCheck() { l.asWriter(l.checkIdle) }

func (l *Ledger) checkIdle() {
	if l.Err() == nil {
		l.lastCheck = time.Now()
		if err := l.checkRestore(l.off); err != nil {
			l.setFailed(fmt.Errorf("appending to ledger %s: %w: %w", l.dir, ErrUnavailable, err))
		}
	}
}

// ErrRestartRequired: the ledger cannot recover by itself; an operator must act and restart
// the server. It is wrapped together with ErrUnavailable.
var ErrRestartRequired = errors.New("only an operator can fix the ledger; restart the server after that")

// errSegmentRemoved: the segment's path no longer names a file; recover restores it.
var errSegmentRemoved = errors.New("the segment was removed while the ledger had it open")

// segmentReplacedError: the segment's path names another file than the one the ledger
// appends to.
type segmentReplacedError struct {
	path, kept string
}

func (e *segmentReplacedError) Error() string {
	msg := fmt.Sprintf("another file was put at %s while the ledger had its segment open; the ledger does not overwrite it", e.path)
	if e.kept != "" {
		msg += fmt.Sprintf("; the ledger's own records are in %s: compare the two, put the right one back at %s, and restart", e.kept, e.path)
	}
	return msg
}

func (e *segmentReplacedError) Unwrap() []error { return []error{ErrUnavailable, ErrRestartRequired} }

// checkSegment reports whether the segment's path still names the open file: nil if it does,
// errSegmentRemoved if nothing is there, a *segmentReplacedError if another file is.
func (l *Ledger) checkSegment() error {
	fi, err := os.Stat(l.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return errSegmentRemoved
	case err != nil:
		return fmt.Errorf("checking %s: %w", l.path, err)
	case !os.SameFile(fi, l.fileInfo):
		return &segmentReplacedError{path: l.path}
	}
	return nil
}

// replaced returns err, and when it is a *segmentReplacedError, first keeps a copy of the
// ledger's own records next to the file that replaced the segment (named in the error) and
// logs it.
func (l *Ledger) replaced(err error) error {
	var replaced *segmentReplacedError
	if errors.As(err, &replaced) && replaced.kept == "" {
		replaced.kept = l.keepOwnCopy()
		l.opts.Logger.Error("ledger segment replaced under the server: closed for appends until an operator acts and restarts it",
			"file", l.path, "kept_own_records", replaced.kept)
	}
	return err
}

// recoverLoop runs until Close: every RecoverInterval, a ledger closed for appends by a
// storage fault tries to recover.
func (l *Ledger) recoverLoop() {
	defer close(l.recoverDone)
	t := time.NewTicker(l.opts.RecoverInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stopRecover:
			return
		case <-t.C:
		}
		switch err := l.Err(); {
		case err == nil:
			l.tryCheck()
		case !errors.Is(err, ErrRestartRequired):
			l.tryRecover()
		}
	}
}

// tryRecover recovers as the writer.
func (l *Ledger) tryRecover() { l.asWriter(l.recover) }

// recover is run by the writer of a ledger closed for appends: see the comment at the top of
// the file. It reopens the ledger for appends if every step succeeds, and otherwise leaves it
// closed with the first error.
func (l *Ledger) recover() {
	failed := l.Err()
	err := l.checkRestore(l.off)
	if errors.Is(err, ErrRestartRequired) {
		l.setFailed(fmt.Errorf("appending to ledger %s: %w", l.dir, err))
		return
	}
	if err == nil && l.dirty > l.off {
		// Zeros over what failed writes may have left: those records were never acknowledged.
		// Records are written only into the free space (a write whose reserve failed wrote
		// nothing), so zeroing stops at its end, and never grows the file.
		err = fillZeros(l.w, l.off, min(l.dirty, l.end))
	}
	if err == nil {
		err = l.regrow()
	}
	if err == nil {
		l.syncs.Add(1)
		err = l.w.Sync()
	}
	if err == nil {
		err = l.checkSegment()
	}
	if err != nil {
		var space *SpaceError
		if errors.As(err, &space) || errors.As(failed, &space) {
			// Err (and SpaceNeeded) say what is free and needed now.
			l.setFailed(fmt.Errorf("appending to ledger %s: %w: %w", l.dir, ErrUnavailable, writeError(l.dir, err)))
		}
		l.opts.Logger.Debug("ledger still cannot be written", "dir", l.dir, "error", err.Error())
		return
	}
	l.dirty, l.retry = 0, 0
	l.recoveries.Add(1)
	l.mu.Lock()
	since := l.failedAt
	l.failed = nil
	l.mu.Unlock()
	l.opts.Logger.Warn("ledger recovered: accepting records again", "dir", l.dir,
		"closed_for", l.opts.Clock.Since(since).Round(time.Millisecond).String(), "cause", failed.Error(), "last_seq", l.seq)
}

// regrow gives a recovering ledger free space again, by the rules of reserve (space.go's
// grow): room for the write that failed (l.retry bytes past the last record; a *SpaceError
// if the file system has not that much free), and, when less than a quarter chunk is free,
// up to the chunk boundary past a quarter chunk or as far as the file system has room for.
func (l *Ledger) regrow() error {
	need, want := l.end, l.end
	if l.off+l.retry > l.end {
		want = alignUp(l.off+l.retry, l.opts.Preallocate)
		need = min(alignUp(l.off+l.retry, pageSize), want)
	}
	if l.end-l.off < l.opts.Preallocate/4 {
		want = max(want, alignUp(l.off+l.opts.Preallocate/4, l.opts.Preallocate))
	}
	if want <= l.end {
		return nil
	}
	end, err := l.grow(need, want)
	l.end = end
	return err
}

// setFailed closes the ledger for appends with err (the first failure's time is kept).
func (l *Ledger) setFailed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed == nil {
		l.failedAt = l.opts.Clock.Now()
	}
	l.failed = err
}

// restore writes the open (removed) segment's first n bytes (its acknowledged records, and
// the batch being acknowledged, if any) and fresh free space to a new file, puts it at the
// segment's path (only if nothing is there: link fails otherwise), and appends to it from now
// on. The free space is sized as Open sizes it (up to the chunk boundary past a quarter
// chunk, or what the file system has room for, or none: space.go's plan); a *SpaceError when
// not even the records fit. A failed restore gives back what it took: the new file is
// removed and closed.
func (l *Ledger) restore(n int64) error {
	tmp := l.path + ".restoring"
	_ = os.Remove(tmp) // a leftover of an earlier attempt
	end, err := plan(l.opts.freeSpace, l.dir, 0, n, alignUp(n+l.opts.Preallocate/4, l.opts.Preallocate))
	if err != nil {
		return fmt.Errorf("restoring %s: %w", l.path, err)
	}
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("restoring %s: %w", l.path, writeError(l.dir, err))
	}
	end, err = copySegment(f, l.file, n, end)
	if err == nil {
		err = os.Link(tmp, l.path)
	}
	_ = os.Remove(tmp)
	if err == nil {
		err = syncDir(l.dir)
	}
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("restoring %s: %w", l.path, writeError(l.dir, err))
	}
	l.appendTo(f, fi, l.seg, l.off, end)
	l.restores.Add(1)
	l.opts.Logger.Error("ledger segment was removed while the server was running; restored it from the open file, no record lost",
		"file", l.path, "records", l.seq)
	return nil
}

// copySegment writes src's first n bytes to dst, then zeros up to end, fsyncs dst and returns
// its size: end, or n when the file system had no room for the zeros (ENOSPC: dst is then
// truncated to n again, the records matter and the free space does not).
func copySegment(dst *os.File, src io.ReaderAt, n, end int64) (int64, error) {
	if _, err := io.Copy(dst, io.NewSectionReader(src, 0, n)); err != nil {
		return n, err
	}
	if err := fillZeros(dst, n, end); err != nil {
		if !noSpace(err) {
			return n, err
		}
		if err := dst.Truncate(n); err != nil {
			return n, err
		}
		end = n
	}
	return end, dst.Sync()
}

// keepOwnCopy writes the open segment's acknowledged records next to the file that replaced
// it, as <segment>.open-<unix time>, and returns that path ("" if it could not).
func (l *Ledger) keepOwnCopy() string {
	p := fmt.Sprintf("%s.open-%d", l.path, l.opts.Clock.Now().Unix())
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		l.opts.Logger.Error("could not keep a copy of the ledger's own records", "file", p, "error", err.Error())
		return ""
	}
	defer f.Close()
	if _, err := copySegment(f, l.file, l.off, l.off); err != nil {
		l.opts.Logger.Error("could not keep a copy of the ledger's own records", "file", p, "error", err.Error())
		return ""
	}
	_ = syncDir(l.dir)
	return p
}

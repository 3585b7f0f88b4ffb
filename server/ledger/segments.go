package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Segments. The records are kept in numbered segment files, ledger-000001.jsonl,
// ledger-000002.jsonl, …: only the last one is appended to. When a batch would take the
// current segment past Options.SegmentSize (and the segment holds a record), the writer
// closes it (cuts its free space off, fsyncs it and makes it read-only, 0400: a closed
// segment never changes again) and begins the next one, whose first record chains to the
// closed one's last through its PrevHash, and whose seq follows. A closed segment can be moved
// to archive storage (docs/ledger.md); the server does not need it to start, only to answer a
// proof or a lookup of one of its records, and offline audits find it in the directories
// they are given.

// segmentPrefix and segmentSuffix frame a segment's number in its file name.
const (
	segmentPrefix = "ledger-"
	segmentSuffix = ".jsonl"
)

// firstSegment is the name of segment 1, the only segment of a ledger written before
// rotation existed.
var firstSegment = segmentFile(1)

// segmentFile returns the file name of segment n.
func segmentFile(n uint32) string { return fmt.Sprintf("%s%06d%s", segmentPrefix, n, segmentSuffix) }

// segmentNumber returns the number of the segment file name, false if name is not one.
func segmentNumber(name string) (uint32, bool) {
	s, ok := strings.CutPrefix(name, segmentPrefix)
	if !ok {
		return 0, false
	}
	if s, ok = strings.CutSuffix(s, segmentSuffix); !ok || len(s) < 6 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 0 || segmentFile(uint32(n)) != name {
		return 0, false
	}
	return uint32(n), true
}

// segmentSet says where each segment of a ledger is: in its directory or, for closed
// segments moved to archive storage, in one of the archive directories an offline reader was
// given.
type segmentSet struct {
	nums  []uint32          // ascending, consecutive
	where map[uint32]string // segment → the directory holding it
}

// findSegments lists the segments in dir and then in each archive directory (a segment found
// in more than one place is taken from the first). The numbers must be consecutive: a gap is
// a *CorruptionError naming the missing segments.
func findSegments(dir string, archives ...string) (segmentSet, error) {
	set := segmentSet{where: map[uint32]string{}}
	for i, d := range append([]string{dir}, archives...) {
		entries, err := os.ReadDir(d)
		if err != nil {
			if i == 0 && errors.Is(err, os.ErrNotExist) {
				return set, err
			}
			return set, fmt.Errorf("listing ledger segments in %s: %w", d, err)
		}
		for _, e := range entries {
			if n, ok := segmentNumber(e.Name()); ok && !e.IsDir() {
				if _, seen := set.where[n]; !seen {
					set.where[n] = d
					set.nums = append(set.nums, n)
				}
			}
		}
	}
	slices.Sort(set.nums)
	for i := 1; i < len(set.nums); i++ {
		if prev, n := set.nums[i-1], set.nums[i]; n != prev+1 {
			return set, &CorruptionError{File: segmentFile(prev + 1), Problem: fmt.Sprintf(
				"segment %s is missing: the ledger has %s and %s but nothing between them — a segment was removed (give it back, from archive storage if it was moved there)",
				gapName(prev+1, n-1), segmentFile(prev), segmentFile(n))}
		}
	}
	return set, nil
}

// gapName names the segments from a to b.
func gapName(a, b uint32) string {
	if a == b {
		return segmentFile(a)
	}
	return segmentFile(a) + " to " + segmentFile(b)
}

// path returns the path of segment n, "" if it is not in the set.
func (s segmentSet) path(n uint32) string {
	d, ok := s.where[n]
	if !ok {
		return ""
	}
	return filepath.Join(d, segmentFile(n))
}

// last returns the number of the last segment, 0 when there is none.
func (s segmentSet) last() uint32 {
	if len(s.nums) == 0 {
		return 0
	}
	return s.nums[len(s.nums)-1]
}

// first returns the number of the first segment, 0 when there is none.
func (s segmentSet) first() uint32 {
	if len(s.nums) == 0 {
		return 0
	}
	return s.nums[0]
}

// missingBefore returns an error naming the segments before the first one present, when
// segment 1 is not there: a reader of the whole history needs them.
func (s segmentSet) missingBefore(dir string) error {
	if f := s.first(); f > 1 {
		return fmt.Errorf("%w: %s of ledger %s %s not in the ledger directory: they were moved away (to archive storage?); give their directory with --archive, or put them back",
			ErrSegmentsArchived, gapName(1, f-1), dir, map[bool]string{true: "is", false: "are"}[f == 2])
	}
	return nil
}

// ErrSegmentsArchived: closed segments a reader needs are not in the ledger directory.
var ErrSegmentsArchived = errors.New("ledger segments are missing")

// rotate closes the current segment and begins the next one, as the writer: the current
// segment is cut to its records (its free space given back), fsynced and made read-only;
// the next is created with free space (as Open sizes it, as far as the file system has room)
// and the directory fsynced. A crash in between leaves either the closed segment last
// (Open gives it free space again and the next batch rotates again) or an empty next
// segment, which Open appends to. A failure leaves the ledger closed for appends, as a
// failed write does; its recovery gives the current segment free space again.
func (l *Ledger) rotate() error {
	if err := l.file.Truncate(l.off); err != nil {
		return fmt.Errorf("closing %s: %w", l.path, err)
	}
	l.end = l.off
	l.syncs.Add(1)
	if err := l.w.Sync(); err != nil {
		return fmt.Errorf("closing %s: %w", l.path, err)
	}
	next := l.seg + 1
	path := filepath.Join(l.dir, segmentFile(next))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("beginning %s: %w", path, err)
	}
	end, err := plan(l.opts.freeSpace, l.dir, 0, 0, l.opts.Preallocate)
	if err == nil {
		end, err = copySegment(f, nil, 0, end)
	}
	if err == nil {
		err = syncDir(l.dir)
	}
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if err != nil {
		f.Close()
		_ = os.Remove(path)
		return fmt.Errorf("beginning %s: %w", path, err)
	}
	oldPath := l.path
	l.appendTo(f, fi, next, 0, end)
	if err := os.Chmod(oldPath, 0o400); err != nil {
		l.opts.Logger.Warn("ledger: could not make the closed segment read-only", "file", oldPath, "error", err.Error())
	}
	l.rotations.Add(1)
	l.opts.Logger.Info("ledger: segment closed, next one begun", "closed", oldPath, "next", path, "first_seq", l.seq+1)
	return nil
}

// appendTo makes f (whose FileInfo is fi) the file the writer appends to, as segment seg with
// its records ending at off and its free space at end, and closes the one it replaces (Line's
// readers switch under fileMu; a cached read-only handle of the old file is dropped).
func (l *Ledger) appendTo(f *os.File, fi os.FileInfo, seg uint32, off, end int64) {
	old, oldSeg := l.file, l.seg
	l.fileMu.Lock()
	l.file, l.fileInfo, l.w, l.path, l.seg, l.off, l.end, l.dirty = f, fi, File(f), filepath.Join(l.dir, segmentFile(seg)), seg, off, end, 0
	l.fileMu.Unlock()
	if l.opts.WrapFile != nil {
		l.w = l.opts.WrapFile(f)
	}
	old.Close()
	l.readers.forget(oldSeg)
}

package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/signet-pki/signet/server/ledger"
)

// spaceFixture opens a ledger of 64 KiB chunks whose file system's free space is what free
// holds (statfs is not asked), writing through a faultyFile.
func spaceFixture(t *testing.T, free *atomic.Int64) (*fixture, *ledger.Ledger, *faultyFile) {
	t.Helper()
	f := newFixture(t)
	f.prealloc = 64 << 10
	ff := &faultyFile{}
	opts := ledger.WithFreeSpace(f.options(), func() (int64, bool) { return free.Load(), true })
	opts.WrapFile = func(inner ledger.File) ledger.File { ff.File = inner; return ff }
	l, err := ledger.Open(f.dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return f, l, ff
}

// appendUntilGrowth appends issued records, from issued(from), until less than 1 KiB (more
// than an issued(i)'s line, about 700 bytes) is free in a segment of size bytes, and returns
// the number appended: the next big(i) then needs the segment to grow, by a page.
func appendUntilGrowth(t *testing.T, f *fixture, l *ledger.Ledger, from int, size int64) int {
	t.Helper()
	n := from
	for ; f.used(t)+1<<10 < size; n++ {
		if _, err := l.Append(context.Background(), issued(n)); err != nil {
			t.Fatalf("Append %d: %v", n, err)
		}
	}
	return n - from
}

// big returns issued(i) with a longer message: its line (about 1.7 KiB) is longer than what
// appendUntilGrowth leaves free, and shorter than a page.
func big(i int) ledger.Record {
	r := issued(i)
	r.Message = strings.Repeat("m", 1<<10)
	return r
}

// TestGrowthFitsTheFreeSpace: the segment grows by a chunk while the file system has room for
// it and the headroom; by less, as far as it has room, when it has not; and, when not even
// the next records fit, it does not grow: the append fails with ErrUnavailable, and Err and
// SpaceNeeded name the bytes needed and free, with the numbers of the latest recovery attempt.
// The ledger recovers as soon as what the next records need is free.
func TestGrowthFitsTheFreeSpace(t *testing.T) {
	t.Parallel()
	const chunk, page = 64 << 10, 4 << 10
	var free atomic.Int64
	free.Store(1 << 30)
	f, l, ff := spaceFixture(t, &free)
	n := appendUntilGrowth(t, f, l, 0, chunk)

	// Room for half a chunk beyond the headroom: the segment grows by that half.
	free.Store(chunk/2 + ledger.Headroom)
	if _, err := l.Append(context.Background(), big(n)); err != nil {
		t.Fatalf("Append with room for half a chunk: %v", err)
	}
	n++
	if size := f.size(t); size != chunk+chunk/2 {
		t.Fatalf("segment of %d bytes, want %d: grown by what the file system has room for", size, chunk+chunk/2)
	}
	n += appendUntilGrowth(t, f, l, n, chunk+chunk/2)

	// Room for less than a page beyond the headroom: refused, nothing written.
	size := f.size(t)
	free.Store(ledger.Headroom + page - 1)
	writes := len(ff.recordWrites())
	_, err := l.Append(context.Background(), big(n))
	var se *ledger.SpaceError
	if !errors.Is(err, ledger.ErrUnavailable) || !errors.As(err, &se) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append with no room: err = %v, want ErrUnavailable wrapping a *SpaceError (ENOSPC)", err)
	}
	want := fmt.Sprintf("the ledger's file system has %d bytes free; the next records need %d (%d of them to stay free for the checkpoint and other small files): free at least 1 more bytes on %s",
		ledger.Headroom+page-1, ledger.Headroom+page, ledger.Headroom, f.dir)
	if !strings.Contains(l.Err().Error(), want) {
		t.Errorf("Err() = %q, want it to say %q", l.Err(), want)
	}
	if se.Need != ledger.Headroom+page || se.Free != ledger.Headroom+page-1 || l.SpaceNeeded() != 1 {
		t.Errorf("SpaceError{Need: %d, Free: %d}, SpaceNeeded() = %d; want %d, %d, 1",
			se.Need, se.Free, l.SpaceNeeded(), ledger.Headroom+page, ledger.Headroom+page-1)
	}
	if got := f.size(t); got != size || len(ff.recordWrites()) != writes {
		t.Errorf("segment of %d bytes after the refusal (was %d), %d writes of records (was %d): want nothing written",
			got, size, len(ff.recordWrites()), writes)
	}

	// Some space freed, not enough: still closed, Err names the new numbers.
	free.Store(ledger.Headroom + 100)
	ledger.Recover(l)
	if !errors.As(l.Err(), &se) || se.Free != ledger.Headroom+100 || l.SpaceNeeded() != page-100 ||
		!strings.Contains(l.Err().Error(), fmt.Sprintf("free at least %d more bytes", page-100)) {
		t.Errorf("after a recovery attempt: SpaceNeeded() = %d, Err() = %v; want the current numbers, %d bytes short",
			l.SpaceNeeded(), l.Err(), page-100)
	}

	// Exactly what the next records need is free: the ledger reopens, grows by one page.
	free.Store(ledger.Headroom + page)
	ledger.Recover(l)
	if err := l.Err(); err != nil {
		t.Fatalf("Err() after enough space was freed = %v", err)
	}
	if got := l.SpaceNeeded(); got != 0 {
		t.Errorf("SpaceNeeded() of a healthy ledger = %d, want 0", got)
	}
	if r, err := l.Append(context.Background(), big(n)); err != nil || r.Seq != uint64(n)+1 {
		t.Fatalf("Append after recovery: %+v, %v; want seq %d", r, err, n+1)
	}
	if got := f.size(t); got != size+page {
		t.Errorf("segment of %d bytes, want %d: grown by the page the records need", got, size+page)
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != n+1 || rep.TornTail != 0 {
		t.Errorf("Verify: %+v, %v; want %d records", rep, err, n+1)
	}
}

// TestFailedExtensionGivesBackWhatItTook: an extension that the file system cuts short
// (ENOSPC after some zeros, as when its free space is unknown or another writer took it) is
// truncated away: the segment is back at its size. grow then tries what the batch needs
// alone; when that fails too, the append fails and the segment is still at its size; once
// the space is there, recovery grows it and appends go on.
func TestFailedExtensionGivesBackWhatItTook(t *testing.T) {
	t.Parallel()
	const chunk, page = 64 << 10, 4 << 10
	var free atomic.Int64 // not known: the writes find out
	f := newFixture(t)
	f.prealloc = chunk
	ff := &faultyFile{}
	opts := ledger.WithFreeSpace(f.options(), func() (int64, bool) { return free.Load(), false })
	opts.WrapFile = func(inner ledger.File) ledger.File { ff.File = inner; return ff }
	l, err := ledger.Open(f.dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n := appendUntilGrowth(t, f, l, 0, chunk)

	// Room for two pages: the chunk fails after two pages of zeros, given back; the page the
	// record needs fits.
	ff.zeroLimit.Store(chunk + 2*page)
	if _, err := l.Append(context.Background(), big(n)); err != nil {
		t.Fatalf("Append with room for two pages: %v", err)
	}
	n++
	if size := f.size(t); size != chunk+page {
		t.Fatalf("segment of %d bytes, want %d: the failed chunk given back, then one page", size, chunk+page)
	}
	n += appendUntilGrowth(t, f, l, n, chunk+page)

	// Room for half a page: the page fails too, and is given back.
	ff.zeroLimit.Store(chunk + page + page/2)
	if _, err := l.Append(context.Background(), big(n)); !errors.Is(err, ledger.ErrUnavailable) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append with no room: err = %v, want ErrUnavailable wrapping ENOSPC", err)
	}
	if size := f.size(t); size != chunk+page {
		t.Errorf("segment of %d bytes after the failed extension, want %d: what it wrote given back", size, chunk+page)
	}
	ledger.Recover(l)
	if l.Err() == nil || f.size(t) != chunk+page {
		t.Errorf("after a recovery attempt with no room: Err() = %v, segment of %d bytes; want closed, %d bytes", l.Err(), f.size(t), chunk+page)
	}

	ff.zeroLimit.Store(0)
	ledger.Recover(l)
	if r, err := l.Append(context.Background(), big(n)); err != nil || r.Seq != uint64(n)+1 {
		t.Fatalf("Append after the space came back: %+v, %v (Err %v)", r, err, l.Err())
	}
	if size := f.size(t); size != 2*chunk {
		t.Errorf("segment of %d bytes, want %d: recovery grows to the chunk boundary", size, 2*chunk)
	}
	if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != n+1 || rep.TornTail != 0 {
		t.Errorf("Verify: %+v, %v; want %d records", rep, err, n+1)
	}
}

// TestOpenOnAFullFileSystem: a restart on a file system with no room beyond the headroom
// opens the ledger (with the free space its segment has, here none: a ledger written before
// free space existed) and warns; the first append that needs room fails with a *SpaceError,
// and the ledger recovers once space is freed.
func TestOpenOnAFullFileSystem(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.fill(t, 5)
	lines := f.lines(t)
	f.write(t, lines[:len(lines)-1])
	used := f.size(t)
	var free atomic.Int64
	free.Store(ledger.Headroom)
	l, err := ledger.Open(f.dir, ledger.WithFreeSpace(f.options(), func() (int64, bool) { return free.Load(), true }))
	if err != nil {
		t.Fatalf("Open on a full file system: %v", err)
	}
	defer l.Close()
	if l.Err() != nil || f.size(t) != used || !strings.Contains(f.log.String(), "little free space") {
		t.Errorf("after Open: Err() = %v, segment of %d bytes (was %d), log %q; want healthy, unchanged, a warning",
			l.Err(), f.size(t), used, f.log.String())
	}
	var se *ledger.SpaceError
	if _, err := l.Append(context.Background(), issued(6)); !errors.Is(err, ledger.ErrUnavailable) || !errors.As(l.Err(), &se) {
		t.Fatalf("Append with no room: err = %v, Err() = %v; want ErrUnavailable and a *SpaceError", err, l.Err())
	}
	free.Store(1 << 30)
	ledger.Recover(l)
	if r, err := l.Append(context.Background(), issued(6)); err != nil || r.Seq != 6 {
		t.Fatalf("Append after space was freed: %+v, %v", r, err)
	}
	if size := f.size(t); size != 4<<20 {
		t.Errorf("segment of %d bytes, want a full chunk once there is room", size)
	}
}

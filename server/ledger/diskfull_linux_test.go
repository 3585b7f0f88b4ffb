package ledger_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/signet-pki/signet/internal/atomicfile"
	"github.com/signet-pki/signet/server/ledger"
)

// TestDiskFullOnASmallVolume is issue 38's report: a ledger of 4 MiB chunks on an 8 MiB tmpfs
// (smaller than two chunks), filled by another file to 64 KiB free. Appends fail closed once
// the segment's free space is used up, and the segment keeps no partial chunk: every growth
// is given back when it fails, so the other file's owner, and the checkpoint, still find the
// space. Once the filler is deleted the ledger recovers by itself within a few
// RecoverIntervals (it grows by what fits, not by a chunk that can never fit), verifies, and
// a restart on the nearly full volume opens it and appends.
//
// With statfs (Linux) the segment does not grow into the last 64 KiB at all and Err names
// the bytes needed and free; where the free space is unknown (other platforms, or another
// writer racing statfs) each chunk is tried, refused by ENOSPC, given back, and the page the
// batch needs taken instead, until not even that fits.
func TestDiskFullOnASmallVolume(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		statfs bool
	}{{"statfs", true}, {"free space unknown", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const chunk, page, interval = 4 << 20, 4 << 10, 50 * time.Millisecond
			vol := mountTmpfs(t, "8m")
			f := newFixture(t)
			f.dir = filepath.Join(vol, "ledger")
			f.recoverEvery = interval
			opts := f.options()
			if !tc.statfs {
				opts = ledger.WithFreeSpace(opts, func() (int64, bool) { return 0, false })
			}
			l, err := ledger.Open(f.dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { l.Close() }()
			if size := f.size(t); size != chunk {
				t.Fatalf("new segment of %d bytes, want one chunk", size)
			}
			// The server writes its checkpoint next to the segment at start: a page of the volume.
			if err := atomicfile.Write(filepath.Join(f.dir, "checkpoint"), make([]byte, 1<<10), 0o600); err != nil {
				t.Fatal(err)
			}
			filler := fillUp(t, vol)
			fi, err := os.Stat(filler)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(filler, fi.Size()-64<<10); err != nil {
				t.Fatal(err)
			}

			rec := func(i int) ledger.Record {
				r := issued(i)
				r.Message = strings.Repeat("m", 3<<10)
				return r
			}
			acked := 0
			before := f.size(t)
			for ; acked < 10_000; acked++ {
				if _, err = l.Append(context.Background(), rec(acked)); err != nil {
					break
				}
				size := f.size(t)
				if grown := size - before; grown != 0 && (tc.statfs || grown != page) {
					t.Fatalf("append %d grew the segment from %d to %d bytes; want no growth (statfs) or the one page it needed, nothing of a failed chunk kept",
						acked, before, size)
				}
				before = size
			}
			if !errors.Is(err, ledger.ErrUnavailable) || !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ledger.ErrRestartRequired) {
				t.Fatalf("Append on the full volume: err = %v, want retryable ErrUnavailable, ENOSPC", err)
			}
			if size := f.size(t); size != before || size%page != 0 {
				t.Fatalf("segment of %d bytes after the refused append, was %d: the failed extension was not given back", size, before)
			}
			t.Logf("%d records acknowledged in %d bytes, then: %v", acked, before, err)
			var se *ledger.SpaceError
			if tc.statfs {
				if !errors.As(l.Err(), &se) || before != chunk || se.Free < 60<<10 || se.Free > 68<<10 || l.SpaceNeeded() != se.Need-se.Free ||
					l.SpaceNeeded() <= 0 || !strings.Contains(l.Err().Error(), "bytes free; the next records need") {
					t.Fatalf("segment of %d bytes, Err() = %v, SpaceNeeded() = %d; want one chunk and a *SpaceError naming the ~64 KiB free",
						before, l.Err(), l.SpaceNeeded())
				}
				// The headroom is left: the checkpoint can still be replaced.
				if err := atomicfile.Write(filepath.Join(f.dir, "checkpoint"), make([]byte, 1<<10), 0o600); err != nil {
					t.Errorf("writing a checkpoint-sized file while the ledger is refused: %v", err)
				}
			}
			if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != acked || rep.TornTail != 0 {
				t.Fatalf("Verify on the full volume: %+v, %v; want the %d acknowledged records", rep, err, acked)
			}

			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			freed := time.Now()
			for l.Err() != nil {
				if time.Since(freed) > 40*interval {
					t.Fatalf("not recovered %v after the filler was deleted: %v", time.Since(freed), l.Err())
				}
				time.Sleep(interval / 10)
			}
			t.Logf("recovered %v after the filler was deleted; segment of %d bytes", time.Since(freed).Round(time.Millisecond), f.size(t))
			if got := l.SpaceNeeded(); got != 0 {
				t.Errorf("SpaceNeeded() after recovery = %d, want 0", got)
			}
			for i := acked; i < acked+10; i++ {
				if r, err := l.Append(context.Background(), rec(i)); err != nil || r.Seq != uint64(i)+1 {
					t.Fatalf("Append after recovery: %+v, %v; want seq %d", r, err, i+1)
				}
			}
			if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != acked+10 || rep.TornTail != 0 {
				t.Fatalf("Verify after recovery: %+v, %v; want %d records", rep, err, acked+10)
			}

			// A restart on the volume, now nearly full of the ledger's own free space.
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l, err = ledger.Open(f.dir, opts)
			if err != nil {
				t.Fatalf("Open after a restart on the nearly full volume: %v", err)
			}
			if tc.statfs {
				if err := atomicfile.Write(filepath.Join(f.dir, "checkpoint"), make([]byte, 1<<10), 0o600); err != nil {
					t.Errorf("writing the checkpoint after the restart: %v", err)
				}
			}
			if r, err := l.Append(context.Background(), rec(acked+10)); err != nil || r.Seq != uint64(acked)+11 {
				t.Fatalf("Append after the restart: %+v, %v; want seq %d", r, err, acked+11)
			}
			if rep, err := ledger.Verify(f.dir); err != nil || rep.Records != acked+11 || rep.TornTail != 0 {
				t.Errorf("Verify after the restart: %+v, %v; want %d records", rep, err, acked+11)
			}
		})
	}
}

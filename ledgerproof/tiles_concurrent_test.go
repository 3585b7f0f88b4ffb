package ledgerproof

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// TestTilesConcurrent runs one appender, a flusher and several provers on a tree in tiles
// with a cache of two tiles (so that proofs read tiles from disk while they are written);
// run with -race. Every size a Flush returned reopens with the reference tree's root.
func TestTilesConcurrent(t *testing.T) {
	mem, hashes := reference(t)
	dir := t.TempDir()
	tr := openTiles(t, dir, 0, TileOptions{CacheTiles: 2})
	const total = 30_000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	var flushed []int64
	wg.Go(func() {
		for !stopped() {
			n, err := tr.Flush()
			if err != nil {
				t.Error(err)
				return
			}
			if size := tr.Size(); n > size || (len(flushed) > 0 && n < flushed[len(flushed)-1]) {
				t.Errorf("Flush() = %d after %v, tree of %d", n, flushed, size)
				return
			}
			flushed = append(flushed, n)
		}
	})
	for range 4 {
		wg.Go(func() {
			var old Checkpoint
			for k := 0; !stopped(); k++ {
				c, err := tr.Checkpoint(testOrigin)
				if err != nil || c.Size == 0 {
					continue
				}
				i := rand.Int64N(c.Size)
				p, err := tr.ProveInclusion(i, c.Size)
				if err == nil {
					err = VerifyInclusion(record(i+1), i, p, c)
				}
				if err == nil && old.Size > 0 {
					var q []tlog.Hash
					q, err = tr.ProveConsistency(old.Size, c.Size)
					if err == nil {
						err = VerifyConsistency(old, c, q)
					}
				}
				if err == nil {
					var h tlog.Hash
					if h, err = tr.LeafHash(i); err == nil && h != hashes[i] {
						t.Errorf("LeafHash(%d) = %s, want %s", i, h, hashes[i])
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
				if k%16 == 0 {
					old = c
				}
			}
		})
	}
	grow(t, tr, total/2, true)
	grow(t, tr, total, false)
	close(stop)
	wg.Wait()
	if n, err := tr.Flush(); err != nil || n != total {
		t.Fatalf("last Flush() = %d, %v; want %d", n, err, total)
	}
	flushed = append(flushed, total)
	if st := tr.TileStats(); st.TilesRead == 0 || st.Pending != 0 {
		t.Errorf("after %d flushes: %+v, want tiles read back from disk and none pending", len(flushed), st)
	}
	for _, k := range []int{0, len(flushed) / 3, len(flushed) / 2, len(flushed) - 2, len(flushed) - 1} {
		if k < 0 {
			continue
		}
		n := flushed[k]
		re := openTiles(t, dir, n, TileOptions{})
		got, err := re.Root()
		want, _ := mem.RootAt(n)
		if err != nil || got != want {
			t.Errorf("reopened at flushed size %d: root %s, %v; want %s", n, got, err, want)
		}
	}
}

// BenchmarkTileAppend is BenchmarkTreeAppend on a tree in tiles: appends only (the full
// tiles pile up in memory), and with a Flush every 65536 appends counted in.
func BenchmarkTileAppend(b *testing.B) {
	for _, every := range []int64{0, 1 << 16} {
		name := "no-flush"
		if every > 0 {
			name = fmt.Sprintf("flush-every-%d", every)
		}
		b.Run(name, func(b *testing.B) {
			tr, err := OpenTiles(b.TempDir(), 0, nil, TileOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(benchLine)))
			b.ReportAllocs()
			for b.Loop() {
				n, err := tr.Append(benchLine)
				if err != nil {
					b.Fatal(err)
				}
				if every > 0 && n%every == every-1 {
					if _, err := tr.Flush(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkTileProveInclusion is BenchmarkProveInclusion on a tree in tiles reopened from
// disk, with the default cache.
func BenchmarkTileProveInclusion(b *testing.B) {
	tr := openTiles(b, flushedTiles(b), 1<<16, TileOptions{})
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		if _, err := tr.ProveInclusion(i%(1<<16), 1<<16); err != nil {
			b.Fatal(err)
		}
		i += 7919
	}
}

// BenchmarkOpenTiles opens the tiles of 200,000 leaves.
func BenchmarkOpenTiles(b *testing.B) {
	dir := flushedTiles(b)
	_, hashes := reference(b)
	b.ReportAllocs()
	for b.Loop() {
		var calls []int64
		if _, err := OpenTiles(dir, flushedSize, leafHashFunc(hashes, &calls), TileOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFlushDuringAppends: a Flush returns the size it started at, and the tiles that appends
// complete while it writes wait for the next Flush.
func TestFlushDuringAppends(t *testing.T) {
	dir := t.TempDir()
	tr := openTiles(t, dir, 0, TileOptions{})
	grow(t, tr, 1000, false)
	tr.tiles.flushing = func() { grow(t, tr, 2000, false) }
	if n, err := tr.Flush(); err != nil || n != 1000 {
		t.Fatalf("Flush() = %d, %v; want the 1000 leaves of when it started", n, err)
	}
	if st := tr.TileStats(); st.TilesWritten != 3 || st.Pending != 4 {
		t.Errorf("after Flush: %+v, want 3 tiles written and 4 pending", st)
	}
	openTiles(t, dir, 1000, TileOptions{})
	if _, err := OpenTiles(dir, 1024, nil, TileOptions{}); !errors.Is(err, ErrMissingTile) {
		t.Errorf("OpenTiles(1024) before the second Flush = %v, want ErrMissingTile", err)
	}
	tr.tiles.flushing = nil
	if n, err := tr.Flush(); err != nil || n != 2000 {
		t.Fatalf("second Flush() = %d, %v", n, err)
	}
	want, _ := tr.Root()
	if got, err := openTiles(t, dir, 2000, TileOptions{}).Root(); err != nil || got != want {
		t.Errorf("reopened at 2000: %s, %v; want %s", got, err, want)
	}
}

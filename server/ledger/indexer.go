package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/signet-pki/signet/server/ledger/index"
)

// The indexer writes the acknowledged records to the index, and the tree's full tiles to
// disk, off the append path: the writer hands it each batch's entries after the fsync (a
// slice append), and every Options.IndexInterval, or sooner when many are waiting, it flushes
// the tree's new full tiles (each fsynced) and then adds the entries to the index in one
// transaction, which also records the tree size the tiles cover. The index therefore never
// points past durable tiles, and records acknowledged but not yet indexed are kept here, in
// memory, where Line and Find see them; after a crash Open indexes them again from the
// segment. A failed index write is logged and retried at the next tick: appends go on, and
// only the catch-up at the next start grows.

// indexerKick is the backlog past which the writer wakes the indexer before its tick.
const indexerKick = 1 << 16

// indexSpace is the free space the file system must have, beyond the headroom the segment's
// growth leaves for the checkpoint, for the indexer to write: the index and the tiles grow
// with every write (bbolt copies the pages it changes), so on a nearly full volume they would
// eat that headroom. Below it the index waits, in memory, and catches up once space is freed.
const indexSpace = 4 << 20

// compactStep is the budget of one compaction step (index.Compact): ids merged, about 1 MiB
// of blocks written in one transaction; deletions take a block per 128 of it.
const compactStep = 1 << 15

// errIndexDeferred: the index is not written while the file system is nearly full.
var errIndexDeferred = errors.New("index writes wait for free space")

// indexer is the background writer of the index.
type indexer struct {
	l *Ledger

	mu sync.Mutex
	// pending are the entries acknowledged and not yet indexed, consecutive seqs, as the
	// batches the writer handed over (kept as they came: no copying on the append path);
	// waiting counts them.
	pending [][]index.Entry
	waiting int
	flushMu sync.Mutex    // one flush at a time
	done    atomic.Uint64 // the seq of the last indexed record
	failing bool          // the last flush failed (logged once until it succeeds)
	// compactFailing: the last compaction step failed (logged once until one succeeds).
	compactFailing bool

	kick       chan struct{}
	stop, quit chan struct{}
	running    bool
}

func newIndexer(l *Ledger) *indexer {
	return &indexer{l: l, kick: make(chan struct{}, 1), stop: make(chan struct{}), quit: make(chan struct{})}
}

// entryOf is the index entry of record r, whose line (without "\n") starts at offset start of
// segment seg.
func entryOf(seg uint32, start int64, r Record, line []byte) index.Entry {
	e := index.Entry{
		Seq: r.Seq, Pos: index.Pos{Segment: seg, Offset: start, Length: uint32(len(line))}, Time: r.Time, Hash: r.Hash,
		Serial: r.Serial, ObjectUID: r.ObjectUID, State: r.Decision.IsState(),
	}
	if e.State {
		e.Line = line
	}
	if r.Decision == Issued {
		e.Signer, e.CA, e.NotAfter = r.Signer, r.CA, r.NotAfter
	}
	return e
}

// setIndexed sets the seq of the last indexed record (Open, from the index).
func (x *indexer) setIndexed(seq uint64) { x.done.Store(seq) }

// indexed returns the seq of the last indexed record.
func (x *indexer) indexed() uint64 {
	if x == nil {
		return 0
	}
	return x.done.Load()
}

// add queues entries of acknowledged records, in seq order.
func (x *indexer) add(es ...index.Entry) {
	x.mu.Lock()
	if len(es) > 0 {
		x.pending = append(x.pending, es)
		x.waiting += len(es)
	}
	n := x.waiting
	x.mu.Unlock()
	if n >= indexerKick && x.running {
		select {
		case x.kick <- struct{}{}:
		default:
		}
	}
}

// backlog returns the number of records waiting.
func (x *indexer) backlog() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.waiting
}

// run starts the loop.
func (x *indexer) run() {
	x.running = true
	go x.loop()
}

func (x *indexer) loop() {
	defer close(x.quit)
	t := time.NewTicker(x.l.opts.IndexInterval)
	defer t.Stop()
	for {
		select {
		case <-x.stop:
			return
		case <-t.C:
		case <-x.kick:
		}
		if err := x.flush(); err != nil {
			x.mu.Lock()
			first := !x.failing
			x.failing = true
			x.mu.Unlock()
			switch {
			case !first:
			case errors.Is(err, errIndexDeferred):
				x.l.opts.Logger.Warn("ledger: its index waits for free space on the ledger's file system (appends go on, the records wait in memory)",
					"dir", x.l.dir, "error", err.Error())
			default:
				x.l.opts.Logger.Error("ledger: writing its index failed; retrying (appends go on, the next start reads the records not indexed)",
					"dir", x.l.dir, "error", err.Error())
			}
			continue
		}
		x.compact(x.stop)
	}
}

// compact merges the index's runs of serials and UIDs (index.Compact), a step at a time,
// until no work is left, entries wait to be indexed (they go first), stop is closed, or the
// file system is nearly full. A failed step is logged and tried again after the next flush;
// meanwhile lookups read more runs, and are as right.
func (x *indexer) compact(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		if x.backlog() >= indexerKick {
			return
		}
		if free, known := x.l.opts.freeSpace(x.l.dir); known && free < headroom+indexSpace {
			return
		}
		more, err := x.l.idx.Compact(compactStep)
		x.mu.Lock()
		first := err != nil && !x.compactFailing
		x.compactFailing = err != nil
		x.mu.Unlock()
		if first {
			x.l.opts.Logger.Warn("ledger: merging the runs of its index failed; retrying after the next index write (lookups read more runs meanwhile)",
				"dir", x.l.dir, "error", err.Error())
		}
		if err != nil || !more {
			return
		}
	}
}

// flush writes the tree's new full tiles and the waiting entries to the index.
func (x *indexer) flush() error {
	x.flushMu.Lock()
	defer x.flushMu.Unlock()
	x.mu.Lock()
	chunks := x.pending
	x.mu.Unlock()
	if len(chunks) == 0 {
		return nil
	}
	if free, known := x.l.opts.freeSpace(x.l.dir); known && free < headroom+indexSpace {
		return fmt.Errorf("%w: %d bytes free on the file system of %s, fewer than the %d it needs to keep %d for the checkpoint",
			errIndexDeferred, free, x.l.dir, headroom+indexSpace, headroom)
	}
	n := 0
	for _, c := range chunks {
		n += len(c)
	}
	tail := chunks[len(chunks)-1]
	size, err := x.l.tree.Flush()
	if err != nil {
		return fmt.Errorf("writing the tree tiles of ledger %s: %w", x.l.dir, err)
	}
	last := tail[len(tail)-1].Seq
	if size < int64(last) {
		return fmt.Errorf("writing the index of ledger %s: its tree covers %d records, fewer than the %d acknowledged", x.l.dir, size, last)
	}
	if err := x.l.idx.AddChunks(chunks, int64(last)); err != nil {
		return fmt.Errorf("writing the index of ledger %s: %w", x.l.dir, err)
	}
	x.mu.Lock()
	x.pending = slices.Clone(x.pending[len(chunks):])
	x.waiting -= n
	if x.failing {
		x.l.opts.Logger.Info("ledger: its index is written again", "dir", x.l.dir, "last_seq", last)
	}
	x.failing = false
	x.mu.Unlock()
	x.done.Store(last)
	return nil
}

// close stops the loop and writes what waits.
func (x *indexer) close() error {
	if x.running {
		close(x.stop)
		<-x.quit
		x.running = false
	}
	return x.flush()
}

// pos returns where the not yet indexed record seq lies.
func (x *indexer) pos(seq uint64) (index.Pos, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	// The chunks are in seq order: find the last one that begins at or before seq.
	i := sort.Search(len(x.pending), func(i int) bool { return x.pending[i][0].Seq > seq }) - 1
	if i < 0 {
		return index.Pos{}, false
	}
	c := x.pending[i]
	if j := seq - c[0].Seq; j < uint64(len(c)) {
		return c[j].Pos, true
	}
	return index.Pos{}, false
}

// match returns the seqs of the waiting entries for which fn is true.
func (x *indexer) match(fn func(index.Entry) bool) []uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []uint64
	for _, c := range x.pending {
		for _, e := range c {
			if fn(e) {
				out = append(out, e.Seq)
			}
		}
	}
	return out
}

// recordMigration appends the Migrated record of a ledger whose index Open built from every
// record, the first time that happens to it.
func (l *Ledger) recordMigration() error {
	if l.migrate == "" {
		return nil
	}
	r, err := l.Append(context.Background(), Record{Decision: Migrated, Signer: "-", Grounds: l.migrate,
		Message: "the ledger keeps an index (index.db) and its Merkle tree as tiles (tiles/) beside the segments, built from the records, which are unchanged"})
	if err != nil {
		return fmt.Errorf("recording the migration of ledger %s: %w", l.dir, err)
	}
	l.opts.Logger.Info("ledger migrated: index and tree tiles built, and the migration recorded", "dir", l.dir, "seq", r.Seq, "grounds", l.migrate)
	if err := l.indexer.flush(); err != nil && !errors.Is(err, errIndexDeferred) {
		return err
	}
	return writeFormat(l.dir)
}

// Reindex rebuilds the index and the tree tiles of the ledger in dir from its segments, with
// the server stopped (it takes the ledger's lock): it removes index.db and tiles/ and opens
// the ledger, which reads every record from segment 1 (in dir, or in one of archives when
// closed segments were moved to archive storage) and builds them again, then closes it. It
// returns the ledger's report: what it read.
func Reindex(dir string, opts Options, archives ...string) (Stats, error) {
	lock, err := lockDir(dir)
	if err != nil {
		return Stats{}, fmt.Errorf("reindexing ledger %s: %w", dir, err)
	}
	for _, name := range []string{indexFile, tilesDir} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			lock.Close()
			return Stats{}, fmt.Errorf("reindexing ledger %s: %w", dir, err)
		}
	}
	lock.Close() // Open takes it again
	opts.archives = archives
	l, err := Open(dir, opts)
	if err != nil {
		return Stats{}, fmt.Errorf("reindexing ledger %s: %w", dir, err)
	}
	st := l.Stats()
	return st, l.Close()
}

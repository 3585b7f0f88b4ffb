package ledger

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/ledger/index"
)

// File is what the ledger writes its segment through: the *os.File (opened O_RDWR, not
// O_APPEND), unless Options.WrapFile wraps it (tests count syncs and inject failures that
// way). The ledger writes records, and the zeros that extend the free space, at explicit
// offsets.
type File interface {
	io.WriterAt
	// Sync commits the written bytes to stable storage (fsync).
	Sync() error
}

// Options configure Open. The zero value is usable.
type Options struct {
	// Clock stamps Record.Time. Default: the real clock.
	Clock clock.PassiveClock
	// Logger receives recovery warnings. Default: slog.Default().
	Logger *slog.Logger
	// MaxBatch caps how many pending appends one write and fsync carries. Default: 512.
	MaxBatch int
	// WrapFile, if set, wraps the segment file every batch, and every extension of the free
	// space after Open, is written and synced through.
	WrapFile func(File) File
	// Preallocate is the size of the zero-filled chunks the segment grows by when a batch
	// would not fit in its free space (less when the file system has not that much free: see
	// the package doc). Default: 4 MiB.
	Preallocate int64
	// Appended, if set, is called by the writer after every batch of acknowledged records
	// (the checkpointer's cue). It must be cheap and never block.
	Appended func()
	// RecoverInterval is how often a ledger closed for appends by a storage fault tries to
	// recover (see recover.go). Default: 1 s.
	RecoverInterval time.Duration
	// Replay, if set, is called by Open in seq order with the records that rebuild the
	// server's state: every state record (Decision.IsState) whatever its age; for each signer
	// and CA, its latest issuance (from the index, an Issued record with only Seq, Signer, CA
	// and NotAfter set, when it is older than the window); then every record from the first
	// one whose Time is not before ReplayFrom to the end. A start that reads the whole history
	// (a new index) passes every record. Its first error fails Open.
	Replay func(Record) error
	// ReplayFrom bounds what Open reads at start (start.go): records before it are read only
	// when Replay needs them as state. The zero time replays every record, which reads the
	// whole history: a server sets it to the start of its idempotency window.
	ReplayFrom time.Time
	// SegmentSize is the size past which the writer closes the current segment and begins
	// the next one (segments.go). Default: 1 GiB.
	SegmentSize int64
	// IndexInterval is how often the records acknowledged since are written to the index
	// and their full tree tiles to disk (indexer.go); a backlog of 65,536 records writes sooner.
	// Default: 1 s.
	IndexInterval time.Duration

	// archives are directories where Reindex looks for closed segments moved out of the
	// ledger directory.
	archives []string

	// freeSpace reports the free space of the ledger's file system (space.go). Default:
	// statfs on Linux, unknown elsewhere; tests set it to see the other platforms' path.
	freeSpace freeSpaceFunc
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 512
	}
	if o.Preallocate <= 0 {
		o.Preallocate = defaultPreallocate
	}
	if o.RecoverInterval <= 0 {
		o.RecoverInterval = defaultRecoverInterval
	}
	if o.SegmentSize <= 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.IndexInterval <= 0 {
		o.IndexInterval = defaultIndexInterval
	}
	if o.freeSpace == nil {
		o.freeSpace = freeSpace
	}
	return o
}

// Stats count a Ledger's work since Open.
type Stats struct {
	// Records is the number of records appended and synced.
	Records uint64
	// Batches is the number of writes of records, each fsynced: one per batch, or more for a
	// batch of more than 1 MiB.
	Batches uint64
	// Syncs is the number of fsync calls on the segment: one per batch and one per extension.
	Syncs uint64
	// Extensions is the number of times the free space ran out and the segment grew by
	// Options.Preallocate (or more, for a bigger batch; or less, on a nearly full file
	// system) of zeros, not counting Open's.
	Extensions uint64
	// Recoveries is the number of times the ledger reopened for appends by itself after a
	// storage fault; Restores the number of times it restored its removed segment.
	Recoveries, Restores uint64
	// Rotations is the number of segments closed (and the next one begun) since Open.
	Rotations uint64
	// ReadAtOpen is the number of records Open read: those after the last indexed one, the
	// state records and the idempotency window that Replay asked for, and at most 255 of the
	// tree's right edge. It does not grow with the history.
	ReadAtOpen uint64
	// Indexed is the seq of the last record written to the index, and Unindexed the number of
	// acknowledged records waiting to be.
	Indexed   uint64
	Unindexed int
	// Segment is the number of the segment appended to.
	Segment uint32
}

// Ledger appends records to a ledger directory. It is safe for concurrent use; see Append.
type Ledger struct {
	dir  string
	path string // of the current segment, the one appended to
	seg  uint32 // its number
	opts Options
	// fileMu guards file for Line's readers against recover's restore, which replaces it.
	fileMu sync.RWMutex
	file   *os.File
	// fileInfo is file's, to tell whether the segment's path still names it.
	fileInfo os.FileInfo
	w        File
	lock     *os.File
	close    sync.Once

	// The batch queue. The Append that writes a batch (the leader) owns off, end, seq,
	// prevHash (under mu for readers), batch and buf until it passes the lead on.
	qmu     sync.Mutex
	pending []*request // waiting for the next batch, in arrival order
	writing bool       // a leader is writing a batch; Appends arriving wait in pending
	closed  bool       // Close has begun: no Append joins any more
	idle    sync.Cond  // on qmu; broadcast when writing ends
	batch   []*request
	buf     []byte

	// off is where the next batch is written (just after the last record) and end the size of
	// the segment: [off, end) is zero-filled free space. The writer (the Append leading the
	// current batch) owns them.
	off, end int64
	// dirty is, after a failed write, the end of the bytes it may have written past off;
	// recover zeroes [off, dirty). retry is the size of the write that failed: recover makes
	// room for it. The writer owns them.
	dirty, retry int64
	// lastCheck is when the writer last checked the segment (recover.go's checkAfterSync).
	lastCheck time.Time

	mu       sync.Mutex // guards seq, prevHash, failed and failedAt for readers; the writer owns them
	seq      uint64
	prevHash string
	failed   error
	failedAt time.Time // when failed was set, after being nil

	stopRecover, recoverDone chan struct{} // recoverLoop's

	tree    *ledgerproof.Tree // the Merkle tree of the acknowledged records, in tiles (tree.go)
	idx     *index.Index      // where each record lies, and the lookups (indexer.go)
	indexer *indexer
	readers segmentReaders // read-only handles of the segments, for Line
	migrate string         // the grounds of the Migrated record Open appends, "" for none

	records, batches, syncs, extensions, recoveries, restores, rotations, readAtOpen atomic.Uint64
}

// Open opens the ledger in dir for appending, creating dir (0700) and its segment (0600) if
// needed. It fails with an error matching ErrNotWritable, naming dir, when dir cannot be
// written; with ErrLocked when another Ledger holds dir; and with a *CorruptionError (ErrCorrupt)
// when the existing records are not an intact chain. A torn tail, the trace of a crash during
// a write that was never acknowledged, is truncated with a warning. Open then gives the
// segment zero-filled free space to write into (a ledger written before free space existed
// gets it now) as far as the file system has room for it (space.go's grow): on a nearly full
// file system it opens with less, or none, and logs a warning; the appends that do not fit
// then fail with a *SpaceError until space is freed. Close the Ledger to release the lock.
func Open(dir string, opts Options) (*Ledger, error) {
	opts = opts.withDefaults()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, dirError("opening ledger", dir, err)
	}
	if err := probeWritable(dir); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o077 != 0 {
		opts.Logger.Warn("ledger directory is accessible to other users; want mode 0700", "dir", dir, "mode", fi.Mode().Perm().String())
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	l, err := start(dir, opts)
	if err != nil {
		lock.Close()
		return nil, err
	}
	l.lock = lock
	l.stopRecover, l.recoverDone = make(chan struct{}), make(chan struct{})
	go l.recoverLoop()
	l.indexer.run()
	if err := l.recordMigration(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// openFreeSpace grows the segment being opened to the chunk boundary past a quarter chunk of
// free space, or by what the file system has room for, and warns when that is less than a
// quarter chunk.
func (l *Ledger) openFreeSpace() error {
	end, err := l.grow(l.end, alignUp(l.off+l.opts.Preallocate/4, l.opts.Preallocate))
	if err != nil {
		return err
	}
	l.end = end
	if end-l.off < l.opts.Preallocate/4 {
		free, _ := l.opts.freeSpace(l.dir)
		l.opts.Logger.Warn("ledger: its file system has little free space; appends that do not fit will be refused until space is freed",
			"dir", l.dir, "segment_free_bytes", end-l.off, "file_system_free_bytes", free, "kept_free_bytes", headroom)
	}
	return nil
}

// probeWritable creates and removes a file in dir, so an unwritable directory (permissions,
// an immutable attribute, a read-only mount) is reported at Open, not at the first Append.
func probeWritable(dir string) error {
	p := filepath.Join(dir, ".probe-"+strconv.Itoa(os.Getpid()))
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return dirError("opening ledger", dir, err)
	}
	f.Close()
	if err := os.Remove(p); err != nil {
		return dirError("opening ledger", dir, err)
	}
	return nil
}

// syncDir fsyncs dir so newly created entries in it survive a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// Dir returns the ledger directory.
func (l *Ledger) Dir() string { return l.dir }

// Last returns the seq and hash of the last record (0 and 64 zeros for an empty ledger).
func (l *Ledger) Last() (uint64, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq, l.prevHash
}

// Err returns the error that closed the ledger for appends after a write or sync failure, or
// nil while it is healthy (again: see recover.go). Readiness probes report it; it matches
// ErrRestartRequired when only an operator can reopen the ledger.
func (l *Ledger) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// Stats returns the counters since Open.
func (l *Ledger) Stats() Stats {
	return Stats{Records: l.records.Load(), Batches: l.batches.Load(), Syncs: l.syncs.Load(), Extensions: l.extensions.Load(),
		Recoveries: l.recoveries.Load(), Restores: l.restores.Load(), Rotations: l.rotations.Load(),
		ReadAtOpen: l.readAtOpen.Load(), Indexed: l.indexer.indexed(), Unindexed: l.indexer.backlog(), Segment: l.segment()}
}

// segment returns the number of the segment appended to.
func (l *Ledger) segment() uint32 {
	l.fileMu.RLock()
	defer l.fileMu.RUnlock()
	return l.seg
}

// Close stops accepting appends, waits for the batch in progress, closes the segment and
// releases the lock. Appends after Close fail with ErrClosed (and ErrUnavailable).
func (l *Ledger) Close() error {
	var err error
	l.close.Do(func() {
		l.qmu.Lock()
		l.closed = true
		for l.writing {
			l.idle.Wait()
		}
		l.qmu.Unlock()
		close(l.stopRecover)
		<-l.recoverDone
		if ierr := l.indexer.close(); ierr != nil {
			// The records are safe in the segment; the next start indexes them again.
			l.opts.Logger.Warn("ledger: its index could not be written at close; the next start reads the records it lacks",
				"dir", l.dir, "error", ierr.Error())
		}
		err = errors.Join(l.idx.Close(), l.readers.close(), l.file.Close(), l.lock.Close())
		if err != nil {
			err = fmt.Errorf("closing ledger %s: %w", l.dir, err)
		}
	})
	return err
}

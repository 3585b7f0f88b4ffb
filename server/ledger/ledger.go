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

	"k8s.io/utils/clock"
)

// File is what the ledger writes its segment through: the *os.File opened O_APPEND, unless
// Options.WrapFile wraps it (tests count syncs and inject failures that way).
type File interface {
	io.Writer
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
	// WrapFile, if set, wraps the segment file every batch is written and synced through.
	WrapFile func(File) File
	// Replay, if set, is called in seq order with every intact record while Open verifies the
	// chain, so that state rebuilt from the ledger costs no second read; its first error
	// fails Open.
	Replay func(Record) error
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
	return o
}

// Stats count a Ledger's work since Open.
type Stats struct {
	// Records is the number of records appended and synced.
	Records uint64
	// Batches is the number of batches written (one write each).
	Batches uint64
	// Syncs is the number of fsync calls on the segment.
	Syncs uint64
}

// Ledger appends records to a ledger directory. It is safe for concurrent use; see Append.
type Ledger struct {
	dir   string
	path  string
	opts  Options
	file  *os.File
	w     File
	lock  *os.File
	reqs  chan *request
	stop  chan struct{}
	done  chan struct{}
	close sync.Once

	mu       sync.Mutex // guards seq, prevHash and failed for readers; the writer owns them
	seq      uint64
	prevHash string
	failed   error

	records, batches, syncs atomic.Uint64
}

// Open opens the ledger in dir for appending, creating dir (0700) and its segment (0600) if
// needed. It fails with an error matching ErrNotWritable, naming dir, when dir cannot be
// written; with ErrLocked when another Ledger holds dir; and with a *CorruptionError (ErrCorrupt)
// when the existing records are not an intact chain. A torn final line, the trace of a crash
// during a write that was never acknowledged, is truncated with a warning. Close the Ledger to
// release the lock.
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
	l, err := openSegment(dir, opts)
	if err != nil {
		lock.Close()
		return nil, err
	}
	l.lock = lock
	go l.run()
	return l, nil
}

// openSegment opens (or creates) the segment, verifies it and truncates a torn tail.
func openSegment(dir string, opts Options) (*Ledger, error) {
	path := filepath.Join(dir, segmentName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, dirError("opening ledger "+path, dir, err)
	}
	rep, good, err := walk(f, dir, opts.Replay)
	if err == nil && rep.TornTail > 0 {
		opts.Logger.Warn("ledger: truncating a torn final line (an unacknowledged write cut short by a crash)",
			"file", path, "line", rep.Records+1, "bytes", rep.TornTail, "last_seq", rep.LastSeq)
		err = f.Truncate(good)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			err = fmt.Errorf("truncating the torn tail of %s: %w", path, err)
		}
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("opening ledger %s: %w", dir, err)
	}
	l := &Ledger{
		dir: dir, path: path, opts: opts, file: f, w: File(f),
		reqs: make(chan *request), stop: make(chan struct{}), done: make(chan struct{}),
		seq: rep.LastSeq, prevHash: zeroHash,
	}
	if rep.Records > 0 {
		l.prevHash = rep.LastHash
	}
	if opts.WrapFile != nil {
		l.w = opts.WrapFile(f)
	}
	return l, nil
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
// nil while it is healthy. Readiness probes report it.
func (l *Ledger) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// Stats returns the counters since Open.
func (l *Ledger) Stats() Stats {
	return Stats{Records: l.records.Load(), Batches: l.batches.Load(), Syncs: l.syncs.Load()}
}

// Close stops accepting appends, waits for the batch in progress, closes the segment and
// releases the lock. Appends after Close fail with ErrClosed (and ErrUnavailable).
func (l *Ledger) Close() error {
	var err error
	l.close.Do(func() {
		close(l.stop)
		<-l.done
		err = errors.Join(l.file.Close(), l.lock.Close())
		if err != nil {
			err = fmt.Errorf("closing ledger %s: %w", l.dir, err)
		}
	})
	return err
}

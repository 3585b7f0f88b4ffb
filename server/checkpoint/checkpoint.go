// Package checkpoint signs the ledger's checkpoints: the size of the ledger and the root of the
// Merkle tree of its records (ledgerproof), as a C2SP signed note, with the server's
// checkpoint key (a file, HSM or TPM key). The latest one is served (LedgerService
// GetCheckpoint), kept in the ledger directory (so that a ledger cut short is refused at the
// next start, see Check) and witnessed by the watchers.
//
// A Checkpointer signs a new checkpoint once records were appended since the last one, at most
// one per Options.Interval: a record is covered by a signed checkpoint within about Interval
// of its acknowledgement.
package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	"k8s.io/utils/clock"

	"github.com/signet-pki/signet/internal/atomicfile"
	"github.com/signet-pki/signet/ledgerproof"
)

// FileName is the latest signed checkpoint's file in the ledger directory.
const FileName = "checkpoint"

// DefaultInterval is Options.Interval's default.
const DefaultInterval = 250 * time.Millisecond

// recent is how many signed checkpoints are kept in memory, so that proofs can name a recent
// size a client already holds.
const recent = 64

// ErrBehind: the ledger is shorter than, or not an extension of, a checkpoint signed (or
// witnessed) before: records were removed from its end, or it was replaced by an older copy
// or by another history.
var ErrBehind = errors.New("the ledger is not consistent with its last checkpoint")

// Options configure a Checkpointer.
type Options struct {
	// Origin names the log: the checkpoint's first line and the signature's key name.
	Origin string
	// Signer signs the checkpoints (ledgerproof.NewNoteSigner).
	Signer note.Signer
	// Dir is where the latest checkpoint is kept (the ledger directory).
	Dir string
	// Interval is the least time between two checkpoints. Default DefaultInterval.
	Interval time.Duration
	// Observe, if set, is told of every checkpoint signed: its size and how long the oldest
	// record it newly covers waited for it (since Appended was first called after the last
	// checkpoint).
	Observe func(size int64, lag time.Duration)
	// Logger receives failures to write the checkpoint file. Default slog.Default().
	Logger *slog.Logger
	// Clock, for tests. Default the real clock.
	Clock clock.Clock
}

// Checkpointer signs the checkpoints of one ledger's tree.
type Checkpointer struct {
	tree *ledgerproof.Tree
	opts Options
	kick chan struct{}

	mu       sync.Mutex
	latest   []byte // signed note of the latest checkpoint
	size     int64
	signed   map[int64][]byte // the recent signed checkpoints by size
	order    []int64          // their sizes, oldest first
	pendingT time.Time        // when records were first appended after the latest checkpoint
}

// New returns a Checkpointer of tree and signs the checkpoint of its current size.
func New(tree *ledgerproof.Tree, opts Options) (*Checkpointer, error) {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Signer == nil || opts.Origin == "" {
		return nil, errors.New("creating checkpointer: origin and signer are required")
	}
	// Temporary files of writes a crash interrupted.
	if stale, _ := filepath.Glob(filepath.Join(opts.Dir, atomicfile.TempPattern(FileName))); len(stale) > 0 {
		for _, p := range stale {
			_ = os.Remove(p)
		}
	}
	c := &Checkpointer{tree: tree, opts: opts, kick: make(chan struct{}, 1), signed: map[int64][]byte{}}
	if err := c.sign(); err != nil {
		return nil, err
	}
	return c, nil
}

// Appended tells the Checkpointer that records were acknowledged; it is cheap and never
// blocks (the ledger's writer calls it after every batch).
func (c *Checkpointer) Appended() {
	c.mu.Lock()
	// The ledger calls this after the tree grew: a checkpoint signed in between already
	// covers the records, and they waited for nothing.
	if c.pendingT.IsZero() && c.tree.Size() > c.size {
		c.pendingT = c.opts.Clock.Now()
	}
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run signs a checkpoint after records are appended, at most one per Interval, until stop is
// closed; it then signs a last one if records were appended since.
func (c *Checkpointer) Run(stop <-chan struct{}) {
	last := time.Time{}
	for {
		select {
		case <-stop:
			c.signLogged()
			return
		case <-c.kick:
		}
		if wait := c.opts.Interval - c.opts.Clock.Since(last); wait > 0 {
			select {
			case <-stop:
				c.signLogged()
				return
			case <-c.opts.Clock.After(wait):
			}
		}
		last = c.opts.Clock.Now()
		c.signLogged()
	}
}

func (c *Checkpointer) signLogged() {
	if err := c.sign(); err != nil {
		c.opts.Logger.Error("signing a ledger checkpoint", "error", err.Error())
	}
}

// sign signs the checkpoint of the tree's current size unless it is already the latest, keeps
// it and writes it to the checkpoint file.
func (c *Checkpointer) sign() error {
	cp, err := c.tree.Checkpoint(c.opts.Origin)
	if err != nil {
		return fmt.Errorf("signing checkpoint: %w", err)
	}
	c.mu.Lock()
	if c.latest != nil && cp.Size == c.size {
		c.mu.Unlock()
		return nil
	}
	pending := c.pendingT
	c.mu.Unlock()
	signed, err := ledgerproof.SignCheckpoint(cp, c.opts.Signer)
	if err != nil {
		return fmt.Errorf("signing checkpoint of size %d: %w", cp.Size, err)
	}
	c.mu.Lock()
	c.latest, c.size = signed, cp.Size
	c.signed[cp.Size] = signed
	c.order = append(c.order, cp.Size)
	if len(c.order) > recent {
		delete(c.signed, c.order[0])
		c.order = c.order[1:]
	}
	if c.tree.Size() == cp.Size {
		c.pendingT = time.Time{}
	}
	c.mu.Unlock()
	if c.opts.Observe != nil && !pending.IsZero() {
		c.opts.Observe(cp.Size, c.opts.Clock.Since(pending))
	}
	// After a crash the file is the old checkpoint or the new one, either of which the ledger
	// on disk extends.
	return atomicfile.Write(filepath.Join(c.opts.Dir, FileName), signed, 0o600)
}

// Latest returns the latest signed checkpoint and its size.
func (c *Checkpointer) Latest() ([]byte, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.latest, c.size
}

// At returns the signed checkpoint of size, if it is the latest or one of the recent ones.
func (c *Checkpointer) At(size int64) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.signed[size]
	return s, ok
}

// Check verifies that tree extends the checkpoint signed is (with v, for origin): it has at
// least as many records and its root at that size is the checkpoint's. what names where the
// checkpoint came from, for the error. The error wraps ErrBehind when the tree does not
// extend it, and another error when the checkpoint cannot be read or verified.
func Check(tree *ledgerproof.Tree, signed []byte, origin string, v note.Verifier, what string) error {
	cp, err := ledgerproof.OpenCheckpoint(signed, origin, v)
	if err != nil {
		return fmt.Errorf("checking the ledger against %s: %w", what, err)
	}
	switch err := tree.Extends(cp); {
	case errors.Is(err, ledgerproof.ErrShrunk):
		return fmt.Errorf("%w: it holds %d records but %s covers %d: records were removed from its end, or it was replaced by an older copy",
			ErrBehind, tree.Size(), what, cp.Size)
	case errors.Is(err, ledgerproof.ErrInconsistent):
		return fmt.Errorf("%w: its first %d records are not those %s covers: the ledger was replaced by another history",
			ErrBehind, cp.Size, what)
	case err != nil:
		return fmt.Errorf("checking the ledger against %s: %w", what, err)
	}
	return nil
}

// CheckFile runs Check against dir's checkpoint file; a missing file passes (a ledger that
// never had a checkpoint, or whose server predates them).
func CheckFile(tree *ledgerproof.Tree, dir, origin string, v note.Verifier) error {
	p := filepath.Join(dir, FileName)
	signed, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the ledger's last checkpoint: %w", err)
	}
	return Check(tree, bytes.TrimRight(signed, "\x00"), origin, v, "its last checkpoint ("+p+")")
}

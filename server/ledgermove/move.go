// Package ledgermove moves a ledger between the file format (server/ledger: segments, index,
// tiles, checkpoint) and a fleet's database (server/pgstate's tables, through
// server/pgstate/ledgertable): Export copies a fleet's ledger into a new ledger directory, for
// offline audit and backup; Import loads a stopped single host's ledger into an empty fleet
// database, when the host moves to a fleet. Every record keeps its line byte for byte, so the
// Merkle tree, and every checkpoint signed of either, is the same on both sides: signetctl
// ledger audit checks an export against the fleet's checkpoints, and a fleet that signs with
// the host's checkpoint key and origin extends the host's checkpoints.
//
// It joins the file ledger and the database, which server/pgstate must not (internal/layout),
// and carries neither the server nor pgstate's answers, so that signetctl can run it.
package ledgermove

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/signet-pki/signet/internal/atomicfile"
	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/checkpoint"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/pgstate/ledgertable"
)

// ErrCheckpointMismatch: the fleet's latest checkpoint is not a checkpoint of the records
// exported (another size or root): the database's records or its checkpoint were changed.
var ErrCheckpointMismatch = errors.New("the fleet's latest checkpoint does not match its records")

// Exported says what Export wrote.
type Exported struct {
	// Dir is the ledger directory written.
	Dir string
	// Records is the number of records, LastHash the last one's hash, Segments the number of
	// segment files.
	Records  int
	LastHash string
	Segments int
	// Checkpoint is the size of the fleet's latest checkpoint, written to Dir/checkpoint
	// (-1 when the fleet had signed none).
	Checkpoint int64
}

// Export copies the fleet's ledger into dir, a new ledger directory (dir must not exist or be
// empty): every record up to the journal's head as it reads it (appends that come meanwhile
// are not exported; ledgertable.Export), each checked as the next of the chain, in segments of
// opts.SegmentSize with the index and tiles a server would build, and the fleet's latest
// signed checkpoint as dir/checkpoint, where the file ledger keeps its own, once its size and
// root were checked against the exported records (ErrCheckpointMismatch otherwise; the
// directory is kept, without the checkpoint, for the investigation). The checkpoint is read
// before the head, so it covers no record the export lacks. A failed export removes what it
// wrote, except after a mismatch.
func Export(ctx context.Context, pool *pgxpool.Pool, dir string, opts ledger.Options) (Exported, error) {
	out := Exported{Dir: dir, Checkpoint: -1}
	size, signed, err := ledgertable.LatestCheckpoint(ctx, pool)
	if err != nil {
		return out, fmt.Errorf("exporting the fleet's ledger: %w", err)
	}
	im, err := ledger.NewImport(dir, opts)
	if err != nil {
		return out, fmt.Errorf("exporting the fleet's ledger: %w", err)
	}
	head, err := ledgertable.Export(ctx, pool, func(_ uint64, line []byte) error { return im.Add(line) })
	if err != nil {
		im.Abort()
		return out, fmt.Errorf("exporting the fleet's ledger to %s: %w", dir, err)
	}
	rep, err := im.Finish()
	if err != nil {
		return out, fmt.Errorf("exporting the fleet's ledger: %w", err)
	}
	out.Records, out.LastHash, out.Segments = rep.Records, rep.LastHash, rep.Segments
	if uint64(rep.Records) != head.Seq || (head.Seq > 0 && rep.LastHash != head.Hash) {
		return out, fmt.Errorf("exporting the fleet's ledger: wrote %d records ending in %s, but the journal's head is record %d, %s",
			rep.Records, rep.LastHash, head.Seq, head.Hash)
	}
	if signed == nil {
		return out, nil
	}
	if err := checkExported(dir, size, signed); err != nil {
		return out, fmt.Errorf("exporting the fleet's ledger to %s: %w", dir, err)
	}
	if err := atomicfile.Write(filepath.Join(dir, checkpoint.FileName), signed, 0o600); err != nil {
		return out, fmt.Errorf("exporting the fleet's ledger: writing its checkpoint: %w", err)
	}
	out.Checkpoint = size
	return out, nil
}

// checkExported checks that the signed checkpoint (of size, as stored) is of the tree of the
// ledger in dir: its body's size and the root of the ledger's first size records. Its
// signature is for whoever holds the public key to check (signetctl ledger audit).
func checkExported(dir string, size int64, signed []byte) error {
	body, _, ok := bytes.Cut(signed, []byte("\n\n"))
	if !ok {
		return fmt.Errorf("%w: the stored checkpoint of size %d is not a signed note", ErrCheckpointMismatch, size)
	}
	c, err := ledgerproof.ParseCheckpoint(signed[:len(body)+1]) // the body with its last newline
	if err != nil {
		return fmt.Errorf("%w: the stored checkpoint of size %d: %w", ErrCheckpointMismatch, size, err)
	}
	snap, err := ledger.OpenSnapshot(dir)
	if err != nil {
		return fmt.Errorf("checking the fleet's checkpoint: %w", err)
	}
	defer snap.Close()
	tree := snap.Tree()
	if c.Size != size || c.Size > tree.Size() {
		return fmt.Errorf("%w: it is stored as size %d, covers %d records, and %d were exported", ErrCheckpointMismatch, size, c.Size, tree.Size())
	}
	root, err := tree.RootAt(c.Size)
	if err != nil {
		return fmt.Errorf("checking the fleet's checkpoint: %w", err)
	}
	if root != c.Hash {
		return fmt.Errorf("%w: the root of the first %d records is %s, the checkpoint's %s", ErrCheckpointMismatch, c.Size, root, c.Hash)
	}
	return nil
}

// Imported says what Import loaded.
type Imported struct {
	// Records is the number of records, LastHash the last one's hash, Segments the number of
	// segments read.
	Records  int
	LastHash string
	Segments int
}

// Import loads the ledger in dir into the fleet's empty database (migrated, with no ledger:
// ledgertable.BeginImport), in one transaction: every record, checked as Verify checks it
// (a broken chain is refused naming the record, and nothing is stored), with the columns, CA
// leaves and head the journal keeps. dir must not be open by a server (ledger.LeavesStopped
// takes its lock); closed segments moved to archive storage are read from archives. The
// checkpoints are not copied: the fleet's integrator builds the tree from record 1 and signs
// its own, which extend the host's when the fleet signs with the host's key and origin.
func Import(ctx context.Context, pool *pgxpool.Pool, dir string, archives ...string) (Imported, error) {
	im, err := ledgertable.BeginImport(ctx, pool)
	if err != nil {
		return Imported{}, fmt.Errorf("importing ledger %s: %w", dir, err)
	}
	rep, err := ledger.LeavesStopped(dir, func(_ ledger.Record, line []byte) error { return im.Add(ctx, line) }, archives...)
	if err != nil {
		im.Rollback(ctx)
		return Imported{}, fmt.Errorf("importing ledger %s: nothing was stored: %w", dir, err)
	}
	head, err := im.Commit(ctx)
	if err != nil {
		return Imported{}, fmt.Errorf("importing ledger %s: %w", dir, err)
	}
	if head.Seq != uint64(rep.Records) || (head.Seq > 0 && head.Hash != rep.LastHash) {
		return Imported{}, fmt.Errorf("importing ledger %s: stored %d records ending in %s, but read %d ending in %s", dir, head.Seq, head.Hash, rep.Records, rep.LastHash)
	}
	return Imported{Records: rep.Records, LastHash: rep.LastHash, Segments: rep.Segments}, nil
}

package index

import (
	"errors"

	"github.com/signet-pki/signet/server/ledger/record"
)

// The sentinel errors of the index. Errors returned by the package wrap one of these (or an
// error of bbolt or the file system) with the operation and the seqs involved.
var (
	// ErrLocked: the index file is held by another Index (in this process or another), a
	// writer holding it exclusively or readers holding it shared, for longer than
	// Options.Timeout.
	ErrLocked = errors.New("index file is locked by another process")
	// ErrBehind: the index does not hold the records before the batch (Add's first seq is
	// past Meta().Seq+1), or TruncateAfter was asked to keep records it does not hold.
	ErrBehind = errors.New("index is behind")
	// ErrOverlap: Add's first seq is at or before Meta().Seq; those records are indexed
	// already.
	ErrOverlap = errors.New("batch overlaps indexed records")
	// ErrNotConsecutive: the seqs of a batch do not follow one another.
	ErrNotConsecutive = errors.New("batch seqs are not consecutive")
	// ErrInvalidEntry: an entry cannot be indexed (seq 0, segment 0, a negative offset, a
	// serial that is not hexadecimal) or a tree size is negative.
	ErrInvalidEntry = errors.New("invalid index entry")
	// ErrInvalidSerial: a serial is not hexadecimal (record.ErrInvalidSerial).
	ErrInvalidSerial = record.ErrInvalidSerial
	// ErrReadOnly: a write was asked of an index opened with Options.ReadOnly.
	ErrReadOnly = errors.New("index is open read-only")
	// ErrLayout: the file is not an index, or one written in a layout this version does not
	// know (it must be rebuilt from the ledger).
	ErrLayout = errors.New("not a ledger index of a known layout")
	// ErrCorrupt: a stored value does not decode.
	ErrCorrupt = errors.New("index is corrupt")
)

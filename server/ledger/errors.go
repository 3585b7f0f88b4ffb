package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/signet-pki/signet/server/ledger/record"
)

// Sentinel errors of the ledger. Callers test them with errors.Is.
var (
	// ErrUnavailable: the record was not (durably) written. The caller must not release the
	// certificate (rule 4). After a write or sync failure every later Append also fails with
	// it until the ledger is reopened.
	ErrUnavailable = errors.New("ledger unavailable")
	// ErrClosed: the Ledger was closed. Append wraps it together with ErrUnavailable.
	ErrClosed = errors.New("ledger closed")
	// ErrNotWritable: the ledger directory (or its segment) cannot be written.
	ErrNotWritable = errors.New("ledger directory is not writable")
	// ErrLocked: another process (or another Ledger in this one) holds the ledger's lock.
	ErrLocked = errors.New("ledger is locked")
	// ErrCorrupt: the ledger's records are not an intact chain. Its *CorruptionError says where.
	ErrCorrupt = errors.New("ledger corrupt")
	// ErrInvalidRecord: Append was given a record that must not be stored as is.
	ErrInvalidRecord = record.ErrInvalidRecord
)

// CorruptionError locates the first problem Verify, Replay or Open found. It wraps ErrCorrupt.
type CorruptionError struct {
	// File is the segment's base name, e.g. "ledger-000001.jsonl".
	File string
	// Line is the 1-based line of the problem in File.
	Line int
	// Offset is the byte offset in File where that line starts or, for data in the free
	// space, of its first non-zero byte.
	Offset int64
	// Seq is the seq the problem concerns (the expected one for a missing record).
	Seq uint64
	// Problem is the full human-readable description, e.g. "record 17 (line 17 of
	// ledger-000001.jsonl): hash mismatch — the record was changed".
	Problem string
}

// Error returns the Problem.
func (e *CorruptionError) Error() string { return e.Problem }

// Unwrap returns ErrCorrupt.
func (e *CorruptionError) Unwrap() error { return ErrCorrupt }

// notWritable reports whether err means the file system refused a write for permission or
// read-only reasons (EACCES, EPERM, EROFS), which root cannot always bypass.
func notWritable(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// dirError wraps err from an operation on the ledger directory; see writeError.
func dirError(op, dir string, err error) error {
	return fmt.Errorf("%s: %w", op, writeError(dir, err))
}

// writeError returns err, or, when the file system refused a write, an error that says the
// ledger directory is not writable, names it, wraps err and matches ErrNotWritable.
func writeError(dir string, err error) error {
	if notWritable(err) {
		return &notWritableError{dir: dir, err: err}
	}
	return err
}

// notWritableError is ErrNotWritable for one directory.
type notWritableError struct {
	dir string
	err error
}

func (e *notWritableError) Error() string {
	return fmt.Sprintf("ledger directory %s is not writable: %v", e.dir, e.err)
}

func (e *notWritableError) Is(target error) bool { return target == ErrNotWritable }

func (e *notWritableError) Unwrap() error { return e.err }

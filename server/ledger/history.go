package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/signet-pki/signet/server/checkpoint"
)

// NewHistory is what StartNewHistory did.
type NewHistory struct {
	// Archive is the folder the previous history's files were moved to ("" if there were
	// none).
	Archive string
	// Previous is Verify's report of the previous history, and PreviousErr its problem, if
	// any.
	Previous    Report
	PreviousErr error
	// First is the Started record; Carried the Rotated records carried over.
	First   Record
	Carried []Record
}

// archivedFiles are the files of a history that StartNewHistory moves to the archive: the
// segments, the index and tiles built from them, and the checkpoint the server kept of it
// (its key stays: the log keeps its name).
func archivedFiles(dir string) []string {
	names := []string{indexFile, tilesDir, checkpoint.FileName}
	entries, _ := os.ReadDir(dir) // even a broken history's segments, gaps and all
	for _, e := range entries {
		if _, ok := segmentNumber(e.Name()); ok {
			names = append(names, e.Name())
		}
	}
	return names
}

// StartNewHistory starts a new history in the ledger directory dir, for when the previous one
// was lost or cannot be trusted and the server refuses to start on it: with the server
// stopped (it takes the ledger's lock), it moves the segment and its checkpoint to
// dir/history-<unix time>/, then writes a new segment whose first record (Started) names the
// operator, the reason and the previous history, followed by the last Rotated record of each
// signer found in it, so that the CA sets survive. Idempotent answers do not: a CSR retried
// after this gets a new certificate. The watchers' witnesses see the log start over and raise
// their alarm until an operator accepts the new history there too (docs/ledger.md).
func StartNewHistory(dir, operator, reason string, opts Options) (NewHistory, error) {
	var h NewHistory
	if operator == "" || reason == "" {
		return h, errors.New("starting a new ledger history: the operator and the reason are required (they are recorded)")
	}
	lock, err := lockDir(dir)
	if err != nil {
		return h, fmt.Errorf("starting a new ledger history: %w", err)
	}
	rotated := map[string]Record{}
	h.Previous, h.PreviousErr = read(dir, func(r Record) error {
		if r.Decision == Rotated {
			rotated[r.Signer] = r
		}
		return nil
	})
	if errors.Is(h.PreviousErr, os.ErrNotExist) {
		h.PreviousErr = nil
	}
	opts = opts.withDefaults()
	if h.Archive, err = archive(dir, opts.Clock.Now()); err != nil {
		lock.Close()
		return h, err
	}
	lock.Close() // Open takes it again
	l, err := Open(dir, opts)
	if err != nil {
		return h, fmt.Errorf("starting a new ledger history: %w", err)
	}
	defer l.Close()
	grounds := "no previous history in " + dir
	if h.Archive != "" {
		grounds = fmt.Sprintf("previous history archived in %s: %d records, last seq %d, last hash %s", h.Archive, h.Previous.Records, h.Previous.LastSeq, h.Previous.LastHash)
		if h.PreviousErr != nil {
			grounds += "; it did not verify: " + h.PreviousErr.Error()
		}
	}
	ctx := context.Background()
	if h.First, err = l.Append(ctx, Record{Decision: Started, Signer: "-", Client: operator, Message: reason, Grounds: grounds}); err != nil {
		return h, fmt.Errorf("starting a new ledger history: %w", err)
	}
	signers := make([]string, 0, len(rotated))
	for s := range rotated {
		signers = append(signers, s)
	}
	sort.Strings(signers)
	for _, s := range signers {
		r := rotated[s]
		r.Grounds = fmt.Sprintf("carried over from record %d of the previous history", r.Seq)
		carried, err := l.Append(ctx, r)
		if err != nil {
			return h, fmt.Errorf("starting a new ledger history: carrying the CA set of %s over: %w", s, err)
		}
		h.Carried = append(h.Carried, carried)
	}
	return h, nil
}

// archive moves the history's files of dir into dir/history-<unix time>/ and returns it, ""
// when there was none.
func archive(dir string, now time.Time) (string, error) {
	var present []string
	for _, name := range archivedFiles(dir) {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			present = append(present, name)
		}
	}
	if len(present) == 0 {
		return "", nil
	}
	to := filepath.Join(dir, fmt.Sprintf("history-%d", now.Unix()))
	if err := os.Mkdir(to, 0o700); err != nil {
		return "", fmt.Errorf("archiving the previous ledger history: %w", err)
	}
	for _, name := range present {
		if err := os.Rename(filepath.Join(dir, name), filepath.Join(to, name)); err != nil {
			return "", fmt.Errorf("archiving the previous ledger history: %w", err)
		}
	}
	if err := syncDir(dir); err != nil {
		return "", err
	}
	return to, nil
}

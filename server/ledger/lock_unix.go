//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockName is the lock file of a ledger directory.
const lockName = "LOCK"

// lockDir takes an exclusive, non-blocking flock on dir/LOCK. flock locks belong to the open
// file description, so a second Open in the same process is refused too. The lock is released
// when the returned file is closed (or the process dies).
func lockDir(dir string) (*os.File, error) {
	p := filepath.Join(dir, lockName)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, dirError("locking ledger", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("locking ledger %s: %w: another signet-server has it open", dir, ErrLocked)
		}
		return nil, fmt.Errorf("locking ledger %s: %w", p, err)
	}
	return f, nil
}

//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
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
	for attempt := 1; ; attempt++ {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return f, nil
		case errors.Is(err, syscall.EWOULDBLOCK) && attempt < lockAttempts:
			// The lock belongs to the open file description, which a child this process
			// forks shares until it execs (or exits): a Ledger closed and re-opened while
			// another goroutine starts a process (an HSM helper, a test's swtpm) can find
			// its own released lock still held for that instant.
			time.Sleep(lockRetry)
			continue
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("locking ledger %s: %w: another signet-server has it open", dir, ErrLocked)
		}
		return nil, fmt.Errorf("locking ledger %s: %w", p, err)
	}
}

// How long lockDir waits for a lock that a forked child may briefly share: lockAttempts tries,
// lockRetry apart (about 1 s in all).
const (
	lockAttempts = 20
	lockRetry    = 50 * time.Millisecond
)

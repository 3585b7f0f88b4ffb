//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package ledger

import (
	"errors"
	"fmt"
	"os"
)

// lockDir refuses: without flock two servers could append to one ledger.
func lockDir(dir string) (*os.File, error) {
	return nil, fmt.Errorf("locking ledger %s: %w", dir, errors.New("file locking is not implemented on this platform"))
}

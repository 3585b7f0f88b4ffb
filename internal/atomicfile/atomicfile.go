// Package atomicfile replaces a file's contents all at once: a reader, or the file system
// after a crash, sees the old contents or the new ones, never a part.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// TempPattern is the pattern of the temporary files Write creates next to name (os.CreateTemp
// syntax); a crash can leave one behind, which the owner of the folder may remove at start.
func TempPattern(name string) string { return "." + name + ".tmp-*" }

// Write writes data to path with mode: into a temporary file in the same folder, synced, then
// renamed over path; the folder is synced after the rename.
func Write(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, TempPattern(filepath.Base(path)))
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

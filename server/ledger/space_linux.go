package ledger

import "syscall"

// freeSpace returns what an unprivileged process may still write on the file system holding
// dir (statfs f_bavail, in fragments of f_frsize), and false if statfs fails.
func freeSpace(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	unit := int64(st.Frsize)
	if unit <= 0 {
		unit = int64(st.Bsize)
	}
	return int64(st.Bavail) * unit, true
}

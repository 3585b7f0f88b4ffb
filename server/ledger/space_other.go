//go:build !linux

package ledger

// freeSpace does not know the free space on this platform: the segment grows by whole chunks
// and, when the file system refuses one (ENOSPC), by what the next records need (grow), and a
// full file system shows as ENOSPC, without the numbers of a *SpaceError.
func freeSpace(string) (int64, bool) { return 0, false }

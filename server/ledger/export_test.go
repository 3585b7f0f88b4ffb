package ledger

// MaxWrite is maxWrite for the tests: no torn write reaches further past the last record.
const MaxWrite = maxWrite

// Recover runs one recovery attempt now, as the recovery loop's next tick would.
func Recover(l *Ledger) { l.tryRecover() }

// CheckSegment checks the segment now, as an idle ledger's recovery loop does every tick.
func CheckSegment(l *Ledger) { l.tryCheck() }

// Headroom is what the segment's growth leaves free on the file system.
const Headroom = headroom

// WithFreeSpace makes the ledger see free (its result: bytes, known) as its file system's free
// space instead of statfs's answer; free returning false is what a platform without statfs
// sees.
func WithFreeSpace(o Options, free func() (int64, bool)) Options {
	o.freeSpace = func(string) (int64, bool) { return free() }
	return o
}

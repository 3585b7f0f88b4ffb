package ledger

// MaxWrite is maxWrite for the tests: no torn write reaches further past the last record.
const MaxWrite = maxWrite

// Recover runs one recovery attempt now, as the recovery loop's next tick would.
func Recover(l *Ledger) { l.tryRecover() }

// CheckSegment checks the segment now, as an idle ledger's recovery loop does every tick.
func CheckSegment(l *Ledger) { l.tryCheck() }

package ledger

// MaxWrite is maxWrite for the tests: no torn write reaches further past the last record.
const MaxWrite = maxWrite

// Package ledgertable is the fleet's ledger as rows of PostgreSQL (the ledger_records table
// and what goes with it: ledger_head, ca_leaves, checkpoints), for what reads or writes it
// whole: the rule that makes a row of a sealed record (Row, which the journal's appends and an
// import share), the export of every line in seq order (Export), and the import of a history
// into an empty database (Importer). It imports nothing of the module but the record, so that
// signetctl, which must not carry the server (internal/layout), can move a ledger between
// the file format and a fleet (server/ledgermove).
package ledgertable

import (
	"time"

	"github.com/signet-pki/signet/server/ledger/record"
)

// Columns are the columns of ledger_records that Row fills, in its order.
var Columns = []string{"seq", "line", "hash", "at", "serial", "object_uid", "kind", "signer"}

// MinSchema is the first schema version (pgstate's migrations) that has every column of
// Columns and the ca_leaves table.
const MinSchema = 4

// Row returns the values of Columns for the sealed record r whose line (without its newline)
// is line: the seq, the line as the tree's leaf, the hash, the time, the serial normalized
// (record.NormalizeSerial; NULL when there is none or it is not hex), the object UID (NULL
// when empty), and for a rotation record (rotated, published) its kind and signer (both NULL
// otherwise).
func Row(r record.Record, line []byte) []any {
	var serial, uid, kind, signer any
	if s, err := record.NormalizeSerial(r.Serial); r.Serial != "" && err == nil {
		serial = s
	}
	if r.ObjectUID != "" {
		uid = r.ObjectUID
	}
	if r.Decision == record.Rotated || r.Decision == record.Published {
		kind, signer = string(r.Decision), r.Signer
	}
	return []any{int64(r.Seq), line, r.Hash, r.Time, serial, uid, kind, signer}
}

// CALeaf is a key of ca_leaves: a signer and the fingerprint of the CA that signed its leaves
// ("" for records that name none).
type CALeaf struct{ Signer, CA string }

// LeafOf returns the ca_leaves key and NotAfter that r raises: an issued record with a
// NotAfter raises its signer's and CA's; ok is false for any other record.
func LeafOf(r record.Record) (key CALeaf, notAfter time.Time, ok bool) {
	if r.Decision != record.Issued || r.NotAfter.IsZero() {
		return CALeaf{}, time.Time{}, false
	}
	return CALeaf{r.Signer, r.CA}, r.NotAfter, true
}

// RaiseLeavesSQL raises ca_leaves to the NotAfters of $1 (signers), $2 (CAs) and $3
// (NotAfters), arrays of one length, keeping the later of the stored and the given one.
const RaiseLeavesSQL = `INSERT INTO ca_leaves (signer, ca, not_after) SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[])
	ON CONFLICT (signer, ca) DO UPDATE SET not_after = greatest(ca_leaves.not_after, excluded.not_after)`

// LeafArgs returns the arguments of RaiseLeavesSQL for leaves.
func LeafArgs(leaves map[CALeaf]time.Time) (signers, cas []string, notAfters []time.Time) {
	for k, t := range leaves {
		signers, cas, notAfters = append(signers, k.Signer), append(cas, k.CA), append(notAfters, t)
	}
	return signers, cas, notAfters
}

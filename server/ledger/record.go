package ledger

import "github.com/signet-pki/signet/server/ledger/record"

// The record type and its encoding live in server/ledger/record, which every journal shares;
// these names keep the ledger's API as it was.
type (
	// Record is one decision of the signing service (record.Record).
	Record = record.Record
	// Decision is what the server decided for one request (record.Decision).
	Decision = record.Decision
	// Authority is a signer's CA set as a Rotated record holds it (record.Authority).
	Authority = record.Authority
	// AuthorityCA is one CA of an Authority (record.AuthorityCA).
	AuthorityCA = record.AuthorityCA
)

// The decisions a record can hold (record's).
const (
	Issued    = record.Issued
	Refused   = record.Refused
	Rotated   = record.Rotated
	Published = record.Published
	Bound     = record.Bound
	Unbound   = record.Unbound
	Migrated  = record.Migrated
	Started   = record.Started
)

// zeroHash is the PrevHash of the first record.
var zeroHash = record.ZeroHash

// decodeLine parses one line (without "\n") and reports whether it is in canonical form.
func decodeLine(line []byte) (Record, bool, error) { return record.Decode(line) }

package ledgertable

import (
	"time"

	"github.com/signet-pki/signet/server/ledger/record"
)

// InsertSQL stores Rows in one statement (one array a column), so that it pipelines with the
// statements of its transaction.
const InsertSQL = `INSERT INTO ledger_records (seq, line, hash, at, serial, object_uid, kind, signer)
	SELECT * FROM unnest($1::bigint[], $2::bytea[], $3::text[], $4::timestamptz[], $5::text[], $6::text[], $7::text[], $8::text[])`

// Rows are records as the columns of Columns, by Row's rules: the arguments of InsertSQL.
type Rows struct {
	seq                       []int64
	line                      [][]byte
	hash                      []string
	at                        []time.Time
	serial, uid, kind, signer []*string
}

// Add adds the sealed record r whose line (without its newline) is line.
func (rs *Rows) Add(r record.Record, line []byte) {
	v := Row(r, line)
	rs.seq = append(rs.seq, v[0].(int64))
	rs.line = append(rs.line, v[1].([]byte))
	rs.hash = append(rs.hash, v[2].(string))
	rs.at = append(rs.at, v[3].(time.Time))
	rs.serial, rs.uid, rs.kind, rs.signer = append(rs.serial, text(v[4])), append(rs.uid, text(v[5])), append(rs.kind, text(v[6])), append(rs.signer, text(v[7]))
}

// Len is the number of rows; First the first one's seq.
func (rs *Rows) Len() int     { return len(rs.seq) }
func (rs *Rows) First() int64 { return rs.seq[0] }

// Args are InsertSQL's arguments.
func (rs *Rows) Args() []any {
	return []any{rs.seq, rs.line, rs.hash, rs.at, rs.serial, rs.uid, rs.kind, rs.signer}
}

func text(v any) *string {
	if v == nil {
		return nil
	}
	s := v.(string)
	return &s
}

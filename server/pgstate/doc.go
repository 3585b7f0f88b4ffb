// Package pgstate is the server's state on PostgreSQL, for a fleet of signet-servers sharing
// one database (issue 43): the schema and its migrations first; the journal, the answers and
// the CA sets follow, each behind the interface the decision core defines.
//
// The schema is versioned embedded SQL (migrations/NNNN_name.sql, numbered from 1 without
// gaps). Migrate brings a database to the newest version this binary knows, once however many
// servers start together, and refuses a database a newer binary migrated.
package pgstate

package server

import (
	"github.com/signet-pki/signet/server/decision"
	"github.com/signet-pki/signet/server/idempotency"
	"github.com/signet-pki/signet/server/ledger"
	"github.com/signet-pki/signet/server/pgstate"
)

// The decision core's state has two implementations of each part: the file ledger and the
// in-memory answers on one host, PostgreSQL for a fleet.
var (
	_ decision.Journal = (*ledger.Ledger)(nil)
	_ decision.Journal = (*pgstate.Journal)(nil)
	_ decision.Answers = (*idempotency.Store)(nil)
	_ decision.Answers = (*pgstate.Answers)(nil)
)

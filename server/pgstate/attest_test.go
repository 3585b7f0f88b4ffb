package pgstate

import (
	"testing"

	"github.com/signet-pki/signet/internal/pgtest"
	"github.com/signet-pki/signet/server/attest/attesttest"
)

// TestAttestStateAcrossServers: the attestation state's contract, with two servers of a fleet
// on one database: a challenge made on one is taken on the other once, a ticket spent once
// across them, an EK bound to one node whichever binds.
func TestAttestStateAcrossServers(t *testing.T) {
	s := pgtest.Start(t)
	attesttest.Check(t, NewAttestState(migrated(t, s, "attest")), NewAttestState(secondPool(t, s, "attest")))
}

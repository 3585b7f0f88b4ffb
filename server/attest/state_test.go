package attest_test

import (
	"testing"

	"github.com/signet-pki/signet/server/attest"
	"github.com/signet-pki/signet/server/attest/attesttest"
)

func TestMemoryState(t *testing.T) {
	s := attest.NewMemoryState()
	attesttest.Check(t, s, s)
}

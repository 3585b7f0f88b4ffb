package decision

import (
	"context"
	"fmt"
	"math/big"
	"strings"

	"github.com/signet-pki/signet/server/issuance"
	"github.com/signet-pki/signet/server/ledger"
)

// Limits of FindRecords.
const (
	defaultRecordLimit = 100
	maxRecordLimit     = 1000
)

// FindRecords returns the ledger records of an object UID or of a certificate serial number
// (exactly one), oldest first, at most limit (the newest kept; 0 means 100): the records of
// identity's own calls for signers it may use, and every record of the signers it
// administers. It costs a token of the client's rate limit and a lookup in the ledger's index.
func (c *Core) FindRecords(ctx context.Context, identity, objectUID, serial string, limit int) ([]ledger.Record, error) {
	switch {
	case (objectUID == "") == (serial == ""):
		return nil, fmt.Errorf("%w: give exactly one of object_uid and serial_number", issuance.ErrMalformedRequest)
	case len(objectUID) > MaxObjectUIDBytes:
		return nil, fmt.Errorf("%w: object_uid is longer than %d bytes", issuance.ErrMalformedRequest, MaxObjectUIDBytes)
	case limit < 0 || limit > maxRecordLimit:
		return nil, fmt.Errorf("%w: limit %d is not between 0 and %d", issuance.ErrMalformedRequest, limit, maxRecordLimit)
	case limit == 0:
		limit = defaultRecordLimit
	}
	var want *big.Int
	if serial != "" {
		var ok bool
		if want, ok = new(big.Int).SetString(strings.TrimPrefix(strings.ToLower(serial), "0x"), 16); !ok || len(serial) > 128 {
			return nil, fmt.Errorf("%w: serial_number %.80q is not hexadecimal", issuance.ErrMalformedRequest, serial)
		}
	}
	if ok, err := c.access.Load().Limiter.AllowClient(identity, nil); err != nil || !ok {
		return nil, fmt.Errorf("%w: the client rate limit is exhausted; retry later", errRateLimited)
	}
	if c.opts.Ledger == nil {
		return nil, fmt.Errorf("%w: no ledger", errLedgerUnavailable)
	}
	found, err := c.opts.Ledger.Find(objectUID, serial)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: reading the ledger: %w", errLedgerUnavailable, err)
	}
	var out []ledger.Record
	for _, r := range found {
		if !matches(r, objectUID, want) || !c.RecordVisible(identity, r) {
			continue
		}
		out = append(out, r)
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}

// matches reports whether r is about objectUID, or issued the certificate of serial want.
func matches(r ledger.Record, objectUID string, want *big.Int) bool {
	if objectUID != "" {
		return r.ObjectUID == objectUID
	}
	if r.Serial == "" {
		return false
	}
	got, ok := new(big.Int).SetString(r.Serial, 16)
	return ok && got.Cmp(want) == 0
}

// RecordVisible reports whether identity may see r (FindRecords's rule): its own call for a
// signer it may use, or any record of a signer it administers.
func (c *Core) RecordVisible(identity string, r ledger.Record) bool {
	if c.admin(identity, r.Signer) {
		return true
	}
	return r.Client == identity && c.allowed(identity, r.Signer)
}

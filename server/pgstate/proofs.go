package pgstate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/mod/sumdb/note"

	"github.com/signet-pki/signet/ledgerproof"
)

// Proofs serves one server's ledger proofs (signerapi.Proofs) from the fleet's database: the
// checkpoints the integrator stored, the Merkle tree at the latest of them, and the records'
// lines. Refresh follows the integrator: it folds the records up to the latest checkpoint
// into its own tree and publishes the checkpoint only if it verifies with the fleet's key and
// its root is the tree's, so every server proves from one tree, and a checkpoint that does
// not match the journal is never served.
type Proofs struct {
	pool     *pgxpool.Pool
	origin   string
	verifier note.Verifier

	// Published, if set, is called after each new checkpoint is published, with the size
	// published before it (from the background loop or a caller's Refresh alike).
	Published func(before, size int64)

	refreshing sync.Mutex // one Refresh at a time folds records into the tree
	mu         sync.RWMutex
	tree       *ledgerproof.Tree
	signed     []byte
	size       int64
}

// NewProofs returns the proofs of the fleet's journal, whose checkpoints verifier checks.
func NewProofs(pool *pgxpool.Pool, origin string, verifier note.Verifier) *Proofs {
	return &Proofs{pool: pool, origin: origin, verifier: verifier}
}

// ErrCheckpointMismatch: a stored checkpoint does not verify, or is not the tree of the
// journal's records.
var ErrCheckpointMismatch = errors.New("the fleet's checkpoint does not match its journal")

// Refresh publishes the latest stored checkpoint, if it is new, once the tree has its
// records and its root. It returns the size published. The ledger service calls it before each
// answer (signerapi.Refresher): as the fleet's checkpoints only grow, every server then serves
// one at least as new as any served before, by any server, so a witness that asks them in turn
// never sees the ledger shrink.
func (p *Proofs) Refresh(ctx context.Context) (int64, error) {
	p.refreshing.Lock()
	defer p.refreshing.Unlock()
	size, signed, err := LatestCheckpoint(ctx, p.pool)
	if err != nil {
		return 0, err
	}
	p.mu.RLock()
	tree, have, published := p.tree, p.size, p.signed != nil
	p.mu.RUnlock()
	switch {
	case size < 0:
		return 0, fmt.Errorf("%w: the fleet's integrator has signed no checkpoint yet", ErrUnavailable)
	case size <= have && published:
		return have, nil
	}
	c, err := ledgerproof.OpenCheckpoint(signed, p.origin, p.verifier)
	if err != nil {
		return have, fmt.Errorf("%w: checkpoint of size %d: %w", ErrCheckpointMismatch, size, err)
	}
	// Far behind (or at first), the tree is opened at the checkpoint's size from the tiles the
	// integrator stored and at most 255 records, rather than folding in every record since:
	// each server's work a checkpoint stays bounded whatever the rate, and the integrator has
	// checked the chain of what it covers (Integrate).
	if tree == nil || size-tree.Size() >= ledgerproof.TileWidth {
		if tree, err = OpenTree(ctx, p.pool, size); err != nil {
			return have, err
		}
	} else if _, err := Integrate(ctx, p.pool, tree, int(size-tree.Size())); err != nil {
		return have, err
	}
	mine, err := tree.Checkpoint(p.origin)
	if err != nil {
		return have, err
	}
	if mine.Size != c.Size || !bytes.Equal(mine.Hash[:], c.Hash[:]) {
		return have, fmt.Errorf("%w: the checkpoint of size %d has root %x, the journal's records %x (size %d)", ErrCheckpointMismatch, c.Size, c.Hash, mine.Hash, mine.Size)
	}
	p.mu.Lock()
	p.tree, p.signed, p.size = tree, signed, size
	p.mu.Unlock()
	if p.Published != nil {
		p.Published(have, size)
	}
	return size, nil
}

// Latest returns the latest checkpoint published (nil and 0 before the first).
func (p *Proofs) Latest() ([]byte, int64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.signed, p.size
}

// At returns the stored checkpoint of size, if it is not beyond the latest published.
func (p *Proofs) At(size int64) ([]byte, bool) {
	p.mu.RLock()
	latest := p.size
	p.mu.RUnlock()
	if size <= 0 || size > latest {
		return nil, false
	}
	var signed []byte
	if err := p.pool.QueryRow(context.Background(), `SELECT signed FROM checkpoints WHERE size = $1`, size).Scan(&signed); err != nil {
		return nil, false
	}
	return signed, true
}

// Tree is the tree at the latest checkpoint published, or beyond (an empty tree before it).
func (p *Proofs) Tree() *ledgerproof.Tree {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.tree == nil {
		return &ledgerproof.Tree{}
	}
	return p.tree
}

// Line returns record seq's line, as its leaf.
func (p *Proofs) Line(seq uint64) ([]byte, error) {
	var line []byte
	err := p.pool.QueryRow(context.Background(), `SELECT line FROM ledger_records WHERE seq = $1`, int64(seq)).Scan(&line)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("record %d: not in the journal", seq)
	case err != nil:
		return nil, fmt.Errorf("reading record %d: %w: %w", seq, ErrUnavailable, err)
	}
	return line, nil
}

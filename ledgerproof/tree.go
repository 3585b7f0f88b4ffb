package ledgerproof

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/mod/sumdb/tlog"
)

// LeafHash returns the RFC 6962 leaf hash of a ledger record: tlog.RecordHash, that is
// SHA-256(0x00 || data), where data is exactly the bytes of the record's line as stored in
// the ledger, minus its terminating newline. line may be given with or without that one
// trailing "\n" (at most one is removed). The record with seq s is the leaf at index s-1.
func LeafHash(line []byte) tlog.Hash {
	return tlog.RecordHash(leafData(line))
}

// leafData removes one trailing newline.
func leafData(line []byte) []byte {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		return line[:n-1]
	}
	return line
}

// MaxLeafSize bounds a leaf (a ledger line without its newline): the ledger refuses lines
// over 1 MiB.
const MaxLeafSize = 1 << 20

// checkLeaf refuses data that cannot be one ledger line.
func checkLeaf(data []byte) error {
	switch {
	case len(data) == 0:
		return fmt.Errorf("empty leaf: a record is never an empty line")
	case len(data) > MaxLeafSize:
		return fmt.Errorf("leaf of %d bytes, more than the %d allowed", len(data), MaxLeafSize)
	case bytes.IndexByte(data, '\n') >= 0:
		return fmt.Errorf("leaf holds a newline: a leaf is one line")
	}
	return nil
}

// Tree is the RFC 6962 Merkle tree of the ledger's records that the server feeds as it
// appends and proves from. It has two storage modes, with the same answers:
//
//   - In memory (the zero Tree): it keeps tlog's stored hashes (every leaf hash and every
//     complete subtree's hash, tlog.StoredHashIndex order) in one slice: about 2 hashes, 64
//     bytes, per record (tlog.StoredHashCount(n) < 2n), plus up to as much again transiently
//     when the slice grows; a million records take about 64 MiB. It is not persisted: rebuild
//     it at start by appending every line of the ledger in order.
//   - In tiles (OpenTiles): the tree lives on disk as C2SP tlog-tiles of height 8, and only
//     its right edge, the full tiles not yet flushed and a bounded cache of tiles are in
//     memory; see OpenTiles and Flush.
//
// Tree is safe for concurrent use by one appender and many readers (a sync.RWMutex), and
// Flush may run alongside them (Flushes run one at a time): proofs and roots for any size up
// to Size() can be computed while appends go on, and the hashes of a size never change once
// reached. The zero Tree is empty, in memory, and ready to use.
type Tree struct {
	mu     sync.RWMutex
	hashes []tlog.Hash // in memory: every stored hash
	size   int64
	tiles  *tileState // in tiles: set by OpenTiles, never changed; nil in memory
}

// Append adds the record line (with or without its trailing newline) as the next leaf and
// returns its index (record seq - 1). A line that is empty, longer than MaxLeafSize or holds
// another newline is refused, and the tree is unchanged.
func (t *Tree) Append(line []byte) (int64, error) {
	data := leafData(line)
	if err := checkLeaf(data); err != nil {
		return 0, fmt.Errorf("appending to tree: %w", err)
	}
	return t.AppendHash(tlog.RecordHash(data))
}

// AppendHash adds the next leaf by its leaf hash (LeafHash of the record's line) and returns
// its index. Append(line) is AppendHash(LeafHash(line)) once the line is checked. In tiles,
// it does no I/O: a tile it completes waits in memory for Flush.
func (t *Tree) AppendHash(h tlog.Hash) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.size
	if t.tiles != nil {
		t.tiles.append(n, h)
		t.size++
		return n, nil
	}
	add, err := tlog.StoredHashesForRecordHash(n, h, t.reader())
	if err != nil {
		return 0, fmt.Errorf("appending leaf %d to tree: %w", n, err)
	}
	t.hashes = append(t.hashes, add...)
	t.size++
	return n, nil
}

// Size returns the number of leaves.
func (t *Tree) Size() int64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.size
}

// snapshot returns the tree's size and a reader of its stored hashes, taken together, and the
// function to call when done with the reader. In memory it holds the read lock until done; in
// tiles it copies the right edge's bounds under the lock and reads full tiles without it.
func (t *Tree) snapshot() (int64, tlog.HashReader, func()) {
	t.mu.RLock()
	if t.tiles == nil {
		return t.size, t.reader(), t.mu.RUnlock
	}
	v := t.tiles.view(t.size)
	t.mu.RUnlock()
	return v.size, v, func() {}
}

// LeafHash returns the stored hash of the leaf at index, 0 ≤ index < Size().
func (t *Tree) LeafHash(index int64) (tlog.Hash, error) {
	n, r, done := t.snapshot()
	defer done()
	if index < 0 || index >= n {
		return tlog.Hash{}, fmt.Errorf("hash of leaf %d: the tree has %d leaves", index, n)
	}
	hs, err := r.ReadHashes([]int64{tlog.StoredHashIndex(0, index)})
	if err != nil {
		return tlog.Hash{}, fmt.Errorf("hash of leaf %d: %w", index, err)
	}
	return hs[0], nil
}

// Root returns the root hash of the whole tree (EmptyRoot() when it is empty).
func (t *Tree) Root() (tlog.Hash, error) {
	n, r, done := t.snapshot()
	defer done()
	return rootAt(n, n, r)
}

// RootAt returns the root hash of the tree's first size leaves, 0 ≤ size ≤ Size().
func (t *Tree) RootAt(size int64) (tlog.Hash, error) {
	n, r, done := t.snapshot()
	defer done()
	return rootAt(size, n, r)
}

// Checkpoint returns the checkpoint of the whole tree for origin: size and root read
// together, which Size then Root would not guarantee while another goroutine appends.
func (t *Tree) Checkpoint(origin string) (Checkpoint, error) {
	n, r, done := t.snapshot()
	defer done()
	h, err := rootAt(n, n, r)
	if err != nil {
		return Checkpoint{}, err
	}
	return Checkpoint{Origin: origin, Size: n, Hash: h}, nil
}

// Extends reports whether the tree extends the checkpoint c: whether it has at least c.Size
// leaves and the root of its first c.Size leaves is c.Hash, read together. It returns nil if
// so; an error wrapping ErrShrunk when the tree has fewer leaves than c.Size (records were
// removed from the end, or the tree is of an older copy); an error wrapping ErrInconsistent
// when the root at c.Size differs (another history), or when in tiles a tile read for it
// does not match the tree above it (ErrCorruptTile too: the stored history was changed); and
// an error wrapping ErrMalformedCheckpoint when c.Size is negative. The messages give the
// sizes or the two roots. c's origin and extensions are not looked at, nor is any signature:
// open the signed checkpoint first (OpenCheckpoint).
func (t *Tree) Extends(c Checkpoint) error {
	if c.Size < 0 {
		return fmt.Errorf("%w: size %d is negative", ErrMalformedCheckpoint, c.Size)
	}
	n, r, done := t.snapshot()
	defer done()
	if c.Size > n {
		return fmt.Errorf("%w: the tree has %d leaves, fewer than the %d the checkpoint covers", ErrShrunk, n, c.Size)
	}
	root, err := rootAt(c.Size, n, r)
	if errors.Is(err, ErrCorruptTile) {
		return fmt.Errorf("%w: %w", ErrInconsistent, err)
	}
	if err != nil {
		return err
	}
	if root != c.Hash {
		return fmt.Errorf("%w: the root of the tree's first %d leaves is %s, not the checkpoint's %s", ErrInconsistent, c.Size, root, c.Hash)
	}
	return nil
}

// rootAt returns the root of the first size leaves of a tree of n leaves read through r.
func rootAt(size, n int64, r tlog.HashReader) (tlog.Hash, error) {
	if size < 0 || size > n {
		return tlog.Hash{}, fmt.Errorf("tree root at size %d: the tree has %d leaves", size, n)
	}
	h, err := tlog.TreeHash(size, r)
	if err != nil {
		return tlog.Hash{}, fmt.Errorf("tree root at size %d: %w", size, err)
	}
	return h, nil
}

// ProveInclusion returns the proof that the leaf at index is in the tree of the first size
// leaves (0 ≤ index < size ≤ Size()), in tlog.RecordProof order (RFC 6962 §2.1.1 audit
// path, leaf-side sibling first). VerifyInclusion checks it.
func (t *Tree) ProveInclusion(index, size int64) (tlog.RecordProof, error) {
	n, r, done := t.snapshot()
	defer done()
	if index < 0 || index >= size || size > n {
		return nil, fmt.Errorf("proving inclusion of leaf %d at size %d: want 0 ≤ index < size ≤ %d", index, size, n)
	}
	p, err := tlog.ProveRecord(size, index, r)
	if err != nil {
		return nil, fmt.Errorf("proving inclusion of leaf %d at size %d: %w", index, size, err)
	}
	return p, nil
}

// ProveConsistency returns the proof that the tree of the first newSize leaves extends the
// tree of the first oldSize leaves (0 ≤ oldSize ≤ newSize ≤ Size()), RFC 6962 §2.1.2 in
// tlog.TreeProof order. The proof is empty when oldSize is 0 or equals newSize.
// VerifyConsistency checks it.
func (t *Tree) ProveConsistency(oldSize, newSize int64) (tlog.TreeProof, error) {
	n, r, done := t.snapshot()
	defer done()
	if oldSize < 0 || oldSize > newSize || newSize > n {
		return nil, fmt.Errorf("proving consistency of size %d with size %d: want 0 ≤ old ≤ new ≤ %d", oldSize, newSize, n)
	}
	if oldSize == 0 || oldSize == newSize {
		return tlog.TreeProof{}, nil
	}
	p, err := tlog.ProveTree(newSize, oldSize, r)
	if err != nil {
		return nil, fmt.Errorf("proving consistency of size %d with size %d: %w", oldSize, newSize, err)
	}
	return p, nil
}

// reader reads stored hashes from the slice of the in-memory tree; called with t.mu held.
func (t *Tree) reader() tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for i, x := range indexes {
			if x < 0 || x >= int64(len(t.hashes)) {
				return nil, fmt.Errorf("stored hash %d not in the tree's %d", x, len(t.hashes))
			}
			out[i] = t.hashes[x]
		}
		return out, nil
	})
}

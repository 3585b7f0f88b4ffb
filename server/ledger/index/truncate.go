package index

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// TruncateAfter removes every entry with a seq after seq and sets Meta to {Seq: seq,
// LastHash: lastHash, TreeSize: treeSize} (Format unchanged), in one durable transaction,
// so that Add can go on from seq+1: an operator-initiated reindex from a point. seq 0
// empties the index. A seq past Meta().Seq fails with ErrBehind.
//
// Unlike the rest of the package it reads the whole serial and uid buckets (they do not
// say which groups hold the removed seqs), so it takes time in proportion to the index.
func (x *Index) TruncateAfter(seq uint64, lastHash string, treeSize int64) error {
	if x.readOnly {
		return fmt.Errorf("truncating index: %w", ErrReadOnly)
	}
	if treeSize < 0 {
		return fmt.Errorf("truncating index: %w: tree size %d", ErrInvalidEntry, treeSize)
	}
	err := x.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		m, err := readMeta(meta)
		if err != nil {
			return err
		}
		if seq > m.Seq {
			return fmt.Errorf("%w: cannot keep up to seq %d, index holds up to seq %d", ErrBehind, seq, m.Seq)
		}
		maxKey := bytes.Clone(meta.Get(metaMaxTime))
		if seq < m.Seq {
			if maxKey, err = truncateSlots(tx, seq); err != nil {
				return err
			}
			if err := deleteFrom(tx.Bucket(bucketState).Cursor(), putUint64(seq+1)); err != nil {
				return fmt.Errorf("removing state seqs: %w", err)
			}
			if err := truncateGroups(tx.Bucket(bucketSerial), seq); err != nil {
				return fmt.Errorf("removing serials: %w", err)
			}
			if err := truncateGroups(tx.Bucket(bucketUID), seq); err != nil {
				return fmt.Errorf("removing object UIDs: %w", err)
			}
			if err := truncateLeaves(tx.Bucket(bucketLeaves), seq); err != nil {
				return fmt.Errorf("removing latest leaves: %w", err)
			}
		}
		return putMeta(meta, seq, lastHash, treeSize, maxKey)
	})
	if err != nil {
		return fmt.Errorf("truncating index after seq %d: %w", seq, err)
	}
	return nil
}

// truncateSlots removes the seqs after seq from the pos and since buckets and returns the
// timeKey of the latest time left (nil when none is).
func truncateSlots(tx *bolt.Tx, seq uint64) ([]byte, error) {
	pos, since := tx.Bucket(bucketPos), tx.Bucket(bucketSince)
	var b uint64 // the block that keeps keep entries, the last one kept
	var keep int
	if seq > 0 {
		var i int
		b, i = blockOf(seq)
		keep = i + 1
	}
	from := b + 1
	if keep == 0 {
		from = b
	}
	if err := deleteFrom(pos.Cursor(), blockKey(from)); err != nil {
		return nil, fmt.Errorf("removing blocks from %d: %w", from, err)
	}
	// Since keys rise with their blocks: drop those of block b and after, then put back
	// block b's if its latest time is still later than every time before it.
	var drop [][]byte
	c := since.Cursor()
	k, v := c.Last()
	for ; k != nil && len(v) == 8 && binary.BigEndian.Uint64(v) >= b; k, v = c.Prev() {
		drop = append(drop, bytes.Clone(k))
	}
	prevMax := bytes.Clone(k)
	for _, k := range drop {
		if err := since.Delete(k); err != nil {
			return nil, fmt.Errorf("removing since keys: %w", err)
		}
	}
	if keep == 0 {
		return prevMax, nil
	}
	var val []byte
	var prev slot
	var latest int64
	n, _, err := walkBlock(pos.Get(blockKey(b)), func(i int, s slot) bool {
		if i == keep {
			return false
		}
		if i == 0 || s.nanos > latest {
			latest = s.nanos
		}
		val = appendSlot(val, prev, s)
		prev = s
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("reading block %d: %w", b, err)
	}
	if n < keep {
		return nil, fmt.Errorf("%w: block %d holds %d entries, want at least %d", ErrCorrupt, b, n, keep)
	}
	if err := pos.Put(blockKey(b), val); err != nil {
		return nil, fmt.Errorf("storing block %d: %w", b, err)
	}
	if prevMax != nil {
		before, err := keyNanos(prevMax)
		if err != nil {
			return nil, err
		}
		if latest <= before {
			return prevMax, nil
		}
	}
	if err := since.Put(timeKey(latest), blockKey(b)); err != nil {
		return nil, fmt.Errorf("storing the since key of block %d: %w", b, err)
	}
	return timeKey(latest), nil
}

// deleteFrom deletes the keys from from on of the cursor's bucket.
func deleteFrom(c *bolt.Cursor, from []byte) error {
	var keys [][]byte
	for k, _ := c.Seek(from); k != nil; k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := c.Bucket().Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// truncateChunk is how many groups truncateGroups changes per pass (a variable for tests).
var truncateChunk = 1024

// truncateGroups removes the members after seq from every group of b, a chunk of groups at
// a time (a bucket must not change under its cursor).
func truncateGroups(b *bolt.Bucket, seq uint64) error {
	type change struct{ k, v []byte } // v nil: delete the group
	c := b.Cursor()
	k, v := c.First()
	for k != nil {
		var changes []change
		var last []byte
		for ; k != nil && len(changes) < truncateChunk; k, v = c.Next() {
			cut := -1
			_, err := walkGroup(v, func(_ []byte, s uint64, at int) bool {
				if s > seq {
					cut = at
					return false
				}
				return true
			})
			if err != nil {
				return fmt.Errorf("reading group %x: %w", k, err)
			}
			if cut >= 0 {
				ch := change{k: bytes.Clone(k)}
				if cut > 0 {
					ch.v = bytes.Clone(v[:cut])
				}
				changes = append(changes, ch)
			}
			last = bytes.Clone(k)
		}
		for _, ch := range changes {
			var err error
			if ch.v == nil {
				err = b.Delete(ch.k)
			} else {
				err = b.Put(ch.k, ch.v)
			}
			if err != nil {
				return fmt.Errorf("storing group %x: %w", ch.k, err)
			}
		}
		if k == nil {
			break
		}
		// Go on after the last group read, whether or not it is still there.
		if k, v = c.Seek(last); k != nil && bytes.Equal(k, last) {
			k, v = c.Next()
		}
	}
	return nil
}

// truncateLeaves removes the latest leaves of records after seq. The NotAfter before them is
// not known any more: until the entries after seq are added again (or the index is rebuilt),
// LatestLeaves has no entry for that signer and CA.
func truncateLeaves(b *bolt.Bucket, seq uint64) error {
	var drop [][]byte
	err := b.ForEach(func(k, v []byte) error {
		if len(v) == 16 && binary.BigEndian.Uint64(v[8:]) > seq {
			drop = append(drop, bytes.Clone(k))
		}
		return nil
	})
	for _, k := range drop {
		if err == nil {
			err = b.Delete(k)
		}
	}
	return err
}

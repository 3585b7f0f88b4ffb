package index

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"iter"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Add stores entries and sets Meta to {Seq: the last entry's seq, LastHash: its hash,
// TreeSize: treeSize} (Format unchanged), all in one transaction that is durable (fsynced)
// when Add returns nil. On any error nothing is stored.
//
// The seqs must be consecutive (ErrNotConsecutive) and the first must be Meta().Seq+1: a
// later one fails with ErrBehind, an earlier one with ErrOverlap, each error naming both
// seqs. Each entry needs a seq ≥ 1, a segment ≥ 1 and an offset ≥ 0 (ErrInvalidEntry); a
// serial that is not hex is left out of the serial lookups. An empty batch changes nothing.
func (x *Index) Add(entries []Entry, treeSize int64) error {
	return x.AddChunks([][]Entry{entries}, treeSize)
}

// AddChunks is Add of the entries of chunks, one after another, without copying them into
// one slice first.
func (x *Index) AddChunks(chunks [][]Entry, treeSize int64) error {
	chunks = slices.DeleteFunc(slices.Clone(chunks), func(c []Entry) bool { return len(c) == 0 })
	if x.readOnly {
		return fmt.Errorf("adding to index: %w", ErrReadOnly)
	}
	if len(chunks) == 0 {
		return nil
	}
	if treeSize < 0 {
		return fmt.Errorf("adding to index: %w: tree size %d", ErrInvalidEntry, treeSize)
	}
	// The work that needs no transaction is done before it, to hold the write lock briefly.
	slots, serials, uids, err := x.prepare(chunks)
	if err != nil {
		return fmt.Errorf("adding to index: %w", err)
	}
	first := chunks[0][0].Seq
	tail := chunks[len(chunks)-1]
	last := &tail[len(tail)-1]
	err = x.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		m, err := readMeta(meta)
		if err != nil {
			return err
		}
		if first > m.Seq+1 {
			return fmt.Errorf("%w: batch starts at seq %d, index holds up to seq %d", ErrBehind, first, m.Seq)
		}
		if first <= m.Seq {
			return fmt.Errorf("%w: batch starts at seq %d, index holds up to seq %d", ErrOverlap, first, m.Seq)
		}
		maxKey, err := addSlots(tx, m.Seq, slots, meta.Get(metaMaxTime))
		if err != nil {
			return err
		}
		state := tx.Bucket(bucketState)
		state.FillPercent = 1
		for _, e := range each(chunks) {
			if e.State {
				if err := state.Put(putUint64(e.Seq), append([]byte{}, e.Line...)); err != nil {
					return fmt.Errorf("storing state seq %d: %w", e.Seq, err)
				}
			}
		}
		if err := addLeaves(tx.Bucket(bucketLeaves), chunks); err != nil {
			return fmt.Errorf("storing latest leaves: %w", err)
		}
		if err := addRun(tx, tableSerial, serials); err != nil {
			return fmt.Errorf("storing serials: %w", err)
		}
		if err := addRun(tx, tableUID, uids); err != nil {
			return fmt.Errorf("storing object UIDs: %w", err)
		}
		return putMeta(meta, last.Seq, last.Hash, treeSize, maxKey)
	})
	if err != nil {
		return fmt.Errorf("adding seqs %d-%d to index: %w", first, last.Seq, err)
	}
	x.added.Add(uint64(len(slots)))
	x.batches.Add(1)
	return nil
}

// prepare checks entries and turns them into the slots of the pos bucket and the run
// entries of the serial and uid lookups.
func (x *Index) prepare(chunks [][]Entry) (slots []slot, serials, uids []runEntry, err error) {
	first := chunks[0][0].Seq
	n := 0
	for _, c := range chunks {
		n += len(c)
	}
	if first == 0 {
		return nil, nil, nil, fmt.Errorf("%w: seq 0 (seqs start at 1)", ErrInvalidEntry)
	}
	slots = make([]slot, n)
	serials, uids = make([]runEntry, 0, n), make([]runEntry, 0, n)
	ids := make([]byte, 0, 36*n) // the ids, one after another (a slice that grows leaves the earlier ids where they are)
	for i, e := range each(chunks) {
		if e.Seq != first+uint64(i) {
			return nil, nil, nil, fmt.Errorf("%w: entry %d has seq %d after seq %d", ErrNotConsecutive, i, e.Seq, first+uint64(i)-1)
		}
		if e.Pos.Segment == 0 || e.Pos.Offset < 0 {
			return nil, nil, nil, fmt.Errorf("%w: seq %d at segment %d offset %d", ErrInvalidEntry, e.Seq, e.Pos.Segment, e.Pos.Offset)
		}
		slots[i] = slot{pos: e.Pos, nanos: clampNanos(e.Time), state: e.State}
		// A serial that is not a hex number is not indexed by serial (no lookup could name
		// it); the entry is stored all the same, so one odd record never stops the index.
		if e.Serial != "" {
			var ok bool
			at := len(ids)
			if ids, ok = appendSerialID(ids, e.Serial); ok {
				id := ids[at:len(ids):len(ids)]
				serials = append(serials, runEntry{h: x.hashID(id), id: id, seq: e.Seq})
			}
		}
		if e.ObjectUID != "" {
			at := len(ids)
			ids = appendUIDID(ids, e.ObjectUID)
			id := ids[at:len(ids):len(ids)]
			uids = append(uids, runEntry{h: x.hashID(id), id: id, seq: e.Seq})
		}
	}
	return slots, serials, uids, nil
}

// putMeta sets the meta of the index after an Add or a TruncateAfter; maxKey nil removes
// the latest time (the index is empty).
func putMeta(meta *bolt.Bucket, seq uint64, hash string, treeSize int64, maxKey []byte) error {
	err := meta.Put(metaSeq, putUint64(seq))
	if err == nil {
		err = meta.Put(metaHash, []byte(hash))
	}
	if err == nil {
		err = meta.Put(metaTree, putUint64(uint64(treeSize)))
	}
	if err == nil && maxKey != nil {
		err = meta.Put(metaMaxTime, maxKey)
	} else if err == nil {
		err = meta.Delete(metaMaxTime)
	}
	if err != nil {
		return fmt.Errorf("storing meta: %w", err)
	}
	return nil
}

// addSlots appends slots (the seqs after last) to the pos bucket, first filling the partly
// filled block that holds last, and keeps the since bucket: a block has a since key when
// the latest time in it is later than every time in the blocks before, and that key is the
// latest time. maxKey is the meta's timeKey of the latest time indexed (nil when empty);
// addSlots returns the new one.
func addSlots(tx *bolt.Tx, last uint64, slots []slot, maxKey []byte) ([]byte, error) {
	pos, since := tx.Bucket(bucketPos), tx.Bucket(bucketSince)
	pos.FillPercent, since.FillPercent = 1, 1
	hasMax := maxKey != nil
	var latest int64
	if hasMax {
		var err error
		if latest, err = keyNanos(maxKey); err != nil {
			return nil, err
		}
	}
	b, n := blockOf(last + 1)
	var val, owned []byte // the block's value, and its since key before this Add
	var prev slot
	if n > 0 {
		v := pos.Get(blockKey(b))
		got, p, err := walkBlock(v, nil)
		if err != nil {
			return nil, fmt.Errorf("reading block %d: %w", b, err)
		}
		if got != n {
			return nil, fmt.Errorf("%w: block %d holds %d entries, want %d", ErrCorrupt, b, got, n)
		}
		val, prev = append(make([]byte, 0, len(v)+8*len(slots)), v...), p
		if hasMax && bytes.Equal(since.Get(maxKey), blockKey(b)) {
			owned = maxKey
		}
	}
	raised := false
	flush := func() error {
		if err := pos.Put(blockKey(b), val); err != nil {
			return fmt.Errorf("storing block %d: %w", b, err)
		}
		if !raised {
			return nil
		}
		if owned != nil {
			if err := since.Delete(owned); err != nil {
				return fmt.Errorf("moving the since key of block %d: %w", b, err)
			}
		}
		if err := since.Put(timeKey(latest), blockKey(b)); err != nil {
			return fmt.Errorf("storing the since key of block %d: %w", b, err)
		}
		return nil
	}
	for _, s := range slots {
		if n == blockSize {
			if err := flush(); err != nil {
				return nil, err
			}
			b, n, val, owned, prev, raised = b+1, 0, nil, nil, slot{}, false
		}
		if !hasMax || s.nanos > latest {
			latest, hasMax, raised = s.nanos, true, true
		}
		val = appendSlot(val, prev, s)
		prev = s
		n++
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return timeKey(latest), nil
}

// each yields the entries of chunks one after another, numbered from 0.
func each(chunks [][]Entry) iter.Seq2[int, *Entry] {
	return func(yield func(int, *Entry) bool) {
		i := 0
		for _, c := range chunks {
			for j := range c {
				if !yield(i, &c[j]) {
					return
				}
				i++
			}
		}
	}
}

// addLeaves raises, for each signer and CA of the issued entries, the latest NotAfter kept in
// b (key: uvarint-length-prefixed signer and CA; value: NotAfter in Unix nanoseconds and the
// seq, 8 bytes each, big-endian).
func addLeaves(b *bolt.Bucket, chunks [][]Entry) error {
	for _, e := range each(chunks) {
		if e.Signer == "" || e.NotAfter.IsZero() {
			continue
		}
		key := leafKey(e.Signer, e.CA)
		nanos := clampNanos(e.NotAfter)
		if v := b.Get(key); len(v) == 16 && int64(binary.BigEndian.Uint64(v)) >= nanos {
			continue
		}
		val := binary.BigEndian.AppendUint64(putUint64(uint64(nanos)), e.Seq)
		if err := b.Put(key, val); err != nil {
			return err
		}
	}
	return nil
}

// leafKey is the leaves bucket's key of signer and ca.
func leafKey(signer, ca string) []byte {
	k := binary.AppendUvarint(nil, uint64(len(signer)))
	k = append(k, signer...)
	k = binary.AppendUvarint(k, uint64(len(ca)))
	return append(k, ca...)
}

package index

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Pos returns where the record seq lies; ok is false when the index does not hold seq.
// It reads one block: O(log n).
func (x *Index) Pos(seq uint64) (p Pos, ok bool, err error) {
	if seq == 0 {
		return Pos{}, false, nil
	}
	b, i := blockOf(seq)
	err = x.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketPos).Get(blockKey(b))
		_, _, err := walkBlock(v, func(j int, s slot) bool {
			if j == i {
				p, ok = s.pos, true
				return false
			}
			return true
		})
		return err
	})
	if err != nil {
		return Pos{}, false, fmt.Errorf("looking up seq %d in index: %w", seq, err)
	}
	return p, ok, nil
}

// BySerial returns the seqs of the records with that certificate serial, ascending (none:
// an empty slice). Serials compare as numbers (NormalizeSerial): "0x0A", "a", "0a" and "A"
// are one serial. A serial that is not hex fails with ErrInvalidSerial. It reads one block in
// each run (runs.go): a few runs a level, O(log n) levels.
func (x *Index) BySerial(serial string) ([]uint64, error) {
	id, err := serialID(serial)
	if err != nil {
		return nil, fmt.Errorf("looking up serial in index: %w", err)
	}
	seqs, err := x.byID(tableSerial, id)
	if err != nil {
		return nil, fmt.Errorf("looking up serial %s in index: %w", truncate(serial), err)
	}
	return seqs, nil
}

// ByObjectUID returns the seqs of the records with exactly that object UID (any bytes),
// ascending; none for "" (records without a UID are not indexed). A UID never matches
// another it is a prefix of. Cost as BySerial.
func (x *Index) ByObjectUID(uid string) ([]uint64, error) {
	if uid == "" {
		return []uint64{}, nil
	}
	seqs, err := x.byID(tableUID, uidID(uid))
	if err != nil {
		return nil, fmt.Errorf("looking up object UID %q in index: %w", truncate(uid), err)
	}
	return seqs, nil
}

func (x *Index) byID(t table, id []byte) ([]uint64, error) {
	var seqs []uint64
	err := x.db.View(func(tx *bolt.Tx) error {
		var err error
		seqs, err = lookup(tx, t, x.hashID(id), id)
		return err
	})
	return seqs, err
}

// FirstSince returns the smallest seq whose record's Time is at or after t, exactly (to the
// nanosecond), whatever steps back the clock took between records; ok is false when no
// record is that late. The records after it need not all be as late: a caller reading on
// filters by time. It seeks the since bucket and reads one block: O(log n).
func (x *Index) FirstSince(t time.Time) (seq uint64, ok bool, err error) {
	want := clampNanos(t)
	err = x.db.View(func(tx *bolt.Tx) error {
		k, v := tx.Bucket(bucketSince).Cursor().Seek(timeKey(want))
		if k == nil {
			return nil
		}
		if len(v) != 8 {
			return fmt.Errorf("%w: since value of %d bytes", ErrCorrupt, len(v))
		}
		b := binary.BigEndian.Uint64(v)
		_, _, err := walkBlock(tx.Bucket(bucketPos).Get(blockKey(b)), func(i int, s slot) bool {
			if s.nanos >= want {
				seq, ok = b*blockSize+uint64(i)+1, true
				return false
			}
			return true
		})
		if err == nil && !ok {
			err = fmt.Errorf("%w: block %d has no time at or after its since key", ErrCorrupt, b)
		}
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("looking up the first record since %s in index: %w", t.Format(time.RFC3339Nano), err)
	}
	return seq, ok, nil
}

// StateSeqs returns the seqs of the State entries, ascending. It reads only those.
func (x *Index) StateSeqs() ([]uint64, error) {
	seqs := []uint64{}
	err := x.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketState).ForEach(func(k, _ []byte) error {
			s, ok := getUint64(k)
			if !ok {
				return fmt.Errorf("%w: state key of %d bytes", ErrCorrupt, len(k))
			}
			seqs = append(seqs, s)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing state seqs in index: %w", err)
	}
	return seqs, nil
}

// StateRecords returns the State entries with their lines, in seq order.
func (x *Index) StateRecords() ([]StateRecord, error) {
	var out []StateRecord
	err := x.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketState).ForEach(func(k, v []byte) error {
			s, ok := getUint64(k)
			if !ok {
				return fmt.Errorf("%w: state key of %d bytes", ErrCorrupt, len(k))
			}
			out = append(out, StateRecord{Seq: s, Line: append([]byte{}, v...)})
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing state records in index: %w", err)
	}
	return out, nil
}

// LatestLeaves returns, for each signer and CA, the latest NotAfter issued and its record's
// seq, ordered by seq.
func (x *Index) LatestLeaves() ([]Leaf, error) {
	var out []Leaf
	err := x.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLeaves).ForEach(func(k, v []byte) error {
			signer, ca, ok := splitLeafKey(k)
			if !ok || len(v) != 16 {
				return fmt.Errorf("%w: leaves entry of %d and %d bytes", ErrCorrupt, len(k), len(v))
			}
			out = append(out, Leaf{Signer: signer, CA: ca, NotAfter: time.Unix(0, int64(binary.BigEndian.Uint64(v[:8]))).UTC(),
				Seq: binary.BigEndian.Uint64(v[8:])})
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("listing latest leaves in index: %w", err)
	}
	slices.SortFunc(out, func(a, b Leaf) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// splitLeafKey splits a leaves key into its signer and CA.
func splitLeafKey(k []byte) (string, string, bool) {
	n, w := binary.Uvarint(k)
	if w <= 0 || uint64(len(k)-w) < n {
		return "", "", false
	}
	signer, rest := string(k[w:w+int(n)]), k[w+int(n):]
	m, w := binary.Uvarint(rest)
	if w <= 0 || uint64(len(rest)-w) != m {
		return "", "", false
	}
	return signer, string(rest[w:]), true
}

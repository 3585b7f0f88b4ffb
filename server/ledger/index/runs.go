package index

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// The serial and uid lookups are kept as sorted runs, an LSM tree inside bbolt: each Add
// writes its ids as one new run, sorted by hash, at the end of the key space (pages written
// once, full); Compact merges runs in the background; a lookup reads, in each run, the one
// block where the id's hash would lie. What an Add writes is therefore proportional to the
// batch, never to the history, which a hash table whose random groups each Add rewrites is
// not (at 10 M records such an Add rewrote most of the file).

// fanout is how many runs of one level Compact merges into one run of the next level: a
// lookup reads at most fanout−1 runs a level (plus one being merged), and each id is
// rewritten about once a level, log_fanout(adds) times in all.
const fanout = 4

// runBlockBytes is the size a run's block is filled to: one block, its 24-byte key and
// bbolt's headers fit a 4 KiB page.
const runBlockBytes = 4000

// table is one of the id lookups: its runs (dir: run number → level and entry count) and
// their blocks (run number ‖ hash ‖ seq of the block's last entry → its entries).
type table struct {
	name        string
	dir, blocks []byte
}

var (
	tableSerial = table{"serial", []byte("serial.runs"), []byte("serial.blocks")}
	tableUID    = table{"uid", []byte("uid.runs"), []byte("uid.blocks")}
	tables      = []table{tableSerial, tableUID}
)

// runEntry is one id of a run: its keyed hash, the record's seq and the id (serialID or
// uidID). A run is sorted by hash, then seq; within a table a seq holds one id, so no two
// entries of a run compare equal.
type runEntry struct {
	h, seq uint64
	id     []byte
}

func (e runEntry) compare(o runEntry) int {
	if c := cmp.Compare(e.h, o.h); c != 0 {
		return c
	}
	return cmp.Compare(e.seq, o.seq)
}

// hashID is the first 8 bytes of SHA-256(secret ‖ id), big-endian. The secret is the index's
// own (random, made with the file, kept in its meta): object UIDs and, through a compromised
// client, serials are chosen by callers, and an unkeyed hash would let one of them aim many
// ids at one hash, whose every lookup then reads them all.
func (x *Index) hashID(id []byte) uint64 {
	h := sha256.New()
	h.Write(x.secret)
	h.Write(id)
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(h.Sum(sum[:0])) >> x.hashShift
}

// runKey is the key of a run's block whose last entry has hash h and seq seq; a seek to
// runKey(run, h, seq) finds the block holding the first entry at or after (h, seq).
func runKey(run, h, seq uint64) []byte {
	k := make([]byte, 24)
	binary.BigEndian.PutUint64(k, run)
	binary.BigEndian.PutUint64(k[8:], h)
	binary.BigEndian.PutUint64(k[16:], seq)
	return k
}

func keyRun(k []byte) (uint64, bool) {
	if len(k) != 24 {
		return 0, false
	}
	return binary.BigEndian.Uint64(k), true
}

// appendRunEntry encodes e into a block: the hash (8 bytes), the seq (uvarint), the id.
func appendRunEntry(dst []byte, e runEntry) []byte {
	dst = binary.BigEndian.AppendUint64(dst, e.h)
	dst = binary.AppendUvarint(dst, e.seq)
	return append(dst, e.id...)
}

// walkRunBlock decodes a block entry by entry, calling fn with each (its id aliases v) until
// fn returns false.
func walkRunBlock(v []byte, fn func(runEntry) bool) error {
	for at := 0; at < len(v); {
		if len(v)-at < 9 {
			return fmt.Errorf("%w: run entry at byte %d of a block", ErrCorrupt, at)
		}
		e := runEntry{h: binary.BigEndian.Uint64(v[at:])}
		seq, k := binary.Uvarint(v[at+8:])
		if k <= 0 || seq == 0 {
			return fmt.Errorf("%w: seq at byte %d of a block", ErrCorrupt, at+8)
		}
		e.seq = seq
		idAt := at + 8 + k
		tag, k2 := binary.Uvarint(v[idAt:])
		if k2 <= 0 || tag>>1 > uint64(len(v)-idAt-k2) {
			return fmt.Errorf("%w: id at byte %d of a block", ErrCorrupt, idAt)
		}
		end := idAt + k2 + int(tag>>1)
		e.id = v[idAt:end]
		if !fn(e) {
			return nil
		}
		at = end
	}
	return nil
}

// runInfo is a dir value: the run's level and its entry count.
type runInfo struct {
	level uint8
	count uint64
}

func (r runInfo) value() []byte { return binary.AppendUvarint([]byte{r.level}, r.count) }

func parseRunInfo(v []byte) (runInfo, error) {
	if len(v) < 2 {
		return runInfo{}, fmt.Errorf("%w: run of %d bytes", ErrCorrupt, len(v))
	}
	n, k := binary.Uvarint(v[1:])
	if k <= 0 || 1+k != len(v) {
		return runInfo{}, fmt.Errorf("%w: run count", ErrCorrupt)
	}
	return runInfo{level: v[0], count: n}, nil
}

// runWriter writes one run's entries, in order, in blocks of about runBlockBytes.
type runWriter struct {
	run   uint64
	count uint64
	buf   []byte
	last  runEntry
}

func (w *runWriter) add(b *bolt.Bucket, e runEntry) error {
	if len(w.buf) > 0 && len(w.buf)+8+binary.MaxVarintLen64+len(e.id) > runBlockBytes {
		if err := w.flush(b); err != nil {
			return err
		}
	}
	w.buf = appendRunEntry(w.buf, e)
	w.last = runEntry{h: e.h, seq: e.seq}
	w.count++
	return nil
}

// flush stores the block being filled, if any.
func (w *runWriter) flush(b *bolt.Bucket) error {
	if len(w.buf) == 0 {
		return nil
	}
	b.FillPercent = 1 // keys only grow: pages filled full
	if err := b.Put(runKey(w.run, w.last.h, w.last.seq), w.buf); err != nil {
		return fmt.Errorf("storing a block of run %d: %w", w.run, err)
	}
	w.buf = nil // bbolt keeps the slice until the commit
	return nil
}

// addRun stores es (any order) as a new run of level 0 of t, numbered by the meta's run
// counter.
func addRun(tx *bolt.Tx, t table, es []runEntry) error {
	if len(es) == 0 {
		return nil
	}
	slices.SortFunc(es, runEntry.compare)
	run, err := nextRun(tx)
	if err != nil {
		return err
	}
	blocks := tx.Bucket(t.blocks)
	w := runWriter{run: run}
	for _, e := range es {
		if err := w.add(blocks, e); err != nil {
			return err
		}
	}
	if err := w.flush(blocks); err != nil {
		return err
	}
	return putRun(tx.Bucket(t.dir), run, runInfo{level: 0, count: w.count})
}

func putRun(dir *bolt.Bucket, run uint64, info runInfo) error {
	dir.FillPercent = 1
	if err := dir.Put(putUint64(run), info.value()); err != nil {
		return fmt.Errorf("listing run %d: %w", run, err)
	}
	return nil
}

// nextRun takes the next run number from the meta's counter.
func nextRun(tx *bolt.Tx) (uint64, error) {
	meta := tx.Bucket(bucketMeta)
	n := uint64(1)
	if v := meta.Get(metaNextRun); v != nil {
		var ok bool
		if n, ok = getUint64(v); !ok {
			return 0, fmt.Errorf("%w: meta %s of %d bytes", ErrCorrupt, metaNextRun, len(v))
		}
	}
	if err := meta.Put(metaNextRun, putUint64(n+1)); err != nil {
		return 0, fmt.Errorf("numbering a run: %w", err)
	}
	return n, nil
}

// listRuns returns t's runs in number order.
func listRuns(tx *bolt.Tx, t table) (runs []uint64, infos []runInfo, err error) {
	err = tx.Bucket(t.dir).ForEach(func(k, v []byte) error {
		run, ok := getUint64(k)
		if !ok {
			return fmt.Errorf("%w: run key of %d bytes", ErrCorrupt, len(k))
		}
		info, err := parseRunInfo(v)
		if err != nil {
			return err
		}
		runs, infos = append(runs, run), append(infos, info)
		return nil
	})
	return runs, infos, err
}

// lookup returns the seqs of the entries of id (whose hash is h) in every run of t, ascending.
func lookup(tx *bolt.Tx, t table, h uint64, id []byte) ([]uint64, error) {
	runs, _, err := listRuns(tx, t)
	if err != nil {
		return nil, err
	}
	seqs := []uint64{}
	c := tx.Bucket(t.blocks).Cursor()
	for _, run := range runs {
		for k, v := c.Seek(runKey(run, h, 0)); k != nil; k, v = c.Next() {
			if r, ok := keyRun(k); !ok || r != run {
				break
			}
			past := false
			err := walkRunBlock(v, func(e runEntry) bool {
				if e.h > h {
					past = true
					return false
				}
				if e.h == h && bytes.Equal(e.id, id) {
					seqs = append(seqs, e.seq)
				}
				return true
			})
			if err != nil {
				return nil, fmt.Errorf("reading run %d: %w", run, err)
			}
			if past {
				break
			}
		}
	}
	slices.Sort(seqs)
	return seqs, nil
}

package index

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// layout is the version of the bucket layout this package writes and reads. Open refuses
// another with ErrLayout. Layout 1 kept the serial and uid lookups as hash tables of groups.
const layout = 2

// The buckets; doc.go describes what each holds.
var (
	bucketMeta   = []byte("meta")
	bucketPos    = []byte("pos")
	bucketSince  = []byte("since")
	bucketState  = []byte("state")
	bucketLeaves = []byte("leaves")
	allBuckets   = [][]byte{bucketMeta, bucketPos, bucketSince, bucketState, bucketLeaves,
		tableSerial.dir, tableSerial.blocks, tableUID.dir, tableUID.blocks}
)

// The keys of the meta bucket.
var (
	metaLayout  = []byte("layout")  // uint64: layout
	metaSeq     = []byte("seq")     // uint64: Meta.Seq
	metaHash    = []byte("hash")    // string: Meta.LastHash
	metaTree    = []byte("tree")    // int64: Meta.TreeSize
	metaFormat  = []byte("format")  // int64: Meta.Format
	metaMaxTime = []byte("maxtime") // timeKey of the latest Time indexed; absent when empty
	metaSecret  = []byte("secret")  // 16 random bytes: the key of the id hash (runs.go)
	metaNextRun = []byte("nextrun") // uint64: the number the next run takes (absent: 1)
)

// Pos is where a record's line lies: segment number (1 = ledger-000001.jsonl), byte offset of
// the line, length without its newline.
type Pos struct {
	Segment uint32
	Offset  int64
	Length  uint32
}

// Entry is what the index keeps of one record.
type Entry struct {
	// Seq is the record's seq (1, 2, …).
	Seq uint64
	// Pos is where the record's line lies.
	Pos Pos
	// Time is the record's time. Times outside 1678–2262 are indexed as those bounds.
	Time time.Time
	// Hash is the record's hash (hex); the index keeps only the last indexed record's, as
	// Meta.LastHash.
	Hash string
	// Serial is the issued certificate's serial, hex as written by the ledger ("" if none).
	Serial string
	// ObjectUID is the record's object UID ("" if none); any bytes.
	ObjectUID string
	// State marks a record that rebuilds server state whatever its age (rotated, published,
	// bound, unbound, migrated). Line, its stored line, is kept with it: a start replays it
	// from the index, even once its segment was moved to archive storage.
	State bool
	Line  []byte
	// Signer, CA and NotAfter are an issued record's: the index keeps, for each signer and CA,
	// the latest NotAfter issued and its seq (LatestLeaves).
	Signer, CA string
	NotAfter   time.Time
}

// StateRecord is a State entry as the index keeps it.
type StateRecord struct {
	Seq  uint64
	Line []byte
}

// Leaf is the latest NotAfter issued by one signer's CA (CA "" for records that name none),
// and the seq of the record that issued it.
type Leaf struct {
	Signer, CA string
	NotAfter   time.Time
	Seq        uint64
}

// Meta is the index's own state.
type Meta struct {
	// Seq is the seq of the last indexed record; 0 when the index is empty.
	Seq uint64
	// LastHash is that record's hash ("" when empty).
	LastHash string
	// TreeSize is the Merkle tree size given with the last Add or TruncateAfter.
	TreeSize int64
	// Format is what SetFormat stored (0 until then); the index gives it no meaning.
	Format int
}

// Options tune Open. The zero value opens for writing with a 1 s lock wait and durable commits.
type Options struct {
	// ReadOnly opens the file read-only with a shared lock: several readers may share it,
	// but not with a writer. The file must exist.
	ReadOnly bool
	// Timeout is how long Open waits for the file's lock (flock) before failing with
	// ErrLocked: 1 s when zero, one attempt when negative.
	Timeout time.Duration
	// NoSync skips fsync on commit. For tests only: a crash can then corrupt the index.
	NoSync bool
}

// Stats describe an open index.
type Stats struct {
	// FileSize is the index file's size in bytes (0 if it cannot be read).
	FileSize int64
	// DataSize is the size in bytes of the file's pages up to the highest page in use.
	DataSize int64
	// FreePages is how many pages are free for reuse (or will be once no reader needs them).
	FreePages int
	// PageSize is the file's page size in bytes.
	PageSize int
	// Added and Batches count the entries and the non-empty Adds stored since Open.
	Added, Batches uint64
}

// Index is the embedded index of a ledger: one bbolt file. Its methods are safe for
// concurrent use; writes are serialized and each is one transaction.
type Index struct {
	db       *bolt.DB
	path     string
	pageSize int
	readOnly bool
	secret   []byte // the id hash's key
	// hashShift drops low bits of the id hash: 0, but tests raise it to make ids collide.
	hashShift uint
	added     atomic.Uint64
	batches   atomic.Uint64

	cmu        sync.Mutex // Compact's
	compaction compaction
}

// Open opens the index file at path (mode 0600), creating it unless opts.ReadOnly. It waits
// up to opts.Timeout for the file's lock and fails with an error wrapping ErrLocked if
// another Index holds it. It reads only the layout version from the file, refusing an
// unknown one with ErrLayout; a new file gets the empty buckets.
func Open(path string, opts Options) (*Index, error) {
	timeout := opts.Timeout
	switch {
	case timeout == 0:
		timeout = time.Second
	case timeout < 0:
		timeout = time.Nanosecond // bbolt tries once when the timeout is this short
	}
	if opts.ReadOnly {
		// bbolt would create a missing file before failing to read it.
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("opening index: %w", err)
		}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:      timeout,
		ReadOnly:     opts.ReadOnly,
		NoSync:       opts.NoSync,
		FreelistType: bolt.FreelistMapType,
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("opening index %s: %w (waited %s)", path, ErrLocked, timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("opening index %s: %w", path, err)
	}
	x := &Index{db: db, path: path, pageSize: db.Info().PageSize, readOnly: opts.ReadOnly}
	if opts.ReadOnly {
		err = db.View(checkLayout)
	} else {
		err = db.Update(initLayout)
	}
	if err == nil {
		err = db.View(func(tx *bolt.Tx) error {
			x.secret = bytes.Clone(tx.Bucket(bucketMeta).Get(metaSecret))
			if opts.ReadOnly {
				return nil
			}
			var err error
			x.compaction.garbage, err = findGarbage(tx)
			return err
		})
	}
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("opening index %s: %w", path, err)
	}
	return x, nil
}

// initLayout creates the buckets of a new file and checks the layout of an existing one.
func initLayout(tx *bolt.Tx) error {
	if tx.Bucket(bucketMeta) != nil {
		return checkLayout(tx)
	}
	if k, _ := tx.Cursor().First(); k != nil {
		return fmt.Errorf("%w: the file holds other buckets", ErrLayout)
	}
	for _, name := range allBuckets {
		if _, err := tx.CreateBucket(name); err != nil {
			return fmt.Errorf("creating bucket %s: %w", name, err)
		}
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return fmt.Errorf("making the id hash key: %w", err)
	}
	if err := tx.Bucket(bucketMeta).Put(metaSecret, secret); err != nil {
		return err
	}
	return tx.Bucket(bucketMeta).Put(metaLayout, putUint64(layout))
}

// checkLayout checks that the file has the buckets of this layout version.
func checkLayout(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return fmt.Errorf("%w: no meta bucket", ErrLayout)
	}
	v, ok := getUint64(meta.Get(metaLayout))
	if !ok || v != layout {
		return fmt.Errorf("%w: layout %x, want %d", ErrLayout, meta.Get(metaLayout), layout)
	}
	if len(meta.Get(metaSecret)) != 16 {
		return fmt.Errorf("%w: no id hash key", ErrLayout)
	}
	for _, name := range allBuckets {
		if tx.Bucket(name) == nil {
			return fmt.Errorf("%w: no %s bucket", ErrLayout, name)
		}
	}
	return nil
}

// Close releases the file and its lock. Further calls fail.
func (x *Index) Close() error {
	if err := x.db.Close(); err != nil {
		return fmt.Errorf("closing index: %w", err)
	}
	return nil
}

// Meta returns the index's meta: the last indexed seq and hash, the tree size and the format.
func (x *Index) Meta() (Meta, error) {
	var m Meta
	err := x.db.View(func(tx *bolt.Tx) error {
		var err error
		m, err = readMeta(tx.Bucket(bucketMeta))
		return err
	})
	if err != nil {
		return Meta{}, fmt.Errorf("reading index meta: %w", err)
	}
	return m, nil
}

// readMeta reads the meta bucket; an absent key reads as zero.
func readMeta(b *bolt.Bucket) (Meta, error) {
	var m Meta
	var tree, format uint64
	for _, f := range []struct {
		key []byte
		v   *uint64
	}{{metaSeq, &m.Seq}, {metaTree, &tree}, {metaFormat, &format}} {
		v := b.Get(f.key)
		if v == nil {
			continue
		}
		u, ok := getUint64(v)
		if !ok {
			return Meta{}, fmt.Errorf("%w: meta %s of %d bytes", ErrCorrupt, f.key, len(v))
		}
		*f.v = u
	}
	m.LastHash = string(b.Get(metaHash))
	m.TreeSize, m.Format = int64(tree), int(int64(format))
	return m, nil
}

// SetFormat stores n as Meta.Format, durably.
func (x *Index) SetFormat(n int) error {
	if x.readOnly {
		return fmt.Errorf("setting index format: %w", ErrReadOnly)
	}
	err := x.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaFormat, putUint64(uint64(int64(n))))
	})
	if err != nil {
		return fmt.Errorf("setting index format: %w", err)
	}
	return nil
}

// Stats returns the file's sizes and what this Index added since Open. It reads no entries;
// after Close only FileSize, PageSize and the counts are set.
func (x *Index) Stats() Stats {
	s := Stats{Added: x.added.Load(), Batches: x.batches.Load()}
	if fi, err := os.Stat(x.path); err == nil {
		s.FileSize = fi.Size()
	}
	_ = x.db.View(func(tx *bolt.Tx) error {
		s.DataSize = tx.Size()
		return nil
	})
	bs := x.db.Stats()
	s.FreePages = bs.FreePageN + bs.PendingPageN
	s.PageSize = x.pageSize
	return s
}

func putUint64(v uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), v) }

func getUint64(b []byte) (uint64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}

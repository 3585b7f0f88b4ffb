package index

import (
	"errors"
	"fmt"
	"maps"
	"math/big"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// model is what an index should answer: every entry indexed, in seq order.
type model struct {
	entries  []Entry
	treeSize int64
	lastHash string
}

func (m *model) add(t *testing.T, x *Index, es []Entry) {
	t.Helper()
	m.treeSize += int64(len(es))
	if err := x.Add(es, m.treeSize); err != nil {
		t.Fatalf("Add(seqs %d-%d): %v", es[0].Seq, es[len(es)-1].Seq, err)
	}
	m.entries = append(m.entries, es...)
	m.lastHash = es[len(es)-1].Hash
}

// bySerial is BySerial by brute force: serials compared as numbers.
func (m *model) bySerial(serial string) []uint64 {
	want, ok := new(big.Int).SetString(strings.TrimPrefix(strings.TrimPrefix(serial, "0x"), "0X"), 16)
	seqs := []uint64{}
	for _, e := range m.entries {
		if e.Serial == "" || !ok {
			continue
		}
		if v, _ := new(big.Int).SetString(strings.TrimPrefix(strings.TrimPrefix(e.Serial, "0x"), "0X"), 16); v.Cmp(want) == 0 {
			seqs = append(seqs, e.Seq)
		}
	}
	return seqs
}

func (m *model) byUID(uid string) []uint64 {
	seqs := []uint64{}
	for _, e := range m.entries {
		if uid != "" && e.ObjectUID == uid {
			seqs = append(seqs, e.Seq)
		}
	}
	return seqs
}

func (m *model) firstSince(at time.Time) (uint64, bool) {
	for _, e := range m.entries {
		if clampNanos(e.Time) >= clampNanos(at) {
			return e.Seq, true
		}
	}
	return 0, false
}

func (m *model) stateSeqs() []uint64 {
	seqs := []uint64{}
	for _, e := range m.entries {
		if e.State {
			seqs = append(seqs, e.Seq)
		}
	}
	return seqs
}

// check compares every answer of x with m's: Meta, Pos of every seq and past the end,
// every serial and UID, FirstSince at, just before and just after every record's time and
// before and after all, StateSeqs.
func (m *model) check(t *testing.T, x *Index) {
	t.Helper()
	meta, err := x.Meta()
	if err != nil {
		t.Fatal(err)
	}
	if meta.Seq != uint64(len(m.entries)) || meta.LastHash != m.lastHash || meta.TreeSize != m.treeSize {
		t.Fatalf("Meta() = %+v, want seq %d hash %q tree %d", meta, len(m.entries), m.lastHash, m.treeSize)
	}
	for _, seq := range []uint64{0, uint64(len(m.entries)) + 1, uint64(len(m.entries)) + blockSize, 1 << 40} {
		if p, ok, err := x.Pos(seq); ok || err != nil {
			t.Fatalf("Pos(%d) = %+v, %t, %v; want not found", seq, p, ok, err)
		}
	}
	times := []time.Time{{}, time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, e := range m.entries {
		p, ok, err := x.Pos(e.Seq)
		if err != nil || !ok || p != e.Pos {
			t.Fatalf("Pos(%d) = %+v, %t, %v; want %+v", e.Seq, p, ok, err, e.Pos)
		}
		if e.Serial != "" {
			if got, err := x.BySerial(e.Serial); err != nil || !slices.Equal(got, m.bySerial(e.Serial)) {
				t.Fatalf("BySerial(%q) = %v, %v; want %v", e.Serial, got, err, m.bySerial(e.Serial))
			}
		}
		if got, err := x.ByObjectUID(e.ObjectUID); err != nil || !slices.Equal(got, m.byUID(e.ObjectUID)) {
			t.Fatalf("ByObjectUID(%q) = %v, %v; want %v", e.ObjectUID, got, err, m.byUID(e.ObjectUID))
		}
		times = append(times, e.Time, e.Time.Add(-1), e.Time.Add(1), e.Time.Add(-time.Hour), e.Time.Add(time.Hour))
	}
	for _, at := range times {
		got, ok, err := x.FirstSince(at)
		want, wantOK := m.firstSince(at)
		if err != nil || got != want || ok != wantOK {
			t.Fatalf("FirstSince(%s) = %d, %t, %v; want %d, %t", at.Format(time.RFC3339Nano), got, ok, err, want, wantOK)
		}
	}
	if got, err := x.StateSeqs(); err != nil || !slices.Equal(got, m.stateSeqs()) {
		t.Fatalf("StateSeqs() = %v, %v; want %v", got, err, m.stateSeqs())
	}
	m.checkSince(t, x)
}

// checkSince checks the since bucket against its definition: exactly the blocks whose latest
// time is later than every time before them have a key, and the key is that time.
func (m *model) checkSince(t *testing.T, x *Index) {
	t.Helper()
	want := map[uint64]int64{}
	var before int64
	for b := 0; b*blockSize < len(m.entries); b++ {
		var latest int64
		for i, e := range m.entries[b*blockSize : min(len(m.entries), (b+1)*blockSize)] {
			if n := clampNanos(e.Time); i == 0 || n > latest {
				latest = n
			}
		}
		if b == 0 || latest > before {
			want[uint64(b)], before = latest, latest
		}
	}
	got := map[uint64]int64{}
	err := x.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSince).ForEach(func(k, v []byte) error {
			n, err := keyNanos(k)
			b, ok := getUint64(v)
			if _, dup := got[b]; err != nil || !ok || dup {
				return fmt.Errorf("since key %x → %x: %v, a duplicate: %t", k, v, err, dup)
			}
			got[b] = n
			return nil
		})
	})
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("since bucket = %v, %v; want %v", got, err, want)
	}
}

// openTest opens a new index in a test directory.
func openTest(t *testing.T) (*Index, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "index.db")
	x, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	return x, path
}

// reopen closes x and opens path again.
func reopen(t *testing.T, x *Index, path string, opts Options) *Index {
	t.Helper()
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	y, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	y.hashShift = x.hashShift // the test's, as the hashes stored were made with it
	t.Cleanup(func() { _ = y.Close() })
	return y
}

// wantErr fails unless err wraps each of targets and its text holds each of texts.
func wantErr(t *testing.T, err error, targets []error, texts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", targets)
	}
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("error %q does not wrap %q", err, target)
		}
	}
	for _, s := range texts {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not say %q", err, s)
		}
	}
}

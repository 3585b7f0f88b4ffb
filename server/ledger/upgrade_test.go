package ledger_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/signet-pki/signet/ledgerproof"
	"github.com/signet-pki/signet/server/ledger"
)

// TestUpgradeInPlace opens a ledger that signet v0.1.0 wrote (testdata/v0.1.0: one segment,
// no index, no tiles) with today's ledger: it migrates once, records the migration, and proves
// the same records with the same proofs against v0.1.0's signed checkpoint. A second start
// neither migrates again nor reads the history.
func TestUpgradeInPlace(t *testing.T) {
	fixture := filepath.Join("testdata", "v0.1.0")
	dir := copyDir(t, filepath.Join(fixture, "ledger"))
	signed, err := os.ReadFile(filepath.Join(fixture, "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	pemKey, err := os.ReadFile(filepath.Join(fixture, "checkpoint.pub"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ledgerproof.ParsePublicKeyPEM(pemKey)
	if err != nil {
		t.Fatal(err)
	}
	const origin = "signet-ledger/fixture"
	v, err := ledgerproof.NewNoteVerifier(origin, pub)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := ledgerproof.OpenCheckpoint(signed, origin, v)
	if err != nil || cp.Size != 700 {
		t.Fatalf("v0.1.0's checkpoint: %+v, %v", cp, err)
	}

	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	seq, _ := l.Last()
	if seq != 701 {
		t.Fatalf("after the migration the ledger ends at %d, want 701 (700 records and the migration's)", seq)
	}
	if st := l.Stats(); st.ReadAtOpen < 700 {
		t.Errorf("the migration read %d records, want all 700", st.ReadAtOpen)
	}
	if err := l.Tree().Extends(cp); err != nil {
		t.Errorf("the migrated tree does not extend v0.1.0's checkpoint: %v", err)
	}
	for _, seq := range []int64{1, 256, 257, 700} {
		data, err := os.ReadFile(filepath.Join(fixture, "record-"+itoa(seq)+".proof"))
		if err != nil {
			t.Fatal(err)
		}
		old, err := ledgerproof.ParseInclusionBundle(data)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := old.Verify(origin, v); err != nil {
			t.Fatalf("v0.1.0's bundle of record %d: %v", seq, err)
		}
		line, err := l.Line(uint64(seq))
		if err != nil {
			t.Fatal(err)
		}
		proof, err := l.Tree().ProveInclusion(seq-1, cp.Size)
		if err != nil {
			t.Fatal(err)
		}
		now := ledgerproof.InclusionBundle{Index: seq - 1, Leaf: line, Proof: proof, SignedCheckpoint: signed}
		if string(now.Marshal()) != string(data) {
			t.Errorf("record %d: today's bundle differs from v0.1.0's", seq)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	recs := recordsOf(t, filepath.Join(dir, "ledger-000001.jsonl"))
	last := recs[len(recs)-1]
	if last.Decision != ledger.Migrated || last.Seq != 701 || last.Message == "" {
		t.Errorf("record 701: %+v, want the migration's", last)
	}

	l, err = ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if seq, _ := l.Last(); seq != 701 {
		t.Errorf("a second start moved the ledger to %d: it migrated again", seq)
	}
	if st := l.Stats(); st.ReadAtOpen > 1+255 {
		t.Errorf("a second start read %d records", st.ReadAtOpen)
	}
	if _, err := ledger.Verify(dir); err != nil {
		t.Error(err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestIndexOfAnotherLayoutIsRebuilt: an index.db written with another layout (layout 1, an
// unreleased development version's, kept the serials and UIDs as hash-table groups) is not
// refused: the start reads every record, builds the index anew, and the lookups answer.
func TestIndexOfAnotherLayoutIsRebuilt(t *testing.T) {
	f := newFixture(t)
	f.fill(t, 40)
	db, err := bolt.Open(filepath.Join(f.dir, "index.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("layout"), binary.BigEndian.AppendUint64(nil, 1))
	})
	if err = errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	l := f.open(t)
	if st := l.Stats(); st.ReadAtOpen != 40 {
		t.Errorf("the start read %d records, want all 40 (the index rebuilt)", st.ReadAtOpen)
	}
	if !strings.Contains(f.log.String(), "another layout") {
		t.Errorf("the start did not say why it read every record:\n%s", f.log)
	}
	want := issued(7)
	got, err := l.Find("", want.Serial)
	if err != nil || len(got) != 1 || got[0].Seq != 7 {
		t.Fatalf("Find(serial of record 7) = %+v, %v", got, err)
	}
}

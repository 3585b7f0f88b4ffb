package index

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.db")
	w, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var m model
	m.add(t, w, entries(1, 3))
	for _, tc := range []struct {
		name string
		opts Options
		max  time.Duration
	}{
		{"reader", Options{ReadOnly: true, Timeout: 200 * time.Millisecond}, 200 * time.Millisecond},
		{"writer", Options{Timeout: 200 * time.Millisecond}, 200 * time.Millisecond},
		{"reader once", Options{ReadOnly: true, Timeout: -1}, 0},
		{"reader default", Options{ReadOnly: true}, time.Second},
	} {
		start := time.Now()
		_, err := Open(path, tc.opts)
		took := time.Since(start)
		wantErr(t, err, []error{ErrLocked}, path)
		if took > tc.max+500*time.Millisecond {
			t.Errorf("%s: Open gave up after %s, want about %s", tc.name, took, tc.max)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Readers share the file, and keep a writer out.
	r1, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open after the writer closed: %v", err)
	}
	r2, err := Open(path, Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("second read-only Open: %v", err)
	}
	m.check(t, r1)
	m.check(t, r2)
	_, err = Open(path, Options{Timeout: 100 * time.Millisecond})
	wantErr(t, err, []error{ErrLocked})
	for name, err := range map[string]error{
		"Add": r1.Add(entries(4, 1), 4), "SetFormat": r1.SetFormat(1), "Compact": compactErr(r1),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("read-only %s = %v, want ErrReadOnly", name, err)
		}
	}
	if err := errors.Join(r1.Close(), r2.Close()); err != nil {
		t.Fatal(err)
	}
	w, err = Open(path, Options{})
	if err != nil {
		t.Fatalf("Open after the readers closed: %v", err)
	}
	m.check(t, w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "index.db")
	if _, err := Open(path, Options{ReadOnly: true}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only Open of a missing file = %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only Open created the file: %v", err)
	}
	x, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if x.db.NoSync {
		t.Fatal("commits are not synced by default")
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("index file mode = %v, %v; want 0600", fi.Mode(), err)
	}
	if meta, err := x.Meta(); err != nil || meta != (Meta{}) {
		t.Fatalf("Meta() of a new index = %+v, %v", meta, err)
	}
	for _, n := range []int{3, -2, 0} {
		if err := x.SetFormat(n); err != nil {
			t.Fatal(err)
		}
		x = reopen(t, x, path, Options{NoSync: true})
		if meta, err := x.Meta(); err != nil || meta.Format != n {
			t.Fatalf("Format = %d, %v; want %d", meta.Format, err, n)
		}
	}
	if err := x.SetFormat(5); err != nil {
		t.Fatal(err)
	}
	var m model
	m.add(t, x, entries(1, 2))
	if meta, _ := x.Meta(); meta.Format != 5 {
		t.Fatalf("Format after Add = %d, want 5", meta.Format)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Meta(); err == nil {
		t.Fatal("Meta() after Close succeeded")
	}
	if st := x.Stats(); st.Added != 2 || st.FileSize == 0 || st.PageSize == 0 {
		t.Fatalf("Stats() after Close = %+v", st)
	}
	if err := x.Add(entries(3, 1), 3); err == nil {
		t.Fatal("Add after Close succeeded")
	}
}

func TestOpenRefusesOtherLayouts(t *testing.T) {
	dir := t.TempDir()
	foreign := filepath.Join(dir, "foreign.db")
	db, err := bolt.Open(foreign, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(dir, "newer.db")
	x, err := Open(newer, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaLayout, putUint64(layout+1))
	}); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, make([]byte, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{foreign, newer} {
		for _, ro := range []bool{false, true} {
			_, err := Open(path, Options{ReadOnly: ro, NoSync: true})
			wantErr(t, err, []error{ErrLayout}, path)
		}
	}
	if _, err := Open(garbage, Options{NoSync: true}); err == nil {
		t.Fatal("Open of a file of zeros succeeded")
	}
}

func compactErr(x *Index) error {
	_, err := x.Compact(1)
	return err
}

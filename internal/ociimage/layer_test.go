package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

// TestTarLayerIsCanonical: entries come out sorted, with every parent directory, the given
// time and owners whatever order the files are listed in; bad paths are refused.
func TestTarLayerIsCanonical(t *testing.T) {
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 999, time.UTC)
	a := []File{
		{Path: "/b/c/file", Mode: 0o644, Data: []byte("x")},
		{Path: "/a", Mode: 0o755, Data: []byte("y")},
		{Path: "/b", Dir: true, Mode: 0o700, UID: 7, GID: 8},
	}
	b := []File{a[2], a[0], a[1]}
	ta, err := tarLayer(a, mtime)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := tarLayer(b, mtime)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ta, tb) {
		t.Error("the same files in another order give another layer")
	}
	type entry struct {
		name     string
		mode     int64
		uid, gid int
	}
	want := []entry{{"a", 0o755, 0, 0}, {"b/", 0o700, 7, 8}, {"b/c/", 0o755, 0, 0}, {"b/c/file", 0o644, 0, 0}}
	tr := tar.NewReader(bytes.NewReader(ta))
	for i := 0; ; i++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if i != len(want) {
				t.Errorf("%d entries, want %d", i, len(want))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if i >= len(want) || (entry{h.Name, h.Mode, h.Uid, h.Gid}) != want[i] {
			t.Errorf("entry %d: %s %o %d:%d", i, h.Name, h.Mode, h.Uid, h.Gid)
		}
		if !h.ModTime.Equal(mtime.Truncate(time.Second)) {
			t.Errorf("%s: mtime %v", h.Name, h.ModTime)
		}
	}
	for _, bad := range [][]File{
		{{Path: "relative"}},
		{{Path: "/a/../b"}},
		{{Path: "/"}},
		{{Path: "/a"}, {Path: "/a"}},
		{{Path: "/a"}, {Path: "/a/b"}},
	} {
		if _, err := tarLayer(bad, mtime); err == nil {
			t.Errorf("tarLayer(%+v) accepted", bad)
		}
	}
}

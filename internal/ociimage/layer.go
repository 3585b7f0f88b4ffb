package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of a layer: a regular file (Data) or, with Dir set, a directory.
type File struct {
	// Path is absolute in the image (/etc/passwd).
	Path string
	// Mode is the permission bits (0o644, 0o755, 0o1777).
	Mode int64
	// UID and GID own the entry.
	UID, GID int
	// Dir makes the entry a directory; Data is then ignored.
	Dir  bool
	Data []byte
}

// NewLayer returns a gzipped layer of media type mt holding files, built so that the
// same files give the same bytes: entries sorted by path, every parent directory present
// (root-owned, 0755, unless listed), every time set to mtime, no user or group names.
func NewLayer(files []File, mtime time.Time, mt types.MediaType) (v1.Layer, error) {
	data, err := tarLayer(files, mtime)
	if err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(mt))
	if err != nil {
		return nil, fmt.Errorf("making a layer: %w", err)
	}
	return l, nil
}

// tarLayer writes the tar stream of NewLayer.
func tarLayer(files []File, mtime time.Time) ([]byte, error) {
	byPath := map[string]File{}
	for _, f := range files {
		p := path.Clean("/" + f.Path)
		if p == "/" || p != f.Path {
			return nil, fmt.Errorf("layer file %q: want a clean absolute path other than /", f.Path)
		}
		if _, dup := byPath[p]; dup {
			return nil, fmt.Errorf("layer file %q: listed twice", p)
		}
		byPath[p] = f
	}
	for p := range byPath {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = File{Path: d, Dir: true, Mode: 0o755}
			} else if !byPath[d].Dir {
				return nil, fmt.Errorf("layer file %q: its parent %s is a file", p, d)
			}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	mtime = mtime.UTC().Truncate(time.Second)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		f := byPath[p]
		hdr := &tar.Header{
			Name:    strings.TrimPrefix(p, "/"),
			Mode:    f.Mode,
			Uid:     f.UID,
			Gid:     f.GID,
			ModTime: mtime,
		}
		if f.Dir {
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(f.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("writing the tar header of %s: %w", p, err)
		}
		if !f.Dir {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, fmt.Errorf("writing %s into the layer: %w", p, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing the layer's tar stream: %w", err)
	}
	return buf.Bytes(), nil
}

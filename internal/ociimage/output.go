package ociimage

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// The annotations on the index's descriptor in a layout's index.json that name the image:
// OCI's tag-only ref.name, and containerd's full name, which `ctr images import` (and
// `docker load` of an OCI archive) uses to tag what it imports.
const (
	AnnotationRefName       = "org.opencontainers.image.ref.name"
	AnnotationContainerName = "io.containerd.image.name"
)

// Tag returns the image tag for a version: the version with '+' (semver build metadata,
// not allowed in a tag) replaced by '-'.
func Tag(version string) string {
	return strings.ReplaceAll(version, "+", "-")
}

// FullName returns the fully qualified name containerd and the kubelet give ref
// (signet-watcher:v1 → docker.io/library/signet-watcher:v1): the name under which an imported
// image is found by a pod that names ref.
func FullName(ref name.Tag) string {
	reg := ref.RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	return reg + "/" + ref.RepositoryStr() + ":" + ref.TagStr()
}

// WriteLayout writes idx as the only entry of a new OCI image layout at dir (an existing dir
// is replaced), its descriptor annotated with ref's tag (ref.name) and full name
// (io.containerd.image.name).
func WriteLayout(dir string, idx v1.ImageIndex, ref name.Tag) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("writing the OCI layout %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing the OCI layout %s: %w", dir, err)
	}
	err = p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		AnnotationRefName:       ref.TagStr(),
		AnnotationContainerName: FullName(ref),
	}))
	if err != nil {
		return fmt.Errorf("writing the image into the OCI layout %s: %w", dir, err)
	}
	return nil
}

// WriteArchive writes the OCI layout at dir as a tar archive at path (an OCI archive, which
// `ctr images import`, `docker load` since Docker 25 and `podman load` accept): entries sorted,
// every time mtime, owned by 0:0, directories 0755 and files 0644.
func WriteArchive(dir, path string, mtime time.Time) error {
	var entries []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			entries = append(entries, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("archiving the OCI layout %s: %w", dir, err)
	}
	sort.Strings(entries)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("archiving the OCI layout %s: %w", dir, err)
	}
	defer os.Remove(tmp)
	defer f.Close()
	tw := tar.NewWriter(f)
	mtime = mtime.UTC().Truncate(time.Second)
	for _, p := range entries {
		if err := addToArchive(tw, dir, p, mtime); err != nil {
			return fmt.Errorf("archiving the OCI layout %s: %w", dir, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("archiving the OCI layout %s: %w", dir, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("archiving the OCI layout %s: %w", dir, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("archiving the OCI layout %s: %w", dir, err)
	}
	return nil
}

// addToArchive writes the file or directory p (under dir) into tw.
func addToArchive(tw *tar.Writer, dir, p string, mtime time.Time) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return err
	}
	hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Mode: 0o644}
	switch {
	case fi.IsDir():
		hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
	case fi.Mode().IsRegular():
		hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
	default:
		return fmt.Errorf("%s: not a regular file or directory", p)
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}

// Push writes idx, with every image and blob in it, to the registry as ref, with the
// credentials of the default keychain (~/.docker/config.json, the credential helpers it
// names), and returns the index's digest. A registry on localhost or 127.0.0.1 is spoken to
// over plain HTTP.
func Push(ctx context.Context, idx v1.ImageIndex, ref name.Reference) (v1.Hash, error) {
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	return d, nil
}

// ReadLayout returns the image index a layout written by WriteLayout holds, and the
// annotations of its descriptor.
func ReadLayout(dir string) (v1.ImageIndex, map[string]string, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the OCI layout %s: %w", dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the OCI layout %s: %w", dir, err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the OCI layout %s: %w", dir, err)
	}
	if len(m.Manifests) != 1 {
		return nil, nil, fmt.Errorf("reading the OCI layout %s: want one image index in index.json, got %d entries", dir, len(m.Manifests))
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the OCI layout %s: %w", dir, err)
	}
	return idx, m.Manifests[0].Annotations, nil
}

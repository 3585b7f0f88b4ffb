package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

var (
	testCreated = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	amd64       = v1.Platform{OS: "linux", Architecture: "amd64"}
	arm64       = v1.Platform{OS: "linux", Architecture: "arm64"}
)

// testProgram is a small Go program with build info (so the SBOM has something to read),
// built by TestMain with Compile: small, because every build of an image compresses it.
var testProgram string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ociimage-test-")
	if err != nil {
		log.Print(err)
		return 1
	}
	defer os.RemoveAll(dir)
	src := map[string]string{
		"go.mod":  "module example.org/prog\n\ngo 1.22\n",
		"main.go": "package main\n\nfunc main() { println(\"prog\") }\n",
	}
	for f, text := range src {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(text), 0o644); err != nil {
			log.Print(err)
			return 1
		}
	}
	testProgram, err = Compile(context.Background(), GoBuild{Dir: dir, Package: ".", LDFlags: "-s -w"}, amd64, "prog", filepath.Join(dir, "out"))
	if err != nil {
		log.Printf("building the test program: %v", err)
		return 1
	}
	return m.Run()
}

// testSpec is a two-platform spec whose "binaries" are testProgram.
func testSpec(t *testing.T) Spec {
	t.Helper()
	exe := testProgram
	return Spec{
		Name: "prog", Version: "v1.2.3+meta", Commit: "0123456789abcdef", Created: testCreated,
		Source: "https://example.org/prog", License: "Apache-2.0",
		Binaries: []Binary{{Platform: amd64, Path: exe}, {Platform: arm64, Path: exe}},
		CABundle: []byte("-----BEGIN CERTIFICATE-----\nnot really\n-----END CERTIFICATE-----\n"),
	}
}

// files returns the flattened file system of img: path → header and content.
func files(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	hdrs, data := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := "/" + strings.TrimSuffix(h.Name, "/")
		hdrs[p] = h
		if data[p], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
	return hdrs, data
}

func TestBuildScratchImage(t *testing.T) {
	spec := testSpec(t)
	built, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	// Through a layout, as it is shipped: validate reads every blob back and checks every
	// digest, size and diff ID.
	dir := t.TempDir()
	ref, _ := name.NewTag("prog:1")
	if err := WriteLayout(dir, built, ref); err != nil {
		t.Fatal(err)
	}
	idx, _, err := ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(idx); err != nil {
		t.Fatalf("the index does not validate: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 2 || m.Manifests[0].Platform.String() != "linux/amd64" || m.Manifests[1].Platform.String() != "linux/arm64" {
		t.Fatalf("index manifests %+v: want linux/amd64 then linux/arm64", m.Manifests)
	}
	if m.Annotations[LabelVersion] != "v1.2.3+meta" || m.Annotations[LabelCreated] != "2026-01-02T03:04:05Z" || m.Annotations[LabelRevision] != "0123456789abcdef" {
		t.Errorf("index annotations %v", m.Annotations)
	}
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != d.Platform.OS || cf.Architecture != d.Platform.Architecture {
			t.Errorf("%s: config says %s/%s", d.Platform, cf.OS, cf.Architecture)
		}
		c := cf.Config
		if c.User != "65532:65532" || c.WorkingDir != "/" || len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/prog" || len(c.Cmd) != 0 {
			t.Errorf("%s: config user %q, workdir %q, entrypoint %v, cmd %v", d.Platform, c.User, c.WorkingDir, c.Entrypoint, c.Cmd)
		}
		if !cf.Created.Time.Equal(testCreated) || c.Labels[LabelVersion] != "v1.2.3+meta" || c.Labels[LabelTitle] != "prog" {
			t.Errorf("%s: created %v, labels %v", d.Platform, cf.Created, c.Labels)
		}
		for _, h := range cf.History {
			if !h.Created.Time.Equal(testCreated) {
				t.Errorf("%s: history %q created %v", d.Platform, h.CreatedBy, h.Created)
			}
		}
		mf, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if mf.Annotations[LabelSource] != "https://example.org/prog" || mf.MediaType != "application/vnd.oci.image.manifest.v1+json" {
			t.Errorf("%s: manifest %s, annotations %v", d.Platform, mf.MediaType, mf.Annotations)
		}
		hdrs, data := files(t, img)
		exe, _ := os.ReadFile(spec.Binaries[0].Path)
		if h := hdrs["/prog"]; h == nil || h.Mode != 0o755 || h.Uid != 0 || !bytes.Equal(data["/prog"], exe) {
			t.Errorf("%s: /prog %+v: want the binary, 0755, root", d.Platform, h)
		}
		if !strings.Contains(string(data["/etc/passwd"]), "nonroot:x:65532:65532:") || !strings.Contains(string(data["/etc/group"]), "nonroot:x:65532:") {
			t.Errorf("%s: passwd %q, group %q", d.Platform, data["/etc/passwd"], data["/etc/group"])
		}
		if !bytes.Equal(data[CABundlePath], spec.CABundle) {
			t.Errorf("%s: %s = %q", d.Platform, CABundlePath, data[CABundlePath])
		}
		if h := hdrs["/home/nonroot"]; h == nil || h.Uid != UID || h.Gid != GID || h.Typeflag != tar.TypeDir {
			t.Errorf("%s: /home/nonroot %+v: want a directory of 65532:65532", d.Platform, h)
		}
		if h := hdrs["/tmp"]; h == nil || h.Mode != 0o1777 {
			t.Errorf("%s: /tmp %+v: want 01777", d.Platform, h)
		}
		if !strings.Contains(string(data["/sbom/prog.cdx.json"]), `"bomFormat": "CycloneDX"`) {
			t.Errorf("%s: no CycloneDX SBOM at /sbom/prog.cdx.json", d.Platform)
		}
		for p, h := range hdrs {
			if !h.ModTime.Equal(testCreated) || h.Uname != "" || h.Gname != "" {
				t.Errorf("%s: %s: mtime %v, owner names %q/%q: want the commit date and no names", d.Platform, p, h.ModTime, h.Uname, h.Gname)
			}
		}
	}
}

// TestBuildIsReproducible: the same spec, built again at another wall-clock time, gives the
// same index digest; another commit date gives another.
func TestBuildIsReproducible(t *testing.T) {
	spec := testSpec(t)
	digest := func(s Spec) v1.Hash {
		idx, err := Build(s)
		if err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := digest(spec)
	if again := digest(spec); again != first {
		t.Errorf("second build %s, first %s", again, first)
	}
	spec.Created = spec.Created.Add(time.Second)
	if other := digest(spec); other == first {
		t.Error("another commit date gives the same digest: the date is not in the image")
	}
}

// TestLayoutArchiveAndPush: the layout and the archive hold the same index, named for
// containerd; a push to a registry gives the same digest, and the registry serves it.
func TestLayoutArchiveAndPush(t *testing.T) {
	idx, err := Build(testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	dir := filepath.Join(t.TempDir(), "prog")
	ref, _ := name.NewTag("prog:" + Tag("v1.2.3+meta"))
	if err := WriteLayout(dir, idx, ref); err != nil {
		t.Fatal(err)
	}
	got, anns, err := ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := got.Digest(); d != want {
		t.Errorf("layout holds %s, built %s", d, want)
	}
	if anns[AnnotationContainerName] != "docker.io/library/prog:v1.2.3-meta" || anns[AnnotationRefName] != "v1.2.3-meta" {
		t.Errorf("index.json annotations %v", anns)
	}
	if err := WriteArchive(dir, dir+".tar", testCreated); err != nil {
		t.Fatal(err)
	}
	unpacked := filepath.Join(t.TempDir(), "unpacked")
	untar(t, dir+".tar", unpacked)
	fromArchive, _, err := ReadLayout(unpacked)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := fromArchive.Digest(); d != want {
		t.Errorf("archive holds %s, built %s", d, want)
	}
	if err := validate.Index(fromArchive); err != nil {
		t.Errorf("the archive's index does not validate: %v", err)
	}

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	pushRef, err := name.NewTag(strings.TrimPrefix(srv.URL, "http://") + "/signet/prog:v1.2.3-meta")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Push(context.Background(), got, pushRef)
	if err != nil {
		t.Fatal(err)
	}
	if d != want {
		t.Errorf("Push says %s, built %s", d, want)
	}
	pulled, err := remote.Index(pushRef)
	if err != nil {
		t.Fatal(err)
	}
	if pd, _ := pulled.Digest(); pd != want {
		t.Errorf("the registry serves %s, built %s", pd, want)
	}
}

// TestBuildOnRegistryBase: with a registry base, each platform starts from the base's image
// for that platform (its layers first, no root file system layer of ours), and the manifest
// names the base.
func TestBuildOnRegistryBase(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	baseSpec := testSpec(t)
	baseSpec.Name = "base"
	baseIdx, err := Build(baseSpec)
	if err != nil {
		t.Fatal(err)
	}
	baseRef, _ := name.NewTag(host + "/base:1")
	if _, err := Push(context.Background(), baseIdx, baseRef); err != nil {
		t.Fatal(err)
	}

	spec := testSpec(t)
	spec.CABundle = nil
	if spec.Base, err = BaseFromRemote(context.Background(), baseRef.String()); err != nil {
		t.Fatal(err)
	}
	spec.BaseName = baseRef.String()
	idx, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := idx.IndexManifest()
	bm, _ := baseIdx.IndexManifest()
	for i, d := range m.Manifests {
		img, _ := idx.Image(d.Digest)
		base, _ := baseIdx.Image(bm.Manifests[i].Digest)
		layers, _ := img.Layers()
		baseLayers, _ := base.Layers()
		if len(layers) != len(baseLayers)+2 {
			t.Fatalf("%s: %d layers on a base of %d: want the base's, the binary and the SBOM", d.Platform, len(layers), len(baseLayers))
		}
		for j, bl := range baseLayers {
			a, _ := bl.Digest()
			b, _ := layers[j].Digest()
			if a != b {
				t.Errorf("%s: layer %d is %s, the base's is %s", d.Platform, j, b, a)
			}
		}
		mf, _ := img.Manifest()
		if mf.Annotations[LabelBaseName] != baseRef.String() || mf.Annotations[LabelBaseDigest] != bm.Manifests[i].Digest.String() {
			t.Errorf("%s: base annotations %v", d.Platform, mf.Annotations)
		}
		_, data := files(t, img)
		if len(data["/prog"]) == 0 || len(data["/base"]) == 0 {
			t.Errorf("%s: want both the base's /base and our /prog", d.Platform)
		}
	}

	// The same base vendored as an OCI layout gives the same image, less the base's name.
	dir := t.TempDir()
	if err := WriteLayout(dir, baseIdx, baseRef); err != nil {
		t.Fatal(err)
	}
	fromLayout := spec
	fromLayout.BaseName = baseRef.String()
	if fromLayout.Base, err = BaseFromLayout(dir); err != nil {
		t.Fatal(err)
	}
	idx2, err := Build(fromLayout)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := digestOf(t, idx), digestOf(t, idx2); a != b {
		t.Errorf("the base from a layout gives %s, from the registry %s", b, a)
	}

	spec.Binaries = append(spec.Binaries, Binary{Platform: v1.Platform{OS: "linux", Architecture: "s390x"}, Path: spec.Binaries[0].Path})
	if _, err := Build(spec); err == nil || !strings.Contains(err.Error(), "no linux/s390x image") {
		t.Errorf("a platform the base lacks: err = %v", err)
	}
}

func digestOf(t *testing.T, idx v1.ImageIndex) v1.Hash {
	t.Helper()
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

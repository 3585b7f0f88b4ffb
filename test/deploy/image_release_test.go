package deploy

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/signet-pki/signet/internal/ociimage"
)

// TestWatcherImageIsReproducibleAndPushes: `make image-push` builds the image a second time
// from scratch into another folder and pushes it to a registry (one in this process). The
// second build has the same index digest and a byte-identical archive; the push prints that
// digest, and the registry serves the index under REGISTRY/signet-watcher:<tag>.
func TestWatcherImageIsReproducibleAndPushes(t *testing.T) {
	first := watcherImage(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	reg := strings.TrimPrefix(srv.URL, "http://") + "/signet"
	second := runMake(sharedRoot, filepath.Join(sharedRoot, "second"), "image-push", "REGISTRY="+reg)
	if second.err != nil {
		t.Fatalf("make image-push: %v\n%s", second.err, second.output)
	}
	firstIdx, _ := readImage(t, first.layout())
	secondIdx, _ := readImage(t, second.layout())
	want, _ := firstIdx.Digest()
	if got, _ := secondIdx.Digest(); got != want {
		t.Errorf("the second build's index is %s, the first's %s: the build is not reproducible", got, want)
		explainDifference(t, platformImages(t, firstIdx), platformImages(t, secondIdx))
	}
	if a, b := fileSum(t, first.archive()), fileSum(t, second.archive()); a != b {
		t.Errorf("the two builds' archives differ (sha256 %x and %x)", a, b)
	}

	ref, err := name.NewTag(reg + "/signet-watcher:" + imageTag)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(second.output, ref.Context().String()+"@"+want.String()) {
		t.Errorf("make image-push did not print %s@%s:\n%s", ref.Context(), want, second.output)
	}
	pushed, err := remote.Index(ref)
	if err != nil {
		t.Fatalf("the registry does not serve %s: %v", ref, err)
	}
	if got, _ := pushed.Digest(); got != want {
		t.Errorf("the registry serves %s as %s, built %s", ref, got, want)
	}
	if err := validate.Index(pushed, validate.Fast); err != nil {
		t.Errorf("the pushed index does not validate: %v", err)
	}
}

// explainDifference logs which parts of two builds' images differ.
func explainDifference(t *testing.T, first, second map[string]v1.Image) {
	t.Helper()
	for platform, a := range first {
		b := second[platform]
		if b == nil {
			t.Logf("%s: only in the first build", platform)
			continue
		}
		ca, _ := a.ConfigName()
		cb, _ := b.ConfigName()
		if ca != cb {
			ra, _ := a.RawConfigFile()
			rb, _ := b.RawConfigFile()
			t.Logf("%s: configs differ:\n%s\n%s", platform, ra, rb)
		}
		la, _ := a.Layers()
		lb, _ := b.Layers()
		cf, _ := a.ConfigFile()
		for i := range min(len(la), len(lb)) {
			da, _ := la[i].Digest()
			db, _ := lb[i].Digest()
			if da != db && cf != nil && i < len(cf.History) {
				t.Logf("%s: layer %d (%s) differs: %s, %s", platform, i, cf.History[i].CreatedBy, da, db)
			}
		}
	}
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(data)
}

// TestWatcherImageArchive: bin/image/signet-watcher.tar is an OCI archive (the layout as a
// tar: what `ctr -n k8s.io images import` and `docker load` take) that go-containerregistry
// reads back whole: the same index as the layout, every blob matching its digest, and the
// index named docker.io/library/signet-watcher:<tag> for containerd.
func TestWatcherImageArchive(t *testing.T) {
	img := watcherImage(t)
	dir := t.TempDir()
	untarLayout(t, img.archive(), dir)
	for _, f := range []string{"oci-layout", "index.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the archive has no %s: %v", f, err)
		}
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(top); err != nil {
		t.Fatalf("the archive's layout does not validate: %v", err)
	}
	idx, anns := readImage(t, dir)
	layoutIdx, _ := readImage(t, img.layout())
	want, _ := layoutIdx.Digest()
	if got, _ := idx.Digest(); got != want {
		t.Errorf("the archive holds %s, the layout %s", got, want)
	}
	if got := anns[ociimage.AnnotationContainerName]; got != "docker.io/library/signet-watcher:"+imageTag {
		t.Errorf("the archive names the image %q for containerd", got)
	}
	if n := len(platformImages(t, idx)); n != 2 {
		t.Errorf("the archive holds %d platforms, want 2", n)
	}
}

// untarLayout unpacks the archive at path into dir, refusing entries outside it.
func untarLayout(t *testing.T, path, dir string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(target, filepath.Clean(dir)+string(os.PathSeparator)) {
			t.Fatalf("%s: entry %q leaves the folder", path, h.Name)
		}
		if strings.HasSuffix(h.Name, "/") {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWatcherImageSBOM: each image carries a CycloneDX SBOM of its binary at
// /sbom/signet-watcher.cdx.json: the watcher at the version it was stamped with, the Go
// toolchain, and the modules it links at the versions go.mod requires, with their hashes.
func TestWatcherImageSBOM(t *testing.T) {
	img := watcherImage(t)
	idx, _ := readImage(t, img.layout())
	gomod := readFile(t, "go.mod")
	required := map[string]string{}
	for _, mod := range []string{"google.golang.org/grpc", "k8s.io/client-go", "google.golang.org/protobuf"} {
		m := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(mod) + `\s+(v\S+)`).FindStringSubmatch(gomod)
		if m == nil {
			t.Fatalf("go.mod does not require %s", mod)
		}
		required[mod] = m[1]
	}
	for platform, im := range platformImages(t, idx) {
		_, data := imageFiles(t, im)
		doc := data[ociimage.SBOMDir+"/signet-watcher.cdx.json"]
		if len(doc) == 0 {
			t.Fatalf("%s: no %s/signet-watcher.cdx.json in the image", platform, ociimage.SBOMDir)
		}
		var bom cdx.BOM
		if err := cdx.NewBOMDecoder(bytes.NewReader(doc), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
			t.Fatalf("%s: the SBOM is not CycloneDX JSON: %v", platform, err)
		}
		if bom.Metadata == nil || bom.Metadata.Component == nil {
			t.Fatalf("%s: the SBOM names no component", platform)
		}
		main := bom.Metadata.Component
		if main.Name != "signet-watcher" || main.Version != imageVersion ||
			main.PackageURL != "pkg:golang/github.com/signet-pki/signet@"+imageVersion+"?type=module" {
			t.Errorf("%s: the SBOM's component is %s %s (%s): want signet-watcher %s of github.com/signet-pki/signet", platform, main.Name, main.Version, main.PackageURL, imageVersion)
		}
		if bom.Metadata.Timestamp != imageCommitDate {
			t.Errorf("%s: the SBOM is dated %s, want the commit date", platform, bom.Metadata.Timestamp)
		}
		found := map[string]cdx.Component{}
		for _, c := range *bom.Components {
			found[c.Name] = c
		}
		for mod, version := range required {
			c, ok := found[mod]
			if !ok || c.Version != version || c.Hashes == nil || len((*c.Hashes)[0].Value) != 64 {
				t.Errorf("%s: the SBOM has %s as %+v: want version %s (go.mod) with its hash", platform, mod, c, version)
			}
		}
		if _, ok := found["std"]; !ok || len(found) < 50 {
			t.Errorf("%s: the SBOM lists %d components, without the standard library or the module graph", platform, len(found))
		}
	}
}

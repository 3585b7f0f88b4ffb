package integration

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/signet-pki/signet/internal/ociimage"
)

// pauseImage is the sandbox image the tests' containerd runs every pod in (startContainerd's
// sandbox_image): no registry is reachable, so the test node imports one built from
// test/pause.
const pauseImage = "registry.k8s.io/pause:3.10"

// importPauseImage builds the pause image for this machine from test/pause, without a
// daemon (internal/ociimage, as `make image` builds the watcher's), and imports it into the
// containerd whose CRI endpoint is runtimeEndpoint, under pauseImage.
func importPauseImage(t *testing.T, runtimeEndpoint, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	platform := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := ociimage.Compile(ctx, ociimage.GoBuild{Dir: root, Package: "./test/pause"}, platform, "pause", filepath.Join(dir, "pause-build"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := ociimage.Build(ociimage.Spec{Name: "pause", Version: "3.10", Created: time.Unix(0, 0),
		Binaries: []ociimage.Binary{{Platform: platform, Path: bin}}, CABundle: []byte{}})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(pauseImage)
	if err != nil {
		t.Fatal(err)
	}
	layout, archive := filepath.Join(dir, "pause-image"), filepath.Join(dir, "pause-image.tar")
	if err := ociimage.WriteLayout(layout, idx, ref); err != nil {
		t.Fatal(err)
	}
	if err := ociimage.WriteArchive(layout, archive, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	importImage(t, runtimeEndpoint, archive)
}

// importImage imports the OCI archive at path into the containerd of runtimeEndpoint, in the
// namespace the kubelet's CRI uses, as `ctr -n k8s.io images import` does on a node.
func importImage(t *testing.T, runtimeEndpoint, path string) {
	t.Helper()
	ctr, err := exec.LookPath("ctr")
	if err != nil {
		t.Fatalf("ctr, containerd's client, is not installed (it comes with containerd; hack/node-deps.sh): %v", err)
	}
	sock := strings.TrimPrefix(runtimeEndpoint, "unix://")
	out, err := exec.Command(ctr, "--address", sock, "--namespace", "k8s.io", "images", "import", path).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr images import %s: %v\n%s", path, err, out)
	}
	t.Logf("imported %s: %s", filepath.Base(path), strings.TrimSpace(string(out)))
}

// tagByDigest gives the image imported as name (repository:tag, fully qualified) the name
// repository@digest too, which is what the kubelet asks the CRI for when a pod names the image
// by digest: a pull by digest records that name, an import does not.
func tagByDigest(t *testing.T, runtimeEndpoint, name, digest string) string {
	t.Helper()
	repo := name
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		repo = name[:i]
	}
	byDigest := repo + "@" + digest
	sock := strings.TrimPrefix(runtimeEndpoint, "unix://")
	if out, err := exec.Command("ctr", "--address", sock, "--namespace", "k8s.io", "images", "tag", "--force", name, byDigest).CombinedOutput(); err != nil {
		t.Fatalf("ctr images tag %s %s: %v\n%s", name, byDigest, err, out)
	}
	return byDigest
}

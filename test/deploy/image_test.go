// Package deploy tests the deployment artifacts: the watcher's container image, built here by
// `make image` exactly as a user builds it (no container daemon; docker and podman on PATH are
// stubs that fail the test if called), and the server's systemd unit, drop-ins, sysusers.d and
// tmpfiles.d files (deploy/server). Where the systemd tools are installed the tests run them
// too, and say in the log when they could not.
//
// The image is built once per test run (both platforms; the arm64 cross-compile takes a
// minute or so the first time on a machine, seconds after) and shared by the image tests; one
// of them builds it a second time and pushes it to an in-process registry (make image-push),
// to check that the build is reproducible and the push gives the same digest.
package deploy

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/signet-pki/signet/internal/ociimage"
)

// repoRoot is the repository root, two levels above this package.
var repoRoot = filepath.Join("..", "..")

// What the test image is stamped with: make image's VERSION, COMMIT and COMMIT_DATE. The '+'
// of the version's build metadata becomes '-' in the tag.
const (
	imageVersion    = "v0.0.0-image-test+build.1"
	imageTag        = "v0.0.0-image-test-build.1"
	imageCommit     = "0123456789abcdef0123456789abcdef01234567"
	imageCommitDate = "2026-01-02T03:04:05Z"
	watcherPath     = "/signet-watcher"
	hostCABundle    = "/etc/ssl/certs/ca-certificates.crt" // make image's default CA_BUNDLE
)

// builtImage is the output of one make image run.
type builtImage struct {
	dir    string // IMAGE_DIR
	output string // what make printed
	err    error
}

func (b builtImage) layout() string  { return filepath.Join(b.dir, "signet-watcher") }
func (b builtImage) archive() string { return filepath.Join(b.dir, "signet-watcher.tar") }

var (
	sharedOnce  sync.Once
	sharedImage builtImage
	sharedRoot  string // removed by TestMain
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedRoot != "" {
		os.RemoveAll(sharedRoot)
	}
	os.Exit(code)
}

// watcherImage returns the image make image built for this test run, building it on first use.
func watcherImage(t *testing.T) builtImage {
	t.Helper()
	sharedOnce.Do(func() {
		root, err := os.MkdirTemp("", "signet-image-test-")
		if err != nil {
			sharedImage.err = err
			return
		}
		sharedRoot = root
		sharedImage = runMake(root, filepath.Join(root, "first"), "image")
	})
	if sharedImage.err != nil {
		t.Fatalf("make image: %v\n%s", sharedImage.err, sharedImage.output)
	}
	return sharedImage
}

// runMake runs `make <target>` in the repository with the test's version, writing the image to
// dir, with docker and podman on PATH replaced by stubs that leave a mark in root: a call to
// either is an error.
func runMake(root, dir string, target string, vars ...string) builtImage {
	b := builtImage{dir: dir}
	stubs := filepath.Join(root, "stubs")
	mark := filepath.Join(root, "container-tool-called")
	if err := os.MkdirAll(stubs, 0o755); err != nil {
		b.err = err
		return b
	}
	for _, tool := range []string{"docker", "podman", "buildah"} {
		script := fmt.Sprintf("#!/bin/sh\necho %s \"$@\" >> %s\nexit 1\n", tool, mark)
		if err := os.WriteFile(filepath.Join(stubs, tool), []byte(script), 0o755); err != nil {
			b.err = err
			return b
		}
	}
	args := append([]string{"-C", repoRoot, "--no-print-directory", target,
		"VERSION=" + imageVersion, "COMMIT=" + imageCommit, "COMMIT_DATE=" + imageCommitDate,
		"IMAGE_DIR=" + dir}, vars...)
	cmd := exec.Command("make", args...)
	// An outer make (make test) passes its command-line variables down in MAKEFLAGS: drop them,
	// so the image is built as a user's make image builds it.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "MAKEFLAGS" && k != "MFLAGS" && k != "MAKELEVEL" && k != "PATH" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+stubs+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	b.output, b.err = string(out), err
	if called, rerr := os.ReadFile(mark); rerr == nil {
		b.err = errors.Join(b.err, fmt.Errorf("make %s called a container tool: %s", target, called))
	}
	return b
}

// readImage returns the index in the layout at dir and its index.json annotations.
func readImage(t *testing.T, dir string) (v1.ImageIndex, map[string]string) {
	t.Helper()
	idx, anns, err := ociimage.ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	return idx, anns
}

// platformImages returns the images of idx by platform ("linux/amd64").
func platformImages(t *testing.T, idx v1.ImageIndex) map[string]v1.Image {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]v1.Image{}
	for _, d := range m.Manifests {
		if d.Platform == nil {
			t.Fatalf("index entry %s has no platform", d.Digest)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		out[d.Platform.String()] = img
	}
	return out
}

// flattened caches imageFiles by image digest: the images are large and several tests read
// them.
var flattened sync.Map // v1.Hash → imageTree

type imageTree struct {
	hdrs map[string]*tar.Header
	data map[string][]byte
}

// imageFiles returns the flattened file system of img: path → header and content.
func imageFiles(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := flattened.Load(d); ok {
		tree := v.(imageTree)
		return tree.hdrs, tree.data
	}
	hdrs, data := extractImage(t, img)
	flattened.Store(d, imageTree{hdrs, data})
	return hdrs, data
}

func extractImage(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	hdrs, data := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hdrs, data
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
}

// TestWatcherImageIndex: make image writes an OCI layout holding one index for linux/amd64 and
// linux/arm64, named for containerd as the kubelet resolves signet-watcher:<tag>, each image
// running /signet-watcher as 65532:65532 from /, with the version, commit and commit date it
// was built from in its labels and annotations.
func TestWatcherImageIndex(t *testing.T) {
	img := watcherImage(t)
	idx, anns := readImage(t, img.layout())
	// Fast: the manifests and configs (TestWatcherImageArchive reads every layer back).
	if err := validate.Index(idx, validate.Fast); err != nil {
		t.Fatalf("the layout's index does not validate: %v", err)
	}
	want := "docker.io/library/signet-watcher:" + imageTag
	if anns[ociimage.AnnotationContainerName] != want || anns[ociimage.AnnotationRefName] != imageTag {
		t.Errorf("index.json names the image %v: want %s (tag %s)", anns, want, imageTag)
	}
	digest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if file, _ := os.ReadFile(img.layout() + ".digest"); strings.TrimSpace(string(file)) != digest.String() {
		t.Errorf("signet-watcher.digest says %q, the index is %s", file, digest)
	}
	if !strings.Contains(img.output, digest.String()) {
		t.Errorf("make image did not print the digest %s:\n%s", digest, img.output)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{
		ociimage.LabelVersion:  imageVersion,
		ociimage.LabelRevision: imageCommit,
		ociimage.LabelCreated:  imageCommitDate,
		ociimage.LabelTitle:    "signet-watcher",
		ociimage.LabelSource:   "https://github.com/signet-pki/signet",
		ociimage.LabelLicenses: "Apache-2.0",
	}
	checkLabels(t, "the index's annotations", m.Annotations, labels)
	images := platformImages(t, idx)
	if len(images) != 2 || images["linux/amd64"] == nil || images["linux/arm64"] == nil {
		t.Fatalf("platforms %v: want linux/amd64 and linux/arm64", keys(images))
	}
	for platform, im := range images {
		cf, err := im.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS+"/"+cf.Architecture != platform {
			t.Errorf("%s: the config says %s/%s", platform, cf.OS, cf.Architecture)
		}
		c := cf.Config
		if c.User != "65532:65532" || c.WorkingDir != "/" || strings.Join(c.Entrypoint, " ") != watcherPath || len(c.Cmd) != 0 {
			t.Errorf("%s: user %q, working dir %q, entrypoint %v, cmd %v: want 65532:65532, /, [%s], none", platform, c.User, c.WorkingDir, c.Entrypoint, c.Cmd, watcherPath)
		}
		if got := cf.Created.UTC().Format("2006-01-02T15:04:05Z"); got != imageCommitDate {
			t.Errorf("%s: created %s, want the commit date %s", platform, got, imageCommitDate)
		}
		checkLabels(t, platform+" config labels", c.Labels, labels)
		mf, err := im.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		checkLabels(t, platform+" manifest annotations", mf.Annotations, labels)
	}
}

func checkLabels(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q", what, k, got[k], v)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestWatcherImageFiles: each image holds the static watcher for its own architecture (built
// with CGO_ENABLED=0, -trimpath and the daemons' GODEBUG default), the CA bundle of Debian's
// ca-certificates, passwd and group entries for 65532, and nothing dated other than the
// commit.
func TestWatcherImageFiles(t *testing.T) {
	img := watcherImage(t)
	idx, _ := readImage(t, img.layout())
	ca, err := os.ReadFile(hostCABundle)
	if err != nil {
		t.Fatalf("the CA bundle make image takes (Debian: apt-get install ca-certificates): %v", err)
	}
	godebug := regexp.MustCompile(`(?m)^DAEMON_GODEBUG\s*:?=\s*(\S+)`).FindStringSubmatch(readFile(t, "Makefile"))
	if godebug == nil {
		t.Fatal("Makefile: no DAEMON_GODEBUG")
	}
	machine := map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64}
	for platform, im := range platformImages(t, idx) {
		hdrs, data := imageFiles(t, im)
		if h := hdrs[watcherPath]; h == nil || h.Typeflag != tar.TypeReg || h.Mode != 0o755 || h.Uid != 0 {
			t.Fatalf("%s: %s %+v: want a root-owned 0755 file", platform, watcherPath, h)
		}
		bin := filepath.Join(t.TempDir(), "signet-watcher")
		if err := os.WriteFile(bin, data[watcherPath], 0o755); err != nil {
			t.Fatal(err)
		}
		checkStatic(t, bin, machine[platform])
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" || settings["GOOS"]+"/"+settings["GOARCH"] != platform {
			t.Errorf("%s: build settings %v: want CGO_ENABLED=0, -trimpath=true, %s", platform, settings, platform)
		}
		// -trimpath leaves -ldflags out of the build settings: look for the GODEBUG default
		// (a string the runtime reads) in the binary itself.
		if !bytes.Contains(data[watcherPath], []byte(godebug[1])) {
			t.Errorf("%s: the binary lacks the daemons' GODEBUG default %s", platform, godebug[1])
		}
		if !bytes.Equal(data[ociimage.CABundlePath], ca) {
			t.Errorf("%s: %s is not %s", platform, ociimage.CABundlePath, hostCABundle)
		}
		if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(data[ociimage.CABundlePath]) {
			t.Errorf("%s: no certificate in %s", platform, ociimage.CABundlePath)
		}
		if !strings.Contains(string(data["/etc/passwd"]), "nonroot:x:65532:65532:") || !strings.Contains(string(data["/etc/group"]), "nonroot:x:65532:") {
			t.Errorf("%s: /etc/passwd %q, /etc/group %q: want nonroot 65532", platform, data["/etc/passwd"], data["/etc/group"])
		}
		for p, h := range hdrs {
			if got := h.ModTime.UTC().Format("2006-01-02T15:04:05Z"); got != imageCommitDate {
				t.Errorf("%s: %s dated %s, want the commit date", platform, p, got)
			}
		}
	}
}

// checkStatic fails unless the ELF file at path is for machine and has no interpreter, no
// dynamic section and no shared libraries.
func checkStatic(t *testing.T, path string, machine elf.Machine) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != machine {
		t.Errorf("%s is for %v, want %v", path, f.Machine, machine)
	}
	for _, p := range f.Progs {
		switch p.Type {
		case elf.PT_INTERP:
			t.Errorf("%s has an ELF interpreter: not a static binary", path)
		case elf.PT_DYNAMIC:
			t.Errorf("%s has a dynamic section: not a static binary", path)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v: not a static binary", path, libs)
	}
}

// TestWatcherImageRuns: the watcher taken out of the image for this machine's architecture
// runs, and says the version and commit the image was built with.
func TestWatcherImageRuns(t *testing.T) {
	img := watcherImage(t)
	idx, _ := readImage(t, img.layout())
	platform := "linux/" + runtime.GOARCH
	im := platformImages(t, idx)[platform]
	if im == nil {
		t.Fatalf("the image has no %s variant to run here", platform)
	}
	_, data := imageFiles(t, im)
	bin := filepath.Join(t.TempDir(), "signet-watcher")
	if err := os.WriteFile(bin, data[watcherPath], 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(imageVersion)) || !bytes.Contains(out, []byte(imageCommit)) || !bytes.Contains(out, []byte(imageCommitDate)) {
		t.Errorf("%s --version = %q, %v: want the version, commit and date make image stamped", watcherPath, out, err)
	}
}

// readFile reads a file of the repository.
func readFile(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// TestWatcherDeploymentMatchesTheImage: deploy/watcher/deployment.yaml runs the image make
// image names (IMAGE_REPO), as the image's user, with a read-only root file system and the
// image's own entrypoint.
func TestWatcherDeploymentMatchesTheImage(t *testing.T) {
	img := watcherImage(t)
	idx, _ := readImage(t, img.layout())
	cf, err := platformImages(t, idx)["linux/amd64"].ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict([]byte(readFile(t, "deploy/watcher/deployment.yaml")), &d); err != nil {
		t.Fatalf("deploy/watcher/deployment.yaml: %v", err)
	}
	psc := d.Spec.Template.Spec.SecurityContext
	user := ""
	if psc != nil && psc.RunAsUser != nil && psc.RunAsGroup != nil {
		user = fmt.Sprintf("%d:%d", *psc.RunAsUser, *psc.RunAsGroup)
	}
	if user != cf.Config.User {
		t.Errorf("deployment.yaml: pod runs as %q, the image's user is %q", user, cf.Config.User)
	}
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("deployment.yaml: want runAsNonRoot: true")
	}
	repo := regexp.MustCompile(`(?m)^IMAGE_REPO\s*\?=\s*(\S+)`).FindStringSubmatch(readFile(t, "Makefile"))
	if repo == nil {
		t.Fatal("Makefile: no IMAGE_REPO")
	}
	var watcher bool
	for _, c := range d.Spec.Template.Spec.Containers {
		if imageRepository(c.Image) != repo[1] {
			continue
		}
		watcher = true
		if len(c.Command) > 0 {
			t.Errorf("deployment.yaml: container %s sets command %v: the image's entrypoint %v starts the watcher", c.Name, c.Command, cf.Config.Entrypoint)
		}
		if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("deployment.yaml: container %s: want readOnlyRootFilesystem: true (the image writes nothing)", c.Name)
		}
	}
	if !watcher {
		t.Errorf("deployment.yaml: no container runs %s, the image make image names", repo[1])
	}
}

// imageRepository returns the repository of an image reference, without tag or digest.
func imageRepository(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}

package deploy

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// TestWatcherDeploymentMatchesTheImage: deploy/watcher/deployment.yaml runs the image make
// image tags, as the image's user, with a read-only root file system and the image's own
// entrypoint.
func TestWatcherDeploymentMatchesTheImage(t *testing.T) {
	df := loadWatcherDockerfile(t)
	uid, gid := imageUser(t, df.stages[len(df.stages)-1])
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict([]byte(readFile(t, "deploy/watcher/deployment.yaml")), &d); err != nil {
		t.Fatalf("deploy/watcher/deployment.yaml: %v", err)
	}
	psc := d.Spec.Template.Spec.SecurityContext
	if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser != int64(uid) || psc.RunAsGroup == nil || *psc.RunAsGroup != int64(gid) {
		t.Errorf("deployment.yaml: pod securityContext %+v: want runAsUser %d, runAsGroup %d (the image's USER)", psc, uid, gid)
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
		if c.Image != repo[1]+":latest" {
			continue
		}
		watcher = true
		if len(c.Command) > 0 {
			t.Errorf("deployment.yaml: container %s sets command %v: the image's ENTRYPOINT starts the watcher", c.Name, c.Command)
		}
		if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("deployment.yaml: container %s: want readOnlyRootFilesystem: true (the image writes nothing)", c.Name)
		}
	}
	if !watcher {
		t.Errorf("deployment.yaml: no container runs %s:latest, the image make image tags", repo[1])
	}
}

// TestWatcherImageContextBuilds checks, without a container daemon, what the Dockerfile's build
// stage promises. On a copy of the repository as the Dockerfile's ignore file
// (Dockerfile.dockerignore) admits it, every package signet-watcher needs must be there (go
// list), and the Dockerfile's own RUN … go build, run there with the build arguments make image
// passes, must build a binary that is static (no ELF interpreter, no dynamic section, no shared
// library; CGO_ENABLED=0 and -trimpath in its build settings), carries the GODEBUG default, and
// reports the version and commit it was given. The runtime stage must copy that binary (the go
// build's -o) and start it (ENTRYPOINT).
//
// The build is a static -trimpath one, which shares nothing with the build cache of go test
// -race: the first run on a machine compiles every dependency again (three to five minutes on
// two cores); -trimpath keeps the cache keys free of the copy's path, so later runs take
// seconds.
func TestWatcherImageContextBuilds(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go on PATH: the build context cannot be checked")
	}
	df := loadWatcherDockerfile(t)
	run := goBuild(t, df)
	built := checkBinaryPath(t, df, run)
	ignore := readFile(t, watcherDockerfile+".dockerignore")
	ctx := t.TempDir()
	n := copyContext(t, repoRoot, ctx, parseDockerignore(ignore))
	t.Logf("build context: %d files admitted by %s.dockerignore", n, watcherDockerfile)
	list := exec.Command(goBin, "list", "-e", "-deps", "-f", "{{with .Error}}{{.}}{{end}}{{with .DepsErrors}}{{.}}{{end}}", "./cmd/signet-watcher")
	list.Dir = ctx
	list.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	if b, err := list.CombinedOutput(); err != nil || len(bytes.TrimSpace(b)) > 0 {
		t.Fatalf("go list ./cmd/signet-watcher in the build context: %v\n%s", err, b)
	}

	// The build writes to a directory of the build stage (/out): here, to a temporary one.
	out := t.TempDir()
	script := strings.ReplaceAll(stripRunFlags(run.args), path.Dir(built)+"/", out+"/")
	godebug, _ := df.stages[0].argDefault("DAEMON_GODEBUG")
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = ctx
	cmd.Env = append(os.Environ(),
		"PATH="+filepath.Dir(goBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"VERSION=v0.0.0-image-test", "COMMIT=0123456789abcdef0123456789abcdef01234567", "COMMIT_DATE=2026-01-02T03:04:05Z",
		"DAEMON_GODEBUG="+godebug, "TARGETOS="+runtime.GOOS, "TARGETARCH="+runtime.GOARCH, "GOTOOLCHAIN=local")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s:%d: the go build fails on the context the ignore file admits: %v\n%s", watcherDockerfile, run.line, err, b)
	}
	bin := filepath.Join(out, path.Base(built))
	checkStatic(t, bin)
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("build settings %v: want CGO_ENABLED=0 and -trimpath=true", settings)
	}
	// -trimpath leaves -ldflags out of the build settings: look for the GODEBUG default (a
	// string the runtime reads) in the binary itself.
	if data, err := os.ReadFile(bin); err != nil || !bytes.Contains(data, []byte(godebug)) {
		t.Errorf("%s lacks the GODEBUG default %s (-X=runtime.godebugDefault) (%v)", bin, godebug, err)
	}
	v, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !bytes.Contains(v, []byte("v0.0.0-image-test")) || !bytes.Contains(v, []byte("0123456789ab")) {
		t.Errorf("signet-watcher --version = %q, %v: want the version and commit passed as build arguments", v, err)
	}
}

// stripRunFlags drops a RUN's leading --mount=… (and other --flag) options, leaving the
// shell command.
func stripRunFlags(args string) string {
	for strings.HasPrefix(args, "--") {
		_, rest, _ := strings.Cut(args, " ")
		args = strings.TrimSpace(rest)
	}
	return args
}

// checkBinaryPath returns the file the go build writes (its -o, an absolute path outside the
// build context), and fails unless the runtime stage copies it from the build stage and its
// ENTRYPOINT starts the copy.
func checkBinaryPath(t *testing.T, df *dockerfile, run instruction) string {
	t.Helper()
	out := regexp.MustCompile(`(?:^|\s)-o\s+(\S+)`).FindStringSubmatch(run.args)
	if out == nil || !path.IsAbs(out[1]) || path.Dir(out[1]) == "/" {
		t.Fatalf("%s:%d: the go build's output (-o) %v: want a file in a directory of its own, by absolute path", watcherDockerfile, run.line, out)
	}
	final := df.stages[len(df.stages)-1]
	copies := final.all("COPY")
	if len(copies) != 1 {
		t.Fatalf("%s: want one COPY in the runtime stage, got %d", watcherDockerfile, len(copies))
	}
	var paths []string
	for _, f := range strings.Fields(copies[0].args) {
		if !strings.HasPrefix(f, "--") {
			paths = append(paths, f)
		}
	}
	if len(paths) != 2 || paths[0] != out[1] {
		t.Errorf("%s:%d: COPY %s: want the go build's output %s copied", watcherDockerfile, copies[0].line, copies[0].args, out[1])
	}
	ep := final.all("ENTRYPOINT")
	if len(ep) != 1 || len(paths) != 2 || !strings.HasPrefix(ep[0].args, `["`+paths[1]+`"`) {
		t.Errorf("%s: ENTRYPOINT %v does not start the binary copied to %v", watcherDockerfile, ep, paths)
	}
	return out[1]
}

// checkStatic fails unless the ELF file at path has no interpreter, no dynamic section and no
// shared libraries.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
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

// ignoreRule is one line of a .dockerignore file.
type ignoreRule struct {
	re     *regexp.Regexp
	negate bool
}

// parseDockerignore compiles the rules of a .dockerignore file as docker reads them: one
// pattern a line, # comments, ! re-includes, * and ? within one path element, ** across
// any number of them, and a pattern matching a folder matching everything in it.
func parseDockerignore(text string) []ignoreRule {
	var rules []ignoreRule
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := ignoreRule{}
		if p, ok := strings.CutPrefix(line, "!"); ok {
			r.negate, line = true, p
		}
		line = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(line)), "/")
		var re strings.Builder
		for i := 0; i < len(line); i++ {
			switch c := line[i]; {
			case strings.HasPrefix(line[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(line[i:], "**"):
				re.WriteString(".*")
				i++
			case c == '*':
				re.WriteString("[^/]*")
			case c == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		r.re = regexp.MustCompile("^" + re.String() + "(/.*)?$")
		rules = append(rules, r)
	}
	return rules
}

// excluded says whether rules keep rel (slash-separated, relative to the context) out of
// the build context: the last rule that matches it decides.
func excluded(rules []ignoreRule, rel string) bool {
	out := false
	for _, r := range rules {
		if r.re.MatchString(rel) {
			out = !r.negate
		}
	}
	return out
}

// copyContext copies the files under src that rules admit to dst and returns how many. .git
// and .cache are not walked (the rules must exclude them: checked).
func copyContext(t *testing.T, src, dst string, rules []ignoreRule) int {
	t.Helper()
	for _, big := range []string{".git/config", ".cache/kube"} {
		if !excluded(rules, big) {
			t.Errorf("%s.dockerignore admits %s into the build context", watcherDockerfile, big)
		}
	}
	n := 0
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == ".git" || rel == ".cache" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || excluded(rules, rel) {
			return nil
		}
		n++
		return copyFile(path, filepath.Join(dst, rel))
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
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

// TestDockerignoreRules pins the matcher to docker's behaviour on the patterns the watcher's
// ignore file uses.
func TestDockerignoreRules(t *testing.T) {
	rules := parseDockerignore("*\n!go.mod\n!**/*.go\n")
	for rel, want := range map[string]bool{
		"go.mod":                  false,
		"go.sum":                  true,
		"main.go":                 false,
		"cmd/signet-watcher/x.go": false,
		"bin/signet-watcher":      true,
		"README.md":               true,
		"docs/x.md":               true,
		".git/HEAD":               true,
	} {
		if got := excluded(rules, rel); got != want {
			t.Errorf("excluded(%q) = %v, want %v", rel, got, want)
		}
	}
}

// Package deploy tests the deployment files in deploy/: the watcher's container image
// definition (deploy/watcher/Dockerfile) and the server's systemd unit, drop-ins, sysusers.d
// and tmpfiles.d files (deploy/server). Each file is parsed and its invariants checked on any
// machine, the image's go build run as the Dockerfile gives it (no container daemon needed);
// where the tools are installed (systemd-analyze, systemd-sysusers, systemd-tmpfiles) the
// tests run them too, and say in the log when they could not.
package deploy

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the repository root, two levels above this package.
var repoRoot = filepath.Join("..", "..")

const (
	watcherDockerfile = "deploy/watcher/Dockerfile"
	versionPkg        = "github.com/signet-pki/signet/internal/version"
)

// instruction is one Dockerfile instruction: its keyword (upper case), its arguments with
// continuation lines joined, and the line it starts on.
type instruction struct {
	cmd  string
	args string
	line int
}

// stage is one FROM … stage of a Dockerfile.
type stage struct {
	from  string // the base image reference
	name  string // AS name, if any
	instr []instruction
}

// dockerfile is a parsed Dockerfile: the global ARGs before the first FROM, then the stages.
type dockerfile struct {
	globalArgs map[string]string
	stages     []stage
}

// parseDockerfile reads the Dockerfile at path: comments and blank lines dropped, lines ending
// in a backslash joined to the next, instructions grouped by stage. Enough of the format for
// the checks here (no heredocs, no escape directive).
func parseDockerfile(path string) (*dockerfile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	df := &dockerfile{globalArgs: map[string]string{}}
	sc := bufio.NewScanner(f)
	var cont strings.Builder
	start, n := 0, 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cont.Len() == 0) {
			continue
		}
		if cont.Len() == 0 {
			start = n
		}
		if body, ok := strings.CutSuffix(line, "\\"); ok {
			cont.WriteString(body + " ")
			continue
		}
		cont.WriteString(line)
		text := cont.String()
		cont.Reset()
		cmd, args, _ := strings.Cut(text, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		if err := df.add(in); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, in.line, err)
		}
	}
	if cont.Len() > 0 {
		return nil, fmt.Errorf("%s: ends in a line continuation", path)
	}
	return df, sc.Err()
}

func (df *dockerfile) add(in instruction) error {
	if in.cmd == "FROM" {
		fields := strings.Fields(in.args)
		var ref, name []string
		for i := 0; i < len(fields); i++ {
			switch {
			case strings.HasPrefix(fields[i], "--"):
			case strings.EqualFold(fields[i], "AS") && i+1 < len(fields):
				name = append(name, fields[i+1])
				i++
			default:
				ref = append(ref, fields[i])
			}
		}
		if len(ref) != 1 {
			return fmt.Errorf("FROM %s: want one image", in.args)
		}
		df.stages = append(df.stages, stage{from: ref[0], name: strings.Join(name, "")})
		return nil
	}
	if len(df.stages) == 0 {
		if in.cmd != "ARG" {
			return fmt.Errorf("%s before the first FROM", in.cmd)
		}
		k, v, _ := strings.Cut(in.args, "=")
		df.globalArgs[k] = v
		return nil
	}
	last := &df.stages[len(df.stages)-1]
	last.instr = append(last.instr, in)
	return nil
}

// all returns the stage's instructions with keyword cmd.
func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.instr {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// argDefault returns the default of ARG name declared in the stage.
func (s stage) argDefault(name string) (string, bool) {
	for _, in := range s.all("ARG") {
		if k, v, _ := strings.Cut(in.args, "="); k == name {
			return v, true
		}
	}
	return "", false
}

func loadWatcherDockerfile(t *testing.T) *dockerfile {
	t.Helper()
	df, err := parseDockerfile(filepath.Join(repoRoot, watcherDockerfile))
	if err != nil {
		t.Fatal(err)
	}
	if len(df.stages) < 2 {
		t.Fatalf("%s: want a multi-stage build (a build stage and a runtime stage), got %d stage(s)", watcherDockerfile, len(df.stages))
	}
	return df
}

// goBuild returns the build stage's RUN that runs `go build`, or fails.
func goBuild(t *testing.T, df *dockerfile) instruction {
	t.Helper()
	var found []instruction
	for _, s := range df.stages[:len(df.stages)-1] {
		for _, in := range s.all("RUN") {
			if strings.Contains(in.args, "go build") {
				found = append(found, in)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: want exactly one RUN … go build in the build stage(s), got %d", watcherDockerfile, len(found))
	}
	return found[0]
}

// TestWatcherDockerfileBuildsStatic: the binary is built static and reproducible
// (CGO_ENABLED=0, -trimpath, no VCS stamping of a context without .git), with the version
// ldflags make build sets through internal/version and the daemons' GODEBUG default.
func TestWatcherDockerfileBuildsStatic(t *testing.T) {
	df := loadWatcherDockerfile(t)
	run := goBuild(t, df)
	for _, want := range []string{
		"CGO_ENABLED=0",
		"-trimpath",
		"-buildvcs=false",
		"./cmd/signet-watcher",
		"-X=" + versionPkg + ".version=$VERSION",
		"-X=" + versionPkg + ".commit=$COMMIT",
		"-X=" + versionPkg + ".commitDate=$COMMIT_DATE",
		"-X=runtime.godebugDefault=",
		"$DAEMON_GODEBUG",
	} {
		if !strings.Contains(run.args, want) {
			t.Errorf("%s:%d: the go build lacks %q", watcherDockerfile, run.line, want)
		}
	}
	if regexp.MustCompile(`CGO_ENABLED=[^0]`).MatchString(run.args) {
		t.Errorf("%s:%d: CGO_ENABLED set to something other than 0", watcherDockerfile, run.line)
	}
}

// TestWatcherDockerfileRuntimeStage: the image the watcher runs in is distroless static or
// scratch, runs as a numeric non-root user, starts the binary directly (exec form, no shell:
// distroless has none) and needs nothing written to its root file system.
func TestWatcherDockerfileRuntimeStage(t *testing.T) {
	df := loadWatcherDockerfile(t)
	final := df.stages[len(df.stages)-1]
	if !(final.from == "scratch" || strings.HasPrefix(final.from, "gcr.io/distroless/static")) {
		t.Errorf("%s: final stage FROM %s: want gcr.io/distroless/static… or scratch", watcherDockerfile, final.from)
	}
	uid, gid := imageUser(t, final)
	if uid == 0 || gid == 0 {
		t.Errorf("%s: USER %d:%d: want a non-root user and group", watcherDockerfile, uid, gid)
	}
	ep := final.all("ENTRYPOINT")
	if len(ep) != 1 || !strings.HasPrefix(ep[0].args, `["/`) {
		t.Errorf("%s: want one ENTRYPOINT in exec form starting an absolute path, got %v", watcherDockerfile, ep)
	}
	for _, cmd := range []string{"RUN", "VOLUME", "ADD"} {
		if in := final.all(cmd); len(in) > 0 {
			t.Errorf("%s:%d: %s in the runtime stage (no shell there; nothing to write or fetch)", watcherDockerfile, in[0].line, cmd)
		}
	}
	copies := final.all("COPY")
	if len(copies) != 1 || !strings.Contains(copies[0].args, "--from=") || !strings.HasSuffix(copies[0].args, "/signet-watcher") {
		t.Errorf("%s: the runtime stage should copy only the binary from the build stage, got %v", watcherDockerfile, copies)
	}
}

// imageUser returns the runtime stage's last USER as numeric uid and gid, failing the test
// for a name (the kubelet cannot check runAsNonRoot against a name) or a missing group.
func imageUser(t *testing.T, s stage) (uid, gid int) {
	t.Helper()
	users := s.all("USER")
	if len(users) == 0 {
		t.Fatalf("%s: no USER in the runtime stage: the image would run as root", watcherDockerfile)
	}
	u := users[len(users)-1]
	us, gs, ok := strings.Cut(u.args, ":")
	uid, err1 := strconv.Atoi(us)
	gid, err2 := strconv.Atoi(gs)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("%s:%d: USER %s: want numeric UID:GID", watcherDockerfile, u.line, u.args)
	}
	return uid, gid
}

// TestWatcherDockerfileFollowsTheRepository: the Go image follows go.mod's go line, the
// GODEBUG default is the Makefile's, and make image passes every build argument the build
// stage declares for the version.
func TestWatcherDockerfileFollowsTheRepository(t *testing.T) {
	df := loadWatcherDockerfile(t)
	gomod := readFile(t, "go.mod")
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod: no go line")
	}
	if got := df.globalArgs["GO_VERSION"]; got != m[1] {
		t.Errorf("%s: ARG GO_VERSION=%s, go.mod says go %s", watcherDockerfile, got, m[1])
	}
	if df.stages[0].from != "golang:${GO_VERSION}" {
		t.Errorf("%s: build stage FROM %s: want golang:${GO_VERSION}", watcherDockerfile, df.stages[0].from)
	}
	makefile := readFile(t, "Makefile")
	mk := regexp.MustCompile(`(?m)^DAEMON_GODEBUG\s*:?=\s*(\S+)`).FindStringSubmatch(makefile)
	if mk == nil {
		t.Fatal("Makefile: no DAEMON_GODEBUG")
	}
	if got, _ := df.stages[0].argDefault("DAEMON_GODEBUG"); got != mk[1] {
		t.Errorf("%s: ARG DAEMON_GODEBUG=%s, the Makefile's is %s", watcherDockerfile, got, mk[1])
	}
	for _, arg := range []string{"VERSION", "COMMIT", "COMMIT_DATE", "DAEMON_GODEBUG"} {
		if _, ok := df.stages[0].argDefault(arg); !ok {
			t.Errorf("%s: the build stage declares no ARG %s", watcherDockerfile, arg)
		}
		if !strings.Contains(makefile, "--build-arg "+arg+"=$("+arg+")") {
			t.Errorf("Makefile: make image does not pass --build-arg %s=$(%s)", arg, arg)
		}
	}
	if !strings.Contains(makefile, "-f $(WATCHER_DOCKERFILE)") || !strings.Contains(makefile, "WATCHER_DOCKERFILE := "+watcherDockerfile) {
		t.Errorf("Makefile: make image does not build %s", watcherDockerfile)
	}
}

func readFile(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

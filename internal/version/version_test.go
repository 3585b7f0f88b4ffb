package version

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func buildInfo(mainVersion string, settings ...string) *debug.BuildInfo {
	bi := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/signet-pki/signet", Version: mainVersion}}
	for i := 0; i+1 < len(settings); i += 2 {
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
	}
	return bi
}

const (
	rev  = "abc1234def5678abc1234def5678abc1234def56"
	rev2 = "0000000111111122222223333333444444455555"
)

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		linkVersion, linkCommit string
		linkDate                string
		bi                      *debug.BuildInfo
		version, commit, date   string
		modified                bool
	}{
		{
			name:        "make build: link-time values",
			linkVersion: "v0.3.0-12-gabc1234", linkCommit: rev, linkDate: "2025-06-01T10:00:00Z",
			bi:      buildInfo("v0.0.0-20250601100000-abc1234def56", "vcs.revision", rev, "vcs.time", "2025-06-01T10:00:00Z", "vcs.modified", "false"),
			version: "v0.3.0-12-gabc1234", commit: rev, date: "2025-06-01T10:00:00Z",
		},
		{
			name:        "make build in a dirty checkout",
			linkVersion: "v0.3.0-dirty", linkCommit: rev,
			bi:      buildInfo("(devel)", "vcs.revision", rev, "vcs.time", "2025-06-01T10:00:00Z", "vcs.modified", "true"),
			version: "v0.3.0-dirty", commit: rev, date: "2025-06-01T10:00:00Z", modified: true,
		},
		{
			name:        "untracked files: git describe is clean, the toolchain is not",
			linkVersion: "v0.3.0", linkCommit: rev,
			bi:      buildInfo("(devel)", "vcs.revision", rev, "vcs.modified", "true"),
			version: "v0.3.0", commit: rev, modified: true,
		},
		{
			name:        "link-time commit differs from the toolchain's: the toolchain's settings are not used",
			linkVersion: "v0.3.0", linkCommit: rev2,
			bi:      buildInfo("(devel)", "vcs.revision", rev, "vcs.time", "2025-06-01T10:00:00Z", "vcs.modified", "true"),
			version: "v0.3.0", commit: rev2,
		},
		{
			name:    "go install module@v0.3.0: module version, no VCS",
			bi:      buildInfo("v0.3.0"),
			version: "v0.3.0",
		},
		{
			name:    "go build in a checkout: pseudo-version and VCS settings",
			bi:      buildInfo("v0.0.0-20250601100000-abc1234def56+dirty", "vcs.revision", rev, "vcs.time", "2025-06-01T10:00:00Z", "vcs.modified", "true"),
			version: "v0.0.0-20250601100000-abc1234def56+dirty", commit: rev, date: "2025-06-01T10:00:00Z", modified: true,
		},
		{
			name:    "go run or a test binary: nothing known",
			bi:      buildInfo("(devel)"),
			version: Devel,
		},
		{
			name:    "no build information",
			version: Devel,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolve(tc.linkVersion, tc.linkCommit, tc.linkDate, tc.bi)
			if got.Version != tc.version || got.Commit != tc.commit || got.CommitDate != tc.date || got.Modified != tc.modified {
				t.Errorf("resolve = %+v, want version %q commit %q date %q modified %v", got, tc.version, tc.commit, tc.date, tc.modified)
			}
			wantGo := runtime.Version()
			if tc.bi != nil {
				wantGo = tc.bi.GoVersion
			}
			if got.GoVersion != wantGo || got.Platform != runtime.GOOS+"/"+runtime.GOARCH {
				t.Errorf("go %q platform %q, want %q %s/%s", got.GoVersion, got.Platform, wantGo, runtime.GOOS, runtime.GOARCH)
			}
		})
	}
}

func TestString(t *testing.T) {
	for _, tc := range []struct {
		info Info
		want string
	}{
		{
			Info{Version: "v0.3.0-12-gabc1234", Commit: rev, CommitDate: "2025-06-01T10:00:00Z", GoVersion: "go1.26.0", Platform: "linux/amd64"},
			"signet v0.3.0-12-gabc1234 (commit " + rev + ", 2025-06-01T10:00:00Z, go1.26.0 linux/amd64)",
		},
		{
			Info{Version: "v0.3.0-dirty", Commit: rev, Modified: true, GoVersion: "go1.26.0", Platform: "linux/arm64"},
			"signet v0.3.0-dirty (commit " + rev + ", modified, go1.26.0 linux/arm64)",
		},
		{
			Info{Version: Devel, GoVersion: "go1.26.0", Platform: "darwin/arm64"},
			"signet devel (commit unknown, go1.26.0 darwin/arm64)",
		},
	} {
		if got := tc.info.String(); got != tc.want {
			t.Errorf("String() = %q\n want %q", got, tc.want)
		}
	}
}

// TestCurrent: the package's own values agree with Get, and a test binary (no -X, version
// "(devel)") says so rather than inventing a version.
func TestCurrent(t *testing.T) {
	info := Get()
	if Version != info.Version || Commit != info.Commit || String() != info.String() {
		t.Errorf("Version %q Commit %q String %q disagree with Get() = %+v", Version, Commit, String(), info)
	}
	if version == "" && info.Version == "" {
		t.Error("Version is empty, want at least devel")
	}
	if !strings.HasPrefix(String(), "signet ") || !strings.Contains(String(), runtime.Version()) {
		t.Errorf("String() = %q, want signet … %s", String(), runtime.Version())
	}
}

// TestMakefileSetsTheLinkTimeValues: `make build` sets this package's variables by name; a
// rename here must be made there.
func TestMakefileSetsTheLinkTimeValues(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"VERSION_PKG := github.com/signet-pki/signet/internal/version\n",
		"-X=$(VERSION_PKG).version=$(VERSION)", "-X=$(VERSION_PKG).commit=$(COMMIT)", "-X=$(VERSION_PKG).commitDate=$(COMMIT_DATE)",
		`-ldflags="$(daemon_ldflags) $(version_ldflags)"`, `-ldflags="$(version_ldflags)"`,
	} {
		if !strings.Contains(string(makefile), want) {
			t.Errorf("Makefile does not contain %q", want)
		}
	}
}

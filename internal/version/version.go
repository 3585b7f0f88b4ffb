// Package version says which build of Signet is running: the version, the commit and the
// commit's date, for every binary's --version, the build_info metrics and signetctl version.
//
// `make build` sets them at link time from git (the Makefile's version_ldflags):
//
//	-X github.com/signet-pki/signet/internal/version.version=$(git describe --tags --always --dirty)
//	-X github.com/signet-pki/signet/internal/version.commit=$(git rev-parse HEAD)
//	-X github.com/signet-pki/signet/internal/version.commitDate=<the commit's date, RFC 3339 UTC>
//
// Whatever is not set so falls back to what the Go toolchain stamps into every binary
// (runtime/debug.ReadBuildInfo): the main module's version (a tag for `go install …@v0.3.0`, a
// pseudo-version for a `go build` in a git checkout) and the vcs.revision, vcs.time and
// vcs.modified settings. So a `go install` or `go build` build still reports something true, and
// a binary that knows nothing (a test binary, `go build -buildvcs=false` outside a module
// version) says "devel" and "unknown" rather than guessing.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set with -ldflags -X by `make build`; empty otherwise. Constant-free declarations, as -X
// requires.
var (
	version    string
	commit     string
	commitDate string
)

// Devel is the Version of a build that knows no version.
const Devel = "devel"

// Info describes one build.
type Info struct {
	// Version is `git describe --tags --always --dirty` at build time (v0.3.0,
	// v0.3.0-12-gabc1234, abc1234-dirty), else the main module's version, else Devel.
	Version string `json:"version"`
	// Commit is the full git commit hash; empty when unknown.
	Commit string `json:"commit,omitempty"`
	// CommitDate is the commit's date (RFC 3339). The commit's, not the build's, so that
	// building the same commit twice gives the same binary. Empty when unknown.
	CommitDate string `json:"commitDate,omitempty"`
	// Modified is true when the build had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the Go toolchain that built the binary (runtime.Version()).
	GoVersion string `json:"goVersion"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// current is this binary's Info, worked out once at start.
var current = resolve(version, commit, commitDate, readBuildInfo())

// Version and Commit are this binary's Info().Version and Info().Commit (Commit empty when
// unknown), as variables for the build_info metrics of the daemons.
var (
	Version = current.Version
	Commit  = current.Commit
)

// Get returns this binary's build information.
func Get() Info { return current }

// String returns Get().String().
func String() string { return current.String() }

// String formats the build on one line, for --version:
//
//	signet v0.3.0-12-gabc1234 (commit abc1234…, 2025-06-01T10:00:00Z, go1.26.0 linux/amd64)
//
// with "modified" after the date for a build with uncommitted changes and "commit unknown" when
// the commit is not known.
func (i Info) String() string {
	parts := []string{"commit unknown"}
	if i.Commit != "" {
		parts[0] = "commit " + i.Commit
	}
	if i.CommitDate != "" {
		parts = append(parts, i.CommitDate)
	}
	if i.Modified {
		parts = append(parts, "modified")
	}
	parts = append(parts, strings.TrimSpace(i.GoVersion+" "+i.Platform))
	return fmt.Sprintf("signet %s (%s)", i.Version, strings.Join(parts, ", "))
}

// readBuildInfo returns the binary's build information; nil if it has none.
func readBuildInfo() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}

// resolve combines the link-time values with the toolchain's build information bi (nil for
// none): a link-time value wins; the module version "(devel)" and an empty one mean unknown.
// Modified is true for a version ending in "-dirty" (git describe --dirty) or "+dirty" (the
// toolchain's pseudo-version of a modified checkout), or for vcs.modified when the toolchain's
// revision is the commit reported (it also counts untracked files, which git describe ignores
// but the build may have compiled).
func resolve(linkVersion, linkCommit, linkDate string, bi *debug.BuildInfo) Info {
	info := Info{
		Version:    linkVersion,
		Commit:     linkCommit,
		CommitDate: linkDate,
		GoVersion:  runtime.Version(),
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
	var revision, vcsTime string
	vcsModified := false
	if bi != nil {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				vcsTime = s.Value
			case "vcs.modified":
				vcsModified = s.Value == "true"
			}
		}
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
	}
	if info.Version == "" {
		info.Version = Devel
	}
	if info.Commit == "" {
		info.Commit = revision
	}
	fromToolchain := revision != "" && info.Commit == revision
	if info.CommitDate == "" && fromToolchain {
		info.CommitDate = vcsTime
	}
	info.Modified = strings.HasSuffix(info.Version, "-dirty") || strings.HasSuffix(info.Version, "+dirty") ||
		(fromToolchain && vcsModified)
	return info
}

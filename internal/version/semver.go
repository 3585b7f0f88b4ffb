package version

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// ErrDevelopment is returned by Parse for the version of a development build: one that no
// release tag names (docs/compatibility.md, "Development builds").
var ErrDevelopment = errors.New("a development build, not a released version")

// Semver is a version that names a release line: vMAJOR.MINOR.PATCH, possibly with a
// pre-release part. Releases are tagged vMAJOR.MINOR.PATCH (docs/compatibility.md).
type Semver struct {
	// Major, Minor and Patch are the three numbers.
	Major, Minor, Patch int
	// Prerelease is what follows the patch number after "-", without the "-": "rc.1" for a
	// release candidate, "12-gabc1234" for a `make build` twelve commits after a tag,
	// "12-gabc1234-dirty" with uncommitted changes; empty for a release.
	Prerelease string
}

// String is the version as x/mod/semver's canonical form, e.g. v0.3.0 or v0.3.0-rc.1 (build
// metadata after "+" is not kept).
func (s Semver) String() string {
	v := fmt.Sprintf("v%d.%d.%d", s.Major, s.Minor, s.Patch)
	if s.Prerelease != "" {
		v += "-" + s.Prerelease
	}
	return v
}

// MajorMinor is the release line, e.g. v0.3: what the skew policy compares.
func (s Semver) MajorMinor() string { return fmt.Sprintf("v%d.%d", s.Major, s.Minor) }

// Released reports whether s names a release itself (no pre-release part).
func (s Semver) Released() bool { return s.Prerelease == "" }

// Parse reads a version as Info.Version holds it (the Makefile's `git describe --tags
// --always --dirty`, a module version, or Devel) as a semantic version:
//
//   - vMAJOR.MINOR.PATCH with an optional -pre-release and +build part is a Semver of that
//     line: v0.3.0, v0.3.0-rc.1, v0.3.0-12-gabc1234 (a build after the tag v0.3.0),
//     v0.3.0-dirty, and a Go pseudo-version based on a tag (v0.3.1-0.20261128060000-abcdef123456,
//     what `go build` stamps after v0.3.0). The leading "v" may be left out (0.3.0, as a Helm
//     chart's appVersion may write it).
//   - anything else is a development build and returns an error matching ErrDevelopment:
//     Devel, "dev", "(devel)" or empty (nothing stamped), a bare commit hash (`git describe`
//     where no tag is reachable: 81c084c, 81c084c-dirty), a shorthand (v1, v1.2), and a
//     pseudo-version that no tag precedes (v0.0.0-20261128060000-abcdef123456, what `go build`
//     stamps in a checkout without tags).
func Parse(v string) (Semver, error) {
	canonical := strings.TrimSpace(v)
	if canonical != "" && canonical[0] >= '0' && canonical[0] <= '9' {
		canonical = "v" + canonical
	}
	if !semver.IsValid(canonical) || !fullForm(canonical) {
		return Semver{}, fmt.Errorf("version %q: %w", v, ErrDevelopment)
	}
	if module.IsPseudoVersion(canonical) {
		if base, err := module.PseudoVersionBase(canonical); err != nil || base == "" {
			return Semver{}, fmt.Errorf("version %q (a pseudo-version that no tag precedes): %w", v, ErrDevelopment)
		}
	}
	core, pre, _ := strings.Cut(strings.TrimPrefix(semver.Canonical(canonical), "v"), "-")
	parts := strings.Split(core, ".")
	var nums [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil { // IsValid let through a number too large for an int
			return Semver{}, fmt.Errorf("version %q: %w", v, ErrDevelopment)
		}
		nums[i] = n
	}
	return Semver{Major: nums[0], Minor: nums[1], Patch: nums[2], Prerelease: pre}, nil
}

// fullForm reports whether the valid semantic version v has all three numbers (x/mod/semver
// also accepts the shorthands v1 and v1.2, which a bare numeric commit hash could look like).
func fullForm(v string) bool {
	core := v
	if i := strings.IndexAny(core, "-+"); i >= 0 {
		core = core[:i]
	}
	return strings.Count(core, ".") == 2
}

// IsDevelopment reports whether v is the version of a development build (Parse fails).
func IsDevelopment(v string) bool {
	_, err := Parse(v)
	return err != nil
}

// Major returns the major version of v, and false for a development build.
func Major(v string) (int, bool) {
	s, err := Parse(v)
	return s.Major, err == nil
}

// Minor returns the minor version of v, and false for a development build.
func Minor(v string) (int, bool) {
	s, err := Parse(v)
	return s.Minor, err == nil
}

// Semver parses the build's Version (Parse).
func (i Info) Semver() (Semver, error) { return Parse(i.Version) }

// Development reports whether the build is a development build (IsDevelopment of its
// Version).
func (i Info) Development() bool { return IsDevelopment(i.Version) }

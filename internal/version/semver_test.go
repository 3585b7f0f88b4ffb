package version

import (
	"errors"
	"testing"
)

// TestParse: what `make build`, `go build` and `go install` stamp is read as its release line,
// and every build no tag names is a development build.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in                  string
		major, minor, patch int
		pre                 string
	}{
		{in: "v0.3.0", major: 0, minor: 3},
		{in: "v1.12.4", major: 1, minor: 12, patch: 4},
		{in: "0.1.0", minor: 1},                                  // a chart's appVersion without the v
		{in: "v0.3.0-rc.1", minor: 3, pre: "rc.1"},               // a release candidate
		{in: "v0.3.0-12-gabc1234", minor: 3, pre: "12-gabc1234"}, // git describe after a tag
		{in: "v0.3.0-12-gabc1234-dirty", minor: 3, pre: "12-gabc1234-dirty"},
		{in: "v0.3.0-dirty", minor: 3, pre: "dirty"},
		{in: "v0.3.0+meta", minor: 3}, // build metadata is dropped
		{in: "v0.3.1-0.20261128060000-abcdef123456", minor: 3, patch: 1, pre: "0.20261128060000-abcdef123456"}, // go build after v0.3.0
		{in: "v0.3.1-0.20261128060000-abcdef123456+dirty", minor: 3, patch: 1, pre: "0.20261128060000-abcdef123456"},
	} {
		got, err := Parse(tc.in)
		want := Semver{Major: tc.major, Minor: tc.minor, Patch: tc.patch, Prerelease: tc.pre}
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.in, got, err, want)
		}
		if IsDevelopment(tc.in) {
			t.Errorf("IsDevelopment(%q) = true", tc.in)
		}
		if m, ok := Major(tc.in); !ok || m != tc.major {
			t.Errorf("Major(%q) = %d, %v", tc.in, m, ok)
		}
		if m, ok := Minor(tc.in); !ok || m != tc.minor {
			t.Errorf("Minor(%q) = %d, %v", tc.in, m, ok)
		}
	}
	for _, in := range []string{
		"", Devel, "dev", "(devel)", "  ",
		"81c084c", "81c084c-dirty", "1234567", "1234567-dirty", // git describe with no tag reachable
		"v1", "v1.2", "1.2", // shorthands
		"v0.0.0-20261128060000-abcdef123456", "v0.0.0-20261128060000-abcdef123456+dirty", // go build, no tag
		"v2.0.0-20261128060000-abcdef123456", // a pseudo-version of a major without a tag
		"v0.3", "latest", "v0.3.0.1", "v99999999999999999999.0.0",
	} {
		if s, err := Parse(in); !errors.Is(err, ErrDevelopment) {
			t.Errorf("Parse(%q) = %+v, %v; want ErrDevelopment", in, s, err)
		}
		if !IsDevelopment(in) {
			t.Errorf("IsDevelopment(%q) = false", in)
		}
		if _, ok := Minor(in); ok {
			t.Errorf("Minor(%q) reports a minor version", in)
		}
	}
}

func TestSemverString(t *testing.T) {
	s := Semver{Major: 0, Minor: 3, Patch: 1, Prerelease: "rc.1"}
	if s.String() != "v0.3.1-rc.1" || s.MajorMinor() != "v0.3" || s.Released() {
		t.Errorf("%+v: String %q MajorMinor %q Released %v", s, s.String(), s.MajorMinor(), s.Released())
	}
	if r := (Semver{Major: 1}); r.String() != "v1.0.0" || !r.Released() {
		t.Errorf("%+v: String %q Released %v", r, r.String(), r.Released())
	}
}

// TestInfoDevelopment: a test binary (nothing stamped) is a development build; a stamped tag
// is not.
func TestInfoDevelopment(t *testing.T) {
	if !Get().Development() && version == "" {
		t.Errorf("this test binary (version %q) is not a development build", Get().Version)
	}
	info := Info{Version: "v0.3.0-2-gabc1234"}
	if s, err := info.Semver(); err != nil || info.Development() || s.MajorMinor() != "v0.3" {
		t.Errorf("%+v: Semver %+v, %v; Development %v", info, s, err, info.Development())
	}
}

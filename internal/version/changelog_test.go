package version

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/semver"
	"sigs.k8s.io/yaml"
)

// The release rule (docs/compatibility.md, "Versions") that the files of the repository must
// follow: a release is the tag vX.Y.Z; CHANGELOG.md (keep-a-changelog) opens with
// "## [Unreleased]" and then has "## [X.Y.Z] - YYYY-MM-DD" for every release, newest first, each
// with its link reference; the Helm chart's appVersion is "vX.Y.Z" (the image tag) and its
// version "X.Y.Z", both those of the newest release in the changelog.
var (
	changelogSection = regexp.MustCompile(`^## \[([^\]]+)\](?: - (\S+))?\s*$`)
	changelogLink    = regexp.MustCompile(`^\[([^\]]+)\]: (\S+)$`)
)

// changelogRelease is one "## [X.Y.Z] - date" section.
type changelogRelease struct {
	version, date string
	line          int
}

// readChangelog returns the release sections of CHANGELOG.md in order, whether it opens with
// [Unreleased], and its link references.
func readChangelog(t *testing.T) (releases []changelogRelease, unreleasedFirst bool, links map[string]string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "CHANGELOG.md"))
	if err != nil {
		t.Fatalf("the repository has no changelog: %v", err)
	}
	links = map[string]string{}
	sections := 0
	for i, line := range strings.Split(string(data), "\n") {
		if m := changelogLink.FindStringSubmatch(line); m != nil {
			links[m[1]] = m[2]
			continue
		}
		if strings.HasPrefix(line, "## ") {
			m := changelogSection.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("CHANGELOG.md:%d: %q is not \"## [X.Y.Z] - YYYY-MM-DD\" nor \"## [Unreleased]\"", i+1, line)
				continue
			}
			sections++
			if m[1] == "Unreleased" {
				unreleasedFirst = sections == 1
				continue
			}
			releases = append(releases, changelogRelease{version: m[1], date: m[2], line: i + 1})
		}
	}
	return releases, unreleasedFirst, links
}

// TestChangelogFollowsTheReleaseRule: CHANGELOG.md is in keep-a-changelog form, every release
// section names a released version and a date, newest first, with a link.
func TestChangelogFollowsTheReleaseRule(t *testing.T) {
	releases, unreleasedFirst, links := readChangelog(t)
	if !unreleasedFirst {
		t.Error(`CHANGELOG.md does not open with "## [Unreleased]"`)
	}
	if _, ok := links["Unreleased"]; !ok {
		t.Error("CHANGELOG.md has no link reference for [Unreleased]")
	}
	if len(releases) == 0 {
		t.Fatal("CHANGELOG.md has no release section")
	}
	for i, r := range releases {
		s, err := Parse(r.version)
		if err != nil || !s.Released() || strings.HasPrefix(r.version, "v") || "v"+r.version != s.String() {
			t.Errorf("CHANGELOG.md:%d: [%s] is not a release version X.Y.Z (%v)", r.line, r.version, err)
		}
		if _, err := time.Parse(time.DateOnly, r.date); err != nil {
			t.Errorf("CHANGELOG.md:%d: [%s] has no release date YYYY-MM-DD: %q", r.line, r.version, r.date)
		}
		if link, ok := links[r.version]; !ok || !strings.Contains(link, "v"+r.version) {
			t.Errorf("CHANGELOG.md: [%s] has no link reference to its tag v%s (%q)", r.version, r.version, link)
		}
		if i > 0 && semver.Compare("v"+r.version, "v"+releases[i-1].version) >= 0 {
			t.Errorf("CHANGELOG.md:%d: [%s] is not older than [%s] above it", r.line, r.version, releases[i-1].version)
		}
	}
}

// TestChartIsTheNewestRelease: the Helm chart's appVersion is "v" and its version is the newest
// release of CHANGELOG.md, so the chart, the image it runs and the changelog name one tag.
func TestChartIsTheNewestRelease(t *testing.T) {
	releases, _, _ := readChangelog(t)
	if len(releases) == 0 {
		t.Fatal("CHANGELOG.md has no release section")
	}
	newest := releases[0].version
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "helm", "signet-watcher", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &chart); err != nil {
		t.Fatalf("Chart.yaml: %v", err)
	}
	if chart.AppVersion != "v"+newest {
		t.Errorf("Chart.yaml's appVersion is %q; the newest release in CHANGELOG.md is [%s], so it must be %q", chart.AppVersion, newest, "v"+newest)
	}
	if chart.Version != newest {
		t.Errorf("Chart.yaml's version is %q; the newest release in CHANGELOG.md is [%s], so it must be %q", chart.Version, newest, newest)
	}
	if s, err := Parse(chart.AppVersion); err != nil || !s.Released() {
		t.Errorf("Chart.yaml's appVersion %q is not a released version: %v", chart.AppVersion, err)
	}
}

package version

import (
	"slices"
	"strings"
	"testing"
)

// TestCheckSkew: a server accepts its own minor version and the one before, any patch, and
// refuses older and newer clients; a development build on either side is accepted.
func TestCheckSkew(t *testing.T) {
	for _, tc := range []struct {
		server, client string
		want           Verdict
	}{
		{"v0.3.0", "v0.3.0", Supported},
		{"v0.3.0", "v0.3.7", Supported}, // a newer patch of the same minor
		{"v0.3.4", "v0.3.0", Supported},
		{"v0.3.1", "v0.2.9", Supported}, // one minor older
		{"v0.3.0-rc.1", "v0.2.0", Supported},
		{"v0.3.0-5-gabc1234-dirty", "v0.2.0-1-gdef5678", Supported},
		{"v1.0.0", "v1.0.3", Supported},
		{"v0.3.0", "v0.1.9", ClientTooOld}, // two minors older
		{"v0.3.0", "v0.0.1", ClientTooOld},
		{"v1.0.0", "v0.9.0", ClientTooOld}, // an older major
		{"v2.1.0", "v1.9.0", ClientTooOld},
		{"v0.3.0", "v0.4.0", ClientTooNew}, // a newer minor
		{"v0.3.9", "v0.4.0-rc.1", ClientTooNew},
		{"v0.3.0", "v1.0.0", ClientTooNew}, // a newer major
		{"v1.5.0", "v2.0.0", ClientTooNew},
		{"v0.0.1", "v0.0.0", Supported},
		{"devel", "v0.1.0", Development},
		{"v0.3.0", "devel", Development},
		{"dev", "81c084c-dirty", Development},
		{"v0.3.0", "v0.0.0-20261128060000-abcdef123456", Development},
		{"v0.3.0", "", Development},
	} {
		got := CheckSkew(tc.server, tc.client)
		if got.Verdict != tc.want || got.Server != tc.server || got.Client != tc.client {
			t.Errorf("CheckSkew(%q, %q) = %+v, want %s", tc.server, tc.client, got, tc.want)
		}
		if accepted := tc.want == Supported || tc.want == Development; got.Accepted() != accepted {
			t.Errorf("CheckSkew(%q, %q).Accepted() = %v", tc.server, tc.client, got.Accepted())
		}
	}
}

// TestSkewMessage: a refusal names both versions, the lines the server accepts and what to do;
// a development build's warning names the side that is one.
func TestSkewMessage(t *testing.T) {
	for _, tc := range []struct {
		server, client string
		want           []string
	}{
		{"v0.3.1", "v0.1.4", []string{"signet-server v0.3.1 does not accept clients of version v0.1.4",
			"its own minor version and of the minor version before it (v0.3.x or v0.2.x)", "upgrade the client", "docs/compatibility.md"}},
		{"v0.3.1", "v0.4.0", []string{"signet-server v0.3.1 does not accept clients of version v0.4.0, newer than itself",
			"it accepts v0.3.x or v0.2.x", "upgrade the signing servers first, then the clients"}},
		{"v0.3.1", "81c084c", []string{"client 81c084c: a development build", "not checked"}},
		{"dev", "devel", []string{"signet-server dev and client devel: a development build"}},
		{"v0.0.2", "v0.1.0", []string{"it accepts v0.0.x;"}},
	} {
		got := CheckSkew(tc.server, tc.client).Message()
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("CheckSkew(%q, %q).Message() = %q\n does not say %q", tc.server, tc.client, got, w)
			}
		}
	}
	if m := CheckSkew("v0.3.0", "v0.2.0").Message(); m != "" {
		t.Errorf("a supported pair has message %q", m)
	}
}

func TestAcceptedLines(t *testing.T) {
	for server, want := range map[string][]string{
		"v0.3.1":      {"v0.3", "v0.2"},
		"v0.0.4":      {"v0.0"},
		"v1.0.0":      {"v1.0"},
		"v2.7.0-rc.1": {"v2.7", "v2.6"},
		"devel":       nil,
	} {
		if got := AcceptedLines(server); !slices.Equal(got, want) {
			t.Errorf("AcceptedLines(%q) = %q, want %q", server, got, want)
		}
	}
}

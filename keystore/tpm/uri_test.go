package tpm

import (
	"strings"
	"testing"
)

// TestParseURI is the grammar of tpm: URIs: what parses (and its canonical form) and what is
// refused, with the part of the URI the error names.
func TestParseURI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		uri       string
		canonical string // "" when parsing must fail
		errHas    string
	}{
		// Keys, with the default device.
		{uri: "tpm:handle=0x81000100", canonical: "tpm:handle=0x81000100"},
		{uri: "tpm:handle=0x81ABCDEF", canonical: "tpm:handle=0x81abcdef"},
		{uri: "tpm:handle=0X81000001", canonical: "tpm:handle=0x81000001"},
		{uri: "tpm:blob=/var/lib/signet/ca.tpmkey", canonical: "tpm:blob=/var/lib/signet/ca.tpmkey"},
		{uri: "tpm:blob=ca.tpmkey", canonical: "tpm:blob=ca.tpmkey"},
		{uri: "tpm:blob=/keys/a%3Fb%23c%25d", canonical: "tpm:blob=/keys/a%3Fb%23c%25d"},
		{uri: "tpm:blob=/keys/with space", canonical: "tpm:blob=/keys/with space"},
		{uri: "tpm:", canonical: "tpm:"},
		// TPM selection.
		{uri: "tpm:handle=0x81000100?device=/dev/tpmrm0", canonical: "tpm:handle=0x81000100"},
		{uri: "tpm:handle=0x81000100?device=/dev/tpm0", canonical: "tpm:handle=0x81000100?device=/dev/tpm0"},
		{uri: "tpm:blob=/k?socket=/run/swtpm/sock", canonical: "tpm:blob=/k?socket=/run/swtpm/sock"},
		{uri: "tpm:?socket=/run/a%26b", canonical: "tpm:?socket=/run/a%26b"},
		{uri: "tpm:?socket=/run/a+b", canonical: "tpm:?socket=/run/a%20b"}, // + is a space in a query
		// Refused.
		{uri: "pkcs11:token=x", errHas: "not a tpm: URI"},
		{uri: "tpm:handle=0x80000001", errHas: `handle="0x80000001"`},
		{uri: "tpm:handle=0x82000000", errHas: `handle="0x82000000"`},
		{uri: "tpm:handle=81000100", errHas: `handle="81000100"`},
		{uri: "tpm:handle=0x", errHas: `handle="0x"`},
		{uri: "tpm:handle=0x081000100", errHas: `handle="0x081000100"`},
		{uri: "tpm:handle=0x8100010g", errHas: `handle="0x8100010g"`},
		{uri: "tpm:blob=", errHas: "blob= names no file"},
		{uri: "tpm:blob=/k%zz", errHas: "blob=:"},
		{uri: "tpm:file=/k", errHas: `unknown key "file"`},
		{uri: "tpm:/k", errHas: "is not name=value"},
		{uri: "tpm:handle=0x81000100?pin=1234", errHas: `unknown attribute "pin"`},
		{uri: "tpm:handle=0x81000100?tcp=localhost:2321", errHas: `unknown attribute "tcp"`},
		{uri: "tpm:handle=0x81000100?socket=/a&socket=/b", errHas: `attribute "socket" given 2 times`},
		{uri: "tpm:handle=0x81000100?device=/dev/tpm0&socket=/a", errHas: "device= and socket= both given"},
		{uri: "tpm:handle=0x81000100?socket=", errHas: "attribute socket= is empty"},
		{uri: "tpm:handle=0x81000100?socket=/a;b", errHas: "query:"},
		{uri: "tpm:handle=0x81000100#frag", errHas: "no fragment"},
	} {
		loc, err := parseURI(tc.uri)
		switch {
		case tc.canonical == "" && err == nil:
			t.Errorf("parseURI(%q) = %v, want an error containing %q", tc.uri, loc, tc.errHas)
		case tc.canonical == "" && !strings.Contains(err.Error(), tc.errHas):
			t.Errorf("parseURI(%q) error %q does not contain %q", tc.uri, err, tc.errHas)
		case tc.canonical != "" && err != nil:
			t.Errorf("parseURI(%q): %v", tc.uri, err)
		case tc.canonical != "" && loc.String() != tc.canonical:
			t.Errorf("parseURI(%q).String() = %q, want %q", tc.uri, loc.String(), tc.canonical)
		case tc.canonical != "":
			again, err := parseURI(loc.String())
			if err != nil || again != loc {
				t.Errorf("the canonical URI %q does not parse back to the same location: %v, %v", loc.String(), again, err)
			}
		}
	}
}

// FuzzParseURI: whatever parses formats to a canonical URI that parses to the same location.
func FuzzParseURI(f *testing.F) {
	for _, s := range []string{"tpm:handle=0x81000100", "tpm:blob=/a%3Fb?socket=/s%26", "tpm:?device=/dev/tpm0", "tpm:blob=x#y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		loc, err := parseURI(uri)
		if err != nil {
			return
		}
		again, err := parseURI(loc.String())
		if err != nil || again != loc {
			t.Fatalf("%q: canonical %q parses to %v, %v; want %v", uri, loc.String(), again, err, loc)
		}
	})
}

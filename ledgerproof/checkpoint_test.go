package ledgerproof

import (
	"bytes"
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// c2spExample is the body of the example in C2SP tlog-checkpoint.
const c2spExample = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"

var emptyRootB64 = EmptyRoot().String()

func TestParseCheckpointValid(t *testing.T) {
	mustHash := func(s string) tlog.Hash {
		h, err := tlog.ParseHash(s)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, tc := range []struct {
		name, body string
		want       Checkpoint
	}{
		{"C2SP tlog-checkpoint example", c2spExample, Checkpoint{
			Origin: "example.com/behind-the-sofa", Size: 20852163, Hash: mustHash("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="),
		}},
		{"Sigstore Rekor: spaces in the origin, one extension",
			"rekor.sigstore.dev - 2605736670972794746\n21428036\nrxnoKyFZlJ7/R6bMh/d3lcqwKqAy5CL1LcNBJP17kgQ=\nTimestamp: 1688058656037355364\n",
			Checkpoint{
				Origin: "rekor.sigstore.dev - 2605736670972794746", Size: 21428036,
				Hash: mustHash("rxnoKyFZlJ7/R6bMh/d3lcqwKqAy5CL1LcNBJP17kgQ="), Extensions: []string{"Timestamp: 1688058656037355364"},
			}},
		{"empty tree", "signet.example/ledger\n0\n" + emptyRootB64 + "\n", Checkpoint{Origin: "signet.example/ledger", Hash: EmptyRoot()}},
		{"largest size", "o\n9223372036854775807\n" + emptyRootB64 + "\n", Checkpoint{Origin: "o", Size: 1<<63 - 1, Hash: EmptyRoot()}},
		{"unicode origin, several extensions", "journal.exemple/é\n1\n" + emptyRootB64 + "\na\nb c\n", Checkpoint{
			Origin: "journal.exemple/é", Size: 1, Hash: EmptyRoot(), Extensions: []string{"a", "b c"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCheckpoint([]byte(tc.body))
			if err != nil {
				t.Fatalf("ParseCheckpoint: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseCheckpoint = %+v, want %+v", got, tc.want)
			}
			if m := got.Marshal(); string(m) != tc.body {
				t.Fatalf("Marshal = %q, want %q", m, tc.body)
			}
		})
	}
}

func TestParseCheckpointMalformed(t *testing.T) {
	h := "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="
	short := base64.StdEncoding.EncodeToString(make([]byte, 31))
	long := base64.StdEncoding.EncodeToString(make([]byte, 33))
	for _, tc := range []struct {
		name, body, want string
	}{
		{"empty body", "", "empty"},
		{"missing final newline", "o\n1\n" + h, "line 3: missing the final newline"},
		{"two lines", "o\n1\n", "2 lines"},
		{"empty origin", "\n1\n" + h + "\n", "line 1 (origin): empty origin"},
		{"leading space in origin", " o\n1\n" + h + "\n", "leading or trailing space"},
		{"trailing space in origin", "o \n1\n" + h + "\n", "leading or trailing space"},
		{"tab in origin", "o\tx\n1\n" + h + "\n", "line 1 (origin): control character U+0009"},
		{"no-break space in origin", "o\u00a0x\n1\n" + h + "\n", "non-printable character U+00A0"},
		{"DEL in origin", "o\x7f\n1\n" + h + "\n", "control character U+007F"},
		{"invalid UTF-8 in origin", "o\xff\n1\n" + h + "\n", "invalid UTF-8"},
		{"CRLF", "o\r\n1\r\n" + h + "\r\n", "carriage return"},
		{"empty size", "o\n\n" + h + "\n", "line 2 (size): empty number"},
		{"leading zero", "o\n01\n" + h + "\n", "line 2 (size): leading zero"},
		{"double zero", "o\n00\n" + h + "\n", "leading zero"},
		{"negative size", "o\n-1\n" + h + "\n", "line 2 (size)"},
		{"plus sign", "o\n+1\n" + h + "\n", "line 2 (size)"},
		{"space in size", "o\n1 \n" + h + "\n", "line 2 (size)"},
		{"hex size", "o\n0x10\n" + h + "\n", "line 2 (size)"},
		{"size overflows int64", "o\n9223372036854775808\n" + h + "\n", "does not fit an int64"},
		{"size of 20 digits", "o\n10000000000000000000\n" + h + "\n", "digits"},
		{"hash missing", "o\n1\n\n", "line 3 (root hash)"},
		{"31-byte hash", "o\n1\n" + short + "\n", "line 3 (root hash)"},
		{"33-byte hash", "o\n1\n" + long + "\n", "line 3 (root hash)"},
		{"bad base64", "o\n1\n" + strings.Repeat("!", 44) + "\n", "bad base64"},
		{"URL-safe base64", "o\n1\n" + strings.Repeat("_", 43) + "=\n", "bad base64"},
		{"unpadded base64", "o\n1\n" + strings.TrimRight(h, "=") + "\n", "line 3 (root hash)"},
		{"non-canonical base64 (unused bits set)", "o\n1\n" + h[:42] + "J=\n", "line 3 (root hash)"},
		{"hex hash", "o\n1\n" + strings.Repeat("ab", 32) + "\n", "line 3 (root hash)"},
		{"size 0 with another root", "o\n0\n" + h + "\n", "size 0 needs the empty tree's root"},
		{"empty extension line", "o\n1\n" + h + "\n\n", "line 4 (extension): empty extension line"},
		{"empty line between extensions", "o\n1\n" + h + "\na\n\nb\n", "line 5 (extension): empty"},
		{"control character in an extension", "o\n1\n" + h + "\na\x00b\n", "line 4 (extension): control character"},
		{"extension without final newline", "o\n1\n" + h + "\next", "line 4: missing the final newline"},
		{"too big", "o\n1\n" + h + "\n" + strings.Repeat("x", MaxCheckpointSize) + "\n", "more than the"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCheckpoint([]byte(tc.body))
			if !errors.Is(err, ErrMalformedCheckpoint) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("ParseCheckpoint(%.60q) = %v, want ErrMalformedCheckpoint", tc.body, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseCheckpoint(%.60q) = %v, want it to say %q", tc.body, err, tc.want)
			}
		})
	}
}

func TestCheckpointMaxSizeAccepted(t *testing.T) {
	head := "o\n1\n" + emptyRootB64 + "\n"
	body := head + strings.Repeat("x", MaxCheckpointSize-len(head)-1) + "\n"
	if _, err := ParseCheckpoint([]byte(body)); err != nil {
		t.Fatalf("a body of exactly MaxCheckpointSize: %v", err)
	}
}

func TestCheckpointValidate(t *testing.T) {
	good := Checkpoint{Origin: testOrigin, Size: 3, Hash: flipBit(EmptyRoot(), 1)}
	if err := good.validate(); err != nil {
		t.Fatalf("validate(%+v): %v", good, err)
	}
	for name, c := range map[string]Checkpoint{
		"empty origin":           {Size: 1},
		"newline in origin":      {Origin: "a\nb", Size: 1},
		"negative size":          {Origin: "o", Size: -1},
		"size 0, wrong root":     {Origin: "o", Size: 0, Hash: flipBit(EmptyRoot(), 0)},
		"empty extension":        {Origin: "o", Size: 1, Extensions: []string{""}},
		"newline in extension":   {Origin: "o", Size: 1, Extensions: []string{"a\nb"}},
		"extension ends in \\n":  {Origin: "o", Size: 1, Extensions: []string{"a\n"}},
		"carriage return in ext": {Origin: "o", Size: 1, Extensions: []string{"a\r"}},
	} {
		if err := c.validate(); !errors.Is(err, ErrMalformedCheckpoint) {
			t.Errorf("%s: validate = %v, want ErrMalformedCheckpoint", name, err)
		}
	}
	// Marshal is the exact inverse of a successful parse.
	if b := good.Marshal(); !bytes.HasSuffix(b, []byte("\n")) || bytes.Count(b, []byte("\n")) != 3 {
		t.Errorf("Marshal = %q", b)
	}
}

package ledgerproof

import (
	"bytes"
	"testing"
)

// FuzzParseCheckpoint checks that ParseCheckpoint never panics and that what it accepts is
// canonical: Marshal of the result is the input, byte for byte.
func FuzzParseCheckpoint(f *testing.F) {
	f.Add([]byte(c2spExample))
	f.Add([]byte("rekor.sigstore.dev - 2605736670972794746\n21428036\nrxnoKyFZlJ7/R6bMh/d3lcqwKqAy5CL1LcNBJP17kgQ=\nTimestamp: 1688058656037355364\n"))
	f.Add([]byte("o\n0\n" + emptyRootB64 + "\n"))
	f.Add([]byte("o\n01\n" + emptyRootB64 + "\n"))
	f.Add([]byte("o\n1\n" + emptyRootB64 + "\n\n"))
	f.Add([]byte("o\r\n1\r\n" + emptyRootB64 + "\r\n"))
	f.Add([]byte("o\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2J=\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := ParseCheckpoint(body)
		if err != nil {
			return
		}
		if m := c.Marshal(); !bytes.Equal(m, body) {
			t.Fatalf("ParseCheckpoint(%q) = %+v, which marshals to %q", body, c, m)
		}
		if err := c.validate(); err != nil {
			t.Fatalf("parsed checkpoint does not validate: %v", err)
		}
	})
}

// FuzzParseInclusionBundle checks that ParseInclusionBundle never panics, that what it accepts
// round-trips exactly, and that Verify never panics on it.
func FuzzParseInclusionBundle(f *testing.F) {
	tr := buildTree(f, 13)
	keys := testKeys(f)
	for _, k := range keys {
		f.Add(inclusionBundle(f, tr, 6, 13, k).Marshal())
		f.Add(inclusionBundle(f, tr, 0, 1, k).Marshal())
	}
	f.Add([]byte(InclusionBundleHeader + "\nindex 0\nleaf e30=\ncheckpoint\n" + rekorCheckpoint))
	f.Add([]byte(InclusionBundleHeader + "\nindex 01\nleaf e30=\nhash " + emptyRootB64 + "\ncheckpoint\nx"))
	f.Fuzz(func(t *testing.T, text []byte) {
		b, err := ParseInclusionBundle(text)
		if err != nil {
			return
		}
		if m := b.Marshal(); !bytes.Equal(m, text) {
			t.Fatalf("ParseInclusionBundle(%q) marshals to %q", text, m)
		}
		for _, k := range keys {
			_, _ = b.Verify(testOrigin, k.v)
		}
	})
}

// FuzzParseConsistencyBundle is FuzzParseInclusionBundle for consistency bundles.
func FuzzParseConsistencyBundle(f *testing.F) {
	tr := buildTree(f, 13)
	keys := testKeys(f)
	for _, k := range keys {
		f.Add(consistencyBundle(f, tr, 5, 13, k).Marshal())
		f.Add(consistencyBundle(f, tr, 0, 0, k).Marshal())
	}
	f.Add([]byte(ConsistencyBundleHeader + "\nold\n" + rekorCheckpoint + "new\n" + rekorCheckpoint))
	f.Fuzz(func(t *testing.T, text []byte) {
		b, err := ParseConsistencyBundle(text)
		if err != nil {
			return
		}
		if m := b.Marshal(); !bytes.Equal(m, text) {
			t.Fatalf("ParseConsistencyBundle(%q) marshals to %q", text, m)
		}
		for _, k := range keys {
			_, _, _ = b.Verify(testOrigin, k.v)
		}
	})
}

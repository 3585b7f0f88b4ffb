package ledgerproof

import (
	"bytes"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
)

// inclusionBundle builds the bundle of leaf index in the first size leaves of tr.
func inclusionBundle(t testing.TB, tr *Tree, index, size int64, k testKey) InclusionBundle {
	t.Helper()
	_, sig := signed(t, tr, size, k.s)
	p, err := tr.ProveInclusion(index, size)
	if err != nil {
		t.Fatal(err)
	}
	return InclusionBundle{Index: index, Leaf: append(record(index+1), '\n'), Proof: p, SignedCheckpoint: sig}
}

func TestInclusionBundleRoundTrip(t *testing.T) {
	tr := buildTree(t, 23)
	for _, k := range testKeys(t) {
		for _, tc := range []struct{ index, size int64 }{{0, 1}, {0, 23}, {7, 13}, {22, 23}, {12, 16}} {
			b := inclusionBundle(t, tr, tc.index, tc.size, k)
			text := b.Marshal()
			got, err := ParseInclusionBundle(text)
			if err != nil {
				t.Fatalf("%s: ParseInclusionBundle(Marshal()): %v\n%s", k.alg, err, text)
			}
			// The encoding carries the line without its newline.
			if got.Index != b.Index || !bytes.Equal(got.Leaf, record(tc.index+1)) || !slices.Equal(got.Proof, b.Proof) || !bytes.Equal(got.SignedCheckpoint, b.SignedCheckpoint) {
				t.Fatalf("%s: round trip = %+v, want %+v", k.alg, got, b)
			}
			if m := got.Marshal(); !bytes.Equal(m, text) {
				t.Fatalf("%s: Marshal(Parse(text)) differs:\n%s\n%s", k.alg, m, text)
			}
			c, err := got.Verify(testOrigin, k.v)
			if err != nil || c.Size != tc.size {
				t.Fatalf("%s: Verify = %+v, %v", k.alg, c, err)
			}
			if _, err := got.Verify("other.example/log", k.v); !errors.Is(err, ErrOriginMismatch) {
				t.Fatalf("%s: Verify with another origin = %v, want ErrOriginMismatch", k.alg, err)
			}
		}
	}
}

// TestInclusionBundleEveryByte changes each byte of a bundle's text in turn (the header,
// index, leaf, proof hashes, checkpoint body and signature) and expects parsing or
// verification to fail every time.
func TestInclusionBundleEveryByte(t *testing.T) {
	tr := buildTree(t, 13)
	for _, k := range testKeys(t) {
		text := inclusionBundle(t, tr, 6, 13, k).Marshal()
		for i := range text {
			for _, delta := range []byte{0x01, 0x20} {
				mod := bytes.Clone(text)
				mod[i] ^= delta
				b, err := ParseInclusionBundle(mod)
				if err == nil {
					_, err = b.Verify(testOrigin, k.v)
				}
				if err == nil {
					t.Fatalf("%s: byte %d (%q) ^ %#x accepted:\n%s", k.alg, i, text[i], delta, mod)
				}
			}
		}
	}
}

func TestParseInclusionBundleMalformed(t *testing.T) {
	tr := buildTree(t, 5)
	k := testKeys(t)[0]
	good := string(inclusionBundle(t, tr, 2, 5, k).Marshal())
	lines := strings.SplitAfter(good, "\n")
	// lines: header, index, leaf, hash, hash, hash, checkpoint, note…
	hashLine := lines[3]
	withLine := func(i int, l string) string {
		return strings.Join(lines[:i], "") + l + strings.Join(lines[i+1:], "")
	}
	b64 := base64.StdEncoding.EncodeToString
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "", "line 1: unexpected end"},
		{"wrong header", withLine(0, "signet-ledger-inclusion-proof v2\n"), "line 1"},
		{"leading zero index", withLine(1, "index 02\n"), "line 2 (index): leading zero"},
		{"negative index", withLine(1, "index -2\n"), "line 2 (index)"},
		{"missing index", withLine(1, ""), "line 2"},
		{"index without space", withLine(1, "index\n"), "line 2"},
		{"empty leaf", withLine(2, "leaf \n"), "line 3 (leaf): empty leaf"},
		{"leaf with a newline", withLine(2, "leaf "+b64([]byte("{}\n{}"))+"\n"), "newline"},
		{"leaf ending in a newline", withLine(2, "leaf "+b64([]byte("{}\n"))+"\n"), "newline"},
		{"leaf in bad base64", withLine(2, "leaf e30*\n"), "line 3 (leaf): bad base64"},
		{"leaf in unpadded base64", withLine(2, "leaf e30\n"), "line 3 (leaf)"},
		{"leaf in non-canonical base64", withLine(2, "leaf e31=\n"), "line 3 (leaf)"},
		{"carriage return in the leaf's base64", withLine(2, "leaf e3\r0=\n"), "line 3 (leaf): not canonical"},
		{"carriage return after a hash", withLine(3, strings.TrimSuffix(hashLine, "\n")+"\r\n"), "line 4 (hash)"},
		{"short hash", withLine(3, "hash "+b64(make([]byte, 31))+"\n"), "line 4 (hash)"},
		{"hash with two spaces", withLine(3, "hash  "+strings.TrimPrefix(hashLine, "hash ")), "line 4 (hash)"},
		{"65 hashes", strings.Join(lines[:3], "") + strings.Repeat(hashLine, 65) + strings.Join(lines[6:], ""), "more than 64 proof hashes"},
		{"missing checkpoint line", strings.Join(lines[:6], "") + strings.Join(lines[7:], ""), "line 7"},
		{"no note", strings.Join(lines[:7], ""), "missing signed checkpoint"},
		{"note without final newline", strings.TrimSuffix(good, "\n"), "does not end in a newline"},
		{"CRLF", strings.ReplaceAll(good, "\n", "\r\n"), "line 1"},
		{"too big", good + strings.Repeat("x", 3<<20), "more than the"},
	} {
		_, err := ParseInclusionBundle([]byte(tc.text))
		if !errors.Is(err, ErrMalformedBundle) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ParseInclusionBundle = %v, want ErrMalformedBundle saying %q", tc.name, err, tc.want)
		}
	}
	// 64 hashes parse (and then fail to verify, the tree being small).
	sixtyFour := strings.Join(lines[:3], "") + strings.Repeat(hashLine, 64) + strings.Join(lines[6:], "")
	b, err := ParseInclusionBundle([]byte(sixtyFour))
	if err != nil {
		t.Fatalf("64 hashes: %v", err)
	}
	if _, err := b.Verify(testOrigin, k.v); !errors.Is(err, ErrNotIncluded) {
		t.Fatalf("64-hash proof in a 5-leaf tree: Verify = %v, want ErrNotIncluded", err)
	}
}

func consistencyBundle(t testing.TB, tr *Tree, m, n int64, k testKey) ConsistencyBundle {
	t.Helper()
	_, old := signed(t, tr, m, k.s)
	_, nw := signed(t, tr, n, k.s)
	p, err := tr.ProveConsistency(m, n)
	if err != nil {
		t.Fatal(err)
	}
	return ConsistencyBundle{Old: old, New: nw, Proof: p}
}

func TestConsistencyBundle(t *testing.T) {
	tr := buildTree(t, 40)
	for _, k := range testKeys(t) {
		for _, tc := range []struct{ m, n int64 }{{0, 0}, {0, 5}, {5, 5}, {3, 7}, {7, 40}, {1, 40}} {
			b := consistencyBundle(t, tr, tc.m, tc.n, k)
			text := b.Marshal()
			got, err := ParseConsistencyBundle(text)
			if err != nil {
				t.Fatalf("%s %d→%d: ParseConsistencyBundle(Marshal()): %v\n%s", k.alg, tc.m, tc.n, err, text)
			}
			if m := got.Marshal(); !bytes.Equal(m, text) {
				t.Fatalf("%s: Marshal(Parse(text)) differs:\n%s\n%s", k.alg, m, text)
			}
			older, newer, err := got.Verify(testOrigin, k.v)
			if err != nil || older.Size != tc.m || newer.Size != tc.n {
				t.Fatalf("%s %d→%d: Verify = %d, %d, %v", k.alg, tc.m, tc.n, older.Size, newer.Size, err)
			}
			if tc.m < tc.n {
				swapped := ConsistencyBundle{Old: b.New, New: b.Old, Proof: b.Proof}
				if _, _, err := swapped.Verify(testOrigin, k.v); !errors.Is(err, ErrShrunk) {
					t.Fatalf("%s %d→%d: Verify = %v, want ErrShrunk", k.alg, tc.n, tc.m, err)
				}
			}
		}
		// Every single-byte change is caught.
		text := consistencyBundle(t, tr, 7, 13, k).Marshal()
		for i := range text {
			mod := bytes.Clone(text)
			mod[i] ^= 0x01
			b, err := ParseConsistencyBundle(mod)
			if err == nil {
				_, _, err = b.Verify(testOrigin, k.v)
			}
			if err == nil {
				t.Fatalf("%s: byte %d (%q) ^ 0x01 accepted:\n%s", k.alg, i, text[i], mod)
			}
		}
	}
}

func TestConsistencyBundleForkDetected(t *testing.T) {
	k := testKeys(t)[0]
	a, b := buildTree(t, 10), buildTree(t, 9)
	if _, err := b.Append([]byte(`{"seq":10,"forked":true}`)); err != nil {
		t.Fatal(err)
	}
	_, oldSig := signed(t, a, 10, k.s)
	_, newSig := signed(t, b, 10, k.s)
	bundle := ConsistencyBundle{Old: oldSig, New: newSig}
	if _, _, err := bundle.Verify(testOrigin, k.v); !errors.Is(err, ErrInconsistent) {
		t.Fatalf("two signed roots for size 10: Verify = %v, want ErrInconsistent", err)
	}
}

func TestParseConsistencyBundleMalformed(t *testing.T) {
	tr := buildTree(t, 9)
	k := testKeys(t)[0]
	good := string(consistencyBundle(t, tr, 3, 9, k).Marshal())
	oldAt := strings.Index(good, "old\n")
	newAt := strings.Index(good, "new\n")
	hashes := good[len(ConsistencyBundleHeader)+1 : oldAt]
	oneHash := hashes[:strings.IndexByte(hashes, '\n')+1]
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "", "unexpected end"},
		{"inclusion header", strings.Replace(good, ConsistencyBundleHeader, InclusionBundleHeader, 1), "line 1"},
		{"129 hashes", ConsistencyBundleHeader + "\n" + strings.Repeat(oneHash, 129) + good[oldAt:], "more than 128"},
		{"no old marker", strings.Replace(good, "old\n", "", 1), "want \"old\""},
		{"no new marker", strings.Replace(good, "new\n", "", 1), "want \"new\" or a signature line"},
		{"old note without signature", good[:oldAt] + "old\no\n1\n" + emptyRootB64 + "\n\nnew\n" + good[newAt+4:], "no signature line"},
		{"old note never ends", good[:newAt], "unexpected end"},
		{"no new note", good[:newAt+4], "missing signed checkpoint"},
	} {
		_, err := ParseConsistencyBundle([]byte(tc.text))
		if !errors.Is(err, ErrMalformedBundle) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ParseConsistencyBundle = %v, want ErrMalformedBundle saying %q", tc.name, err, tc.want)
		}
	}
}
